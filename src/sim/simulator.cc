#include "sim/simulator.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <queue>
#include <set>
#include <tuple>

#include "autoscale/replica_plan.h"
#include "core/clock.h"
#include "core/text.h"
#include "sched/cluster_state.h"
#include "sched/plugins/scores.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"
#include "sched/usage_window.h"
#include "sim/requests.h"

namespace gpucloud::sim {
namespace {

using sched::Allocation;
using sched::ClusterState;
using sched::Decision;
using sched::DecisionKind;
using sched::NodeIndex;
using sched::PendingJob;

enum class EventKind {
  kArrival,
  kCompletion,
  kStop,
  kFailure,
  kRepair,
  kSignal,
  kNoise,
  kInspected,
  kBandChange,   // ordering dlas: a job's band changes (see ScheduleBandChange)
  kNodeBooted,   // autoscaling: a requested machine is up (attempt: its generation)
  kScaleWake,    // autoscaling: a boot timeout or back-off ends (jobs may wait for it)
  kScaleIdle,    // autoscaling: a node has been idle long enough to scale down
  kSpotNotice,   // autoscaling: a spot machine's reclamation notice (attempt: its generation)
  kSpotGone,     // autoscaling: the noticed spot machine goes (attempt: its generation)
  kServiceTick,  // an inference service's autoscaler round (job: the service's index)
};

struct Event {
  int64_t t = 0;
  int64_t seq = 0;
  EventKind kind = EventKind::kArrival;
  int32_t job = -1;
  int32_t attempt = 0;
  NodeIndex node = -1;
  // kSignal / kNoise: a health signal on GPU `gpu` of `node`.
  int32_t gpu = 0;
  RiskSignal signal = RiskSignal::kCorrectedEcc;
  double amount = 0;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return std::tie(a.t, a.seq) > std::tie(b.t, b.seq);
  }
};

struct JobRun {
  JobOutcome out;
  PendingJob request;
  double remaining_s = 0;  // work left at full speed
  int32_t attempt = 0;
  bool running = false;
  bool terminating = false;
  int64_t start_s = 0;
  double slowdown = 1;
  Allocation allocation;
  bool capacity_bound = false;  // its last decision: waits for room (the autoscaler's cue)
  int32_t service = -1;         // a replica of SimOptions::services[service]; -1: a trace job
};

// A replica's work never runs out: it runs until its service scales it down.
constexpr double kReplicaWorkS = 1e15;

int32_t MaxGpusPerNode(const std::vector<Node>& nodes) {
  int32_t max_per_node = 1;
  for (const Node& n : nodes) {
    max_per_node = std::max<int32_t>(max_per_node, static_cast<int32_t>(n.gpus.size()));
  }
  return max_per_node;
}

int32_t IndexOfKey(const std::string& key) {
  int32_t i = -1;
  (void)std::from_chars(key.data() + 2, key.data() + key.size(), i);
  return i;
}

class Simulation {
 public:
  Simulation(const Trace& trace, const SimCluster& cluster, const SimOptions& o,
             const GpuCatalog& catalog, std::unique_ptr<sched::Scheduler> scheduler,
             std::vector<WorkloadShare> workload)
      : trace_(trace),
        cluster_(cluster),
        o_(o),
        catalog_(catalog),
        scheduler_(std::move(scheduler)),
        state_(cluster.nodes, catalog),
        elastic_(cluster, o.elastic, *scheduler_, catalog, o.seed),
        rng_(o.seed),
        signal_rng_(o.seed * 7919 + 17),
        workload_(std::move(workload)),
        usage_(o.policy.fair_share_window_s * 1000),
        services_(o.services, o.service_tick_s),
        replicas_of_(o.services.size()) {
    const int32_t max_per_node = MaxGpusPerNode(cluster.nodes);
    jobs_.resize(trace.jobs.size());
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      const TraceJob& t = trace.jobs[i];
      JobRun& j = jobs_[i];
      j.out.id = t.id;
      j.out.queue = t.queue;
      j.out.gpus = t.TotalGpus();
      j.out.submit_s = t.submit_s;
      j.out.duration_s = t.duration_s;
      j.remaining_s = static_cast<double>(t.duration_s);
      j.request = MakeRequest(t, static_cast<int32_t>(i), max_per_node, o.oracle_estimates);
      // Preemption weighs the work since a victim's last periodic checkpoint, as the server
      // weighs it since the last one its agents reported.
      j.request.checkpoint_interval_ms = o.checkpoint_interval_s * 1000;
      Push({.t = t.submit_s, .kind = EventKind::kArrival, .job = static_cast<int32_t>(i)});
    }
    if (o.elastic.spot_share > 0) {  // its own stream: the rest of the run draws the same
      Rng spot(o.seed * 31 + 3);
      for (JobRun& j : jobs_) {
        j.request.preemptible =
            static_cast<double>(spot.Uniform(1'000'000)) / 1e6 < o.elastic.spot_share;
        j.out.spot_tolerant = j.request.preemptible;
        // They tolerate the spot taint (spot pools carry it, so that other jobs keep off).
        if (j.request.preemptible) {
          j.request.request.tolerations.push_back(
              {.key = std::string(kSpotTaintKey), .exists = true, .effect = "NoSchedule"});
        }
      }
    }
    // Machines an autoscaled pool has not created are no capacity.
    for (NodeIndex n = 0; n < state_.node_count(); ++n) {
      if (!elastic_.Up(n)) SetNodeUp(n, false);
    }
    Apply(elastic_.Start());  // the first reclamation notices of spot machines
    for (NodeIndex n = 0; n < state_.node_count(); ++n) {
      double mtbf = o.mtbf_hours;
      const Node& node = state_.node(n);
      if (!node.gpus.empty()) {
        if (auto it = o.mtbf_hours_by_type.find(node.gpus[0].type);
            it != o.mtbf_hours_by_type.end()) {
          mtbf = it->second;
        }
      }
      mtbf_of_node_.push_back(mtbf);
      if (mtbf > 0) ScheduleFailure(NextFailure(0, n), n, 0);
    }
    for (const auto& [t, n] : o.node_failures) {
      if (n >= 0 && n < state_.node_count()) Push({.t = t, .kind = EventKind::kFailure, .node = n});
    }
    if (predicting()) {
      models_.resize(state_.node_count());
      flagged_.assign(state_.node_count(), false);
      for (NodeIndex n = 0; n < state_.node_count(); ++n) {
        int32_t gpus = static_cast<int32_t>(state_.node(n).gpus.size());
        models_[n].assign(gpus, FailureRiskModel(o.prediction.model));
        for (int32_t g = 0; g < gpus; ++g) ScheduleNoise(0, n, g);
      }
    }
    for (int32_t s = 0; s < static_cast<int32_t>(services_.size()); ++s) {
      Push({.t = services_.FirstTick(s), .kind = EventKind::kServiceTick, .job = s});
    }
    result_.policy_name = o.policy_name;
    result_.total_gpus = cluster.TotalGpus();
  }

