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
  int limit = kPage;
  for (;;) {
    int64_t head = store.Revision();
    absl::StatusOr<std::vector<store::Event>> events = store.Changes(prefix_, revision_, limit);
    if (absl::IsOutOfRange(events.status())) {
      if (absl::Status s = Relist(store); !s.ok()) return s;
      return true;
    }
    if (!events.ok()) return events.status();
    const bool full = static_cast<int>(events->size()) >= limit;
    if (full && events->front().revision == events->back().revision) {
      limit *= 2;  // one transaction wrote more than a page: read it whole
      continue;
    }
    // A full page may end inside a revision (one transaction's many writes): what is done is
    // every revision before the page's last; that one is read again, whole, with the next page.
    const int64_t done = full ? events->back().revision - 1 : head;
    for (store::Event& e : *events) {
      if (e.revision > done) break;
      changed = true;
      if (e.kind == store::Event::Kind::kDelete) {
        objects_.erase(e.kv.key);
        continue;
      }
      CachedObject& o = objects_[e.kv.key];
      o.mod_revision = e.kv.mod_revision;
      o.doc = nlohmann::ordered_json::parse(e.kv.value, nullptr, false);
      o.derived.reset();
    }
    revision_ = std::max(revision_, done);
    if (!full) return changed;  // every change up to `head` under the prefix has been seen
  }
}

}  // namespace gpucloud::server
