// One scheduling cycle: a pure function of (cluster state, pending jobs, now) to decisions.
//
// Pending jobs are taken in queue-sort order (QueueSortLess: priority, then FIFO, SJF or LAS). Each
// job either
//   binds    — the gang placer found room; the allocation is committed into the state at once,
//              so later jobs of the same cycle see it;
//   rejects  — it could never run on this cluster (reason says why; it must not wait forever);
//   waits    — it could run, just not now (reason says what it waits for).
// No I/O, no clock, no threads: `now` only orders and stamps. The server and the simulator
// call the same code. Not thread-safe (mutates the given ClusterState).
//
// With backfill on, the first waiting job of each queue reserves the nodes it will get at its
// earliest start, and later jobs may not delay that (see SchedulerOptions::backfill).
//
// Queue maxima are enforced (SchedulerOptions::queues). Not yet here (see issue 3): guaranteed
// quotas with lending and reclaiming, fair share between queues, preemption and the score
// plugins' weights.
#ifndef GPUCLOUD_SCHED_SCHEDULER_H_
#define GPUCLOUD_SCHED_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/queue.h"
#include "sched/cluster_state.h"
#include "sched/gang_placer.h"
#include "sched/job_request.h"
#include "sched/plugin.h"

namespace gpucloud::sched {

struct PendingJob {
  JobRequest request;
  std::string queue;
  int32_t priority = 0;
  int64_t submit_ms = 0;
  std::optional<int64_t> runtime_estimate_s;  // the user's estimate (SJF)
  int64_t attained_gpu_ms = 0;                // GPU time received in earlier attempts (LAS)
};

enum class DecisionKind { kBind, kWait, kReject };

struct Decision {
  DecisionKind kind = DecisionKind::kWait;
  std::string job;
  std::optional<Allocation> allocation;      // kBind only; already committed to the state
  std::string reason;                        // kWait and kReject
  std::optional<int64_t> expected_start_ms;  // kWait, when start times are estimated and known
};

struct SchedulerOptions {
  QueueOrdering ordering = QueueOrdering::kFifo;
  // Tell waiting jobs when they could start ("expected to start in about 40 min"), from the
  // running jobs' expected ends. Costs a few placement searches per waiting job shape.
  bool estimate_start_times = false;
  // EASY backfill: the first waiting job of each queue holds a reservation at its earliest
  // start (when running jobs' ends are known); a later job may start now only if it surely ends
  // before that (by its runtime estimate) or stays off the reserved nodes.
  bool backfill = true;
  // Queue specs by name. A job whose placement would take its queue past a maximum
  // (QueueSpec::quota[].max) waits. Queues not listed have no maximum.
  std::map<std::string, QueueSpec> queues;
};

// The order jobs are considered in. Priority always comes first (higher first); then
//   kFifo: earlier submission;
//   kSjf:  smaller estimated GPU-time (estimate x GPUs); jobs without an estimate after those
//          with one (shortest job first on the user's estimate);
//   kLas:  less GPU time attained so far (Tiresias' least attained service);
// then submission time and key, so the order is total and deterministic.
bool QueueSortLess(QueueOrdering ordering, const PendingJob& a, const PendingJob& b);

class Scheduler {
 public:
  Scheduler(std::vector<std::unique_ptr<FilterPlugin>> filters, const GpuCatalog& catalog,
            SchedulerOptions options = {})
      : filters_(std::move(filters)), catalog_(catalog), options_(options), placer_(filters_) {}

  std::vector<Decision> Schedule(ClusterState& state, const std::vector<PendingJob>& pending,
                                 int64_t now_ms) const;

 private:
  struct Reservation {
    std::string job;
    int64_t start_ms = 0;
    std::vector<NodeIndex> nodes;
  };
  // PlaceNow, except that a job that may still run at a reservation's start keeps off the
  // reserved nodes.
  PlacementResult PlaceRespectingReservations(
      ClusterState& state, const PendingJob& p,
      const std::map<std::string, Reservation>& reservations, int64_t now_ms) const;

  // The decision for a job that cannot start now but could some day; makes the queue's first
  // such job the holder of its reservation (with backfill on).
  Decision Wait(ClusterState& state, const PendingJob& p, int64_t now_ms, std::string reason,
                std::map<std::string, Reservation>* reservations) const;

  std::vector<std::unique_ptr<FilterPlugin>> filters_;
  const GpuCatalog& catalog_;
  SchedulerOptions options_;
  GangPlacer placer_;
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_SCHEDULER_H_
