// Fragmentation: FGD (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
// with Fragmentation Gradient Descent", USENIX ATC'23), on whole and shared GPUs.
//
// For one class of request asking `d` GPUs per replica, a node's fragment is the free GPU
// capacity that such a request cannot use there:
//   d < 1 (a share):  the GPUs whose free part is non-zero but below d;
//   d >= 1:           every free part when fewer than d GPUs are wholly free (the request does
//                     not fit), otherwise the partly used GPUs' free parts;
//   d > the node's GPUs (a multi-node gang, which takes whole nodes): all free capacity unless
//                     the node is wholly free.
// The node's expected fragmentation is the workload-weighted sum; the score rewards placements
// that make it grow least (or shrink most).
#include <algorithm>

#include "sched/plugins/scores.h"

namespace gpucloud::sched {
namespace {

double Fragment(const NodeView& view, int64_t d) {
  int64_t total = 0, partial = 0, wholly_free = 0;
  for (MilliGpu f : view.free) {
    total += f.raw();
    if (f.raw() == kMilliPerUnit) {
      ++wholly_free;
    } else {
      partial += f.raw();
    }
  }
  int64_t frag = 0;
  if (d < kMilliPerUnit) {
    for (MilliGpu f : view.free) {
      if (f.raw() > 0 && f.raw() < d) frag += f.raw();
    }
  } else if (d > int64_t{view.usable} * kMilliPerUnit) {
    frag = wholly_free == view.usable ? 0 : total;
  } else {
    frag = wholly_free * kMilliPerUnit < d ? total : partial;
  }
  return static_cast<double>(frag) / kMilliPerUnit;
}

class FragmentationScore final : public ScorePlugin {
 public:
  explicit FragmentationScore(std::vector<WorkloadShare> workload)
      : workload_(workload.empty() ? PhillyWorkload() : std::move(workload)) {}
  std::string_view Name() const override { return "Fragmentation"; }
  double Score(const JobRequest&, const NodeView& before, const NodeView& after) const override {
    if (before.usable == 0) return 50;
    double growth =
        ExpectedFragmentation(after, workload_) - ExpectedFragmentation(before, workload_);
    // growth lies in [-usable, usable]; no growth scores 50.
    return std::clamp(50.0 * (1.0 - growth / before.usable), 0.0, 100.0);
  }

 private:
  std::vector<WorkloadShare> workload_;
};

}  // namespace

void WorkloadCounter::Add(const GpuRequest& per_replica) {
  int64_t milli = 0;
  if (per_replica.mode == GpuMode::kWhole) milli = int64_t{per_replica.count} * kMilliPerUnit;
  if (per_replica.mode == GpuMode::kShared) milli = per_replica.fraction.raw();
  if (milli > 0) ++tasks_by_milli_[milli];
}

std::vector<WorkloadShare> WorkloadCounter::Shares() const {
  std::vector<WorkloadShare> out;
  for (const auto& [milli, n] : tasks_by_milli_) {
    out.push_back({MilliGpu(milli), static_cast<double>(n)});
  }
  return out;
}

std::vector<WorkloadShare> PhillyWorkload() {
  return {{WholeGpus(1), 93.2},
          {WholeGpus(2), 2.2},
          {WholeGpus(4), 2.3},
          {WholeGpus(8), 2.0},
          {WholeGpus(16), 0.4}};
}

double ExpectedFragmentation(const NodeView& view, const std::vector<WorkloadShare>& workload) {
  double total_weight = 0, sum = 0;
  for (const WorkloadShare& w : workload) {
    total_weight += w.weight;
    sum += w.weight * Fragment(view, w.gpus.raw());
  }
  return total_weight > 0 ? sum / total_weight : 0;
}

std::unique_ptr<ScorePlugin> NewFragmentationScore(std::vector<WorkloadShare> workload) {
  return std::make_unique<FragmentationScore>(std::move(workload));
}

}  // namespace gpucloud::sched
