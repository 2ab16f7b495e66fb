// The one snapshot builder: how "the cluster, the jobs, their history, now" become the
// scheduler's input (ClusterState with every job's holdings, the pending jobs, the fair-share
// window's history, the request mix). The server's controller builds its input from these
// functions, job by job, keeping its state across passes; the replay of a recorded server
// (sim/replay.h) builds it from scratch each pass with BuildSnapshot, from the same JobViews.
// A difference between the two is a bug the replay test finds.
//
// Pure functions of their arguments; thread-safe. Snapshot owns what it holds.
#ifndef GPUCLOUD_SCHED_SNAPSHOT_H_
#define GPUCLOUD_SCHED_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/node.h"
#include "sched/cluster_state.h"
#include "sched/queue_quota.h"
#include "sched/scheduler.h"
#include "sched/usage_window.h"

namespace gpucloud::sched {

// Where a job stands, as the scheduler's input sees it.
//   kWaiting   pending: the scheduler may bind it (once `not_before_ms` has passed);
//   kHolding   bound or running: holds its placement;
//   kStopping  preempted, restarting, cancelled, ...: holds its placement until its tasks end;
//   kOther     ended, cancelled while pending, or deleted: holds nothing, never scheduled.
enum class JobViewPhase { kWaiting, kHolding, kStopping, kOther };

// One replica of a job's placement, by node name (node indexes belong to one ClusterState).
struct HeldReplica {
  std::string node;
  ReplicaPlacement placement;  // placement.node is ignored
  bool operator==(const HeldReplica&) const = default;
};

// GPU time of an ended attempt on one GPU type (the fair-share window's history).
struct UsageSpan {
  int64_t end_ms = 0;
  std::string gpu_type;
  double gpu_seconds = 0;
  bool operator==(const UsageSpan&) const = default;
};

// A job's state as the scheduler's input is built from it, besides its spec (core::Job). The
// server reads it from the job's status; a recording (sim/recording.h) stores it.
struct JobView {
  JobViewPhase phase = JobViewPhase::kOther;
  int64_t submit_ms = 0;
  // kWaiting:
  int64_t not_before_ms = 0;     // back-off: not scheduled before
  int64_t attained_gpu_ms = 0;   // GPU x ms of the attempts that ended (ordering las)
  int64_t waiting_since_ms = 0;  // when its last attempt was interrupted (dlas starvation)
  // kHolding and kStopping:
  std::vector<HeldReplica> placement;
  int64_t bound_ms = 0;            // when the scheduler bound the current attempt
  int64_t started_ms = 0;          // when its first task ran (0: not yet)
  int64_t last_checkpoint_ms = 0;  // the newest complete checkpoint its agents reported
  int64_t las_service_gpu_ms = 0;  // ordering dlas: what the attempt's band counts from
  std::vector<UsageSpan> usage;    // the last ended attempts' GPU time
  bool operator==(const JobView&) const = default;
};

// The scheduler's view of a waiting job `key` (spec `job`).
PendingJob PendingOf(std::string_view key, const Job& job, const JobView& v);

// What a holding or stopping job holds in `state`: its placement on the nodes `index` still has
// (a lost node holds nothing), without GPUs that turned unhealthy. Its expected end is the
// user's runtime estimate from when it was bound, so that it survives every rebuild.
Allocation AllocationOf(std::string_view key, const Job& job, const JobView& v,
                        const std::map<std::string, NodeIndex>& index, const ClusterState& state);

// Adds the job's ended attempts (v.usage) to the fair-share window, for its queue.
void AddToWindow(UsageWindow& window, const std::string& queue, const JobView& v);

// Whether the job takes part in the request mix a Fragmentation score protects (it waits or
// holds GPUs now).
inline bool InWorkload(const JobView& v) {
  return v.phase == JobViewPhase::kWaiting || v.phase == JobViewPhase::kHolding;
}

// One job as BuildSnapshot takes it; nothing is owned: all must outlive the call.
struct SnapshotJob {
  std::string_view key;
  const Job* job = nullptr;
  const JobView* view = nullptr;
};

struct Snapshot {
  std::unique_ptr<ClusterState> state;     // the nodes with every job's holdings committed
  std::map<std::string, NodeIndex> index;  // node name -> index in state
  // Waiting and due, in the order of `jobs`; the elements of arrays the parallelism gate admits
  // (sched/array_gate.h) after the others, as the server orders them.
  std::vector<PendingJob> pending;
  QueueHistory history;                        // the fair-share window's (when window_ms > 0)
  std::vector<WorkloadShare> workload;         // the request mix of the jobs that InWorkload
  std::vector<std::string> holding_conflicts;  // jobs whose holdings did not fit (a bug)
};

// The scheduler's whole input at `now_ms`: `nodes` in their order (cordons and GPU health as
// given), the jobs' holdings committed in the order of `jobs`, the waiting jobs due by now.
Snapshot BuildSnapshot(std::vector<Node> nodes, const std::vector<SnapshotJob>& jobs,
                       int64_t window_ms, int64_t now_ms, const GpuCatalog& catalog);

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_SNAPSHOT_H_
