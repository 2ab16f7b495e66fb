#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <set>
#include <thread>
#include <utility>

#include "api/wire.h"
#include "core/log.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "sched/cluster_state.h"
#include "sched/job_request.h"
#include "sched/scheduler.h"
#include "server/assignments.h"
#include "server/autoscaling.h"
#include "server/billing.h"
#include "server/budgets.h"
#include "server/controller_internal.h"
#include "server/events.h"
#include "server/job_arrays.h"
#include "server/job_machine.h"
#include "server/job_status.h"
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
using controller_detail::NodeEntry;
using controller_detail::NodeOf;
using controller_detail::Pass;

constexpr double kBindBounds[] = {0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5,
                                  1,     2.5,  5,    10,   30,  60,   300};

std::string NameOf(const Json& doc) {
  auto m = doc.find("metadata");
  if (m == doc.end() || !m->is_object()) return "";
  return m->value("name", "");
}

std::string NamespaceOf(const Json& doc) {
  auto m = doc.find("metadata");
  if (m == doc.end() || !m->is_object()) return "";
  return m->value("namespace", "");
}

bool SpecFlag(const Json& doc, const char* key) {
  auto s = doc.find("spec");
  return s != doc.end() && s->is_object() && s->value(key, false);
}

}  // namespace

namespace controller_detail {

std::string UidOf(const Json& doc) {
  auto m = doc.find("metadata");
  if (m == doc.end() || !m->is_object()) return "";
  return m->value("uid", "");
}

JobIdentity IdentityOf(const JobEntry& e) {
  return {e.ns, e.name, e.uid, e.job ? e.job->spec.queue : std::string(kDefaultQueue),
          e.job && e.job->spec.billing == BillingClass::kSpot};
}

void AddCostDelta(Pass& pass, const JobEntry& e, const JobStatus& before, const JobStatus& after) {
  const std::string queue = e.job ? e.job->spec.queue : std::string(kDefaultQueue);
  for (const auto& [billing, usd] : after.cost_usd) {
    auto was = before.cost_usd.find(billing);
    const double added = usd - (was != before.cost_usd.end() ? was->second : 0.0);
    if (added > 0) pass.cost_usd[{e.ns, queue, billing}] += added;
  }
}

const JobEntry& JobOf(CachedObject& o) {
  if (!o.derived) {
    auto e = std::make_shared<JobEntry>();
    manifest::ParseResult p = manifest::ParseStoredManifest(o.doc, "store");
    if (p.ok() && p.manifests.size() == 1) {
      if (const Job* j = std::get_if<Job>(&p.manifests[0].object)) e->job = *j;
    }
    if (absl::StatusOr<JobStatus> status = JobStatusFromJson(o.doc); status.ok()) {
      e->status = *std::move(status);
    } else {  // left alone, like a spec that does not parse
      e->job.reset();
      log::Error("server", "stored job status does not decode",
                 {{"job", Cat(NamespaceOf(o.doc), "/", NameOf(o.doc))},
                  {"error", status.status().message()}});
    }
    e->ns = NamespaceOf(o.doc);
    e->name = NameOf(o.doc);
    e->uid = UidOf(o.doc);
    e->key = Cat(e->ns, "/", e->name);
    if (e->job) e->view = ViewOf(e->status, e->job->metadata.creation_unix_seconds * 1000);
    o.derived = e;
  }
  return *static_cast<const JobEntry*>(o.derived.get());
}

const NodeEntry& NodeOf(CachedObject& o) {
  if (!o.derived) {
    auto e = std::make_shared<NodeEntry>();
    absl::StatusOr<api::NodeInfo> n = api::NodeFromJson(o.doc.dump());
    if (n.ok()) e->info = std::make_shared<const api::NodeInfo>(std::move(*n));
    e->unschedulable = SpecFlag(o.doc, "unschedulable");
    e->draining = SpecFlag(o.doc, "draining");
    if (auto spec = o.doc.find("spec"); spec != o.doc.end() && spec->is_object()) {
      e->reclaim_at_ms = spec->value("reclaimAtMs", int64_t{0});
      e->health_reset = spec->value("healthReset", int64_t{0});
      if (auto p = spec->find("prePull"); p != spec->end() && p->is_array()) {
        for (const Json& image : *p) {
          if (image.is_string()) e->pre_pull.push_back(image.get<std::string>());
        }
      }
    }
    const Json& st = o.doc["status"];
    e->stored_ready = st.is_object() && st.value("ready", false);
    o.derived = e;
  }
  return *static_cast<const NodeEntry*>(o.derived.get());
}

std::string AssignmentKey(const std::string& node, const std::string& name) {
  return Cat("/assignments/", node, "/", name);
}

}  // namespace controller_detail

