// The scheduler's plugin interfaces, after kube-scheduler's framework: each stage is one small
// interface and a plugin implements the stages it needs. Plugins are stateless and
// deterministic: the same job and node give the same answer. Registered by name in
// registry.h. Implementations must be thread-compatible (const methods only).
#ifndef GPUCLOUD_SCHED_PLUGIN_H_
#define GPUCLOUD_SCHED_PLUGIN_H_

#include <optional>
#include <string>
#include <string_view>

#include "core/node.h"
#include "sched/job_request.h"

namespace gpucloud::sched {

// Filter stage: may this job use this node at all, whatever is free on it? Rejections are
// static facts about the node (labels, taints, versions, health, GPU types), so they also
// answer "could this job ever run here". A filter may look only at the job's fields that
// FilterSignature covers (its answers are cached per signature) and at the node.
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view Name() const = 0;
  // nullopt when the node is acceptable; otherwise why not, e.g. "node label accelerator is
  // nvidia-h100, the job needs nvidia-a100".
  virtual std::optional<std::string> Filter(const JobRequest& job, const Node& node) const = 0;
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_PLUGIN_H_