  SimResult Run() {
    int64_t now = 0;
    while (!events_.empty()) {
      now = events_.top().t;
      if (o_.until_s && now > *o_.until_s) {
        now = *o_.until_s;
        break;
      }
      SampleFragmentationBefore(now);
      bool changed = false;
      while (!events_.empty() && events_.top().t == now) {
        Event e = events_.top();
        events_.pop();
        changed = Handle(e, now) || changed;
      }
      bool bound = false;
      if (!pending_.empty() && changed) bound = Cycle(now);
      if (elastic_.enabled()) Autoscale(now, changed);
      if (changed) ScheduleBandChange(now);
      if (now == next_fragmentation_) SampleFragmentationBefore(now + 1);
      // Nothing left that could change anything: waiting jobs stay pending.
      if (!bound && live_events_ == 0 && running_ == 0 && down_nodes_ == 0 && flagged_count_ == 0) {
        RecordAllocated(now);
        break;
      }
      RecordAllocated(now);
      if (!events_.empty() && OnlyFailuresLeft()) break;
    }
    Finish(now);
    return std::move(result_);
  }

 private:
  // Events that do not keep the replay going by themselves: failures and repairs recur forever,
  // and a band change only matters while jobs run and wait.
  static bool Recurring(EventKind k) {
    return k == EventKind::kFailure || k == EventKind::kRepair || k == EventKind::kSignal ||
           k == EventKind::kNoise || k == EventKind::kInspected || k == EventKind::kBandChange ||
           k == EventKind::kScaleIdle || k == EventKind::kSpotNotice;
  }
  void Push(Event e) {
    e.seq = seq_++;
    if (!Recurring(e.kind)) ++live_events_;
    events_.push(e);
  }
  bool predicting() const { return o_.prediction.mode != PredictionMode::kOff; }
  double Uniform01(Rng& r) { return (static_cast<double>(r.Uniform(1'000'000)) + 0.5) / 1'000'000; }
  int64_t Exponential(Rng& r, double mean_s) {
    return std::max<int64_t>(1, std::llround(-std::log(Uniform01(r)) * mean_s));
  }

  // The injected health signals: each kind with its share of draws and its amount (`min` plus
  // a uniform 0..spread-1; a spread of 0: just `min`).
  struct SignalShare {
    double cumulative;  // draws below this (and above the previous entry's) are this kind
    RiskSignal kind;
    int min, spread;
  };
  // Before a failure: corrected-ECC bursts of 20-119, single remapped rows, watch-class Xids.
  static constexpr SignalShare kPrecursors[] = {{0.4, RiskSignal::kCorrectedEcc, 20, 100},
                                                {0.75, RiskSignal::kRowRemap, 1, 0},
                                                {1.0, RiskSignal::kWatchXid, 1, 0}};
  // Benign: small corrected-ECC bursts of 1-40, thermal excursions, the odd remapped row.
  static constexpr SignalShare kNoise[] = {{0.6, RiskSignal::kCorrectedEcc, 1, 40},
                                           {0.9, RiskSignal::kThermal, 1, 0},
                                           {1.0, RiskSignal::kRowRemap, 1, 0}};
  template <size_t N>
  void DrawSignal(const SignalShare (&mix)[N], Event& e) {
    double u = Uniform01(signal_rng_);
    const SignalShare* pick = &mix[N - 1];
    for (const SignalShare& m : mix) {
      if (u < m.cumulative) {
        pick = &m;
        break;
      }
    }
    e.signal = pick->kind;
    e.amount = pick->min +
               (pick->spread > 0 ? static_cast<double>(signal_rng_.Uniform(pick->spread)) : 0.0);
  }