JobRules Controller::RulesOf(const std::optional<Job>& job) const {
  JobRules rules;
  rules.stop_grace_ms = options_.stop_grace_ms;
  if (job) {
    rules.restart = job->spec.restart;
    rules.policies = job->spec.policies;
    rules.node_local_checkpoints = job->spec.checkpoint.node_local;
    rules.interactive = job->spec.interactive;
  }
  return rules;
}

std::set<int>& Controller::MasterPortsOn(Pass& pass, const std::string& node) {
  if (!pass.master_ports) {
    pass.master_ports.emplace();
    for (auto& [key, obj] : jobs_.mutable_objects()) {
      const JobStatus& s = JobOf(obj).status;
      if (s.Terminal() || s.placement.empty() || s.master_port == 0) continue;
      (*pass.master_ports)[s.placement[0].node].insert(s.master_port);
    }
  }
  return (*pass.master_ports)[node];
}

Controller::Controller(store::Store& store, NodeTable& nodes, const Clock& clock,
                       const GpuCatalog& catalog, ControllerOptions options)
    : store_(store),
      node_table_(nodes),
      clock_(clock),
      catalog_(catalog),
      options_(std::move(options)),
      started_ms_(clock.NowMillis()),
      budgets_(std::make_unique<BudgetBook>(options_.currency)) {
  metrics_.bind_latency_bounds.assign(std::begin(kBindBounds), std::end(kBindBounds));
  metrics_.bind_latency_counts.assign(std::size(kBindBounds) + 1, 0);
  if (options_.record_scheduler) {
    recorder_ = std::make_unique<sim::RecordingWriter>(*options_.record_scheduler);
    recorder_->Header(options_.scheduler);
  }
}

Controller::~Controller() { Stop(); }

void Controller::Start() {
  stopping_ = false;
  {
    absl::MutexLock lock(&mu_);
    store_revision_ = store_.Revision();
  }
  store_watcher_ = std::thread([this] { WatchStore(); });
  thread_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  stopping_ = true;
  Kick();
  if (thread_.joinable()) thread_.join();
  if (store_watcher_.joinable()) store_watcher_.join();
}

void Controller::Kick() {
  absl::MutexLock lock(&mu_);
  kicked_ = true;
}

ClusterMetrics Controller::Metrics() const {
  absl::MutexLock lock(&mu_);
  return metrics_;
}

void Controller::Loop() {
  while (!stopping_) {
    const int64_t before = store_.Revision();
    own_txns_ = 0;
    if (absl::Status s = RunOnce(); !s.ok()) {
      log::Error("server", "controller pass failed", {{"error", s.message()}});
    }
    // Each transaction is one revision: when all the revisions since the pass began are its own
    // writes, nothing new arrived; otherwise someone wrote during the pass (perhaps after its
    // caches caught up), and the next pass runs at once.
    const int64_t after = store_.Revision();
    WaitForWork(after - before > own_txns_ ? before : after);
  }
}

void Controller::WaitForWork(int64_t seen) {
  // A store change, a kick (a heartbeat's news), a stop, or the tick (for heartbeat timeouts
  // and back-offs), whichever comes first.
  absl::MutexLock lock(&mu_);
  auto work = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return kicked_ || stopping_ || store_revision_ > seen;
  };
  mu_.AwaitWithTimeout(absl::Condition(&work), absl::Milliseconds(options_.tick_ms));
  kicked_ = false;
}

void Controller::WatchStore() {
  // From the revision Start saw, not the store's now: a change made before this thread got to
  // run (a pass's, or an API write during it) must still wake the loop.
  int64_t seen;
  {
    absl::MutexLock lock(&mu_);
    seen = store_revision_;
  }
  while (!stopping_) {
    // Bounded, so that Stop is seen: the store has no way to interrupt the wait.
    if (!store_.WaitForChange(seen, absl::Milliseconds(50))) continue;
    seen = store_.Revision();
    absl::MutexLock lock(&mu_);
    store_revision_ = seen;
  }
}

