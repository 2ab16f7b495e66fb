// One scheduling cycle: a pure function of (cluster state, pending jobs, now) to decisions.
//
// Stages, after kube-scheduler: queue sort (fair share between queues, then priority and the
// queue's ordering inside one), filter and score (GangPlacer with the configured plugins),
// reserve (ClusterState::Commit of the whole gang or nothing), and post-filter (preemption).
// Each pending job either
//   binds    — the gang placer found room; the allocation is committed into the state at once,
//              so later jobs of the same cycle see it;
//   rejects  — it could never run on this cluster (reason says why; it must not wait forever);
//   waits    — it could run, just not now (reason says what it waits for);
// and a job that waits may cause preemptions: kPreempt decisions for running jobs, each with a
// grace period to checkpoint. A namespace that has used its per-cycle budget (backlog.h) has its
// remaining jobs deferred to the next cycle, without a decision; so does a job whose wait the
// caller already holds (PendingJob::last_wait_reason). No I/O, no clock, no threads:
// `now` only orders and stamps. The server and the simulator call the same code. Not thread-safe
// (mutates the given ClusterState).
//
// With backfill on, the first waiting job of each queue reserves the nodes it will get at its
// earliest start, and later jobs may not delay that (see SchedulerOptions::backfill). Queue
// maxima, guarantees and borrowing are enforced (SchedulerOptions::queues, QueueQuota).
#ifndef GPUCLOUD_SCHED_SCHEDULER_H_
#define GPUCLOUD_SCHED_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/queue.h"
#include "core/sched_config.h"
#include "sched/backlog.h"
#include "sched/cluster_state.h"
#include "sched/gang_placer.h"
#include "sched/job_request.h"
#include "sched/plugin.h"
#include "sched/queue_quota.h"

