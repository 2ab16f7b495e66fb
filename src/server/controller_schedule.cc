// The controller's scheduling stage (Controller::Schedule and its parts): the scheduler's view of
// the cluster kept across passes, the pending jobs handed to libsched, and each decision turned
// into one transaction. The decisions themselves are pure functions (AllocationHeldBy,
// PendingRequestOf, BoundStatus); the member functions only read the caches and write.
#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "core/log.h"
#include "core/text.h"
#include "sched/cluster_state.h"
#include "sched/plugins/scores.h"
#include "sched/scheduler.h"
#include "sched/usage_window.h"
#include "server/assignments.h"
#include "server/autoscaling.h"
#include "server/billing.h"
#include "server/budgets.h"
#include "server/controller.h"
#include "server/controller_internal.h"
#include "server/events.h"
#include "server/job_arrays.h"
#include "server/job_machine.h"
#include "server/paths.h"
#include "sim/recording.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;
using controller_detail::AddCostDelta;
using controller_detail::AssignmentKey;
using controller_detail::IdentityOf;
using controller_detail::JobEntry;
using controller_detail::JobOf;
using controller_detail::UidOf;

// The queues as the scheduler takes them, from the cached Queue documents (one that does not
// parse is skipped: the API refuses such writes).
std::map<std::string, QueueSpec> QueuesOf(ObjectCache& queues) {
  std::map<std::string, QueueSpec> out;
  for (const auto& [key, obj] : queues.objects()) {
    manifest::ParseResult p = manifest::ParseStoredManifest(obj.doc, key);
    if (!p.ok() || p.manifests.size() != 1) continue;
    if (const Queue* q = std::get_if<Queue>(&p.manifests[0].object)) {
      out[q->metadata.name] = q->spec;
    }
  }
  return out;
}

// GPU equivalents allocated in `state`, by GPU type (sched::GpuShareOf).
void CountAllocated(const sched::ClusterState& state, std::map<std::string, double>& by_type) {
  for (const auto& [job, a] : state.allocations()) {
    for (const sched::ReplicaPlacement& r : a.replicas) {
      const Node& n = state.node(r.node);
      for (const sched::GpuAssignment& g : r.gpus) {
        by_type[n.gpus[g.gpu].type] += state.ShareOf(r.node, g).raw() / 1000.0;
      }
    }
  }
}

// A job's status once bound to `binding` as `attempt` (the status before: `s`).
JobStatus BoundStatus(JobStatus s, const Job& job, int attempt, std::string checkpoint_dir,
                      Binding binding, int64_t now) {
  s.phase = api::JobPhase::kScheduled;
  s.next.reset();
  s.attempt = attempt;
  s.scheduled_ms = now;
  s.tasks.clear();
  s.checkpoint_dir = std::move(checkpoint_dir);
  s.placement = std::move(binding.placement);
  s.gpus = GpuEquivalents(s.placement);
  s.attempt_started_ms = 0;
  s.run_ended_ms = 0;
  s.reason = "Scheduled";
  s.message = Cat("attempt ", s.attempt, " on ", Join(binding.where, ", "));
  if (std::string from = ResumeFrom(s, job.spec.checkpoint, s.placement); !from.empty()) {
    s.message += Cat("; resuming ", from);
  }
  return s;
}

}  // namespace

// One decision's transaction: the job's new status first, then assignments and events.
struct Controller::DecisionWrite {
  std::vector<store::Op> ops;
  std::string job;  // "ns/name"
  bool bind = false;
  int attempt = 0;
  std::optional<api::AttemptUsage> usage;  // a re-rated attempt's record, written with it
};

void Controller::EnsurePrices() {
  if (prices_ && prices_revision_ == pools_.revision()) return;
  prices_ = std::make_unique<PriceBook>(NodePoolsOf(pools_), catalog_);
  prices_revision_ = pools_.revision();
}

