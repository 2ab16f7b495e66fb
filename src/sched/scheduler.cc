#include "sched/scheduler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/parse.h"
#include "core/text.h"
#include "sched/plugins/scores.h"
#include "sched/registry.h"

namespace gpucloud::sched {

namespace {

int64_t RequestedMilliGpus(const JobRequest& job) {
  int64_t total = 0;
  for (const TaskRequest& t : job.tasks) {
    const GpuRequest& g = t.per_replica.gpu;
    int64_t per = g.mode == GpuMode::kShared ? g.fraction.raw()
                  : g.mode == GpuMode::kNone ? 0
                                             : int64_t{g.count} * kMilliPerUnit;
    total += per * t.replicas;
  }
  return total;
}

}  // namespace

int64_t QueueOrderKey(const OrderContext& order, const PendingJob& p) {
  switch (order.ordering) {
    case QueueOrdering::kSjf:
      if (!p.runtime_estimate_s) return INT64_MAX;
      return *p.runtime_estimate_s * std::max<int64_t>(RequestedMilliGpus(p.request), 1);
    case QueueOrdering::kLas:
      return p.attained_gpu_ms;
    case QueueOrdering::kDlas:
      return LasBandOf(order.las != nullptr ? *order.las : LasConfig{}, p, order.now_ms);
    case QueueOrdering::kFifo:
      break;
  }
  return 0;
}

namespace {

// GPU equivalents (milli-GPUs) that `a` holds.
int64_t HeldMilliGpus(const ClusterState& state, const Allocation& a) {
  int64_t total = 0;
  for (const ReplicaPlacement& r : a.replicas) {
    for (const GpuAssignment& g : r.gpus) total += state.ShareOf(r.node, g).raw();
  }
  return total;
}

}  // namespace

bool QueueSortLess(const OrderContext& order, const PendingJob& a, const PendingJob& b) {
  return std::forward_as_tuple(-int64_t{a.priority}, QueueOrderKey(order, a), a.submit_ms,
                               a.request.key) < std::forward_as_tuple(-int64_t{b.priority},
                                                                      QueueOrderKey(order, b),
                                                                      b.submit_ms, b.request.key);
}

int32_t LasBand(const LasConfig& las, int64_t service_gpu_ms) {
  int32_t band = 0;
  for (int64_t t : las.thresholds_gpu_s) {
    if (service_gpu_ms < t * 1000) break;
    ++band;
  }
  return band;
}

int64_t LasPromotionMs(const LasConfig& las, const PendingJob& p) {
  if (p.attained_gpu_ms <= 0 || las.starvation_factor <= 0) return INT64_MAX;
  // Wall time its service took: GPU x ms over its GPUs (milli-GPUs / 1000).
  const int64_t milli = std::max<int64_t>(RequestedMilliGpus(p.request), 1);
  const double served_ms = static_cast<double>(p.attained_gpu_ms) * 1000 / milli;
  const int64_t since = p.waiting_since_ms > 0 ? p.waiting_since_ms : p.submit_ms;
  return since + std::llround(std::ceil(las.starvation_factor * served_ms));
}

int32_t LasBandOf(const LasConfig& las, const PendingJob& p, int64_t now_ms) {
  if (p.attained_gpu_ms <= 0 || now_ms >= LasPromotionMs(las, p)) return 0;
  return LasBand(las, p.attained_gpu_ms);
}

int32_t LasBandOf(const LasConfig& las, const Allocation& a, int64_t milli_gpus, int64_t now_ms) {
  return LasBand(
      las, a.las_service_gpu_ms + milli_gpus * std::max<int64_t>(0, now_ms - a.start_ms) / 1000);
}

int64_t LasNextBandMs(const LasConfig& las, const Allocation& a, int64_t milli_gpus,
                      int64_t now_ms) {
  if (milli_gpus <= 0) return INT64_MAX;
  const int32_t band = LasBandOf(las, a, milli_gpus, now_ms);
  if (band >= static_cast<int32_t>(las.thresholds_gpu_s.size())) return INT64_MAX;
  // The first t with las_service + milli x (t - start) / 1000 >= the threshold (GPU x ms).
  const int64_t missing = las.thresholds_gpu_s[band] * 1000 - a.las_service_gpu_ms;
  return a.start_ms + (missing * 1000 + milli_gpus - 1) / milli_gpus;
}

namespace {

std::string AboutMinutes(int64_t from_ms, int64_t to_ms) {
  return Cat("about ", std::max<int64_t>(1, (to_ms - from_ms + 59'999) / 60'000), " min");
}

bool Touches(const Allocation& a, const std::set<NodeIndex>& nodes) {
  for (const ReplicaPlacement& r : a.replicas) {
    if (nodes.contains(r.node)) return true;
  }
  return false;
}

// Commits placeholders that hold every free whole GPU, CPU and memory of `nodes`; returns their
// keys, to be released.
std::vector<std::string> HoldNodes(ClusterState& state, const std::set<NodeIndex>& nodes) {
  std::vector<std::string> keys;
  for (NodeIndex n : nodes) {
    ReplicaRequest all{.gpu = {.mode = GpuMode::kWhole, .count = state.FreeWholeGpus(n)}};
    if (all.gpu.count == 0) all.gpu = {};
    std::optional<std::vector<GpuAssignment>> gpus = state.FitReplica(n, all);
    ReplicaPlacement p{.task = "hold",
                       .node = n,
                       .gpus = gpus.value_or(std::vector<GpuAssignment>{}),
                       .cpu = state.FreeCpu(n),
                       .memory = state.FreeMemory(n)};
    std::string key = Cat("#hold#", n);
    Allocation hold{key, {p}};
    hold.placeholder = true;
    if (state.Commit(hold).ok()) keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace

PlacementResult Scheduler::PlaceRespectingReservations(ClusterState& state, const PendingJob& p,
                                                       const Reservations& reservations,
                                                       int64_t now_ms) const {
  PlacementResult r = placer_.PlaceNow(state, p.request);
  if (!r.allocation || (reservations.heads.empty() && reservations.preemptors.empty())) return r;
  std::set<NodeIndex> blocked;
  const Reservation* first = nullptr;
  auto block = [&](const Reservation& res) {
    bool ends_before =
        p.runtime_estimate_s && now_ms + *p.runtime_estimate_s * 1000 <= res.start_ms;
    if (ends_before) return;
    blocked.insert(res.nodes.begin(), res.nodes.end());
    if (first == nullptr || res.start_ms < first->start_ms) first = &res;
  };
  for (const auto& [queue, res] : reservations.heads) block(res);
  for (const Reservation& res : reservations.preemptors) block(res);
  if (blocked.empty() || !Touches(*r.allocation, blocked)) return r;
  std::vector<std::string> holds = HoldNodes(state, blocked);
  PlacementResult again = placer_.PlaceNow(state, p.request);
  for (const std::string& key : holds) (void)state.Release(key);
  // The holds cover free whole GPUs, CPU and memory; a job that still lands on a reserved node
  // (on a shared or MIG GPU) is refused too, so reserved nodes are really left alone.
  if (again.allocation && !Touches(*again.allocation, blocked)) return again;
  return {std::nullopt,
          Cat("waiting: starting now would delay the reservation of ", first->job,
              " (expected to start in ", AboutMinutes(now_ms, first->start_ms), ")"),
          /*reservation=*/true};
}

namespace {

// What a preemptor's candidates are drawn from, in summary: with it, a job that no running job
// could make room for (the usual case in a busy cluster of equals) is answered without looking
// at every allocation. Built at a cycle's first preemption search, then kept up to date with the
// cycle's binds (the only allocations a cycle adds for good). Placeholders are left out.
struct PossibleVictims {
  bool terminating = false;                        // some job is stopping already
  std::map<std::string, int32_t> lowest_priority;  // by queue
  std::optional<int32_t> lowest_preemptible_priority;
  // Ordering dlas: the latest band of a running job, by queue and over all (-1: none).
  std::map<std::string, int32_t> latest_band;
  int32_t latest_band_any = -1;

  // `band`: a's dlas band at the cycle's time, or -1 when no lane orders by dlas.
  void Add(const Allocation& a, int32_t band) {
    if (a.placeholder) return;
    terminating = terminating || a.terminating;
    if (band >= 0 && !a.terminating) {
      auto [b, fresh] = latest_band.emplace(a.queue, band);
      if (!fresh) b->second = std::max(b->second, band);
      latest_band_any = std::max(latest_band_any, band);
    }
    auto [it, added] = lowest_priority.emplace(a.queue, a.priority);
    if (!added) it->second = std::min(it->second, a.priority);
    if (a.preemptible) {
      lowest_preemptible_priority =
          std::min(lowest_preemptible_priority.value_or(a.priority), a.priority);
    }
  }
  // False only when no allocation meets any of Preempt's reasons for `p` (`band`: p's dlas
  // band, -1 when its lane does not order by dlas; `any_queue`: dlas victims may be of any
  // queue, as with fair share off).
  bool Any(const PendingJob& p, bool may_reclaim, int32_t band, bool any_queue) const {
    if (terminating) return true;
    if (band >= 0) {
      auto b = latest_band.find(p.queue);
      if (any_queue ? latest_band_any > band : b != latest_band.end() && b->second > band) {
        return true;
      }
    }
    auto own = lowest_priority.find(p.queue);
    if (own != lowest_priority.end() && own->second < p.priority) return true;
    if (!p.preemptible && lowest_preemptible_priority &&
        *lowest_preemptible_priority <= p.priority) {
      return true;
    }
    return may_reclaim && lowest_priority.size() > (own != lowest_priority.end() ? 1u : 0u);
  }
};

// The memo's key: what a job's placement and preemption depend on (Decide), with the runtime
// estimate only for answers that a reservation decided. Views into the cycle's PendingJobs,
// which outlive it: a lookup builds no string.
struct MemoKey {
  uint32_t queue = 0;  // PendingJob::queue_id
  uint32_t shape = 0;  // PendingJob::shape_id
  int32_t priority = 0;
  bool preemptible = false;
  int32_t band = -1;                  // dlas: whom it may preempt depends on its band
  std::optional<int64_t> estimate_s;  // set: the key with the estimate (-1 for none)
  bool operator==(const MemoKey&) const = default;
};
struct MemoKeyHash {
  size_t operator()(const MemoKey& k) const {
    size_t h = std::hash<uint64_t>()(uint64_t{k.shape} << 32 | k.queue);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    mix(std::hash<int64_t>()(k.priority));
    mix(k.preemptible);
    mix(std::hash<int32_t>()(k.band));
    mix(k.estimate_s ? std::hash<int64_t>()(*k.estimate_s) : 0x51ed27);
    return h;
  }
};

}  // namespace

struct Scheduler::CycleState {
  QueueQuota quota;
  std::optional<PossibleVictims> possible_victims;  // see PossibleVictims
  // Within one cycle the cluster only fills up and reservations are only added, so a job that
  // did not fit will not fit later in the cycle either: same queue, shape and estimate get the
  // same decision without another search.
  std::unordered_map<MemoKey, Decision, MemoKeyHash> unfit;
  Reservations reservations;
  std::set<std::string> victims;      // preempted in this cycle
  std::vector<Allocation> nominated;  // where this cycle's preemptors will run
};

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::FromConfig(
    const SchedulerConfig& config, std::map<std::string, QueueSpec> queues,
    const GpuCatalog& catalog) {
  absl::StatusOr<std::vector<std::unique_ptr<FilterPlugin>>> filters = MakeFilters(config.filters);
  if (!filters.ok()) return filters.status();
  absl::StatusOr<std::vector<WeightedScore>> scores = MakeScorePlugins(config.scores);
  if (!scores.ok()) return scores.status();
  SchedulerOptions o;
  o.ordering = config.ordering;
  o.backfill = config.backfill;
  o.estimate_start_times = config.estimate_start_times;
  o.queues = std::move(queues);
  o.fair_share = config.fair_share;
  o.fair_share_window_hours = static_cast<double>(config.fair_share_window_s) / 3600;
  o.preemption = config.preemption;
  o.preemption_grace_ms = config.preemption_grace_s * 1000;
  o.namespace_budget.max_waiting = config.namespace_budget.max_waiting;
  o.namespace_budget.max_searches = config.namespace_budget.max_searches;
  o.las = config.las;
  auto s =
      std::make_unique<Scheduler>(std::move(*filters), catalog, std::move(o), std::move(*scores));
  // At most one Fragmentation score (a plugin listed twice is refused); weight 0 leaves it out.
  bool defaulted = false;
  for (const ScorePluginConfig& c : config.scores) {
    defaulted = defaulted || (c.name == "Fragmentation" && c.workload.empty());
  }
  for (size_t i = 0; defaulted && i < s->scores_.size(); ++i) {
    if (s->scores_[i].plugin->Name() == "Fragmentation") s->default_workload_scores_.push_back(i);
  }
  return s;
}

void Scheduler::SetWorkload(const std::vector<WorkloadShare>& mix) {
  for (size_t i : default_workload_scores_) scores_[i].plugin = NewFragmentationScore(mix);
  later_starts_.clear();  // placements (a reservation's nodes) may score differently now
}

std::vector<Decision> Scheduler::Schedule(ClusterState& state,
                                          const std::vector<PendingJob>& pending, int64_t now_ms,
                                          CycleStats* stats) const {
  std::vector<const PendingJob*> jobs;
  jobs.reserve(pending.size());
  for (const PendingJob& p : pending) jobs.push_back(&p);
  return Schedule(state, jobs, now_ms, stats);
}

std::vector<Decision> Scheduler::Schedule(ClusterState& state,
                                          const std::vector<const PendingJob*>& pending,
                                          int64_t now_ms, CycleStats* stats) const {
  Intern(pending);
  CycleState cycle{
      QueueQuota(options_.queues, state, &options_.history, options_.fair_share_window_hours)};
  NamespaceBudget budget(options_.namespace_budget);
  CycleStats counted;
  std::vector<Decision> decisions;
  // Takes the lane's next job that its namespace's budget admits and decides it; false when the
  // lane has none left.
  auto decide_next = [&](Lane& lane) {
    while (!lane.empty()) {
      const PendingJob& p = lane.Next();
      std::string_view ns = NamespaceOfKey(p.request.key);
      if (!budget.Admits(ns)) {
        counted.deferred += static_cast<int64_t>(lane.DropNamespaceOfNext());
        continue;
      }
      lane.Pop();
      JobOutcome outcome = Decide(state, p, now_ms, cycle, &decisions);
      budget.Record(ns, outcome);
      ++counted.decided;
      if (outcome == JobOutcome::kSearched) ++counted.searched;
      return true;
    }
    return false;
  };

  // With preemption on, spot jobs come after every other waiting job: one bound first into
  // capacity a non-spot job needs would be preempted by it at once (in the same cycle, or the
  // next), and, taking the capacity again each time it is freed, would keep that job waiting for
  // ever (the replay test's scripted day found it).
  const bool split =
      options_.preemption && std::any_of(pending.begin(), pending.end(),
                                         [](const PendingJob* p) { return p->preemptible; });
  if (!split) {
    DecideAll(pending, now_ms, cycle, decisions, decide_next);
  } else {
    std::vector<const PendingJob*> first, spot;
    for (const PendingJob* p : pending) (p->preemptible ? spot : first).push_back(p);
    for (const std::vector<const PendingJob*>* part : {&first, &spot}) {
      if (!part->empty()) DecideAll(*part, now_ms, cycle, decisions, decide_next);
    }
  }
  if (stats != nullptr) {
    for (const auto& [queue, res] : cycle.reservations.heads) {
      counted.reserved_nodes.insert(counted.reserved_nodes.end(), res.nodes.begin(),
                                    res.nodes.end());
    }
    for (const Reservation& res : cycle.reservations.preemptors) {
      counted.reserved_nodes.insert(counted.reserved_nodes.end(), res.nodes.begin(),
                                    res.nodes.end());
    }
    *stats = std::move(counted);
  }
  return decisions;
}

template <typename DecideNext>
void Scheduler::DecideAll(const std::vector<const PendingJob*>& pending, int64_t now_ms,
                          CycleState& cycle, const std::vector<Decision>& decisions,
                          DecideNext& decide_next) const {
  if (!options_.fair_share) {
    Lane lane(OrderContext{options_.ordering, &options_.las, now_ms}, pending);
    while (decide_next(lane)) {
    }
    return;
  }

  // Fair share: per queue, jobs in the queue's own order; then, job by job, the queue below its
  // guarantee, else the one with the smallest weighted dominant share, places its next job.
  // Grouped by queue through the jobs' queue ids (Intern), then in name order.
  std::vector<int32_t> group_of(interned_.queues.size(), -1);
  std::vector<std::pair<const std::string*, std::vector<const PendingJob*>>> groups;
  for (const PendingJob* p : pending) {
    int32_t& g = group_of[p->queue_id];
    if (g < 0) {
      g = static_cast<int32_t>(groups.size());
      groups.push_back({&p->queue, {}});
    }
    groups[g].second.push_back(p);
  }
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return *a.first < *b.first; });
  std::vector<const std::string*> names;
  std::vector<Lane> lanes;
  lanes.reserve(groups.size());
  for (auto& [name, jobs] : groups) {
    names.push_back(name);
    lanes.emplace_back(OrderContext{OrderingOf(*name), &options_.las, now_ms}, jobs);
  }
  std::vector<std::tuple<int, double>> keys(lanes.size());
  auto refresh_keys = [&] {
    for (size_t i = 0; i < lanes.size(); ++i) {
      keys[i] = {cycle.quota.BelowGuarantee(*names[i]) ? 0 : 1,
                 cycle.quota.DominantShare(*names[i])};
    }
  };
  refresh_keys();
  for (;;) {
    size_t pick = lanes.size();
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (lanes[i].empty()) continue;
      if (pick == lanes.size() || keys[i] < keys[pick]) pick = i;  // ties: queue name order
    }
    if (pick == lanes.size()) break;
    size_t before = decisions.size();
    if (!decide_next(lanes[pick])) continue;  // the lane's namespaces were all out of budget
    // A bind or a preemption changes shares; refresh only then (cheap either way). A wait the
    // caller knew already makes no decision.
    const size_t made = decisions.size() - before;
    if (made > 1 || (made == 1 && decisions.back().kind == DecisionKind::kBind)) refresh_keys();
  }
}

QueueOrdering Scheduler::OrderingOf(const std::string& queue) const {
  if (!options_.fair_share) return options_.ordering;
  auto spec = options_.queues.find(queue);
  return spec != options_.queues.end() ? spec->second.ordering : options_.ordering;
}

bool Scheduler::DlasUsed(const SchedulerOptions& o) {
  if (o.ordering == QueueOrdering::kDlas) return true;
  if (!o.fair_share) return false;
  for (const auto& [name, spec] : o.queues) {
    if (spec.ordering == QueueOrdering::kDlas) return true;
  }
  return false;
}

int32_t Scheduler::PreemptorBand(const PendingJob& p, int64_t now_ms) const {
  if (!dlas_used_ || OrderingOf(p.queue) != QueueOrdering::kDlas) return -1;
  return LasBandOf(options_.las, p, now_ms);
}

int32_t Scheduler::RunningBand(const ClusterState& state, const Allocation& a,
                               int64_t now_ms) const {
  if (!dlas_used_ || a.placeholder) return -1;
  return LasBandOf(options_.las, a, HeldMilliGpus(state, a), now_ms);
}

ClusterState& Scheduler::EmptyTwin(const ClusterState& state) const {
  // Same node set as last time (by identity, by identity but for GPU health, which the twin
  // resets, or else by value): reuse it.
  if (empty_ && empty_source_id_ != state.nodes_id() &&
      empty_source_shape_id_ != state.shape_id() && empty_source_ != state.nodes()) {
    empty_.reset();
    never_fits_.clear();
  }
  if (!empty_) {
    empty_source_ = state.nodes();
    empty_.emplace(GangPlacer::EmptyCluster(state.nodes(), catalog_));
  }
  empty_source_id_ = state.nodes_id();
  empty_source_shape_id_ = state.shape_id();
  return *empty_;
}

const std::optional<std::string>& Scheduler::WhyNeverFits(const ClusterState& state,
                                                          const PendingJob& p) const {
  ClusterState& empty = EmptyTwin(state);
  std::string key = p.shape_key;  // made by Intern at the cycle's start
  for (const TaskRequest& t : p.request.tasks) key += Cat("|n", t.name);  // named in the answer
  if (auto it = never_fits_.find(key); it != never_fits_.end()) return it->second;
  constexpr size_t kMaxShapes = 4096;  // a bound, not a working set: shapes repeat
  if (never_fits_.size() >= kMaxShapes) never_fits_.clear();
  return never_fits_.emplace(std::move(key), placer_.WhyNeverFits(empty, p.request)).first->second;
}

void Scheduler::Intern(const std::vector<const PendingJob*>& pending) const {
  // Ids are handed out as numbers for good, so the table only grows: bounded by starting afresh
  // (a new generation) before a cycle when it holds this many names.
  constexpr size_t kMaxNames = size_t{1} << 16;
  static std::atomic<uint64_t> generations{0};
  InternTable& t = interned_;
  if (t.generation == 0 || t.queues.size() + t.shapes.size() > kMaxNames) {
    t = InternTable{.generation = ++generations};
  }
  for (const PendingJob* p : pending) {
    if (p->interned_by == t.generation && !p->shape_key.empty()) continue;
    if (p->shape_key.empty()) p->shape_key = ShapeKey(p->request);
    p->queue_id =
        t.queues.try_emplace(p->queue, static_cast<uint32_t>(t.queues.size())).first->second;
    p->shape_id =
        t.shapes.try_emplace(p->shape_key, static_cast<uint32_t>(t.shapes.size())).first->second;
    p->interned_by = t.generation;
  }
}

JobOutcome Scheduler::Decide(ClusterState& state, const PendingJob& p, int64_t now_ms,
                             CycleState& cycle, std::vector<Decision>* decisions) const {
  const JobRequest& job = p.request;  // its shape_key and ids: Intern, at the cycle's start
  // Jobs alike in everything placement and preemption look at get the same answer. The runtime
  // estimate matters only where a reservation is in the way, so only those answers carry it.
  const int32_t band = PreemptorBand(p, now_ms);
  MemoKey memo{p.queue_id, p.shape_id, p.priority, p.preemptible, band, std::nullopt};
  MemoKey memo_with_estimate = memo;
  memo_with_estimate.estimate_s = p.runtime_estimate_s.value_or(-1);
  auto it = cycle.unfit.find(memo);
  if (it == cycle.unfit.end()) it = cycle.unfit.find(memo_with_estimate);
  if (it != cycle.unfit.end()) {
    const Decision& same = it->second;
    const bool said = p.last_wait_reason != nullptr && p.last_wait_capacity_bound != nullptr &&
                      same.kind == DecisionKind::kWait && *p.last_wait_reason == same.reason &&
                      *p.last_wait_capacity_bound == same.capacity_bound;
    if (!said) {
      Decision d = same;
      d.job = job.key;
      decisions->push_back(std::move(d));
    }
    return JobOutcome::kRemembered;
  }
  PlacementResult r = PlaceRespectingReservations(state, p, cycle.reservations, now_ms);
  if (r.allocation) {
    Allocation& a = *r.allocation;
    if (p.runtime_estimate_s) a.expected_end_ms = now_ms + *p.runtime_estimate_s * 1000;
    a.queue = p.queue;
    a.priority = p.priority;
    a.preemptible = p.preemptible;
    a.start_ms = now_ms;
    a.checkpoint_interval_ms = p.checkpoint_interval_ms;
    // A job the starvation guard promoted starts its band afresh (Tiresias resets it).
    a.las_service_gpu_ms =
        band == 0 && LasBand(options_.las, p.attained_gpu_ms) > 0 ? 0 : p.attained_gpu_ms;
    std::optional<std::string> refused = cycle.quota.CheckMax(p.queue, a);
    if (!refused) refused = cycle.quota.CheckBorrow(p.queue, a);
    if (refused) {
      decisions->push_back(
          {DecisionKind::kWait, job.key, std::nullopt, Cat("waiting: ", std::move(*refused))});
      cycle.unfit.emplace(memo, decisions->back());
      return JobOutcome::kSearched;
    }
    if (absl::Status st = state.Commit(a); st.ok()) {
      cycle.quota.Add(p.queue, a);
      if (cycle.possible_victims) cycle.possible_victims->Add(a, RunningBand(state, a, now_ms));
      decisions->push_back({DecisionKind::kBind, job.key, std::move(r.allocation), ""});
      return JobOutcome::kBound;
    } else {
      r.reason = std::string(st.message());  // cannot happen: the placer checked it
    }
  }
  if (const std::optional<std::string>& never = WhyNeverFits(state, p)) {
    decisions->push_back({DecisionKind::kReject, job.key, std::nullopt, *never});
    cycle.unfit.emplace(memo, decisions->back());
    return JobOutcome::kSearched;
  }
  if (options_.preemption) {
    if (std::optional<Decision> wait = Preempt(state, p, now_ms, cycle, decisions)) {
      decisions->push_back(std::move(*wait));
      return JobOutcome::kSearched;  // not memoized: the next such job may find other victims
    }
  }
  bool by_reservation = r.reservation;
  Decision wait = Wait(state, p, now_ms, r.reason, cycle);
  decisions->push_back(wait);
  // What later jobs alike reuse: the reason without this job's own reservation (they are not
  // the queue's head; a head is the first to wait, and this one came first).
  Decision memo_decision{DecisionKind::kWait, "", std::nullopt, std::move(r.reason),
                         options_.estimate_start_times ? wait.expected_start_ms : std::nullopt};
  memo_decision.capacity_bound = true;
  if (options_.estimate_start_times && wait.expected_start_ms) {
    memo_decision.reason +=
        Cat("; expected to start in ", AboutMinutes(now_ms, *wait.expected_start_ms));
  }
  cycle.unfit.emplace(by_reservation ? memo_with_estimate : memo, std::move(memo_decision));
  return JobOutcome::kSearched;
}

std::optional<Decision> Scheduler::Preempt(ClusterState& state, const PendingJob& p, int64_t now_ms,
                                           CycleState& cycle,
                                           std::vector<Decision>* decisions) const {
  QueueQuota& quota = cycle.quota;
  const int64_t requested = RequestedMilliGpus(p.request);
  struct Candidate {
    const Allocation* a;
    int64_t cost;  // milli-GPU x ms of work since the last checkpoint; -1: already terminating
    std::string why;
  };
  std::vector<Candidate> candidates;
  // Reclaiming needs room under the preemptor's queue's guarantee; without it, no job's usage
  // need be looked at for that reason.
  const bool may_reclaim = quota.BelowGuarantee(p.queue);
  if (!cycle.possible_victims) {
    cycle.possible_victims.emplace();
    for (const auto& [key, a] : state.allocations()) {
      cycle.possible_victims->Add(a, RunningBand(state, a, now_ms));
    }
  }
  const int32_t band = PreemptorBand(p, now_ms);
  const bool any_queue = !options_.fair_share;
  if (!cycle.possible_victims->Any(p, may_reclaim, band, any_queue)) return std::nullopt;
  // Only jobs on nodes the preemptor may use can make room for it.
  const std::vector<bool> eligible = placer_.EligibleMask(state, p.request);
  auto on_eligible_node = [&](const Allocation& a) {
    for (const ReplicaPlacement& r : a.replicas) {
      if (eligible[r.node]) return true;
    }
    return false;
  };
  for (const auto& [key, a] : state.allocations()) {
    if (a.placeholder || cycle.victims.contains(key) || !on_eligible_node(a)) continue;
    std::string why;
    std::map<std::string, MilliGpu> usage;  // filled when needed
    if (a.terminating) {
      why = "already stopping";
    } else if (a.queue == p.queue && a.priority < p.priority) {
      why = Cat("priority ", a.priority, " < ", p.priority);
    } else if (a.preemptible && !p.preemptible && a.priority <= p.priority) {
      why = "a spot job";
    } else if (int32_t b =
                   band >= 0 && a.priority <= p.priority && (any_queue || a.queue == p.queue)
                       ? RunningBand(state, a, now_ms)
                       : -1;
               b > band) {
      why = Cat("it has attained more GPU-time: LAS band ", b, " after ", band);
    } else if (may_reclaim && a.queue != p.queue) {
      usage = quota.Usage(a);
      for (const auto& [type, amount] : usage) {
        MilliGpu room = quota.Guaranteed(p.queue, type) - quota.Used(p.queue, type);
        if (room.raw() >= requested && quota.Borrowing(a.queue, type)) {
          why = Cat("queue ", p.queue, " reclaims its guarantee of ",
                    FormatMilli(quota.Guaranteed(p.queue, type).raw()), " ",
                    type == kAnyGpuType ? std::string("GPUs") : Cat(type, " GPUs"),
                    " lent to queue ", a.queue);
          break;
        }
      }
    }
    if (why.empty()) continue;
    if (usage.empty()) usage = quota.Usage(a);
    const int64_t gpus = usage[std::string(kAnyGpuType)].raw();
    int64_t since = LastCheckpointMs(a, now_ms);
    int64_t cost = a.terminating ? -1 : gpus * std::max<int64_t>(0, now_ms - since);
    candidates.push_back({&a, cost, std::move(why)});
  }
  if (candidates.empty()) return std::nullopt;
  // Cheapest first; then lower priority, then the younger job, then key (deterministic).
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    return std::forward_as_tuple(x.cost, x.a->priority, -x.a->start_ms, x.a->job) <
           std::forward_as_tuple(y.cost, y.a->priority, -y.a->start_ms, y.a->job);
  });
  // Copies: the search releases and re-commits them.
  std::vector<Allocation> running;
  for (const Candidate& c : candidates) running.push_back(*c.a);