namespace gpucloud::sched {

struct PendingJob {
  JobRequest request;
  std::string queue;
  int32_t priority = 0;
  int64_t submit_ms = 0;
  std::optional<int64_t> runtime_estimate_s;  // the user's estimate (SJF)
  int64_t attained_gpu_ms = 0;                // GPU time received in earlier attempts (LAS)
  // When its last attempt ended (0: it never ran, or unknown: the submission counts); the
  // dlas starvation guard measures its wait from here.
  int64_t waiting_since_ms = 0;
  // Checkpoints it writes every this long once started (0: unknown; the server counts what its
  // agents report instead). Bound allocations carry it (Allocation::checkpoint_interval_ms).
  int64_t checkpoint_interval_ms = 0;
  bool preemptible = false;  // spot: any non-preemptible job may preempt it
  // ShapeKey(request), computed on first use. Callers that keep PendingJobs across cycles (the
  // server, the simulator) thereby compute it once per job instead of once per cycle; a caller
  // that changes `request` must clear it.
  mutable std::string shape_key;
  // The scheduler's own, kept with the job like shape_key: its queue and shape as small numbers
  // in the tables of the scheduler that interned them last (`interned_by`: that table's
  // generation, 0 for none), so that a cycle groups and remembers jobs without hashing strings.
  // A caller that changes `queue` or `request` clears shape_key, which makes them be made again.
  mutable uint64_t interned_by = 0;
  mutable uint32_t queue_id = 0;
  mutable uint32_t shape_id = 0;
  // Optional, for callers that keep each waiting job's last wait (the simulator): its reason and
  // capacity_bound, borrowed (valid whenever the job is passed to Schedule; null: not kept). A job
  // that the cycle would give the very same wait again from its memo (a job alike decided first)
  // then gets no Decision: there is nothing new to say, as for a deferred job, and a congested
  // cycle makes no copy of a reason per waiting job. The estimated start is not compared: callers
  // that read Decision::expected_start_ms leave these null.
  const std::string* last_wait_reason = nullptr;
  const bool* last_wait_capacity_bound = nullptr;
};

// kPreempt: a running job (Decision::job) must checkpoint and stop within grace_ms, so that
// Decision::preemptor can start. It stays in the state until the caller releases it; pass it
// back with Allocation::terminating set meanwhile, so it is not chosen again.
enum class DecisionKind { kBind, kWait, kReject, kPreempt };

struct Decision {
  DecisionKind kind = DecisionKind::kWait;
  std::string job;
  std::optional<Allocation> allocation;      // kBind only; already committed to the state
  std::string reason;                        // kWait, kReject and kPreempt
  std::optional<int64_t> expected_start_ms;  // kWait, when start times are estimated and known
  std::string preemptor;                     // kPreempt: the job it makes room for
  int64_t grace_ms = 0;                      // kPreempt
  // kWait: there is no room for it now (more nodes would let it start: what the autoscaler
  // scales up for); false when it waits for its queue's quota or for preempted jobs to stop.
  bool capacity_bound = false;
  bool operator==(const Decision&) const = default;
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
  // Queue specs by name: maxima, guarantees, lending, weights and ordering (a listed queue's
  // spec.ordering overrides `ordering`). Queues not listed have weight 1 and no quota.
  std::map<std::string, QueueSpec> queues;
  // Weighted dominant-resource fair share between queues: the queue below its guarantee, then
  // the one with the smallest dominant share, places its next job. Off: one global order.
  bool fair_share = true;
  // GPU-hours per queue and type used in the last fair_share_window_hours (from the caller).
  QueueHistory history;
  double fair_share_window_hours = 168;
  // Post-filter: a job that cannot start may preempt (1) lower-priority jobs of its queue,
  // (2) preemptible (spot) jobs of priority <= its own when it is not preemptible itself, and
  // (3) when its queue is below its guarantee, jobs of queues that borrow the GPU types they
  // hold. The victims are the set that loses the fewest GPU-hours since their last checkpoint.
  bool preemption = true;
  int64_t preemption_grace_ms = 30'000;
  // Per-cycle work per namespace (backlog.h): once a namespace has had this many jobs decided
  // without a bind, or this many unsuccessful searches, in a cycle, its remaining jobs are
  // deferred to the next cycle (no decision). Keeps one tenant's backlog from slowing the cycle.
  NamespaceBudgetLimits namespace_budget;
  // Ordering dlas (Tiresias' discretized 2D-LAS): the bands of attained GPU-time and the
  // starvation guard. A waiting job may preempt running jobs of a later band, of priority at
  // most its own, in its queue (or any queue, with fair share off); they checkpoint within the
  // grace period, and lose nothing else.
  LasConfig las;
};

// What a cycle did, for tests and metrics.
struct CycleStats {
  int64_t decided = 0;   // jobs looked at (each got a decision)
  int64_t searched = 0;  // of those, ones not bound after a placement search
  int64_t deferred = 0;  // jobs not looked at: their namespace was out of budget
  // The nodes the cycle's reservations plan to use (backfill's queue heads, preemptors waiting
  // for their victims): an autoscaler must not remove them (ray#50783).
  std::vector<NodeIndex> reserved_nodes;
};

// The order jobs are considered in. Priority always comes first (higher first); then
//   kFifo: earlier submission;
//   kSjf:  smaller estimated GPU-time (estimate x GPUs); jobs without an estimate after those
//          with one (shortest job first on the user's estimate);
//   kLas:  less GPU time attained so far (Tiresias' least attained service);
//   kDlas: the earlier band of attained GPU-time (LasBandOf), FIFO inside a band;
// then submission time and key, so the order is total and deterministic. With preemption on, a
// cycle decides spot (preemptible) jobs after all others: a spot job bound before a job that may
// preempt it would only be preempted by it.
bool QueueSortLess(const OrderContext& order, const PendingJob& a, const PendingJob& b);
// The ordering's key of `p` (QueueSortLess compares priority, then this, then submission and
// key): for callers that sort many jobs and compute it once per job.
int64_t QueueOrderKey(const OrderContext& order, const PendingJob& p);
inline bool QueueSortLess(QueueOrdering ordering, const PendingJob& a, const PendingJob& b) {
  return QueueSortLess(OrderContext{ordering}, a, b);
}

// The band of `service_gpu_ms` (GPU x ms): how many of las.thresholds_gpu_s it has reached.
int32_t LasBand(const LasConfig& las, int64_t service_gpu_ms);
// A waiting job's band at `now_ms`: 0 when the starvation guard promotes it (it has waited, since
// waiting_since_ms or else its submission, at least starvation_factor x attained / its GPUs),
// else LasBand of its attained GPU-time.
int32_t LasBandOf(const LasConfig& las, const PendingJob& p, int64_t now_ms);
// A running job's band at `now_ms`: LasBand of its las_service_gpu_ms plus `milli_gpus` (what it
// holds) x the time since it started.
int32_t LasBandOf(const LasConfig& las, const Allocation& a, int64_t milli_gpus, int64_t now_ms);
// When those bands change without any other event (the simulator schedules a cycle then):
// when the starvation guard promotes waiting job `p` (LasBandOf is 0 from then on), and when
// running `a` reaches its next band after `now_ms`. INT64_MAX for never.
int64_t LasPromotionMs(const LasConfig& las, const PendingJob& p);
int64_t LasNextBandMs(const LasConfig& las, const Allocation& a, int64_t milli_gpus,
                      int64_t now_ms);

class Scheduler {
 public:
  Scheduler(std::vector<std::unique_ptr<FilterPlugin>> filters, const GpuCatalog& catalog,
            SchedulerOptions options = {}, std::vector<WeightedScore> scores = {})
      : filters_(std::move(filters)),
        scores_(std::move(scores)),
        catalog_(catalog),
        options_(std::move(options)),
        placer_(filters_, &scores_),
        dlas_used_(DlasUsed(options_)) {}
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The scheduler a SchedulerConfig describes (plugins by name, weights, policies), with the
  // given queue specs; InvalidArgument or NotFound naming a bad plugin.
  static absl::StatusOr<std::unique_ptr<Scheduler>> FromConfig(
      const SchedulerConfig& config, std::map<std::string, QueueSpec> queues,
      const GpuCatalog& catalog);

