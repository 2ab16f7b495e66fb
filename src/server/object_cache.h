// ObjectCache: an informer. Keeps every object under a store prefix in memory, parsed once per
// change, and catches up with the store's change log (Store::Changes) instead of listing again;
// lists again only when the log was compacted past it. The controller loop owns its caches.
// Not thread-safe.
#ifndef GPUCLOUD_SERVER_OBJECT_CACHE_H_
#define GPUCLOUD_SERVER_OBJECT_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "store/store.h"

namespace gpucloud::server {

struct CachedObject {
  int64_t mod_revision = 0;
  nlohmann::ordered_json doc;
  // What the owner derived from `doc` (a parsed Job, a NodeInfo...); reset on every change.
  std::shared_ptr<void> derived;
};

class ObjectCache {
 public:
  explicit ObjectCache(std::string prefix) : prefix_(std::move(prefix)) {}
  // Applies the changes since the last sync. Returns true when something changed.
  // A transaction's writes are applied together: a sync never stops inside a revision.
  absl::StatusOr<bool> Sync(store::Store& store);
  // Change-log events read at a time.
  static constexpr int kPage = 4096;
  const std::map<std::string, CachedObject>& objects() const { return objects_; }
  // An owner that wrote an object may put what it wrote here (doc, the mod_revision the store
  // gave it, what it derived): Sync then skips that revision's event for the key instead of
  // parsing it again and dropping `derived`.
  std::map<std::string, CachedObject>& mutable_objects() { return objects_; }
  int64_t revision() const { return revision_; }

 private:
  absl::Status Relist(store::Store& store);
  std::string prefix_;
  std::map<std::string, CachedObject> objects_;
  int64_t revision_ = -1;  // -1: never listed
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_OBJECT_CACHE_H_