  // A failure at `t`, and its precursors when predicting.
  void ScheduleFailure(int64_t t, NodeIndex n, int64_t now) {
    Push({.t = t, .kind = EventKind::kFailure, .node = n});
    const FailurePredictionOptions& p = o_.prediction;
    int32_t gpus = static_cast<int32_t>(state_.node(n).gpus.size());
    if (!predicting() || gpus == 0 || Uniform01(signal_rng_) >= p.precursor_share) return;
    int32_t culprit = static_cast<int32_t>(signal_rng_.Uniform(static_cast<uint64_t>(gpus)));
    double lead_s = p.lead_hours * 3600 * (0.5 + Uniform01(signal_rng_));
    if (p.precursors_per_hour <= 0) return;
    for (int64_t s = std::max<int64_t>(now, t - std::llround(lead_s));;) {
      s += Exponential(signal_rng_, 3600 / p.precursors_per_hour);
      if (s >= t) break;
      Event e{.t = s, .kind = EventKind::kSignal, .node = n, .gpu = culprit};
      DrawSignal(kPrecursors, e);
      Push(e);
    }
  }

  // The next benign signal on one GPU.
  void ScheduleNoise(int64_t now, NodeIndex n, int32_t g) {
    if (o_.prediction.noise_per_gpu_day <= 0) return;
    Event e{.t = now + Exponential(signal_rng_, 86400 / o_.prediction.noise_per_gpu_day),
            .kind = EventKind::kNoise,
            .node = n,
            .gpu = g};
    DrawSignal(kNoise, e);
    Push(e);
  }

  // True when it cordoned the node (the scheduler has something to do).
  bool OnSignal(const Event& e, int64_t now) {
    if (down_since_.contains(e.node)) return false;  // a failed node says nothing
    FailureRiskModel& m = models_[e.node][e.gpu];
    bool was = m.AtRisk(now * 1000);
    m.Observe(e.signal, e.amount, now * 1000);
    if (was || !m.AtRisk(now * 1000) || flagged_[e.node]) return false;
    flags_.push_back({e.node, now});
    if (o_.prediction.mode != PredictionMode::kAct) return false;
    // Predictive drain: checkpoint and move the node's jobs, cordon it.
    flagged_[e.node] = true;
    ++flagged_count_;
    flagged_since_[e.node] = now;
    for (int32_t i : JobsOn(e.node)) {
      JobRun& j = jobs_[i];
      j.remaining_s = std::max(0.0, j.remaining_s - (now - j.start_s) / j.slowdown);
      double gpus = j.out.gpus.raw() / 1000.0;
      result_.prediction.gpu_hours_migration += gpus * o_.prediction.migration_cost_s / 3600.0;
      j.remaining_s += o_.prediction.migration_cost_s / j.slowdown;  // checkpoint + restart
      ++result_.prediction.migrations;
      ++j.out.preemptions;
      Stop(i, now);
      Enqueue(i);
    }
    HoldNode(e.node, "#flag#");
    Push({.t = now + o_.prediction.inspection_s, .kind = EventKind::kInspected, .node = e.node});
    return true;
  }

  // Jobs (not the holds) with a replica on node n.
  std::vector<int32_t> JobsOn(NodeIndex n) const {
    std::vector<int32_t> hit;
    for (const auto& [key, a] : state_.allocations()) {
      if (a.placeholder) continue;
      for (const sched::ReplicaPlacement& r : a.replicas) {
        if (r.node == n) {
          hit.push_back(IndexOfKey(key));
          break;
        }
      }
    }
    return hit;
  }

  // Marks node n's GPUs healthy (up) or not (down), as the server rebuilds its view when a
  // node goes or comes back (the jobs on a failed node have been stopped first).
  void SetNodeUp(NodeIndex n, bool up) {
    if (!state_.SetNodeGpusHealthy(n, up).ok()) std::abort();  // cannot happen: see above
  }

  void HoldNode(NodeIndex n, const char* why) {
    sched::ReplicaPlacement hold{.task = "down", .node = n};
    const Node& node = state_.node(n);
    for (int32_t g = 0; g < static_cast<int32_t>(node.gpus.size()); ++g) {
      if (!node.gpus[g].mig_enabled && node.gpus[g].healthy) hold.gpus.push_back({.gpu = g});
    }
    Allocation a{Cat(why, n), {hold}};
    a.placeholder = true;
    (void)state_.Commit(a);
  }

  // Ends a cordon for a predicted failure: at the failure, or after the inspection.
  void Unflag(NodeIndex n, int64_t now) {
    if (!flagged_[n]) return;
    flagged_[n] = false;
    --flagged_count_;
    result_.prediction.gpu_hours_cordoned +=
        static_cast<double>(state_.node(n).gpus.size()) * (now - flagged_since_[n]) / 3600.0;
    (void)state_.Release(Cat("#flag#", n));
    for (FailureRiskModel& m : models_[n]) m.Reset();
  }
  // Failures and repairs recur forever; once nothing else is left, the replay is over.
  bool OnlyFailuresLeft() const { return live_events_ == 0 && pending_.empty() && running_ == 0; }

  int64_t NextFailure(int64_t from, NodeIndex n) {
    double u = (static_cast<double>(rng_.Uniform(1'000'000)) + 0.5) / 1'000'000;
    return from + std::max<int64_t>(1, std::llround(-std::log(u) * mtbf_of_node_[n] * 3600));
  }