absl::Status Controller::RunOnce() {
  absl::Time t0 = absl::Now();
  Pass pass;
  pass.now_ms = clock_.NowMillis();
  if (pass.now_ms - live_jobs_ms_ >= 5000 || pass.now_ms < live_jobs_ms_) {
    pass.live_jobs_due = true;
    live_jobs_ms_ = pass.now_ms;
  }
  absl::Time t = t0;
  auto stage = [&](const char* name) {
    absl::Time now = absl::Now();
    pass.metrics.stage_seconds[name] = absl::ToDoubleSeconds(now - t);
    t = now;
  };
  for (ObjectCache* c : {&nodes_, &jobs_, &queues_, &pools_}) {
    if (absl::StatusOr<bool> s = c->Sync(store_); !s.ok()) return s.status();
  }
  stage("sync");
  pass.reports = node_table_.Snapshot();
  if (absl::Status s = SyncNodes(pass); !s.ok()) return s;
  stage("nodes");
  // The agents may stop sending the ended tasks this pass read, once all it decided is stored.
  if (StepJobs(pass)) node_table_.MarkRead(pass.reports);
  stage("jobs");
  EnsurePrices();
  prices_->At(pass.now_ms);  // a pool's priceSchedule: the prices now
  if (absl::Status s = Schedule(pass); !s.ok()) return s;
  AddIdleCost(pass);
  stage("schedule");
  absl::MutexLock lock(&mu_);
  // The gauges are this pass's; the counters add up over the server's life.
  ClusterMetrics& m = metrics_;
  m.jobs_by_phase = std::move(pass.metrics.jobs_by_phase);
  m.pending_by_queue = std::move(pass.metrics.pending_by_queue);
  m.gpus_total_by_type = std::move(pass.metrics.gpus_total_by_type);
  m.gpus_allocated_by_type = std::move(pass.metrics.gpus_allocated_by_type);
  m.nodes_ready = pass.metrics.nodes_ready;
  m.nodes_not_ready = pass.metrics.nodes_not_ready;
  m.jobs_deferred = pass.metrics.jobs_deferred;
  if (pass.live_jobs_due) m.live_jobs = std::move(pass.metrics.live_jobs);
  m.job_gpu_seconds += pass.settled;
  for (const auto& [k, v] : pass.cost_usd) m.cost_usd[k] += v;
  for (const auto& [k, v] : pass.idle_cost_usd) m.idle_cost_usd[k] += v;
  m.budgets = std::move(pass.metrics.budgets);
  for (const auto& [k, n] : pass.metrics.budget_alerts) m.budget_alerts[k] += n;
  m.gpu_seconds_registered += pass.metrics.gpu_seconds_registered;
  m.gpu_seconds_available += pass.metrics.gpu_seconds_available;
  m.stage_seconds = std::move(pass.metrics.stage_seconds);
  ++m.passes;
  m.last_pass_seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  for (double v : pass.bind_latencies) {
    for (size_t i = 0; i < m.bind_latency_bounds.size(); ++i) {
      if (v <= m.bind_latency_bounds[i]) ++m.bind_latency_counts[i];
    }
    ++m.bind_latency_counts.back();
    m.bind_latency_sum += v;
    ++m.bind_latency_count;
  }
  for (double v : pass.recovery_seconds) {
    ++m.recovery_count;
    m.recovery_sum += v;
    m.recovery_max = std::max(m.recovery_max, v);
  }
  return absl::OkStatus();
}

// --- nodes -----------------------------------------------------------------------------------

