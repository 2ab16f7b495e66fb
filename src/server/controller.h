// Controller: the control plane's loop — node controller, job controller and scheduler loop in
// one thread, so that one writer moves jobs through their phases (fewer conflicts, and every
// decision sees the previous one). Each pass:
//   1. catches up with the store (ObjectCache: nodes, jobs, queues);
//   2. nodes: Ready while heartbeats arrive (NodeTable), NotReady after `heartbeat_timeout_ms`
//      without one; transitions are written to the Node's status;
//   3. jobs: the job controller moves each job along from its tasks' reports — Scheduled ->
//      Running -> Succeeded; a failed task restarts the job from its checkpoint with back-off
//      (restartPolicy) or fails it; a lost or drained node, a preemption or a cancel stops the
//      job's tasks (assignments deleted; the agents stop them with a grace period) and keeps
//      its GPUs reserved until they have stopped;
//   4. the scheduler (libsched, the same as `gpucloud sim`) places pending jobs; a gang's
//      bindings — the job's status and every assignment — are written in one transaction;
//      a waiting job gets its reason in its status and an Event.
// Writes are compare-and-swap on what the pass read, so a concurrent API write wins and the
// next pass sees it. Passes run at once on a store change (WatchStore, a thread of its own) or a
// Kick, and at least every tick; a change made while a pass ran gets a pass right after it.
// Thread-safe: Start/Stop/Kick/Metrics from any thread; RunOnce from one at a time (tests call
// it directly, with a FakeClock, instead of Start).
#ifndef GPUCLOUD_SERVER_CONTROLLER_H_
#define GPUCLOUD_SERVER_CONTROLLER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "core/gpu_catalog.h"
#include "core/node_pool.h"
#include "core/sched_config.h"
#include "server/job_machine.h"
#include "server/job_status.h"
#include "server/node_table.h"
#include "server/object_cache.h"
#include "store/store.h"

namespace gpucloud::sim {
class RecordingWriter;
}

namespace gpucloud::sched {
class ClusterState;
class Scheduler;
struct Decision;
struct PendingJob;
}  // namespace gpucloud::sched