void Controller::RepriceRunning(Pass& pass, std::vector<DecisionWrite>& writes) {
  // The pools' objects (an edited price) and their schedules' periods.
  const std::string epoch = Cat(prices_revision_, "|", prices_->Epoch());
  if (epoch == price_epoch_) return;  // no pool's price changed since the last pass
  if (passes_before_reprice_ > 0) {   // the state holds the running jobs from the second pass on
    --passes_before_reprice_;
    return;
  }
  price_epoch_ = epoch;
  for (auto& [key, obj] : jobs_.mutable_objects()) {
    const JobEntry& entry = JobOf(obj);
    const JobStatus& old = entry.status;
    if (!old.Active() || old.usd_per_hour.empty() || !entry.job) continue;
    const std::string job_key = Cat(entry.ns, "/", entry.name);
    auto a = state_->allocations().find(job_key);
    if (a == state_->allocations().end()) continue;  // not held (its node went away)
    std::map<std::string, double> rate = UsdPerHour(*state_, a->second, *prices_);
    if (rate == old.usd_per_hour) continue;
    JobStatus s = old;
    std::optional<api::AttemptUsage> u =
        Rerate(IdentityOf(entry), s, std::move(rate),
               UsdPerHourByPool(*state_, a->second, *prices_), pass.now_ms);
    if (!u) continue;
    AddCostDelta(pass, entry, old, s);
    Json doc = obj.doc;
    JobStatusToJson(s, doc);
    DecisionWrite w;
    w.job = job_key;
    w.ops = {{store::Op::Kind::kPut, key, doc.dump(2), obj.mod_revision},
             {store::Op::Kind::kPut, api::UsageKey(*u), api::UsageToJson(*u).dump(), std::nullopt}};
    w.usage = std::move(u);
    writes.push_back(std::move(w));
  }
}

void Controller::AddIdleCost(Pass& pass) {
  // The time since the last pass was idle at the rate its end left (binds and ends happen at
  // passes, as jobs are billed from their binding pass to their ending one).
  for (const auto& [pool, rate] : idle_usd_per_hour_) {
    if (rate > 0 && pass.dt_s > 0) pass.idle_cost_usd[pool] += rate * pass.dt_s / 3600.0;
  }
  // Again only when the allocations, the nodes or the prices changed (it walks them all).
  if (!state_ || !prices_) return;
  const IdleRateKey key{state_->version(), state_->nodes_id(), prices_revision_, prices_->Epoch()};
  if (key == idle_rate_key_) return;
  idle_usd_per_hour_ = IdleUsdPerHourByPool(*state_, *prices_);
  idle_rate_key_ = key;
}

absl::Status Controller::EnsureScheduler(int64_t now) {
  if (scheduler_ && scheduler_queues_revision_ == queues_.revision()) return absl::OkStatus();
  std::map<std::string, QueueSpec> queues = QueuesOf(queues_);
  absl::StatusOr<std::unique_ptr<sched::Scheduler>> s =
      sched::Scheduler::FromConfig(options_.scheduler, queues, catalog_);
  if (!s.ok()) return s.status();
  if (recorder_) recorder_->Queues(now, queues);
  scheduler_ = std::move(*s);
  scheduler_queues_revision_ = queues_.revision();
  workload_mix_.clear();  // a new scheduler has the default mix until the pass sets it
  return absl::OkStatus();
}

void Controller::EnsureClusterState(Pass& pass) {
  // The scheduler's nodes, rebuilt only when a node, its health or its cordon changed: the
  // state's node identity then stays the same across passes, and so do the scheduler's caches.
  if (!base_state_ || pass.nodes_fingerprint != base_fingerprint_) {
    std::vector<Node> nodes;
    base_index_.clear();
    for (const auto& [name, info] : pass.ready) {
      base_index_[name] = static_cast<sched::NodeIndex>(nodes.size());
      Node n = api::ToSchedulerNode(*info);
      n.cordoned = pass.cordoned.contains(name);
      nodes.push_back(std::move(n));
    }
    base_state_ = std::make_unique<sched::ClusterState>(std::move(nodes), catalog_);
    base_fingerprint_ = std::move(pass.nodes_fingerprint);
    if (recorder_) recorder_->Nodes(pass.now_ms, base_state_->nodes());
  }
  for (const auto& [type, n] : base_state_->HealthyGpusByType()) {
    pass.metrics.gpus_total_by_type[type] = n.raw() / 1000;
  }
  // The allocations, kept across passes and changed only for jobs whose holdings changed.
  if (!state_ || state_->nodes_id() != base_state_->nodes_id()) {
    state_ = std::make_unique<sched::ClusterState>(*base_state_);
    held_.clear();
  }
}

