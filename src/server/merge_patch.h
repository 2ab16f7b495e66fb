// JSON merge patch (RFC 7386, as RFC 7396 restates it): what PATCH with Content-Type
// application/merge-patch+json applies to a stored object. Pure; thread-safe.
#ifndef GPUCLOUD_SERVER_MERGE_PATCH_H_
#define GPUCLOUD_SERVER_MERGE_PATCH_H_

#include <nlohmann/json.hpp>

namespace gpucloud::server {

// `target` with `patch` merged in: a patch that is not an object replaces the target whole; an
// object patch sets each of its members in the target (recursively, a target member that is
// not an object read as {}), and a member whose value is null removes that member. Arrays are
// replaced, never merged.
nlohmann::ordered_json MergePatch(const nlohmann::ordered_json& target,
                                  const nlohmann::ordered_json& patch);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_MERGE_PATCH_H_
