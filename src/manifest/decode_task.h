// Internal: pieces of the Job decoder that the Kubernetes and Volcano decoders reuse.
#ifndef GPUCLOUD_MANIFEST_DECODE_TASK_H_
#define GPUCLOUD_MANIFEST_DECODE_TASK_H_

#include <optional>
#include <vector>

#include "manifest/decode.h"

namespace gpucloud::manifest::internal {

// A whole-GPU count: a non-negative integer; a decimal gets a hint to ask for a fraction.
std::optional<int32_t> ReadGpuCount(Context& ctx, const Field& f);
// The fields a task and a Kubernetes container share: name (a DNS label unique among
// `earlier`), image, command, args, env, workingDir.
bool DecodeProcess(Context& ctx, MapReader& m, const std::vector<TaskSpec>& earlier, TaskSpec* t);
// A list of {name, value} environment variables.
bool DecodeEnv(Context& ctx, const Field& f, std::vector<EnvVar>* out);
// The job-wide options of a gpucloud/v1 Job spec (queue, priority, billing, nodeSelector,
// tolerations, minCudaVersion, runtimeClass, checkpoint, restartPolicy, runtimeEstimate).
bool DecodeJobOptions(Context& ctx, MapReader& spec, JobSpec* out);

}  // namespace gpucloud::manifest::internal

#endif  // GPUCLOUD_MANIFEST_DECODE_TASK_H_