  bool Handle(const Event& e, int64_t now) {
    if (!Recurring(e.kind)) --live_events_;
    switch (e.kind) {
      case EventKind::kArrival:
        Enqueue(e.job);
        return true;
      case EventKind::kCompletion: {
        JobRun& j = jobs_[e.job];
        if (!j.running || j.attempt != e.attempt) return false;
        Stop(e.job, now);
        j.out.state = JobState::kFinished;
        j.out.end_s = now;
        j.remaining_s = 0;
        ++finished_;
        if (o_.progress && o_.progress_every > 0 && finished_ % o_.progress_every == 0) {
          o_.progress(finished_, static_cast<int64_t>(trace_.jobs.size()), now);
        }
        return true;
      }
      case EventKind::kStop: {
        JobRun& j = jobs_[e.job];
        if (!j.running || j.attempt != e.attempt) return false;
        // Checkpointed during the grace period: all work so far is kept.
        j.remaining_s = std::max(0.0, j.remaining_s - (now - j.start_s) / j.slowdown);
        Stop(e.job, now);
        Enqueue(e.job);
        return true;
      }
      case EventKind::kFailure:
        if (elastic_.enabled() && (!elastic_.Up(e.node) || elastic_.Held(e.node))) {
          // A machine that is not there (or only held for its request) does not fail; the
          // next failure is drawn from now.
          if (mtbf_of_node_[e.node] > 0) ScheduleFailure(NextFailure(now, e.node), e.node, now);
          return false;
        }
        if (predicting()) {
          failure_times_.push_back({e.node, now});
          Unflag(e.node, now);
          down_since_.insert(e.node);
        }
        Fail(e.node, now);
        return true;
      case EventKind::kRepair:
        --down_nodes_;
        if (elastic_.enabled() && !elastic_.Up(e.node)) {  // deleted while it was down
          if (mtbf_of_node_[e.node] > 0) ScheduleFailure(NextFailure(now, e.node), e.node, now);
          return false;
        }
        SetNodeUp(e.node, true);
        if (predicting()) {
          down_since_.erase(e.node);
          for (FailureRiskModel& m : models_[e.node]) m.Reset();  // repaired or replaced
        }
        if (mtbf_of_node_[e.node] > 0) ScheduleFailure(NextFailure(now, e.node), e.node, now);
        return true;
      case EventKind::kSignal:
        return OnSignal(e, now);
      case EventKind::kNoise: {
        bool acted = OnSignal(e, now);
        ScheduleNoise(now, e.node, e.gpu);
        return acted;
      }
      case EventKind::kBandChange:
        if (e.t == next_band_change_) next_band_change_ = INT64_MAX;
        return true;
      case EventKind::kNodeBooted: {
        ElasticCapacity::Effects fx = elastic_.Booted(e.node, e.attempt, now);
        Apply(fx);
        return fx.changed();
      }
      case EventKind::kSpotNotice: {
        ElasticCapacity::Effects fx = elastic_.Notice(e.node, e.attempt, now);
        for (NodeIndex n : fx.noticed) NoticeJobs(n, now);
        Apply(fx);
        return false;
      }
      case EventKind::kSpotGone: {
        ElasticCapacity::Effects fx = elastic_.Gone(e.node, e.attempt, now);
        if (fx.remove.empty()) return false;
        // What still runs there (bound during the notice) is lost since its last checkpoint.
        EvictJobs(e.node, now);
        Apply(fx);
        return true;
      }
      case EventKind::kScaleWake:
        scale_due_ = true;
        return false;
      case EventKind::kScaleIdle:
        scale_due_ = scale_due_ || elastic_.IdleDue(now);
        return false;
      case EventKind::kServiceTick:
        return ServiceTick(e.job, now);
      case EventKind::kInspected:
        if (!flagged_[e.node] || flagged_since_[e.node] + o_.prediction.inspection_s != now)
          return false;
        Unflag(e.node, now);
        return true;
    }
    return false;
  }

  void Enqueue(int32_t i) {
    JobRun& j = jobs_[i];
    j.request.runtime_estimate_s.reset();
    if (j.service < 0 && (trace_.jobs[i].estimate_s || o_.oracle_estimates)) {
      j.request.runtime_estimate_s = std::max<int64_t>(1, std::llround(j.remaining_s));
    }
    j.capacity_bound = false;
    pending_.push_back(i);
    pending_requests_.push_back(j.request);
    LendLastWait(pending_requests_.back(), j);
  }

  // What a waiting job was last told, lent to the scheduler: a cycle that would tell it the same
  // again from its memo says nothing. Points into jobs_ (LendLastWaits again when it grows).
  static void LendLastWait(PendingJob& p, const JobRun& j) {
    p.last_wait_reason = &j.out.reason;
    p.last_wait_capacity_bound = &j.capacity_bound;
  }
  void LendLastWaits() {
    for (size_t k = 0; k < pending_.size(); ++k) {
      LendLastWait(pending_requests_[k], jobs_[pending_[k]]);
    }
  }