namespace gpucloud::server {
class Autoscaling;
class PriceBook;
class BudgetBook;
namespace controller_detail {
struct JobEntry;
struct Pass;
}  // namespace controller_detail

struct ControllerOptions {
  SchedulerConfig scheduler;
  // Where jobs' checkpoints go when their spec names none: {root}/{namespace}/{job}. A shared
  // file system on a multi-node cluster.
  std::string checkpoint_root = ".gpucloud/checkpoints";
  int64_t heartbeat_timeout_ms = 3000;  // 3 missed heartbeats of 1 s
  // Every node counts as heard from `start_grace_ms` after this controller started (so judged
  // NotReady no sooner than that plus the heartbeat timeout), whatever its NodeTable entry says:
  // a new leader's agents are still finding it (a frozen old leader costs each one its connect,
  // handshake or answer timeout), and its NodeTable may hold heartbeats from long ago.
  int64_t start_grace_ms = 0;
  int64_t tick_ms = 1000;
  int64_t stop_grace_ms = 30'000;  // SIGTERM to SIGKILL on the agents
  // Called (on the controller's thread) once a job the controller deleted is gone from the
  // store: a deleted job's tasks had to stop first. The server removes the job's logs here.
  std::function<void(const std::string& namespace_, const std::string& job)> on_job_deleted;
  // Where to record what the scheduler is given and decides, pass by pass (sim/recording.h;
  // `gpucloud sim --trace` replays it); not owned, written on the controller's thread. Null:
  // nothing is recorded.
  std::ostream* record_scheduler = nullptr;
  // The autoscaler (server/autoscaling.h), not owned: its held nodes are cordoned in the
  // scheduler's view, and it runs after each pass's scheduling. Null: no autoscaling.
  Autoscaling* autoscaling = nullptr;
  // How jobs' GPU energy is turned into carbon (billing.h).
  CarbonOptions carbon;
  // The currency of prices and budgets (budgets.h): a Namespace budget in another is refused.
  std::string currency = "USD";
};

// What /metrics shows of the cluster, as of the last pass.
struct ClusterMetrics {
  std::map<std::string, int64_t> jobs_by_phase;
  std::map<std::string, int64_t> pending_by_queue;
  std::map<std::string, int64_t> gpus_total_by_type;     // on Ready nodes, healthy
  std::map<std::string, double> gpus_allocated_by_type;  // whole GPUs (shares as fractions)
  int64_t nodes_ready = 0;
  int64_t nodes_not_ready = 0;
  // Pending jobs the last pass's scheduling cycle did not look at: their namespace had used its
  // per-cycle budget (sched/backlog.h).
  int64_t jobs_deferred = 0;
  int64_t passes = 0;
  double last_pass_seconds = 0;
  std::map<std::string, double> stage_seconds;  // sync, nodes, jobs, schedule (place, write)
  // Submission (creation) to binding, first attempts only: histogram buckets in seconds.
  std::vector<double> bind_latency_bounds;
  std::vector<int64_t> bind_latency_counts;  // cumulative per bound, then +Inf
  double bind_latency_sum = 0;
  int64_t bind_latency_count = 0;
  // Interruption to running again, over the server's life.
  int64_t recovery_count = 0;
  double recovery_sum = 0;
  double recovery_max = 0;
  // GPU time of the attempts that ended over the server's life (job_status.h's GpuSeconds).
  GpuSeconds job_gpu_seconds;
  // Jobs holding GPUs ("ns/name"): their GPU time so far, the current attempt included
  // (refreshed at most every 5 s).
  std::map<std::string, GpuSeconds> live_jobs;
  // Billing (server/billing.h) over the server's life: what the job attempts that ended cost,
  // by {namespace, queue, billing class}, and what Ready nodes' GPUs no job held cost, by pool.
  std::map<std::array<std::string, 3>, double> cost_usd;
  std::map<std::string, double> idle_cost_usd;
  // Namespace budgets (budgets.h): the monthly amount and this month's spend as of the last
  // pass, by namespace; the alerts raised over the server's life, by {namespace, percent}.
  std::map<std::string, std::pair<double, double>> budgets;
  std::map<std::pair<std::string, int>, int64_t> budget_alerts;
  // Availability over the server's life: GPU-seconds on registered nodes, and of those the
  // ones on Ready nodes with healthy GPUs.
  double gpu_seconds_registered = 0;
  double gpu_seconds_available = 0;
  double availability() const {
    return gpu_seconds_registered > 0 ? gpu_seconds_available / gpu_seconds_registered : 1.0;
  }
};

// Renders ClusterMetrics in Prometheus text format (gpucloud_* names).
std::string RenderClusterMetrics(const ClusterMetrics& m);
// The cluster's availability, goodput and recovery figures as JSON (GET .../v1/cluster), taken
// at `as_of_ms` (asOfMs: a standby serves what the leader published, and says when that was).
std::string ClusterSummaryJson(const ClusterMetrics& m, int64_t as_of_ms);
// What of the summary changes with events rather than with time (nodes, GPUs, jobs by phase,
// recoveries): the leader publishes its summary again when this differs.
std::string ClusterSummaryShape(const ClusterMetrics& m);

// What the scheduler would decide for a job submitted now (Controller::WhatIf).
struct WhatIfAnswer {
  std::string outcome;  // "Bind" (it would start now), "Wait" or "Reject" (it never could)
  std::vector<std::string> nodes;            // Bind: the nodes its replicas would get, by rank
  std::string reason;                        // Wait and Reject: the scheduler's reason
  std::optional<int64_t> expected_start_ms;  // Wait, when the scheduler estimates start times
};

class Controller {
 public:
  // Borrows everything; all must outlive the controller.
  Controller(store::Store& store, NodeTable& nodes, const Clock& clock, const GpuCatalog& catalog,
             ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  void Start();
  void Stop();
  void Kick();
  absl::Status RunOnce();
  ClusterMetrics Metrics() const;
  // What the scheduler would decide for `job` (in namespace `ns`) if it were submitted now:
  // one cycle of the scheduler, in the next pass, over a copy of the cluster as that pass sees
  // it, with the job among the waiting ones (queues, fair share, reservations and preemption
  // as for any job; namespace budgets and job arrays' gates are not applied). Nothing is
  // written. Blocks until that pass answers (the call kicks one); DeadlineExceeded after
  // `timeout` (the controller is not running, or its passes are slower). Any thread.
  absl::StatusOr<WhatIfAnswer> WhatIf(const std::string& ns, const Job& job,
                                      absl::Duration timeout);

 private:
  using Pass = controller_detail::Pass;  // one pass's view and results (controller_internal.h)
  void Loop();
  // Blocks until the store's revision passes `seen`, Kick or Stop is called, or a tick passed.
  void WaitForWork(int64_t seen);
  void WatchStore();  // store_watcher_: publishes the store's revision as it changes
  absl::Status SyncNodes(Pass& pass);
  // Steps every job on the pass's reports; false when a status write did not land (a conflict):
  // then the pass's reports are not acknowledged, and the agents send them again.
  bool StepJobs(Pass& pass);
  struct JobWrite;
  // One job stepped by NextStatus on the pass's observations; nullopt when nothing changed.
  std::optional<JobWrite> StepJob(Pass& pass, const std::string& key, CachedObject& obj);
  // The scheduling stage (controller_schedule.cc): the scheduler and its view of the cluster
  // brought up to date, every active job's holdings kept in it, the pending jobs placed, and
  // each decision written in one transaction.
  absl::Status Schedule(Pass& pass);
  struct WhatIfRequest;
  // Answers the WhatIf calls waiting, each with a scheduler cycle over a copy of state_ and the
  // pass's `pending` jobs plus its own.
  void AnswerWhatIfs(const Pass& pass, const std::vector<const sched::PendingJob*>& pending);
  struct DecisionWrite;
  absl::Status EnsureScheduler(int64_t now);  // rebuilt when the queues changed
  void EnsureClusterState(Pass& pass);
  // Holds the GPUs of every active or stopping job in state_; the pending ones, for libsched.
  std::vector<const sched::PendingJob*> CollectPending(Pass& pass);
  void HoldActiveJob(const CachedObject& obj);  // a job holding GPUs (JobOf done)
  void ReleaseEnded();                          // what jobs no longer active held
  std::optional<DecisionWrite> WriteOfDecision(Pass& pass, const sched::Decision& d);
  // A bind decision's assignments; `s` becomes the bound status.
  std::vector<store::Op> BindOps(Pass& pass, const sched::Decision& d, const CachedObject& obj,
                                 const Job& job, std::string checkpoint_dir, JobStatus& s);
  void WriteDecisions(Pass& pass, std::vector<DecisionWrite> writes);
  // What a job's spec says about its lifecycle (the restart policy and lifecycle policies).
  JobRules RulesOf(const std::optional<Job>& job) const;
  // The master ports in use on `node` this pass (jobs whose rank 0 runs or stops there).
  std::set<int>& MasterPortsOn(Pass& pass, const std::string& node);
  // Runs independent transactions concurrently; results in order.
  std::vector<absl::StatusOr<int64_t>> TxnAll(const std::vector<std::vector<store::Op>>& txns);

  store::Store& store_;
  NodeTable& node_table_;
  const Clock& clock_;
  const GpuCatalog& catalog_;
  ControllerOptions options_;
  const int64_t started_ms_;

  ObjectCache nodes_{"/nodes/"};
  ObjectCache jobs_{"/jobs/"};
  ObjectCache queues_{"/queues/"};
  ObjectCache pools_{"/nodepools/"};
  std::unique_ptr<PriceBook> prices_;  // from pools_, rebuilt when they change
  int64_t prices_revision_ = -1;
  void EnsurePrices();
  void AddIdleCost(Pass& pass);  // the idle cost since the last pass, then the rate from now
  std::map<std::string, double> idle_usd_per_hour_;  // by pool, as the last pass left state_
  struct IdleRateKey {                               // what idle_usd_per_hour_ was computed from
    uint64_t allocations = 0, nodes = 0;
    int64_t prices = -1;
    std::string epoch;  // the pools' price periods now (PriceBook::Epoch)
    bool operator==(const IdleRateKey&) const = default;
  };
  IdleRateKey idle_rate_key_;
  // Namespace budgets (budgets.h; controller_schedule.cc): the month's spend judged before the
  // pending jobs are collected; the writes of over-budget waits, stops and alerts.
  std::unique_ptr<BudgetBook> budgets_;
  std::map<std::string, std::string> last_over_budget_;  // the last judged pass's over_budget
  std::string budget_error_;                             // the last Sync error logged
  std::vector<DecisionWrite> EnforceBudgets(Pass& pass);
  // When a pool's price changed (its object, or its schedule's period; or on the first pass):
  // every running attempt whose
  // price is not the current one is re-rated (billing.h's Rerate), its status and the record of
  // the part at the old price written together.
  void RepriceRunning(Pass& pass, std::vector<DecisionWrite>& writes);
  std::string price_epoch_ = "-";  // PriceBook::Epoch at the last re-rating; "-": none yet
  int passes_before_reprice_ = 1;  // the first pass's state holds no running jobs yet
  // This month's spend of each namespace with a budget: its ended attempts' and its running ones'.
  std::map<std::string, double> BudgetSpend(const Pass& pass);
  // Each budget judged on `spent`: the pass's over_budget, metrics, and the alerts written.
  void JudgeBudgets(Pass& pass, const std::map<std::string, double>& spent);
  std::optional<DecisionWrite> OverBudgetWrite(Pass& pass, CachedObject& obj,
                                               const std::string& message);
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<sched::ClusterState> base_state_;  // Ready nodes, nothing allocated
  std::string base_fingerprint_;
  std::map<std::string, int32_t> base_index_;  // node name -> index in base_state_
  // base_state_ plus every job's holdings, kept across passes; held_: job key -> the entry
  // whose view its allocation in state_ was made from.
  std::unique_ptr<sched::ClusterState> state_;
  struct Held {
    // The entry (JobEntry) whose view its allocation was made from (AllocationOf); null: the
    // scheduler's own commit of a bind, replaced by the next pass.
    std::shared_ptr<const controller_detail::JobEntry> made_from;
    uint64_t pass = 0;  // the last pass that saw the job hold it
  };
  std::map<std::string, Held> held_;
  std::unique_ptr<sim::RecordingWriter> recorder_;  // when options_.record_scheduler is set
  uint64_t pass_number_ = 0;
  int64_t last_pass_ms_ = 0;              // for the availability integral
  int64_t live_jobs_ms_ = INT64_MIN / 2;  // when ClusterMetrics::live_jobs was last refreshed
  int64_t scheduler_queues_revision_ = -1;
  // The request mix last given to scheduler_'s Fragmentation score (SetWorkload).
  std::vector<WorkloadShare> workload_mix_;
  uint64_t event_seq_ = 0;

  mutable absl::Mutex mu_;
  ClusterMetrics metrics_ ABSL_GUARDED_BY(mu_);
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  int64_t store_revision_ ABSL_GUARDED_BY(mu_) = 0;  // the newest revision WatchStore saw
  std::vector<std::shared_ptr<WhatIfRequest>> what_ifs_ ABSL_GUARDED_BY(mu_);
  int64_t own_txns_ = 0;  // transactions this pass committed (the loop's thread only)
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::thread store_watcher_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_CONTROLLER_H_
