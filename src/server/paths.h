// Where a job's files go on the nodes: its checkpoint directory lies in the operator's
// checkpoint root, inside its own namespace's tree, whatever the spec asks for. Checked when a
// job is created (a 422 naming spec.checkpoint.dir) and again when it is bound (a job stored
// before the check existed fails then). Pure functions; thread-safe.
#ifndef GPUCLOUD_SERVER_PATHS_H_
#define GPUCLOUD_SERVER_PATHS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpucloud::server {

// The checkpoint directory of job `job` in `namespace_` under `root` (--checkpoint-root):
//   dir empty     -> <root>/<namespace>/<job> (the default);
//   dir relative  -> <root>/<namespace>/<dir>, refused when, normalised, it is "." or leaves
//                    that tree ("../x");
//   dir absolute  -> dir, lexically normalised, accepted only strictly inside
//                    <root>/<namespace>/ (a relative root is made absolute against the working
//                    directory for the comparison; symbolic links are not followed).
// InvalidArgument "spec.checkpoint.dir: ..." otherwise. `namespace_` and `job` are DNS labels.
absl::StatusOr<std::string> ResolveCheckpointDir(std::string_view root, std::string_view namespace_,
                                                 std::string_view job, std::string_view dir);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_PATHS_H_
