#include "sched/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/text.h"
#include "sched/queue_quota.h"

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

// The policy's key; smaller runs first.
int64_t OrderingKey(QueueOrdering ordering, const PendingJob& p) {
  switch (ordering) {
    case QueueOrdering::kSjf:
      if (!p.runtime_estimate_s) return INT64_MAX;
      return *p.runtime_estimate_s * std::max<int64_t>(RequestedMilliGpus(p.request), 1);
    case QueueOrdering::kLas:
      return p.attained_gpu_ms;
    case QueueOrdering::kFifo:
      break;
  }
  return 0;
}

}  // namespace

bool QueueSortLess(QueueOrdering ordering, const PendingJob& a, const PendingJob& b) {
  return std::forward_as_tuple(-int64_t{a.priority}, OrderingKey(ordering, a), a.submit_ms,
                               a.request.key) < std::forward_as_tuple(-int64_t{b.priority},
                                                                      OrderingKey(ordering, b),
                                                                      b.submit_ms, b.request.key);
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
    if (state.Commit(Allocation{key, {p}}).ok()) keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace

PlacementResult Scheduler::PlaceRespectingReservations(
    ClusterState& state, const PendingJob& p,
    const std::map<std::string, Reservation>& reservations, int64_t now_ms) const {
  PlacementResult r = placer_.PlaceNow(state, p.request);
  if (!r.allocation || reservations.empty()) return r;
  std::set<NodeIndex> blocked;
  const Reservation* first = nullptr;
  for (const auto& [queue, res] : reservations) {
    bool ends_before =
        p.runtime_estimate_s && now_ms + *p.runtime_estimate_s * 1000 <= res.start_ms;
    if (ends_before) continue;
    blocked.insert(res.nodes.begin(), res.nodes.end());
    if (first == nullptr || res.start_ms < first->start_ms) first = &res;
  }
  if (blocked.empty() || !Touches(*r.allocation, blocked)) return r;
  std::vector<std::string> holds = HoldNodes(state, blocked);
  PlacementResult again = placer_.PlaceNow(state, p.request);
  for (const std::string& key : holds) (void)state.Release(key);
  // The holds cover free whole GPUs, CPU and memory; a job that still lands on a reserved node
  // (on a shared or MIG GPU) is refused too, so reserved nodes are really left alone.
  if (again.allocation && !Touches(*again.allocation, blocked)) return again;
  return {std::nullopt, Cat("waiting: starting now would delay the reservation of ", first->job,
                            " (expected to start in ", AboutMinutes(now_ms, first->start_ms), ")")};
}

std::vector<Decision> Scheduler::Schedule(ClusterState& state,
                                          const std::vector<PendingJob>& pending,
                                          int64_t now_ms) const {
  std::vector<const PendingJob*> order;
  order.reserve(pending.size());
  for (const PendingJob& p : pending) order.push_back(&p);
  std::sort(order.begin(), order.end(), [&](const PendingJob* a, const PendingJob* b) {
    return QueueSortLess(options_.ordering, *a, *b);
  });

  std::optional<ClusterState> empty;  // built on the first job that does not fit now
  // Within one cycle the cluster only fills up and reservations are only added, so a job that
  // did not fit will not fit later in the cycle either: same queue, shape and estimate get the
  // same decision without another search.
  std::unordered_map<std::string, Decision> unfit;
  std::map<std::string, Reservation> reservations;  // queue -> its head's reservation
  QueueQuota quota(options_.queues, state, catalog_);
  std::vector<Decision> decisions;
  decisions.reserve(order.size());
  for (const PendingJob* p : order) {
    const JobRequest& job = p->request;
    std::string memo = Cat(p->queue, "\n", p->runtime_estimate_s.value_or(-1), "\n", ShapeKey(job));
    if (auto it = unfit.find(memo); it != unfit.end()) {
      decisions.push_back({it->second.kind, job.key, std::nullopt, it->second.reason,
                           it->second.expected_start_ms});
      continue;
    }
    PlacementResult r = PlaceRespectingReservations(state, *p, reservations, now_ms);
    if (r.allocation && p->runtime_estimate_s) {
      r.allocation->expected_end_ms = now_ms + *p->runtime_estimate_s * 1000;
    }
    if (r.allocation) r.allocation->queue = p->queue;
    if (r.allocation) {
      if (std::optional<std::string> over = quota.CheckMax(p->queue, *r.allocation)) {
        decisions.push_back({DecisionKind::kWait, job.key, std::nullopt, std::move(*over)});
        unfit.emplace(std::move(memo), decisions.back());
        continue;
      }
      if (absl::Status st = state.Commit(*r.allocation); st.ok()) {
        quota.Add(p->queue, *r.allocation);
        decisions.push_back({DecisionKind::kBind, job.key, std::move(r.allocation), ""});
        continue;
      } else {
        r.reason = std::string(st.message());  // cannot happen: the placer checked it
      }
    }
    if (!empty) empty.emplace(GangPlacer::EmptyCluster(state.nodes(), catalog_));
    if (std::optional<std::string> never = placer_.WhyNeverFits(*empty, job)) {
      decisions.push_back({DecisionKind::kReject, job.key, std::nullopt, std::move(*never)});
    } else {
      decisions.push_back(Wait(state, *p, now_ms, std::move(r.reason), &reservations));
    }
    unfit.emplace(std::move(memo), decisions.back());
  }
  return decisions;
}

Decision Scheduler::Wait(ClusterState& state, const PendingJob& p, int64_t now_ms,
                         std::string reason,
                         std::map<std::string, Reservation>* reservations) const {
  Decision wait{DecisionKind::kWait, p.request.key, std::nullopt, std::move(reason)};
  bool head = options_.backfill && !reservations->contains(p.queue);
  if (!head && !options_.estimate_start_times) return wait;
  std::optional<GangPlacer::StartEstimate> e = placer_.EarliestLaterStart(state, p.request, now_ms);
  if (!e) return wait;
  wait.expected_start_ms = e->start_ms;
  if (head && e->start_ms > now_ms) {
    Reservation res{p.request.key, e->start_ms, {}};
    for (const ReplicaPlacement& r : e->allocation.replicas) res.nodes.push_back(r.node);
    reservations->emplace(p.queue, std::move(res));
    wait.reason +=
        Cat("; holds a reservation, expected to start in ", AboutMinutes(now_ms, e->start_ms));
  } else {
    wait.reason += Cat("; expected to start in ", AboutMinutes(now_ms, e->start_ms));
  }
  return wait;
}

}  // namespace gpucloud::sched
