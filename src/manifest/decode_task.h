// Internal: pieces of the Job decoder that the Kubernetes and Volcano decoders reuse.
#ifndef GPUCLOUD_MANIFEST_DECODE_TASK_H_
#define GPUCLOUD_MANIFEST_DECODE_TASK_H_

#include <optional>
#include <vector>

#include "manifest/decode.h"

namespace gpucloud::manifest::internal {

// A whole-GPU count: a non-negative integer; a decimal gets a hint to ask for a fraction.
std::optional<int32_t> ReadGpuCount(Context& ctx, const Field& f);
// Where a securityContext is written: a gpucloud/v1 task (runAsUser, runAsGroup, runAsNonRoot
// only), a Kubernetes container or a pod spec (their other fields accepted with a warning;
// `privileged: true` refused).
enum class SecurityLevel { kTask, kContainer, kPod };
// A securityContext mapping into *out (fields it does not name are left as they were). User and
// group ids are in [0, kMaxPosixId].
bool DecodeSecurityContext(Context& ctx, const Field& f, SecurityLevel level, SecurityContext* out);
// runAsNonRoot with runAsUser 0 is an error at `at`.runAsUser.
bool CheckSecurityContext(Context& ctx, const Field& at, const SecurityContext& sc);
// The fields a task and a Kubernetes container share: name (a DNS label unique among
// `earlier`), image, imagePullPolicy, securityContext, command, args, env, workingDir.
bool DecodeProcess(Context& ctx, MapReader& m, const std::vector<TaskSpec>& earlier,
                   SecurityLevel level, TaskSpec* t);
// A list of {name, value} environment variables.
bool DecodeEnv(Context& ctx, const Field& f, std::vector<EnvVar>* out);
// The job-wide options of a gpucloud/v1 Job spec (queue, priority, billing, nodeSelector,
// tolerations, minCudaVersion, runtimeClass, checkpoint, restartPolicy, runtimeEstimate).
bool DecodeJobOptions(Context& ctx, MapReader& spec, JobSpec* out);

}  // namespace gpucloud::manifest::internal

#endif  // GPUCLOUD_MANIFEST_DECODE_TASK_H_