  // Look at the future this cycle has already decided: earlier victims gone, earlier
  // preemptors in their places.
  std::vector<Allocation> earlier_victims;
  for (const std::string& v : cycle.victims) {
    if (auto it = state.allocations().find(v); it != state.allocations().end()) {
      earlier_victims.push_back(it->second);
    }
  }
  for (const Allocation& v : earlier_victims) (void)state.Release(v.job);
  std::vector<std::string> nominated;
  for (const Allocation& n : cycle.nominated) {
    if (state.Commit(n).ok()) nominated.push_back(n.job);
  }

  std::vector<bool> out(running.size(), false);
  auto set_out = [&](size_t i, bool o) {
    if (out[i] == o) return;
    out[i] = o;
    (void)(o ? state.Release(running[i].job) : state.Commit(running[i]));
  };
  auto fits = [&]() { return placer_.PlaceNow(state, p.request).allocation; };
  size_t current = 0;  // running[0, current) are out
  auto prefix = [&](size_t k) {
    while (current < k) set_out(current++, true);
    while (current > k) set_out(--current, false);
  };
  // Galloping search for the shortest prefix of the cheapest-first list that makes room (a few
  // victims cost a few commits, not one per running job), then binary search inside the last
  // step.
  std::optional<Allocation> placed;
  size_t lo = 0, hi = 0;  // does not fit with lo out; fits with hi out
  for (size_t k = 1;; k = std::min(running.size(), 2 * k)) {
    prefix(k);
    if (fits()) {
      hi = k;
      break;
    }
    lo = k;
    if (k == running.size()) break;
  }
  if (hi > 0) {
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      prefix(mid);
      (fits() ? hi : lo) = mid;
    }
    prefix(hi);
    // Reprieve, most expensive first, every victim the job can do without.
    constexpr size_t kMaxReprieve = 64;
    for (size_t i = hi; i-- > 0 && hi - i <= kMaxReprieve;) {
      set_out(i, false);
      if (!fits()) set_out(i, true);
    }
    placed = fits();
  }
  const std::vector<bool> chosen = out;
  for (size_t i = 0; i < running.size(); ++i) set_out(i, false);
  for (auto it = nominated.rbegin(); it != nominated.rend(); ++it) (void)state.Release(*it);
  for (const Allocation& v : earlier_victims) (void)state.Commit(v);
  if (!placed) return std::nullopt;

  std::vector<std::string> stopping;
  for (size_t i = 0; i < running.size(); ++i) {
    if (!chosen[i]) continue;
    const Allocation& v = running[i];
    stopping.push_back(v.job);
    cycle.victims.insert(v.job);
    quota.Remove(v.queue, v);
    if (v.terminating) continue;
    decisions->push_back(
        {.kind = DecisionKind::kPreempt,
         .job = v.job,
         .reason = Cat("preempted by ", p.request.key, " (", candidates[i].why,
                       "); checkpoint and stop within ", options_.preemption_grace_ms / 1000, " s"),
         .preemptor = p.request.key,
         .grace_ms = options_.preemption_grace_ms});
  }
  placed->queue = p.queue;
  quota.Add(p.queue, *placed);
  int64_t start = now_ms + options_.preemption_grace_ms;
  Reservation res{p.request.key, start, {}};
  for (const ReplicaPlacement& r : placed->replicas) res.nodes.push_back(r.node);
  cycle.reservations.preemptors.push_back(std::move(res));
  cycle.nominated.push_back(std::move(*placed));
  return Decision{
      .kind = DecisionKind::kWait,
      .job = p.request.key,
      .reason = Cat("waiting for ", Plural(stopping.size(), "preempted job", "preempted jobs"),
                    " to stop: ", Join(stopping, ", ")),
      .expected_start_ms = start};
}

