// Factories of the built-in score plugins, one per file in this folder. Use the registry
// (sched/registry.h) to get them by name.
#ifndef GPUCLOUD_SCHED_PLUGINS_SCORES_H_
#define GPUCLOUD_SCHED_PLUGINS_SCORES_H_

#include <map>
#include <memory>
#include <vector>

#include "core/sched_config.h"
#include "sched/plugin.h"

namespace gpucloud::sched {

// "BinPack": the fuller the node after placement, the better (kube-scheduler's MostAllocated):
// keeps empty nodes empty for large gangs.
std::unique_ptr<ScorePlugin> NewBinPackScore();

// "Fragmentation": the smaller the growth of the node's expected fragmentation, the better
// (FGD, "Beware of Fragmentation", USENIX ATC'23). A node's fragmentation for one class of
// request is the free GPU capacity that request could not use there; the expected
// fragmentation weights the classes by their share of `workload` (empty: the Philly trace's
// job sizes).
std::unique_ptr<ScorePlugin> NewFragmentationScore(std::vector<WorkloadShare> workload);

// The expected fragmentation of one node, in GPUs; exposed for tests and the simulator's report.
double ExpectedFragmentation(const NodeView& view, const std::vector<WorkloadShare>& workload);
// The Philly trace's request sizes (93.2% 1 GPU, 2.2% 2, 2.3% 4, 2.0% 8, 0.4% 16 or more).
std::vector<WorkloadShare> PhillyWorkload();

// Counts requests into a workload for the Fragmentation score: each task's GPUs per replica
// (whole GPUs, or a share's fraction; MIG and GPU-less tasks are left out), weighted by how many
// tasks ask for that size. Value type.
class WorkloadCounter {
 public:
  void Add(const GpuRequest& per_replica);
  // Sorted by size; empty when nothing was counted.
  std::vector<WorkloadShare> Shares() const;

 private:
  std::map<int64_t, int64_t> tasks_by_milli_;
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_PLUGINS_SCORES_H_