void Controller::HoldActiveJob(const CachedObject& obj) {
  auto entry = std::static_pointer_cast<const JobEntry>(obj.derived);
  // Committed again whenever the job's view changed (a start, a checkpoint, a stop), so that the
  // state is always what sched::BuildSnapshot would build from the views (the replay's). The
  // entry it was made from is kept, not a copy of its view: the same entry is the same view.
  auto held = held_.find(entry->key);
  if (held != held_.end() && held->second.made_from &&
      (held->second.made_from == entry || held->second.made_from->view == entry->view)) {
    held->second.made_from = std::move(entry);
    held->second.pass = pass_number_;
    return;
  }
  if (held != held_.end()) (void)state_->Release(entry->key);
  held_[entry->key] = {entry, pass_number_};
  sched::Allocation a =
      sched::AllocationOf(entry->key, *entry->job, entry->view, base_index_, *state_);
  if (a.replicas.empty()) return;
  if (absl::Status c = state_->Commit(a); !c.ok()) {
    log::Error("server", "job holds what is not free",
               {{"job", entry->key}, {"error", c.message()}});
  }
}

std::vector<const sched::PendingJob*> Controller::CollectPending(Pass& pass) {
  const int64_t now = pass.now_ms;
  // Pointers into the cached entries (stable during the pass): copying 100,000 PendingJobs would
  // cost more than the bounded cycle itself.
  std::vector<const sched::PendingJob*> pending;
  ArrayGate<CachedObject*> arrays;  // job_arrays.h: at most `parallelism` elements at once
  // Counted by the enum, named once (not a string per job per pass).
  std::array<int64_t, std::size(api::kAllJobPhases)> by_phase{};
  // Fair share's window: the GPU time of the attempts that ended in it (the simulator keeps the
  // same UsageWindow).
  const bool fair_share = scheduler_->options().fair_share;
  sched::UsageWindow usage(options_.scheduler.fair_share_window_s * 1000);
  usage.Advance(now);  // first, so that records older than the window are not even stored
  // The request mix a Fragmentation score without a workload of its own protects: the jobs
  // waiting or holding GPUs now.
  sched::WorkloadCounter mix;
  for (auto& [key, obj] : jobs_.mutable_objects()) {
    const JobEntry& entry = JobOf(obj);
    const JobStatus& s = entry.status;
    ++by_phase[static_cast<size_t>(s.phase)];
    if (!entry.job) continue;
    const Job& job = *entry.job;
    if (recorder_) recorder_->Job(now, entry.key, job, entry.view);
    // Classified by the view, as sched::BuildSnapshot classifies it.
    const sched::JobView& v = entry.view;
    if (fair_share) sched::AddToWindow(usage, job.spec.queue, v);
    if (sched::InWorkload(v)) {
      for (const TaskSpec& t : job.spec.tasks) mix.Add(t.resources.gpu);
    }
    if (v.phase == sched::JobViewPhase::kHolding || v.phase == sched::JobViewPhase::kStopping) {
      if (Gated(job.spec)) arrays.Holding(entry.ns, *job.spec.array);
      if (pass.live_jobs_due) {
        pass.metrics.live_jobs.emplace_hint(pass.metrics.live_jobs.end(), entry.key,
                                            LiveGpuSeconds(s, now));
      }
      HoldActiveJob(obj);
      continue;
    }
    if (v.phase != sched::JobViewPhase::kWaiting) continue;
    ++pass.metrics.pending_by_queue[job.spec.queue];
    if (v.not_before_ms > now) continue;
    if (!pass.over_budget.empty() && pass.over_budget.contains(entry.ns)) {
      pass.over_budget_waiting.push_back(&obj);  // waits with the reason, not scheduled
      continue;
    }
    if (!entry.request) entry.request = sched::PendingOf(entry.key, job, v);
    if (Gated(job.spec)) {
      arrays.Candidate(entry.ns, *job.spec.array, &obj);
      continue;
    }
    pending.push_back(&*entry.request);
  }
  if (fair_share) scheduler_->SetHistory(usage.history());
  if (std::vector<WorkloadShare> shares = mix.Shares(); shares != workload_mix_) {
    scheduler_->SetWorkload(shares);
    workload_mix_ = std::move(shares);
  }
  for (api::JobPhase phase : api::kAllJobPhases) {
    if (int64_t n = by_phase[static_cast<size_t>(phase)]; n > 0) {
      pass.metrics.jobs_by_phase[std::string(api::PhaseName(phase))] += n;
    }
  }
  ArrayGate<CachedObject*>::Verdict gate = arrays.Decide();
  for (CachedObject* o : gate.admitted) pending.push_back(&*JobOf(*o).request);
  std::vector<std::vector<store::Op>> holds;
  for (CachedObject* o : gate.held) {
    const JobEntry& e = JobOf(*o);
    if (std::optional<store::Op> op = HoldArrayElementOp(
            Cat("/jobs/", e.key), o->doc, o->mod_revision, e.status, *e.job->spec.array)) {
      holds.push_back({*std::move(op)});
    }
  }
  (void)TxnAll(holds);  // a conflict (an API write won) is held again by the next pass
  return pending;
}

