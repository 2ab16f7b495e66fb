// GpuType: a job whose tasks accept only some GPU types skips nodes that have none of them.
// (Which GPUs of a mixed node a replica gets is ClusterState's job.)
#include "core/text.h"
#include "sched/plugins/filters.h"

namespace gpucloud::sched {
namespace {

class GpuTypeFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "GpuType"; }
  std::optional<std::string> Filter(const JobRequest& job, const Node& node) const override {
    std::vector<std::string> types = job.AcceptedGpuTypes();
    if (types.empty()) return std::nullopt;
    for (const Gpu& g : node.gpus) {
      for (const std::string& t : types) {
        if (g.type == t) return std::nullopt;
      }
    }
    return Cat("node has no ", Join(types, " or "), " GPU");
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> NewGpuTypeFilter() { return std::make_unique<GpuTypeFilter>(); }

}  // namespace gpucloud::sched