const std::optional<GangPlacer::StartEstimate>& Scheduler::LaterStartOf(ClusterState& state,
                                                                        const PendingJob& p,
                                                                        int64_t now_ms) const {
  constexpr size_t kMaxShapes = 4096;  // a bound, not a working set: shapes repeat
  if (later_starts_.size() >= kMaxShapes) later_starts_.clear();
  LaterStart& known = later_starts_[p.shape_key];  // Decide filled shape_key
  if (known.version != state.version() || known.nodes_id != state.nodes_id() ||
      now_ms < known.now_ms) {
    known.estimate = placer_.EarliestLaterStart(state, p.request, now_ms);
    known.version = state.version();
    known.nodes_id = state.nodes_id();
  } else if (known.estimate && known.estimate->start_ms < now_ms) {
    // Its start was the moment of the search (the endings it waits for were already due):
    // now, later.
    known.estimate->start_ms = now_ms;
  }
  known.now_ms = now_ms;
  return known.estimate;
}

Decision Scheduler::Wait(ClusterState& state, const PendingJob& p, int64_t now_ms,
                         std::string reason, CycleState& cycle) const {
  std::map<std::string, Reservation>& heads = cycle.reservations.heads;
  Decision wait{DecisionKind::kWait, p.request.key, std::nullopt, std::move(reason)};
  wait.capacity_bound = true;
  bool head = options_.backfill && !heads.contains(p.queue);
  if (!head && !options_.estimate_start_times) return wait;
  const std::optional<GangPlacer::StartEstimate>& e = LaterStartOf(state, p, now_ms);
  if (!e) return wait;
  wait.expected_start_ms = e->start_ms;
  if (head && e->start_ms > now_ms) {
    Reservation res{p.request.key, e->start_ms, {}};
    for (const ReplicaPlacement& r : e->allocation.replicas) res.nodes.push_back(r.node);
    heads.emplace(p.queue, std::move(res));
    wait.reason +=
        Cat("; holds a reservation, expected to start in ", AboutMinutes(now_ms, e->start_ms));
  } else {
    wait.reason += Cat("; expected to start in ", AboutMinutes(now_ms, e->start_ms));
  }
  return wait;
}

}  // namespace gpucloud::sched