absl::Status Controller::SyncNodes(Pass& pass) {
  // The time since the last pass counts as this pass's view of the nodes.
  const double dt =
      last_pass_ms_ > 0 ? std::max<int64_t>(0, pass.now_ms - last_pass_ms_) / 1000.0 : 0.0;
  last_pass_ms_ = pass.now_ms;
  pass.dt_s = dt;
  if (options_.autoscaling != nullptr) pass.held = options_.autoscaling->HeldNodes();
  for (auto& [key, obj] : nodes_.mutable_objects()) {
    const NodeEntry& entry = NodeOf(obj);
    if (!entry.info) continue;
    const std::string& name = entry.info->name;
    if (!entry.told) {
      node_table_.SetHealthReset(name, entry.health_reset);
      node_table_.SetPrePull(name, entry.pre_pull);
      entry.told = true;
    }
    pass.metrics.gpu_seconds_registered += dt * static_cast<double>(entry.info->gpus.size());
    auto rep = pass.reports.find(name);
    const int64_t last =
        std::max(rep != pass.reports.end() ? rep->second.last_heartbeat_ms : int64_t{0},
                 started_ms_ + options_.start_grace_ms);
    bool ready = pass.now_ms - last <= options_.heartbeat_timeout_ms;
    if (ready != entry.stored_ready) {
      Json doc = obj.doc;
      doc["status"]["ready"] = ready;
      doc["status"]["readyReason"] = ready ? "HeartbeatsArrive" : "HeartbeatsMissed";
      doc["status"]["readyMessage"] =
          ready ? "the agent is heartbeating"
                : Cat("no heartbeat for ", (pass.now_ms - last) / 1000.0, " s (limit ",
                      options_.heartbeat_timeout_ms / 1000.0, " s)");
      doc["status"]["readySinceMs"] = pass.now_ms;
      absl::StatusOr<int64_t> rev =
          store_.Txn({{store::Op::Kind::kPut, key, doc.dump(2), obj.mod_revision}});
      if (!rev.ok() && !absl::IsAborted(rev.status())) return rev.status();
      if (rev.ok()) {
        ++own_txns_;
        log::Write(ready ? log::Level::kInfo : log::Level::kWarn, "server",
                   ready ? "node is Ready" : "node is NotReady", {{"node", name}});
      }
    }
    if (!ready) {
      ++pass.metrics.nodes_not_ready;
      pass.not_ready[name] = {entry.info->pool, static_cast<int32_t>(entry.info->gpus.size())};
      continue;
    }
    ++pass.metrics.nodes_ready;
    std::shared_ptr<const api::NodeInfo> info = entry.info;
    uint64_t generation = 0;
    if (rep != pass.reports.end() && rep->second.heartbeat != nullptr) {
      generation = rep->second.generation;
      // The agent's view of its GPUs' health: a copy only when it takes one away. A GPU at
      // risk of failing takes no new work either (its jobs move off it gracefully: StepJobs).
      for (const api::GpuHealth& h : rep->second.heartbeat->gpus) {
        if (h.index < 0 || h.index >= static_cast<int>(info->gpus.size())) continue;
        if (h.healthy && h.at_risk) {
          pass.at_risk[name][h.index] = h.risk;
          pass.metrics.gpu_seconds_available += dt;  // not failed yet: still available
        }
        if ((!h.healthy || h.at_risk) && info->gpus[h.index].healthy) {
          auto copy = std::make_shared<api::NodeInfo>(*info);
          copy->gpus[h.index].healthy = false;
          info = std::move(copy);
        }
      }
    }
    for (const Gpu& g : info->gpus) {
      if (g.healthy) pass.metrics.gpu_seconds_available += dt;
    }
    const bool held = pass.held.contains(name);  // by the autoscaler
    if (entry.unschedulable || held) pass.cordoned.insert(name);
    if (entry.draining) pass.draining.insert(name);
    if (entry.reclaim_at_ms > 0) pass.reclaiming[name] = entry.reclaim_at_ms;
    pass.nodes_fingerprint +=
        Cat(name, "@", obj.mod_revision, "/", generation, held ? "h" : "", ";");
    pass.ready[name] = std::move(info);
  }
  return absl::OkStatus();
}

// --- jobs ------------------------------------------------------------------------------------

namespace {

// The report of one replica's task for the job's current attempt, if its node sent one.
const api::TaskReport* ReportOf(const std::map<std::string, NodeReport>& reports,
                                const PlacedReplica& r, const std::string& uid, int attempt) {
  auto it = reports.find(r.node);
  if (it == reports.end() || it->second.heartbeat == nullptr) return nullptr;
  for (const api::TaskReport& t : it->second.heartbeat->tasks) {
    if (t.name == r.name && t.job_uid == uid && t.attempt == attempt) return &t;
  }
  return nullptr;
}

using AtRisk = std::map<std::string, std::map<int, std::string>>;

// Why one of a replica's GPUs is expected to fail (the agent's risk model), or "".
std::string GpuRisk(const AtRisk& at_risk, const PlacedReplica& r) {
  auto node = at_risk.find(r.node);
  if (node == at_risk.end()) return "";
  for (const sched::GpuAssignment& g : r.placement.gpus) {
    if (auto it = node->second.find(g.gpu); it != node->second.end()) {
      return Cat("GPU ", g.gpu, " on ", r.node, " is likely to fail (", it->second, ")");
    }
  }
  return "";
}

// Why a replica's GPU is unhealthy (from its node's heartbeat), or "" when all of them are fine.
std::string GpuProblem(const std::map<std::string, std::shared_ptr<const api::NodeInfo>>& ready,
                       const std::map<std::string, NodeReport>& reports, const AtRisk& at_risk,
                       const PlacedReplica& r) {
  auto node = ready.find(r.node);
  if (node == ready.end()) return "";
  auto risky = at_risk.find(r.node);
  for (const sched::GpuAssignment& g : r.placement.gpus) {
    if (g.gpu < 0 || g.gpu >= static_cast<int>(node->second->gpus.size()) ||
        node->second->gpus[g.gpu].healthy ||
        (risky != at_risk.end() && risky->second.contains(g.gpu))) {
      continue;
    }
    std::string why = "unhealthy";
    auto rep = reports.find(r.node);
    if (rep != reports.end() && rep->second.heartbeat != nullptr) {
      for (const api::GpuHealth& h : rep->second.heartbeat->gpus) {
        if (h.index == g.gpu && !h.reason.empty()) why = h.reason;
      }
    }
    return Cat("GPU ", g.gpu, " on ", r.node, ": ", why);
  }
  return "";
}

}  // namespace