  // Ends job i's current attempt (completion, preemption or failure) and pays for it.
  void Stop(int32_t i, int64_t now) {
    JobRun& j = jobs_[i];
    for (const sched::ReplicaPlacement& r : j.allocation.replicas) {
      double gpus = 0;
      for (const sched::GpuAssignment& g : r.gpus) {
        gpus += state_.ShareOf(r.node, g).raw() / 1000.0;  // GPU equivalents (sched)
      }
      const double gpu_s = gpus * static_cast<double>(now - j.start_s);
      if (j.service >= 0) {
        services_.AddGpuSeconds(j.service, gpu_s);
      } else {
        result_.gpu_hours_training += gpu_s / 3600;
      }
      int pool = cluster_.pool_of_node[r.node];
      double dollars = gpus * static_cast<double>(now - j.start_s) / 3600.0 *
                       static_cast<double>(cluster_.price_of_pool[pool].raw()) / 1e6;
      result_.cost_usd[std::string(BillingClassName(cluster_.pools[pool].spec.billing))] += dollars;
    }
    j.request.attained_gpu_ms +=
        static_cast<int64_t>(j.out.gpus.raw()) * (now - j.start_s);  // milli-GPU x s = GPU x ms
    j.request.waiting_since_ms = now * 1000;
    if (o_.policy.fair_share) {  // the fair-share window's history
      for (const auto& [type, gpus] : sched::GpusByType(state_, j.allocation)) {
        usage_.Add(now * 1000, j.request.queue, type,
                   gpus * static_cast<double>(now - j.start_s) / 3600.0);
      }
    }
    elastic_.Released(j.allocation, now);
    (void)state_.Release(j.request.request.key);
    j.running = false;
    j.terminating = false;
    ++j.attempt;
    --running_;
  }

  void Fail(NodeIndex n, int64_t now) {
    ++result_.failures;
    EvictJobs(n, now);
    // Out of the cluster until it is repaired: its GPUs are no capacity (as the server leaves a
    // node that is not Ready out of the scheduler's view), not held.
    SetNodeUp(n, false);
    ++down_nodes_;
    Push({.t = now + o_.repair_s, .kind = EventKind::kRepair, .node = n});
  }

  // A spot machine's reclamation notice: its jobs checkpoint and stop within the notice, their
  // work kept (as a preemption's grace period).
  void NoticeJobs(NodeIndex n, int64_t now) {
    for (int32_t i : JobsOn(n)) {
      JobRun& j = jobs_[i];
      if (!j.running || j.terminating) continue;
      j.terminating = true;
      ++j.out.preemptions;
      ++result_.preemptions;
      Push({.t = now + o_.elastic.spot_notice_s,
            .kind = EventKind::kStop,
            .job = i,
            .attempt = j.attempt});
    }
  }

  // Stops the jobs on node n at once, their work since their last checkpoint lost, and queues
  // them again.
  void EvictJobs(NodeIndex n, int64_t now) {
    for (int32_t i : JobsOn(n)) {
      JobRun& j = jobs_[i];
      if (j.service >= 0) {  // a replica serves again elsewhere; it has no work to lose
        Stop(i, now);
        Enqueue(i);
        continue;
      }
      // Work since the last periodic checkpoint of this attempt is lost.
      int64_t ran = now - j.start_s;
      int64_t kept = o_.checkpoint_interval_s > 0
                         ? ran / o_.checkpoint_interval_s * o_.checkpoint_interval_s
                         : 0;
      double lost_s = static_cast<double>(ran - kept);
      j.out.gpu_seconds_lost += lost_s * j.out.gpus.raw() / 1000.0;
      result_.gpu_hours_lost += lost_s * j.out.gpus.raw() / 1000.0 / 3600.0;
      j.remaining_s = std::max(0.0, j.remaining_s - kept / j.slowdown);
      ++j.out.restarts;
      ++result_.restarts;
      Stop(i, now);
      Enqueue(i);
    }
  }

  double Slowdown(const Allocation& a) const {
    std::set<NodeIndex> nodes;
    for (const sched::ReplicaPlacement& r : a.replicas) nodes.insert(r.node);
    if (nodes.size() <= 1) return 1.0;
    const ClusterTopology& topo = state_.topology();
    auto same = [&](TopologyLevel level) {
      int32_t d = topo.DomainOf(*nodes.begin(), level);
      for (NodeIndex n : nodes) {
        if (topo.DomainOf(n, level) != d) return false;
      }
      return true;
    };
    if (same(TopologyLevel::kLeaf)) return o_.placement.same_leaf;
    if (same(TopologyLevel::kSpine)) return o_.placement.same_spine;
    return o_.placement.cross_spine;
  }