void Controller::ReleaseEnded() {
  // Jobs that held GPUs and hold none now (ended, stopped, deleted).
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.pass == pass_number_) {
      ++it;
      continue;
    }
    (void)state_->Release(it->first);
    it = held_.erase(it);
  }
}

std::vector<store::Op> Controller::BindOps(Pass& pass, const sched::Decision& d,
                                           const CachedObject& obj, const Job& job,
                                           std::string checkpoint_dir, JobStatus& s) {
  std::vector<PlacedOn> placed;
  for (const sched::ReplicaPlacement& r : d.allocation->replicas) {
    const std::string& node = state_->node(r.node).name;
    placed.push_back({r, node, pass.ready.at(node).get()});
  }
  BindInput in{
      &job, UidOf(obj.doc), s.attempt + 1, checkpoint_dir, 0, options_.stop_grace_ms / 1000};
  Binding binding = AssignmentsFor(in, std::move(placed));
  // The master port: not one another job's rank 0 already listens on at that node.
  std::set<int>& taken = MasterPortsOn(pass, binding.placement[0].node);
  const int master_port = MasterPort(in.uid, in.attempt, taken);
  taken.insert(master_port);
  std::vector<store::Op> ops;
  for (api::Assignment& a : binding.assignments) {
    a.master_port = master_port;
    ops.push_back({store::Op::Kind::kPut, AssignmentKey(binding.placement[a.rank].node, a.name),
                   api::AssignmentToJson(a), std::nullopt});
  }
  s = BoundStatus(std::move(s), job, in.attempt, std::move(checkpoint_dir), std::move(binding),
                  pass.now_ms);
  s.master_port = master_port;
  s.las_service_gpu_ms = d.allocation->las_service_gpu_ms;
  s.gpus_by_type = sched::GpusByType(*state_, *d.allocation);
  s.usd_per_hour = UsdPerHour(*state_, *d.allocation, *prices_);
  s.usd_per_hour_by_pool = UsdPerHourByPool(*state_, *d.allocation, *prices_);
  s.co2e_g_per_kwh = Co2eGramsPerKwh(*state_, *d.allocation, *prices_, options_.carbon);
  if (s.attempt == 1) {
    pass.bind_latencies.push_back(std::max<int64_t>(0, pass.now_ms - s.submitted_ms) / 1000.0);
  }
  return ops;
}