namespace {

// Whether an active job has anything new this pass: a node lost, draining or reclaimed, a GPU
// unhealthy or at risk, or a task report that differs from what its status already says. Most
// running jobs have nothing new; they are skipped without copying anything.
bool HasNews(const Pass& pass, const JobStatus& old, const std::string& uid) {
  for (const PlacedReplica& r : old.placement) {
    if (!pass.ready.contains(r.node) || pass.draining.contains(r.node) ||
        pass.reclaiming.contains(r.node) ||
        !GpuProblem(pass.ready, pass.reports, pass.at_risk, r).empty() ||
        !GpuRisk(pass.at_risk, r).empty()) {
      return true;
    }
    const api::TaskReport* t = ReportOf(pass.reports, r, uid, old.attempt);
    if (t == nullptr) continue;
    auto known = old.tasks.find(r.name);
    if (known == old.tasks.end() || !known->second.starts_with(api::TaskStateName(t->state)) ||
        t->state != api::TaskState::kRunning || t->checkpoint_ms > old.last_checkpoint_ms ||
        t->replicated_ms > old.last_replicated_ms) {
      return true;
    }
  }
  return old.phase == api::JobPhase::kScheduled && !old.tasks.empty();
}

// The GPU energy the replicas' tasks report for their current attempt, summed.
double ReportedEnergy(const std::vector<ReplicaView>& views) {
  double joules = 0;
  for (const ReplicaView& v : views) {
    if (v.report != nullptr) joules += v.report->energy_j;
  }
  return joules;
}

JobStatus WithAttemptEnergy(const JobStatus& s, double joules) {
  JobStatus out = s;
  out.attempt_energy_j = joules;
  return out;
}

// What NextStatus observes of each replica this pass.
std::vector<ReplicaView> ViewsOf(const Pass& pass, const JobStatus& old, const std::string& uid) {
  std::vector<ReplicaView> views;
  views.reserve(old.placement.size());
  for (const PlacedReplica& r : old.placement) {
    ReplicaView& v = views.emplace_back();
    v.replica = &r;
    v.node_ready = pass.ready.contains(r.node);
    if (!v.node_ready) continue;
    v.draining = pass.draining.contains(r.node);
    if (auto rc = pass.reclaiming.find(r.node); rc != pass.reclaiming.end()) {
      v.reclaim_at_ms = rc->second;
    }
    v.gpu_problem = GpuProblem(pass.ready, pass.reports, pass.at_risk, r);
    v.gpu_risk = GpuRisk(pass.at_risk, r);
    v.report = ReportOf(pass.reports, r, uid, old.attempt);
  }
  return views;
}

}  // namespace

// One job's write in the jobs stage: its new status (and events, assignment deletions), or its
// deletion once a deleted job's tasks stopped.
struct Controller::JobWrite {
  std::vector<store::Op> ops;
  std::string key;
  CachedObject* obj;
  std::shared_ptr<JobEntry> entry;  // the new cache entry; null for a deletion
  Json doc;
  std::string deleted_ns, deleted_name;    // for a deletion
  std::optional<api::AttemptUsage> usage;  // the ended attempt's record, written with it
};