  // Runs the scheduler; true when some job was bound.
  bool Cycle(int64_t now) {
    ++result_.cycles;
    if (o_.policy.fair_share) {
      usage_.Advance(now * 1000);
      scheduler_->SetHistory(usage_.history());
    }
    sched::CycleStats cycle;
    std::vector<Decision> decisions =
        scheduler_->Schedule(state_, pending_requests_, now * 1000, &cycle);
    reserved_nodes_ = std::move(cycle.reserved_nodes);
    std::set<int32_t> leaving;
    for (Decision& d : decisions) {
      int32_t i = IndexOfKey(d.job);
      JobRun& j = jobs_[i];
      switch (d.kind) {
        case DecisionKind::kBind: {
          j.allocation = std::move(*d.allocation);
          j.running = true;
          j.out.reason.clear();
          j.start_s = now;
          if (!j.out.first_start_s) j.out.first_start_s = now;
          j.slowdown = Slowdown(j.allocation);
          elastic_.Placed(j.allocation);
          int64_t run =
              std::max<int64_t>(1, std::llround(std::ceil(j.remaining_s * j.slowdown - 1e-6)));
          if (j.service < 0) {
            Push({.t = now + run, .kind = EventKind::kCompletion, .job = i, .attempt = j.attempt});
          }
          ++running_;
          leaving.insert(i);
          break;
        }
        case DecisionKind::kReject:
          j.out.state = JobState::kRejected;
          j.out.reason = d.reason;
          if (j.service >= 0) services_.Rejected(j.service, d.reason);
          leaving.insert(i);
          break;
        case DecisionKind::kPreempt: {
          if (!j.running || j.terminating) break;
          j.terminating = true;
          ++j.out.preemptions;
          ++result_.preemptions;
          if (j.service >= 0) services_.Preempted(j.service);
          Allocation a = state_.allocations().at(d.job);
          (void)state_.Release(d.job);
          a.terminating = true;
          (void)state_.Commit(a);
          Push({.t = now + std::max<int64_t>(0, d.grace_ms / 1000),
                .kind = EventKind::kStop,
                .job = i,
                .attempt = j.attempt});
          break;
        }
        case DecisionKind::kWait:
          j.out.reason = std::move(d.reason);
          j.capacity_bound = d.capacity_bound;
          break;
      }
    }
    bool bound = false;
    if (!leaving.empty()) {
      size_t out = 0;
      for (size_t k = 0; k < pending_.size(); ++k) {
        if (leaving.contains(pending_[k])) {
          bound = bound || jobs_[pending_[k]].running;
          continue;
        }
        pending_[out] = pending_[k];
        if (out != k) pending_requests_[out] = std::move(pending_requests_[k]);
        ++out;
      }
      pending_.resize(out);
      pending_requests_.resize(out);
    }
    return bound;
  }

  // Ordering dlas: a running job crossing into a later band, or a waiting job that the starvation
  // guard promotes, may change who runs without any other event (Tiresias' time quanta); a
  // cycle is due at the first such moment. Only while jobs wait (else nobody could preempt).
  void ScheduleBandChange(int64_t now) {
    if (!scheduler_->orders_by_dlas() || pending_.empty()) return;
    const LasConfig& las = scheduler_->options().las;
    int64_t next_ms = INT64_MAX;
    for (const auto& [key, a] : state_.allocations()) {
      if (a.placeholder || a.terminating) continue;
      next_ms = std::min(
          next_ms, sched::LasNextBandMs(las, a, jobs_[IndexOfKey(key)].out.gpus.raw(), now * 1000));
    }
    for (const PendingJob& p : pending_requests_) {
      // A promotion still to come (one past is no change to wait for).
      const int64_t promoted = sched::LasPromotionMs(las, p);
      if (promoted > now * 1000 && sched::LasBand(las, p.attained_gpu_ms) > 0) {
        next_ms = std::min(next_ms, promoted);
      }
    }
    if (next_ms == INT64_MAX) return;
    const int64_t t = std::max(now + 1, (next_ms + 999) / 1000);  // the clock counts seconds
    if (t >= next_band_change_) return;
    next_band_change_ = t;
    Push({.t = t, .kind = EventKind::kBandChange});
  }

  // An autoscaler round, when a wake-up is due or when something
  // changed while jobs wait for room.
  void Autoscale(int64_t now, bool changed) {
    std::vector<const PendingJob*> waiting;
    for (size_t k = 0; k < pending_.size(); ++k) {
      if (jobs_[pending_[k]].capacity_bound) waiting.push_back(&pending_requests_[k]);
    }
    for (int64_t t : elastic_.TakeIdleWakes()) {
      if (scale_wakes_.insert({t, EventKind::kScaleIdle}).second) {
        Push({.t = t, .kind = EventKind::kScaleIdle});
      }
    }
    if (!scale_due_ && !(changed && !waiting.empty())) return;
    scale_due_ = false;
    Apply(elastic_.Round(state_, waiting, now, reserved_nodes_));
  }

  void Apply(const ElasticCapacity::Effects& fx) {
    for (NodeIndex n : fx.remove) {
      (void)state_.Release(Cat("#boot#", n));
      SetNodeUp(n, false);
    }
    for (NodeIndex n : fx.up) SetNodeUp(n, true);
    for (NodeIndex n : fx.hold) {
      // Everything of the machine, CPU and memory too, so that nothing binds on it before the
      // rest of its request is up.
      Allocation a{Cat("#boot#", n), {sched::WholeNodeHold(state_.node(n), n)}};
      a.placeholder = true;
      (void)state_.Commit(a);
    }
    for (NodeIndex n : fx.unhold) (void)state_.Release(Cat("#boot#", n));
    for (const ElasticCapacity::Effects::Boot& b : fx.boots) {
      Push({.t = b.t, .kind = EventKind::kNodeBooted, .attempt = b.generation, .node = b.node});
    }
    for (const ElasticCapacity::Effects::Boot& b : fx.notices) {
      Push({.t = b.t, .kind = EventKind::kSpotNotice, .attempt = b.generation, .node = b.node});
    }
    for (const ElasticCapacity::Effects::Boot& b : fx.gone) {
      Push({.t = b.t, .kind = EventKind::kSpotGone, .attempt = b.generation, .node = b.node});
    }
    for (auto [t, kind] : {std::pair{fx.wake_live_s, EventKind::kScaleWake},
                           std::pair{fx.wake_idle_s, EventKind::kScaleIdle}}) {
      if (t != INT64_MAX && scale_wakes_.insert({t, kind}).second) Push({.t = t, .kind = kind});
    }
  }

