// BinPack: prefer the node that is fullest after placement (share of its usable GPUs in use).
#include "sched/plugins/scores.h"

namespace gpucloud::sched {
namespace {

class BinPackScore final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "BinPack"; }
  double Score(const JobRequest&, const NodeView&, const NodeView& after) const override {
    if (after.usable == 0) return 100;
    int64_t free = 0;
    for (MilliGpu f : after.free) free += f.raw();
    double used = 1.0 - static_cast<double>(free) / (after.usable * kMilliPerUnit);
    return 100.0 * used;
  }
};

}  // namespace

std::unique_ptr<ScorePlugin> NewBinPackScore() { return std::make_unique<BinPackScore>(); }

}  // namespace gpucloud::sched