std::optional<Controller::JobWrite> Controller::StepJob(Pass& pass, const std::string& key,
                                                        CachedObject& obj) {
  const int64_t now = pass.now_ms;
  const JobEntry& entry = JobOf(obj);
  const JobStatus& old = entry.status;
  if (old.Terminal() && !old.delete_requested) return std::nullopt;
  // A Pending job is the scheduler's.
  if (old.phase == api::JobPhase::kPending && !old.cancel_requested) return std::nullopt;
  const std::string &ns = entry.ns, &name = entry.name, &uid = entry.uid;
  // An interactive job is looked at every pass: its idleness and its maximum duration are news
  // that no state change announces (such jobs are few, and an unchanged step writes nothing).
  const bool interactive = entry.job && entry.job->spec.interactive.has_value();
  if (old.Active() && !old.cancel_requested && !interactive && !HasNews(pass, old, uid)) {
    return std::nullopt;
  }
  std::vector<ReplicaView> views = ViewsOf(pass, old, uid);
  // The attempt's energy as its tasks report it now (kept with this write; settled into
  // energy_j when the attempt ends).
  const double energy = ReportedEnergy(views);
  JobStep step = energy > old.attempt_energy_j
                     ? NextStatus(WithAttemptEnergy(old, energy), views, RulesOf(entry.job), now)
                     : NextStatus(old, views, RulesOf(entry.job), now);
  JobStatus& s = step.status;
  std::vector<store::Op> ops;
  if (step.delete_assignments) {
    for (const PlacedReplica& r : old.placement) {
      ops.push_back({store::Op::Kind::kDelete, AssignmentKey(r.node, r.name), "", std::nullopt});
    }
  }
  pass.settled += step.settled;
  AddCostDelta(pass, entry, old, s);
  if (step.recovery_seconds) pass.recovery_seconds.push_back(*step.recovery_seconds);
  // The attempt that ended is metered: its usage record is written with the status that
  // settled it, and outlives the job.
  std::optional<api::AttemptUsage> usage = EndedAttemptUsage(IdentityOf(entry), old, s, now);
  if (usage) {
    ops.push_back({store::Op::Kind::kPut, api::UsageKey(*usage), api::UsageToJson(*usage).dump(),
                   std::nullopt});
  }
  if (s.Terminal() && s.delete_requested) {
    ops.push_back({store::Op::Kind::kDelete, key, "", obj.mod_revision});
    for (const std::string& k : EventKeysOf(store_, ns, name)) {
      ops.push_back({store::Op::Kind::kDelete, k, "", std::nullopt});
    }
    return JobWrite{std::move(ops), key, &obj, nullptr, Json(), ns, name, std::move(usage)};
  }
  if (s == old) return std::nullopt;
  Json doc = obj.doc;
  JobStatusToJson(s, doc);
  ops.push_back({store::Op::Kind::kPut, key, doc.dump(2), obj.mod_revision});
  for (const JobEvent& e : step.events) {
    ops.push_back(MakeEventOp(ns, name, uid, e, now, ++event_seq_));
  }
  auto next = std::make_shared<JobEntry>(entry);
  next->status = s;
  if (next->job) next->view = ViewOf(s, next->job->metadata.creation_unix_seconds * 1000);
  next->request.reset();
  return JobWrite{std::move(ops), key, &obj, std::move(next),
                  std::move(doc), "",  "",   std::move(usage)};
}

bool Controller::StepJobs(Pass& pass) {
  std::vector<JobWrite> writes;
  for (auto& [key, obj] : jobs_.mutable_objects()) {
    if (std::optional<JobWrite> w = StepJob(pass, key, obj)) writes.push_back(*std::move(w));
  }
  std::vector<std::vector<store::Op>> txns;
  txns.reserve(writes.size());
  for (JobWrite& w : writes) txns.push_back(std::move(w.ops));
  std::vector<absl::StatusOr<int64_t>> results = TxnAll(txns);
  bool all_written = true;
  for (size_t i = 0; i < writes.size(); ++i) {
    JobWrite& w = writes[i];
    if (!results[i].ok()) {
      all_written = false;
      if (!absl::IsAborted(results[i].status()) && !absl::IsNotFound(results[i].status())) {
        log::Error("server", "job status not written",
                   {{"job", w.key}, {"error", results[i].status().message()}});
      }
      continue;
    }
    if (w.usage) budgets_->Recorded(*w.usage);
    if (w.entry == nullptr) {  // deleted: gone from the cache's view too, as the store has it
      jobs_.mutable_objects().erase(w.key);
      if (options_.on_job_deleted) options_.on_job_deleted(w.deleted_ns, w.deleted_name);
      continue;
    }
    // Keep the cache's view current for the scheduling stage of this pass (budgets included:
    // an attempt settled here is in the ledger, not also counted as running).
    w.obj->doc = std::move(w.doc);
    w.obj->mod_revision = *results[i];
    w.obj->derived = std::move(w.entry);
  }
  return all_written;
}

