// SchedulerConfig: the scheduler's profile, as an operator writes it in a SchedulerConfiguration
// file (see docs/scheduler.md): which filter and score plugins run and with what weights, queue
// ordering, backfill, fair share, preemption and the per-namespace cycle budget. The server and the
// simulator read the same file, so a policy tried in the simulator is the policy production runs.
// Value type; thread-compatible.
#ifndef GPUCLOUD_CORE_SCHED_CONFIG_H_
#define GPUCLOUD_CORE_SCHED_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/object_meta.h"
#include "core/quantity.h"
#include "core/queue.h"

namespace gpucloud {

// One class of request in the workload the Fragmentation score plugin protects: `gpus` per
// replica (a fraction such as 0.5 for shared GPUs) and its relative frequency.
struct WorkloadShare {
  MilliGpu gpus;
  double weight = 0;
  bool operator==(const WorkloadShare&) const = default;
};

struct ScorePluginConfig {
  std::string name;
  int32_t weight = 1;
  // Fragmentation only: the expected mix of requests; empty = the requests actually made (the
  // server's current jobs, the simulator's trace: Scheduler::SetWorkload), else Philly's sizes.
  std::vector<WorkloadShare> workload;
  bool operator==(const ScorePluginConfig&) const = default;
};

// How much of one namespace's backlog a scheduling cycle looks at (sched/backlog.h): at most
// `max_waiting` jobs decided without a bind, of which at most `max_searches` needed a placement
// search; the namespace's other jobs wait for the next cycle. 0 = no limit.
struct NamespaceBudgetConfig {
  int32_t max_waiting = 1000;
  int32_t max_searches = 100;
  bool operator==(const NamespaceBudgetConfig&) const = default;
};

// Ordering dlas (Tiresias' discretized 2D-LAS): band k holds the jobs whose attained GPU-time
// (GPUs x time, over all their attempts) is at least thresholds[k-1] and below thresholds[k];
// band 0 goes first. A job that has waited, since its last attempt ended, at least
// `starvation_factor` times the wall time its service took (attained / GPUs) is promoted to
// band 0 for its next attempt (0 = no promotion). The defaults are those of the Pollux artifact's
// Tiresias (one threshold of 16 GPU-hours, no promotion).
struct LasConfig {
  std::vector<int64_t> thresholds_gpu_s = {16 * 3600};  // ascending, > 0
  double starvation_factor = 0;                         // >= 0
  bool operator==(const LasConfig&) const = default;
};

struct SchedulerConfig {
  // Within a queue: priority first, then this (a queue's own spec.ordering overrides it).
  QueueOrdering ordering = QueueOrdering::kFifo;
  bool backfill = true;
  bool estimate_start_times = false;
  // Weighted dominant-resource fair share between queues; off = one global order.
  bool fair_share = true;
  // GPU-hours attained over this window count towards a queue's share (with its current use).
  int64_t fair_share_window_s = 7 * 24 * 3600;
  bool preemption = true;
  // Time a preempted job gets to checkpoint before it is stopped.
  int64_t preemption_grace_s = 30;
  std::vector<std::string> filters;  // empty = every built-in filter
  // Empty = no scoring: the first node in best-fit order wins.
  std::vector<ScorePluginConfig> scores = {{"BinPack", 1, {}}, {"Fragmentation", 1, {}}};
  NamespaceBudgetConfig namespace_budget;
  LasConfig las;  // ordering dlas's bands
  bool operator==(const SchedulerConfig&) const = default;
};

// The manifest kind gpucloud/v1 SchedulerConfiguration (cluster-scoped).
struct SchedulerConfiguration {
  ObjectMeta metadata;
  SchedulerConfig spec;
  bool operator==(const SchedulerConfiguration&) const = default;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_SCHED_CONFIG_H_
