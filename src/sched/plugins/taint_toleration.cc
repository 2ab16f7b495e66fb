// TaintToleration: a NoSchedule or NoExecute taint keeps out every job that does not tolerate
// it (Kubernetes semantics: Exists matches any value; an empty effect matches every effect).
// PreferNoSchedule taints do not filter.
#include "core/text.h"
#include "sched/plugins/filters.h"

namespace gpucloud::sched {
namespace {

bool Tolerates(const Toleration& t, const Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (t.exists) return t.key.empty() || t.key == taint.key;
  return t.key == taint.key && t.value == taint.value;
}

class TaintTolerationFilter final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "TaintToleration"; }
  std::optional<std::string> Filter(const JobRequest& job, const Node& node) const override {
    for (const Taint& taint : node.taints) {
      if (taint.effect == "PreferNoSchedule") continue;
      bool tolerated = false;
      for (const Toleration& t : job.tolerations) tolerated = tolerated || Tolerates(t, taint);
      if (!tolerated) {
        return Cat("node has taint ", taint.key, taint.value.empty() ? "" : "=", taint.value, ":",
                   taint.effect, " that the job does not tolerate");
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<FilterPlugin> NewTaintTolerationFilter() {
  return std::make_unique<TaintTolerationFilter>();
}

}  // namespace gpucloud::sched