  const SchedulerOptions& options() const { return options_; }
  // Whether some queue's jobs are ordered by dlas (bands change with time, not only events).
  bool orders_by_dlas() const { return dlas_used_; }
  // The fair-share window's GPU-hours per queue and type for the next cycles (the caller keeps
  // them in a UsageWindow, sched/usage_window.h).
  void SetHistory(QueueHistory history) { options_.history = std::move(history); }
  // Fragmentation scores configured without a workload of their own protect `mix` from the
  // next cycle on (the simulator: the trace's request mix; the server: its current jobs'); an
  // empty mix restores the default (the Philly trace's). Scores built by the constructor, not
  // FromConfig, are left alone.
  void SetWorkload(const std::vector<WorkloadShare>& mix);

  // Where `p` could run on `state` now, by this scheduler's filters, scores and topology rules,
  // ignoring queues, reservations and preemption: the autoscaler's "could it run if these
  // nodes existed", asked on hypothetical nodes. The allocation is not committed; `state` is
  // left as it was.
  PlacementResult PlaceOn(ClusterState& state, const PendingJob& p) const {
    return placer_.PlaceNow(state, p.request);
  }
  // Whether `p` could ever run on `empty` (a state of empty, healthy nodes: GangPlacer's
  // EmptyCluster) by this scheduler's filters: nullopt if so, else why not.
  std::optional<std::string> WhyNeverFitsOn(ClusterState& empty, const PendingJob& p) const {
    return placer_.WhyNeverFits(empty, p.request);
  }

  // One cycle. Decisions come in the order jobs were looked at; a job deferred by the namespace
  // budget gets none (the caller keeps what it showed before), nor does a job told again the
  // wait its caller lent (PendingJob::last_wait_reason).
  std::vector<Decision> Schedule(ClusterState& state, const std::vector<PendingJob>& pending,
                                 int64_t now_ms, CycleStats* stats = nullptr) const;
  // The same, for callers that keep their PendingJobs elsewhere (no copies).
  std::vector<Decision> Schedule(ClusterState& state, const std::vector<const PendingJob*>& pending,
                                 int64_t now_ms, CycleStats* stats = nullptr) const;

 private:
  struct Reservation {
    std::string job;
    int64_t start_ms = 0;
    std::vector<NodeIndex> nodes;
  };
  // A cycle's reservations: each queue's first waiting job's (backfill), and the nodes this
  // cycle's preemptors will get once their victims stop.
  struct Reservations {
    std::map<std::string, Reservation> heads;  // by queue
    std::vector<Reservation> preemptors;
  };
  // PlaceNow, except that a job that may still run at a reservation's start keeps off the
  // reserved nodes.
  PlacementResult PlaceRespectingReservations(ClusterState& state, const PendingJob& p,
                                              const Reservations& reservations,
                                              int64_t now_ms) const;