std::vector<absl::StatusOr<int64_t>> Controller::TxnAll(
    const std::vector<std::vector<store::Op>>& txns) {
  // Concurrent writers share the store's group commit: one fsync for many transactions
  // instead of one each.
  std::vector<absl::StatusOr<int64_t>> results(txns.size(), absl::UnknownError("not run"));
  auto count = [&] {
    for (const absl::StatusOr<int64_t>& r : results) own_txns_ += r.ok() ? 1 : 0;
  };
  if (txns.size() <= 1) {
    for (size_t i = 0; i < txns.size(); ++i) results[i] = store_.Txn(txns[i]);
    count();
    return results;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < txns.size();) results[i] = store_.Txn(txns[i]);
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min<size_t>(16, txns.size()); ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  count();
  return results;
}

// --- metrics ---------------------------------------------------------------------------------

std::string ClusterSummaryShape(const ClusterMetrics& m) {
  Json shape{m.nodes_ready,   m.nodes_not_ready, m.gpus_total_by_type, m.gpus_allocated_by_type,
             m.jobs_by_phase, m.recovery_count};
  return shape.dump();
}

std::string ClusterSummaryJson(const ClusterMetrics& m, int64_t as_of_ms) {
  GpuSeconds jobs = m.job_gpu_seconds;
  for (const auto& [job, g] : m.live_jobs) jobs += g;
  Json gpus = Json::object();
  for (const auto& [type, total] : m.gpus_total_by_type) {
    auto a = m.gpus_allocated_by_type.find(type);
    gpus[type] = Json{{"total", total},
                      {"allocated", a == m.gpus_allocated_by_type.end() ? 0.0 : a->second}};
  }
  Json j{{"kind", "ClusterSummary"},
         {"nodes", {{"ready", m.nodes_ready}, {"notReady", m.nodes_not_ready}}},
         {"gpus", gpus},
         {"availability", m.availability()},
         {"gpuSeconds",
          {{"registered", m.gpu_seconds_registered}, {"available", m.gpu_seconds_available}}},
         {"jobGpuSeconds",
          {{"allocated", jobs.allocated},
           {"productive", jobs.productive},
           {"lost", jobs.lost},
           {"goodput", jobs.goodput()}}},
         {"recoveries",
          {{"count", m.recovery_count},
           {"meanSeconds", m.recovery_count > 0 ? m.recovery_sum / m.recovery_count : 0.0},
           {"maxSeconds", m.recovery_max}}},
         {"jobs", m.jobs_by_phase},
         {"asOfMs", as_of_ms}};
  return j.dump(2);
}