std::optional<Controller::DecisionWrite> Controller::WriteOfDecision(Pass& pass,
                                                                     const sched::Decision& d) {
  const int64_t now = pass.now_ms;
  auto it = jobs_.mutable_objects().find(Cat("/jobs/", d.job));  // d.job is "ns/name"
  if (it == jobs_.mutable_objects().end()) return std::nullopt;
  CachedObject& obj = it->second;
  const JobEntry& entry = JobOf(obj);
  const Job& job = *entry.job;
  JobStatus s = entry.status;
  const std::string& ns = job.metadata.namespace_;
  const std::string& name = job.metadata.name;
  DecisionWrite w;
  w.job = d.job;
  std::vector<JobEvent> events;
  // The checkpoint directory is checked when a job is created; one stored before that check
  // existed fails here rather than write outside its namespace's tree.
  absl::StatusOr<std::string> dir =
      d.kind == sched::DecisionKind::kBind
          ? ResolveCheckpointDir(options_.checkpoint_root, ns, name, job.spec.checkpoint.dir)
          : std::string();
  w.bind = d.kind == sched::DecisionKind::kBind && dir.ok();
  if (!dir.ok()) {
    (void)state_->Release(d.job);  // Schedule committed the binding to the state
    s.phase = api::JobPhase::kFailed;
    s.finished_ms = now;
    s.reason = "InvalidSpec";
    s.message = std::string(dir.status().message());
    events.push_back({"Warning", "InvalidSpec", s.message});
  } else if (w.bind) {
    w.ops = BindOps(pass, d, obj, job, *std::move(dir), s);
    events.push_back({"Normal", "Scheduled", s.message});
  } else if (d.kind == sched::DecisionKind::kPreempt) {
    if (!s.Active()) return std::nullopt;
    JobStep step = Preempt(s, RulesOf(entry.job),
                           Cat("preempted for ", d.preemptor, ": ", d.reason), d.grace_ms, now);
    if (step.delete_assignments) {
      for (const PlacedReplica& r : s.placement) {
        w.ops.push_back(
            {store::Op::Kind::kDelete, AssignmentKey(r.node, r.name), "", std::nullopt});
      }
    }
    s = std::move(step.status);
    events = std::move(step.events);
  } else {
    std::string reason = d.kind == sched::DecisionKind::kReject ? "Unschedulable" : "Waiting";
    if (s.reason == reason && s.message == d.reason) return std::nullopt;
    s.reason = reason;
    s.message = d.reason;
    events.push_back(
        {d.kind == sched::DecisionKind::kReject ? "Warning" : "Normal", reason, d.reason});
  }
  Json doc = obj.doc;
  JobStatusToJson(s, doc);
  w.ops.insert(w.ops.begin(), {store::Op::Kind::kPut, Cat("/jobs/", ns, "/", name), doc.dump(2),
                               obj.mod_revision});
  for (const JobEvent& e : events) {
    w.ops.push_back(MakeEventOp(ns, name, UidOf(obj.doc), e, now, ++event_seq_));
  }
  w.attempt = s.attempt;
  return w;
}

