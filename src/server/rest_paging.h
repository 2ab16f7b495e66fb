// Paging of lists (limit/continue, as Kubernetes pages them): the continue token a page ends
// with names the list (its store prefix), the revision its first page was read at and the last
// key answered; the next page is the keys after it. Pages are each read from the newest state,
// in key order, so an object that exists throughout the paging is answered exactly once,
// whatever is created or deleted meanwhile; every page answers the first page's revision as the
// list's resourceVersion, so a watch from it misses no change. A token whose revision the store
// has compacted is expired (410), as Kubernetes' are after etcd's compaction. Pure; thread-safe.
#ifndef GPUCLOUD_SERVER_REST_PAGING_H_
#define GPUCLOUD_SERVER_REST_PAGING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpucloud::server {

struct ContinueToken {
  std::string prefix;     // the list's store prefix
  int64_t revision = 0;   // the first page's revision
  std::string after_key;  // the last key answered
  bool operator==(const ContinueToken&) const = default;
};

// Opaque to clients: URL-safe base64 of a small JSON document.
std::string EncodeContinue(const ContinueToken& token);
// nullopt when `text` is no token EncodeContinue wrote.
std::optional<ContinueToken> DecodeContinue(std::string_view text);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_REST_PAGING_H_
