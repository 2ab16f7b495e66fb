// NodeHealth: cordoned nodes take no new work, and a job that needs GPUs skips nodes whose GPUs
// are all unhealthy.
#include "core/text.h"
#include "sched/plugins/filters.h"

namespace gpucloud::sched {
namespace {

class NodeHealthFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "NodeHealth"; }
  std::optional<std::string> Filter(const JobRequest& job, const Node& node) const override {
    if (node.cordoned) return "node is cordoned";
    bool needs_gpu = false;
    for (const TaskRequest& t : job.tasks) needs_gpu |= t.per_replica.gpu.mode != GpuMode::kNone;
    if (!needs_gpu) return std::nullopt;
    for (const Gpu& g : node.gpus) {
      if (g.healthy) return std::nullopt;
    }
    return node.gpus.empty() ? "node has no GPU" : "every GPU of the node is unhealthy";
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> NewNodeHealthFilter() { return std::make_unique<NodeHealthFilter>(); }

}  // namespace gpucloud::sched
