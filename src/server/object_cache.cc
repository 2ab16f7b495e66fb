#include "server/object_cache.h"

namespace gpucloud::server {

absl::Status ObjectCache::Relist(store::Store& store) {
  absl::StatusOr<store::ListResult> list = store.List(prefix_);
  if (!list.ok()) return list.status();
  objects_.clear();
  for (store::KeyValue& kv : list->items) {
    CachedObject& o = objects_[kv.key];
    o.mod_revision = kv.mod_revision;
    o.doc = nlohmann::ordered_json::parse(kv.value, nullptr, false);
  }
  revision_ = list->revision;
  return absl::OkStatus();
}

absl::StatusOr<bool> ObjectCache::Sync(store::Store& store) {
  if (revision_ < 0) {
    if (absl::Status s = Relist(store); !s.ok()) return s;
    return true;
  }
  bool changed = false;
  for (;;) {
    int64_t head = store.Revision();
    absl::StatusOr<std::vector<store::Event>> events = store.Changes(prefix_, revision_, 4096);
    if (absl::IsOutOfRange(events.status())) {
      if (absl::Status s = Relist(store); !s.ok()) return s;
      return true;
    }
    if (!events.ok()) return events.status();
    for (store::Event& e : *events) {
      changed = true;
      revision_ = std::max(revision_, e.revision);
      if (e.kind == store::Event::Kind::kDelete) {
        objects_.erase(e.kv.key);
        continue;
      }
      CachedObject& o = objects_[e.kv.key];
      o.mod_revision = e.kv.mod_revision;
      o.doc = nlohmann::ordered_json::parse(e.kv.value, nullptr, false);
      o.derived.reset();
    }
    if (events->size() < 4096) {
      // Every change up to `head` under the prefix has been seen.
      revision_ = std::max(revision_, head);
      return changed;
    }
  }
}

}  // namespace gpucloud::server