  void RecordAllocated(int64_t now) {
    double gpus = 0;
    for (const auto& [queue, types] : state_.QueueUsage()) {
      if (auto it = types.find(std::string(kAnyGpuType)); it != types.end()) {
        gpus += it->second.raw() / 1000.0;
      }
    }
    if (result_.allocated.empty() || result_.allocated.back().second != gpus) {
      if (!result_.allocated.empty() && result_.allocated.back().first == now) {
        result_.allocated.back().second = gpus;
      } else {
        result_.allocated.push_back({now, gpus});
      }
    }
  }

  // Samples the fragmentation at every multiple of the sample interval before `t`, from the
  // state since the last event (it does not change between events), so that quiet stretches
  // and busy ones are sampled alike.
  void SampleFragmentationBefore(int64_t t) {
    if (o_.fragmentation_sample_s <= 0) return;
    while (next_fragmentation_ < t) {
      result_.fragmentation.push_back({next_fragmentation_, Fragmentation()});
      next_fragmentation_ += o_.fragmentation_sample_s;
    }
  }

  double Fragmentation() const {
    double frag = 0, free = 0;
    for (NodeIndex n = 0; n < state_.node_count(); ++n) {
      sched::NodeView v = sched::ViewOfNode(state_, n);
      for (MilliGpu f : v.free) free += f.raw() / 1000.0;
      frag += sched::ExpectedFragmentation(v, workload_);
    }
    return free > 0 ? frag / free : 0;
  }

  // Precision, recall and lead time from the flags and failures seen.
  void ScorePrediction(int64_t now) {
    if (!predicting()) return;
    for (NodeIndex n = 0; n < static_cast<NodeIndex>(flagged_.size()); ++n) Unflag(n, now);
    PredictionResult& r = result_.prediction;
    const int64_t h = o_.prediction.horizon_s;
    std::map<NodeIndex, std::vector<int64_t>> fails, flags;
    for (const auto& [n, t] : failure_times_) fails[n].push_back(t);
    for (const auto& [n, t] : flags_) flags[n].push_back(t);
    r.flags = static_cast<int64_t>(flags_.size());
    r.failures = static_cast<int64_t>(failure_times_.size());
    for (const auto& [n, t] : flags_) {
      const std::vector<int64_t>& f = fails[n];
      auto it = std::upper_bound(f.begin(), f.end(), t);
      if (it != f.end() && *it - t <= h) ++r.true_flags;
    }
    std::vector<double> leads;
    for (const auto& [n, t] : failure_times_) {
      const std::vector<int64_t>& f = flags[n];
      auto first = std::lower_bound(f.begin(), f.end(), t - h);
      if (first != f.end() && *first < t) {
        ++r.predicted_failures;
        leads.push_back((t - *first) / 3600.0);
      }
    }
    if (!leads.empty()) {
      std::nth_element(leads.begin(), leads.begin() + leads.size() / 2, leads.end());
      r.median_lead_hours = leads[leads.size() / 2];
    }
  }