namespace {

void RenderJobAndCapacityGauges(const ClusterMetrics& m, PromText& p) {
  p.Family("gpucloud_jobs", "gauge", "Jobs by phase.");
  for (const char* phase : {"Pending", "Scheduled", "Running", "Preempting", "Restarting",
                            "Cancelling", "Stopping", "Succeeded", "Failed", "Cancelled"}) {
    auto it = m.jobs_by_phase.find(phase);
    p.Sample({{"phase", phase}}, it == m.jobs_by_phase.end() ? 0 : it->second);
  }
  p.Family("gpucloud_pending_jobs", "gauge", "Pending jobs per queue.");
  for (const auto& [q, n] : m.pending_by_queue) p.Sample({{"queue", q}}, n);
  p.Family("gpucloud_gpus", "gauge", "GPUs on Ready nodes by type and state.");
  for (const auto& [type, total] : m.gpus_total_by_type) {
    auto a = m.gpus_allocated_by_type.find(type);
    double allocated = a == m.gpus_allocated_by_type.end() ? 0 : a->second;
    p.Sample({{"type", type}, {"state", "allocated"}}, allocated);
    p.Sample({{"type", type}, {"state", "free"}}, total - allocated);
  }
  p.Family("gpucloud_nodes", "gauge", "Nodes by readiness.");
  p.Sample({{"ready", "true"}}, m.nodes_ready).Sample({{"ready", "false"}}, m.nodes_not_ready);
  p.Family("gpucloud_scheduler_deferred_jobs", "gauge",
           "Pending jobs the last cycle did not look at (their namespace had used its per-cycle "
           "budget).")
      .Sample(m.jobs_deferred);
  p.Family("gpucloud_controller_pass_seconds", "gauge", "Duration of the last controller pass.")
      .Sample(m.last_pass_seconds);
  p.Family("gpucloud_controller_stage_seconds", "gauge",
           "Duration of each stage of the last pass.");
  for (const auto& [stage, secs] : m.stage_seconds) p.Sample({{"stage", stage}}, secs);
}

void RenderLatencies(const ClusterMetrics& m, PromText& p) {
  p.Family("gpucloud_scheduling_latency_seconds", "histogram",
           "Submission to binding of first attempts.");
  std::vector<double> counts(m.bind_latency_counts.begin(), m.bind_latency_counts.end());
  if (counts.size() > m.bind_latency_bounds.size()) counts.resize(m.bind_latency_bounds.size());
  p.Histogram({}, m.bind_latency_bounds, counts, m.bind_latency_sum,
              static_cast<double>(m.bind_latency_count));
  p.Family("gpucloud_job_recovery_seconds", "summary",
           "From a job's interruption (failure, lost node or GPU, drain, preemption) to running "
           "again.");
  p.Sample({}, m.recovery_sum, "_sum").Sample({}, m.recovery_count, "_count");
  p.Family("gpucloud_job_recovery_seconds_max", "gauge",
           "The longest recovery since the server started.")
      .Sample(m.recovery_max);
}

void RenderCost(const ClusterMetrics& m, PromText& p) {
  p.Family("gpucloud_cost_usd_total", "counter",
           "What ended job attempts cost, from binding to their end, at their nodes' pools' "
           "prices (GPU equivalents: fractions and MIG slices by their share of the GPU).");
  for (const auto& [k, usd] : m.cost_usd) {
    p.Sample({{"namespace", k[0]}, {"queue", k[1]}, {"class", k[2]}}, usd);
  }
  p.Family("gpucloud_idle_cost_usd_total", "counter",
           "What Ready nodes' GPUs that no job held cost, by pool (\"\" for nodes in none).");
  for (const auto& [pool, usd] : m.idle_cost_usd) p.Sample({{"pool", pool}}, usd);
  p.Family("gpucloud_budget_usd", "gauge", "A namespace's monthly budget (Namespace spec.budget).");
  for (const auto& [ns, b] : m.budgets) p.Sample({{"namespace", ns}}, b.first);
  p.Family("gpucloud_budget_spent_usd", "gauge",
           "What a namespace with a budget has spent this month (UTC), running jobs included.");
  for (const auto& [ns, b] : m.budgets) p.Sample({{"namespace", ns}}, b.second);
  p.Family("gpucloud_budget_alerts_total", "counter",
           "Budget alerts raised, by namespace and threshold (percent of the budget).");
  for (const auto& [k, n] : m.budget_alerts) {
    p.Sample({{"namespace", k.first}, {"percent", std::to_string(k.second)}},
             static_cast<double>(n));
  }
}

void RenderGpuTime(const ClusterMetrics& m, PromText& p) {
  p.Family("gpucloud_job_gpu_seconds_total", "counter",
           "GPU time of ended job attempts: allocated, productive (work kept) and lost (work "
           "redone after an interruption).");
  p.Sample({{"kind", "allocated"}}, m.job_gpu_seconds.allocated);
  p.Sample({{"kind", "productive"}}, m.job_gpu_seconds.productive);
  p.Sample({{"kind", "lost"}}, m.job_gpu_seconds.lost);
  // job_name, not job: Prometheus' own `job` (the scrape job) would rename ours exported_job.
  auto job_labels = [](const std::string& key) {
    size_t slash = key.find('/');
    return PromLabels{{"namespace", key.substr(0, slash)}, {"job_name", key.substr(slash + 1)}};
  };
  p.Family("gpucloud_job_goodput_ratio", "gauge",
           "Productive over allocated GPU time of each job holding GPUs, over all its attempts.");
  for (const auto& [job, g] : m.live_jobs) p.Sample(job_labels(job), g.goodput());
  p.Family("gpucloud_job_work_lost_gpu_seconds", "gauge",
           "GPU time of work redone after interruptions, per job holding GPUs.");
  for (const auto& [job, g] : m.live_jobs) p.Sample(job_labels(job), g.lost);
  p.Family("gpucloud_gpu_seconds_total", "counter",
           "GPU time of registered nodes: all, and available (on Ready nodes, GPU healthy).");
  p.Sample({{"state", "registered"}}, m.gpu_seconds_registered);
  p.Sample({{"state", "available"}}, m.gpu_seconds_available);
  p.Family("gpucloud_cluster_availability", "gauge",
           "Available over registered GPU time since the server started.")
      .Sample(m.availability());
}

}  // namespace

std::string RenderClusterMetrics(const ClusterMetrics& m) {
  PromText p;
  RenderJobAndCapacityGauges(m, p);
  RenderLatencies(m, p);
  RenderGpuTime(m, p);
  RenderCost(m, p);
  return p.Take();
}

}  // namespace gpucloud::server