void Controller::WriteDecisions(Pass& pass, std::vector<DecisionWrite> writes) {
  std::vector<std::vector<store::Op>> txns;
  txns.reserve(writes.size());
  for (DecisionWrite& w : writes) txns.push_back(std::move(w.ops));
  absl::Time t_write = absl::Now();
  std::vector<absl::StatusOr<int64_t>> results = TxnAll(txns);
  pass.metrics.stage_seconds["write"] = absl::ToDoubleSeconds(absl::Now() - t_write);
  for (size_t i = 0; i < writes.size(); ++i) {
    const absl::StatusOr<int64_t>& rev = results[i];
    if (!rev.ok() && !absl::IsAborted(rev.status())) {
      log::Error("server", "scheduling decision not written",
                 {{"job", writes[i].job}, {"error", rev.status().message()}});
    }
    if (rev.ok() && writes[i].usage) budgets_->Recorded(*writes[i].usage);
    if (!writes[i].bind) continue;
    // Schedule committed the binding to the state: keep it when the store has it too. Its
    // allocation carries no checkpoint, so a job bound again after one is re-committed with it
    // by the next pass (HoldActiveJob).
    if (rev.ok()) {
      held_[writes[i].job] = {nullptr, pass_number_};  // committed again next pass
    } else {
      (void)state_->Release(writes[i].job);
    }
  }
}

std::optional<Controller::DecisionWrite> Controller::OverBudgetWrite(Pass& pass, CachedObject& obj,
                                                                     const std::string& message) {
  const JobEntry& entry = JobOf(obj);
  JobStatus s = entry.status;
  if (s.reason == "OverBudget" && s.message == message) return std::nullopt;
  s.reason = "OverBudget";
  s.message = message;
  Json doc = obj.doc;
  JobStatusToJson(s, doc);
  DecisionWrite w;
  w.job = Cat(entry.ns, "/", entry.name);
  w.ops.push_back({store::Op::Kind::kPut, Cat("/jobs/", w.job), doc.dump(2), obj.mod_revision});
  w.ops.push_back(MakeEventOp(entry.ns, entry.name, entry.uid, {"Warning", "OverBudget", message},
                              pass.now_ms, ++event_seq_));
  return w;
}

std::vector<Controller::DecisionWrite> Controller::EnforceBudgets(Pass& pass) {
  std::vector<DecisionWrite> writes;
  if (absl::Status s = budgets_->Sync(store_, pass.now_ms); !s.ok()) {
    // The last verdicts stand (an unreadable store does not lift a budget); said once.
    if (budget_error_ != s.message()) {
      log::Warn("server", "budgets not read", {{"error", s.message()}});
      budget_error_ = std::string(s.message());
    }
    pass.over_budget = last_over_budget_;
    return writes;
  }
  budget_error_.clear();
  if (budgets_->budgets().empty()) {
    last_over_budget_.clear();
    return writes;
  }
  JudgeBudgets(pass, BudgetSpend(pass));
  last_over_budget_ = pass.over_budget;
  // Stop budgets: the namespace's running jobs are stopped and requeued (they then wait).
  for (auto& [key, obj] : jobs_.mutable_objects()) {
    const JobEntry& entry = JobOf(obj);
    auto over = pass.over_budget.find(entry.ns);
    if (over == pass.over_budget.end() || !budgets_->budgets().at(entry.ns).budget.stop ||
        !entry.status.Active() || entry.status.cancel_requested) {
      continue;
    }
    sched::Decision d{.kind = sched::DecisionKind::kPreempt,
                      .job = Cat(entry.ns, "/", entry.name),
                      .reason = over->second,
                      .preemptor = "the namespace's budget",
                      .grace_ms = options_.stop_grace_ms};
    if (std::optional<DecisionWrite> w = WriteOfDecision(pass, d)) writes.push_back(*std::move(w));
  }
  return writes;
}

std::map<std::string, double> Controller::BudgetSpend(const Pass& pass) {
  const Month& month = budgets_->month();
  std::map<std::string, double> spent;
  for (const auto& [ns, e] : budgets_->budgets()) spent[ns] = budgets_->EndedSpend(ns);
  for (auto& [key, obj] : jobs_.mutable_objects()) {
    const JobEntry& entry = JobOf(obj);
    if (auto it = spent.find(entry.ns); it != spent.end()) {
      it->second += LiveCostIn(entry.status, month.start_ms, pass.now_ms);
    }
  }
  return spent;
}