  void Finish(int64_t now) {
    ScorePrediction(now);
    result_.capacity = elastic_.Finish(now);
    result_.autoscaled = elastic_.enabled();
    result_.end_s = now;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      JobRun& j = jobs_[i];
      if (j.running) {
        Stop(static_cast<int32_t>(i), now);  // pays for the time so far
        j.out.state = JobState::kRunning;
      }
      if (j.service >= 0) continue;  // a replica: its service's outcome has it
      if (j.out.state == JobState::kPending && j.out.submit_s > now) {
        j.out.state = JobState::kNotSubmitted;
      }
      result_.jobs.push_back(std::move(j.out));
    }
    result_.services = services_.Finish(now);
    if (o_.progress) o_.progress(finished_, static_cast<int64_t>(trace_.jobs.size()), now);
  }

  // An inference service's autoscaler round: replicas made and stopped as its plan says.
  bool ServiceTick(int32_t s, int64_t now) {
    using State = ServiceReplay::State;
    std::vector<ServiceReplay::Replica> replicas;
    const int64_t startup_s = services_.service(s).startup_s;
    for (int32_t i : replicas_of_[s]) {
      const JobRun& j = jobs_[i];
      replicas.push_back({i, !j.running                     ? State::kPending
                             : j.terminating                ? State::kStopping
                             : now - j.start_s >= startup_s ? State::kReady
                                                            : State::kStarting});
    }
    ServiceReplay::Plan plan = services_.Tick(s, now, replicas);
    for (int32_t i : plan.stop) StopReplica(s, i, now);
    for (int32_t k = 0; k < plan.create; ++k) AddReplica(s, now);
    if (int64_t next = services_.NextTick(s, now); next >= 0) {
      Push({.t = next, .kind = EventKind::kServiceTick, .job = s});
    }
    return plan.create > 0 || !plan.stop.empty();
  }

  // A replica's job, as the server's service controller makes it, waiting from now.
  void AddReplica(int32_t s, int64_t now) {
    const SimService& svc = services_.service(s);
    const int32_t i = static_cast<int32_t>(jobs_.size());
    Job job;
    job.spec = autoscale::ReplicaJobSpec(svc.service.spec);
    JobRun j;
    j.service = s;
    j.out.id = Cat(svc.service.metadata.name, "-", i);
    j.out.queue = job.spec.queue;
    j.out.gpus = job.spec.tasks[0].resources.gpu.PerReplicaGpus();
    j.out.submit_s = now;
    j.remaining_s = kReplicaWorkS;
    j.request = sched::PendingOf(Cat("j/", i), job,
                                 {.phase = sched::JobViewPhase::kWaiting, .submit_ms = now * 1000});
    const JobRun* before = jobs_.data();
    jobs_.push_back(std::move(j));
    if (jobs_.data() != before) LendLastWaits();  // the waits lent point into the old array
    replicas_of_[s].push_back(i);
    services_.Started(s);
    Enqueue(i);
  }

  // Stops replica i of service s (scaled down, or the service ended): at once, its GPUs paid.
  void StopReplica(int32_t s, int32_t i, int64_t now) {
    JobRun& j = jobs_[i];
    if (j.running) {
      Stop(i, now);
    } else if (auto it = std::find(pending_.begin(), pending_.end(), i); it != pending_.end()) {
      pending_requests_.erase(pending_requests_.begin() + (it - pending_.begin()));
      pending_.erase(it);
    }
    j.out.state = JobState::kFinished;
    j.out.end_s = now;
    std::erase(replicas_of_[s], i);
  }

  const Trace& trace_;
  const SimCluster& cluster_;
  const SimOptions& o_;
  const GpuCatalog& catalog_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  ClusterState state_;
  ElasticCapacity elastic_;
  bool scale_due_ = false;                 // a kScaleWake or kScaleIdle came
  std::vector<NodeIndex> reserved_nodes_;  // the last cycle's reservations (not scaled down)
  std::set<std::pair<int64_t, EventKind>> scale_wakes_;  // pushed, so none twice
  Rng rng_;
  Rng signal_rng_;  // precursors and noise: their own stream, so failures do not depend on them
  std::vector<WorkloadShare> workload_;
  sched::UsageWindow usage_;  // GPU-hours of ended attempts in the fair-share window
  ServiceReplay services_;    // SimOptions::services' autoscalers and outcomes
  std::vector<std::vector<int32_t>> replicas_of_;  // per service: its replicas' job indexes
  // Failure prediction (SimOptions::prediction): one model per GPU, nodes cordoned on a flag.
  std::vector<std::vector<FailureRiskModel>> models_;
  std::vector<bool> flagged_;
  std::map<NodeIndex, int64_t> flagged_since_;
  std::set<NodeIndex> down_since_;  // failed and not repaired yet
  std::vector<std::pair<NodeIndex, int64_t>> flags_, failure_times_;
  std::vector<JobRun> jobs_;
  std::vector<double> mtbf_of_node_;          // hours; 0 = never fails
  std::vector<int32_t> pending_;              // job indexes, arrival order
  std::vector<PendingJob> pending_requests_;  // parallel to pending_
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  int64_t seq_ = 0;
  int64_t live_events_ = 0;  // arrivals, completions and stops still to come
  int64_t running_ = 0;
  int64_t down_nodes_ = 0;
  int64_t flagged_count_ = 0;  // nodes cordoned for a predicted failure
  int64_t finished_ = 0;
  int64_t next_fragmentation_ = 0;
  int64_t next_band_change_ = INT64_MAX;  // the kBandChange event pending, if any
  SimResult result_;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Trace& trace, const SimCluster& cluster,
                                   const SimOptions& options, const GpuCatalog& catalog) {
  if (options.service_tick_s <= 0) {
    return absl::InvalidArgumentError("the service autoscaler's tick must be longer than 0s");
  }
  for (const SimService& s : options.services) {
    if (s.service.spec.autoscaling.metric == ServiceMetric::kP95Latency) {
      return absl::InvalidArgumentError(
          Cat("service ", s.service.metadata.name,
              ": scales on p95 latency, which the replay does not model (its latency is fixed); "
              "replay it on concurrency or rps"));
    }
    if (s.load.size() < 2 || !(s.latency_s > 0) || s.startup_s < 0) {
      return absl::InvalidArgumentError(
          Cat("service ", s.service.metadata.name,
              ": needs a load curve of two points or more, a latency > 0 and a startup >= 0"));
    }
  }
  if (options.elastic.enabled && options.prediction.mode != PredictionMode::kOff) {
    return absl::InvalidArgumentError("autoscaling and failure prediction do not combine yet");
  }
  if (!(options.elastic.spot_reclaims_per_hour >= 0) || options.elastic.spot_notice_s < 0) {
    return absl::InvalidArgumentError("spot reclaims per hour and the notice must be >= 0");
  }
  if (!(options.elastic.boot_failure >= 0 && options.elastic.boot_failure < 1)) {
    return absl::InvalidArgumentError("boot failure probability must be in [0, 1)");
  }
  for (const auto& [pool, p] : options.elastic.boot_failure_by_pool) {
    if (!(p >= 0 && p < 1)) {
      return absl::InvalidArgumentError(
          Cat("boot failure probability of pool ", pool, " must be in [0, 1)"));
    }
  }
  absl::StatusOr<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::FromConfig(options.policy, options.queues, catalog);
  if (!scheduler.ok()) {
    return absl::InvalidArgumentError(
        Cat("policy ", options.policy_name, ": ", scheduler.status().message()));
  }
  const std::vector<WorkloadShare> mix = WorkloadOfTrace(trace, MaxGpusPerNode(cluster.nodes));
  (*scheduler)->SetWorkload(mix);
  Simulation sim(trace, cluster, options, catalog, std::move(*scheduler),
                 mix.empty() ? sched::PhillyWorkload() : mix);
  return sim.Run();
}

}  // namespace gpucloud::sim
