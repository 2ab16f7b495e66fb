// NodeSelector: every key of the job's node selector must be a node label with the same value.
#include "core/text.h"
#include "sched/plugins/filters.h"

namespace gpucloud::sched {
namespace {

class NodeSelectorFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "NodeSelector"; }
  std::optional<std::string> Filter(const JobRequest& job, const Node& node) const override {
    for (const auto& [key, want] : job.node_selector) {
      auto it = node.labels.find(key);
      if (it == node.labels.end())
        return Cat("node has no label ", key, " (the job needs ", want, ")");
      if (it->second != want) {
        return Cat("node label ", key, " is ", it->second, ", the job needs ", want);
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> NewNodeSelectorFilter() {
  return std::make_unique<NodeSelectorFilter>();
}

}  // namespace gpucloud::sched
