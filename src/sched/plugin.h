// The scheduler's plugin interfaces, after kube-scheduler's framework: each stage is one small
// interface and a plugin implements the stages it needs. Plugins are stateless and
// deterministic: the same job and node give the same answer. Registered by name in
// registry.h. Implementations must be thread-compatible (const methods only).
#ifndef GPUCLOUD_SCHED_PLUGIN_H_
#define GPUCLOUD_SCHED_PLUGIN_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// What a score plugin sees of a node: per GPU, how much a whole-GPU or shared request could still
// use (ClusterState::FreeShare), before or after the candidate placement.
struct NodeView {
  const Node* node = nullptr;
  std::vector<MilliGpu> free;  // one entry per GPU of the node; 0 for MIG-enabled or broken
  int32_t usable = 0;          // GPUs that are healthy and not MIG-enabled
};

// Node `n` as it is now in `state`.
inline NodeView ViewOfNode(const ClusterState& state, NodeIndex n) {
  NodeView v;
  v.node = &state.node(n);
  for (int32_t g = 0; g < static_cast<int32_t>(v.node->gpus.size()); ++g) {
    const Gpu& gpu = v.node->gpus[g];
    if (gpu.healthy && !gpu.mig_enabled) ++v.usable;
    v.free.push_back(state.FreeShare(n, g));
  }
  return v;
}

// Score stage: how good is this node for this job, among nodes where it fits? 0..100, higher is
// better. The placer normalizes each plugin's scores over the candidates of one decision (so a
// plugin only has to order nodes) and sums them times their weights; ties keep best-fit order.
class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view Name() const = 0;
  virtual double Score(const JobRequest& job, const NodeView& before,
                       const NodeView& after) const = 0;
};

struct WeightedScore {
  std::unique_ptr<ScorePlugin> plugin;
  int32_t weight = 1;
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_PLUGIN_H_