  struct CycleState;
  // Decides `pending` in the cycle's order (fair share between queues, each queue's ordering);
  // decide_next(lane) decides a lane's next job into `decisions`.
  template <typename DecideNext>
  void DecideAll(const std::vector<const PendingJob*>& pending, int64_t now_ms, CycleState& cycle,
                 const std::vector<Decision>& decisions, DecideNext& decide_next) const;
  // The decision for a job that cannot start now but could some day; makes the queue's first
  // such job the holder of its reservation (with backfill on).
  Decision Wait(ClusterState& state, const PendingJob& p, int64_t now_ms, std::string reason,
                CycleState& cycle) const;

  // Post-filter: the cheapest set of running jobs whose end lets `p` start, among those it may
  // preempt. Appends kPreempt decisions and returns p's wait decision (with a reservation of
  // the nodes it will get), or nullopt when no such set exists.
  std::optional<Decision> Preempt(ClusterState& state, const PendingJob& p, int64_t now_ms,
                                  CycleState& cycle, std::vector<Decision>* decisions) const;
  // The ordering of `queue`'s lane (its spec's, or the default; with fair share off, the
  // default for all), and whether dlas is any lane's.
  QueueOrdering OrderingOf(const std::string& queue) const;
  static bool DlasUsed(const SchedulerOptions& o);
  // p's band when its lane orders by dlas, else -1 (no band, nothing to preempt by it).
  int32_t PreemptorBand(const PendingJob& p, int64_t now_ms) const;
  // A running job's band at `now_ms` when some lane orders by dlas, else -1.
  int32_t RunningBand(const ClusterState& state, const Allocation& a, int64_t now_ms) const;
  // Bind, wait or reject one job.
  JobOutcome Decide(ClusterState& state, const PendingJob& p, int64_t now_ms, CycleState& cycle,
                    std::vector<Decision>* decisions) const;

  std::vector<std::unique_ptr<FilterPlugin>> filters_;
  std::vector<WeightedScore> scores_;
  const GpuCatalog& catalog_;
  SchedulerOptions options_;
  GangPlacer placer_;
  const bool dlas_used_;
  std::vector<size_t> default_workload_scores_;  // indices into scores_ (SetWorkload)

  // `state`'s nodes, empty, uncordoned and healthy: where "could it ever run" is asked. Built
  // when a job first does not fit and kept while the nodes stay the same (cycles of a server or
  // simulator usually share them), since building it costs a copy of every node.
  ClusterState& EmptyTwin(const ClusterState& state) const;
  mutable std::optional<ClusterState> empty_;
  mutable std::vector<Node> empty_source_;
  mutable uint64_t empty_source_id_ = 0;
  mutable uint64_t empty_source_shape_id_ = 0;
  // GangPlacer::WhyNeverFits on the empty twin, by the job's shape and task names (what its
  // answer depends on), kept with the twin: a waiting shape is asked once, not every cycle.
  const std::optional<std::string>& WhyNeverFits(const ClusterState& state,
                                                 const PendingJob& p) const;
  mutable std::unordered_map<std::string, std::optional<std::string>> never_fits_;
  // GangPlacer::EarliestLaterStart by shape, with the nodes' and allocations' stamps (which the
  // search leaves as they were): a job of the same shape asked again before anything was committed,
  // released or changed on the nodes gets the same answer without the search, in the same cycle
  // (queue heads of one shape, in a full cluster, one after another) or a later one (a cycle that
  // only new arrivals woke). Its start is never before `now_ms` (then the search's own time).
  struct LaterStart {
    uint64_t version = 0;
    uint64_t nodes_id = 0;
    int64_t now_ms = 0;
    std::optional<GangPlacer::StartEstimate> estimate;
  };
  const std::optional<GangPlacer::StartEstimate>& LaterStartOf(ClusterState& state,
                                                               const PendingJob& p,
                                                               int64_t now_ms) const;
  mutable std::unordered_map<std::string, LaterStart> later_starts_;
  // PendingJob::queue_id and shape_id: numbers for names, set on `pending` where they are not
  // this table's (a job seen first, or interned by another scheduler). The table is made anew,
  // with a new generation, when it has grown past a bound (the ids of earlier jobs are then
  // theirs no more, and are made again when those jobs are next seen).
  void Intern(const std::vector<const PendingJob*>& pending) const;
  struct InternTable {
    uint64_t generation = 0;
    std::unordered_map<std::string, uint32_t> queues, shapes;
  };
  mutable InternTable interned_;
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_SCHEDULER_H_