void Controller::JudgeBudgets(Pass& pass, const std::map<std::string, double>& spent) {
  std::vector<std::vector<store::Op>> alerts;
  std::vector<std::pair<std::string, std::vector<int>>> raised;
  for (const auto& [ns, e] : budgets_->budgets()) {
    BudgetVerdict v = JudgeBudget(e.budget, spent.at(ns), e.alerted);
    pass.metrics.budgets[ns] = {e.budget.monthly, v.spent};
    if (v.over) pass.over_budget[ns] = OverBudgetMessage(ns, e.budget);
    if (v.new_alerts.empty()) continue;
    std::vector<int> alerted = e.alerted;
    alerted.insert(alerted.end(), v.new_alerts.begin(), v.new_alerts.end());
    std::sort(alerted.begin(), alerted.end());
    std::vector<store::Op> ops = {budgets_->AlertStateOp(ns, alerted, v.spent)};
    for (int percent : v.new_alerts) {
      std::string msg = fmt::format(
          "namespace {} has spent {:.2f} {} this month: {}% of its "
          "budget of {:.2f}",
          ns, v.spent, e.budget.currency, percent, e.budget.monthly);
      ops.push_back(MakeNamespaceEventOp(
          ns, e.uid, {percent >= 100 ? "Warning" : "Normal", "BudgetAlert", std::move(msg)},
          pass.now_ms, ++event_seq_));
    }
    alerts.push_back(std::move(ops));
    raised.emplace_back(ns, v.new_alerts);
  }
  std::vector<absl::StatusOr<int64_t>> results = TxnAll(alerts);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) continue;  // a conflict: the namespace changed; judged again next pass
    for (int percent : raised[i].second) {
      ++pass.metrics.budget_alerts[{raised[i].first, percent}];
      log::Warn("server", "budget alert", {{"namespace", raised[i].first}, {"percent", percent}});
    }
  }
}

struct Controller::WhatIfRequest {
  std::string key;  // the probe's scheduler key: no job's (a job name has no '.')
  Job job;
  bool done = false;
  absl::StatusOr<WhatIfAnswer> answer = absl::UnknownError("not answered");
};

absl::StatusOr<WhatIfAnswer> Controller::WhatIf(const std::string& ns, const Job& job,
                                                absl::Duration timeout) {
  auto request = std::make_shared<WhatIfRequest>();
  request->key = Cat(ns, "/whatif.", job.metadata.name);
  request->job = job;
  request->job.metadata.namespace_ = ns;
  absl::MutexLock lock(&mu_);
  what_ifs_.push_back(request);
  kicked_ = true;
  if (!mu_.AwaitWithTimeout(absl::Condition(&request->done), timeout)) {
    std::erase(what_ifs_, request);
    return absl::DeadlineExceededError(
        Cat("the scheduler did not answer within ", absl::FormatDuration(timeout)));
  }
  return request->answer;
}

void Controller::AnswerWhatIfs(const Pass& pass,
                               const std::vector<const sched::PendingJob*>& pending) {
  std::vector<std::shared_ptr<WhatIfRequest>> asked;
  {
    absl::MutexLock lock(&mu_);
    asked.swap(what_ifs_);
  }
  for (const std::shared_ptr<WhatIfRequest>& q : asked) {
    sched::ClusterState copy = *state_;
    JobStatus fresh;
    fresh.submitted_ms = pass.now_ms;
    sched::PendingJob probe = sched::PendingOf(q->key, q->job, ViewOf(fresh, pass.now_ms));
    std::vector<const sched::PendingJob*> all = pending;
    all.push_back(&probe);
    WhatIfAnswer a;
    a.outcome = "Wait";
    a.reason = "not reached in this cycle (the scheduler's work per namespace and cycle)";
    for (const sched::Decision& d : scheduler_->Schedule(copy, all, pass.now_ms)) {
      if (d.job != q->key) continue;
      a.outcome = d.kind == sched::DecisionKind::kBind     ? "Bind"
                  : d.kind == sched::DecisionKind::kReject ? "Reject"
                                                           : "Wait";
      a.reason = d.reason;
      a.expected_start_ms = d.expected_start_ms;
      if (d.allocation) {
        for (const sched::ReplicaPlacement& r : d.allocation->replicas) {
          a.nodes.push_back(copy.node(r.node).name);
        }
      }
    }
    absl::MutexLock lock(&mu_);
    q->answer = std::move(a);
    q->done = true;
  }
}

