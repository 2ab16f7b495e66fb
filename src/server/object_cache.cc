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
    absl::StatusOr<std::vector<store::Event>> events = store.Changes(prefix_, revision_, kPage);
    if (absl::IsOutOfRange(events.status())) {
      if (absl::Status s = Relist(store); !s.ok()) return s;
      return true;
    }
    if (!events.ok()) return events.status();
    // Pages hold whole revisions: after a full one, everything up to its last revision is seen.
    const bool full = static_cast<int>(events->size()) >= kPage;
    const int64_t done = full ? events->back().revision : head;
    for (store::Event& e : *events) {
      changed = true;
      if (e.kind == store::Event::Kind::kDelete) {
        objects_.erase(e.kv.key);
        continue;
      }
      CachedObject& o = objects_[e.kv.key];
      // The owner wrote this revision itself and put it here already (doc and what it derived
      // from it): parsing it again would only throw away what it derived.
      if (o.mod_revision == e.kv.mod_revision) continue;
      o.mod_revision = e.kv.mod_revision;
      o.doc = nlohmann::ordered_json::parse(e.kv.value, nullptr, false);
      o.derived.reset();
    }
    revision_ = std::max(revision_, done);
    if (!full) return changed;  // every change up to `head` under the prefix has been seen
  }
}

}  // namespace gpucloud::server