absl::Status Controller::Schedule(Pass& pass) {
  if (absl::Status s = EnsureScheduler(pass.now_ms); !s.ok()) return s;
  EnsureClusterState(pass);
  ++pass_number_;
  // A pool's price changed: running attempts are re-rated before their spend is judged (on the
  // allocations the state kept from the last pass), and budgets before the pending jobs are
  // collected (an over-budget namespace's wait).
  std::vector<DecisionWrite> budget_writes;
  RepriceRunning(pass, budget_writes);
  if (!budget_writes.empty()) WriteDecisions(pass, std::move(budget_writes));
  budget_writes = EnforceBudgets(pass);
  std::vector<const sched::PendingJob*> pending = CollectPending(pass);
  ReleaseEnded();
  AnswerWhatIfs(pass, pending);  // before this cycle's binds change the state
  for (CachedObject* obj : pass.over_budget_waiting) {
    const std::string& message = pass.over_budget.at(JobOf(*obj).ns);
    if (std::optional<DecisionWrite> w = OverBudgetWrite(pass, *obj, message)) {
      budget_writes.push_back(*std::move(w));
    }
  }
  if (!budget_writes.empty()) WriteDecisions(pass, std::move(budget_writes));
  if (pending.empty()) {
    if (recorder_) recorder_->Pass(pass.now_ms, false, pending, {}, *state_);
    CountAllocated(*state_, pass.metrics.gpus_allocated_by_type);
    if (options_.autoscaling != nullptr) {
      options_.autoscaling->AfterPass(*scheduler_, *state_, {}, pass.not_ready, prices_->pools(),
                                      pass.now_ms);
    }
    return absl::OkStatus();
  }
  absl::Time t_place = absl::Now();
  sched::CycleStats cycle;
  std::vector<sched::Decision> decisions =
      scheduler_->Schedule(*state_, pending, pass.now_ms, &cycle);
  if (recorder_) recorder_->Pass(pass.now_ms, true, pending, decisions, *state_);
  pass.metrics.jobs_deferred = cycle.deferred;
  pass.metrics.stage_seconds["place"] = absl::ToDoubleSeconds(absl::Now() - t_place);
  // What is allocated once this pass's bindings are in (Schedule committed them to the state).
  CountAllocated(*state_, pass.metrics.gpus_allocated_by_type);
  std::vector<DecisionWrite> writes;
  for (const sched::Decision& d : decisions) {
    if (std::optional<DecisionWrite> w = WriteOfDecision(pass, d)) writes.push_back(*std::move(w));
  }
  WriteDecisions(pass, std::move(writes));
  if (options_.autoscaling != nullptr) {
    // The jobs that wait for room, as the scheduler saw them (after the binds it committed),
    // and those no Ready node could ever hold (they stay pending here: a pool may add one).
    std::set<std::string_view> room;
    for (const sched::Decision& d : decisions) {
      if ((d.kind == sched::DecisionKind::kWait && d.capacity_bound) ||
          d.kind == sched::DecisionKind::kReject) {
        room.insert(d.job);
      }
    }
    std::vector<const sched::PendingJob*> waiting;
    for (const sched::PendingJob* p : pending) {
      if (room.contains(p->request.key)) waiting.push_back(p);
    }
    std::set<std::string> reserved;  // backfill's and preemptors' nodes: not removed
    for (sched::NodeIndex n : cycle.reserved_nodes) reserved.insert(state_->node(n).name);
    options_.autoscaling->AfterPass(*scheduler_, *state_, waiting, pass.not_ready, prices_->pools(),
                                    pass.now_ms, reserved);
  }
  return absl::OkStatus();
}

}  // namespace gpucloud::server
