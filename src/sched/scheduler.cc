#include "sched/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <unordered_map>

#include "core/text.h"

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
  // Within one cycle the cluster only fills up, so a job shape that did not fit will not fit
  // later in the cycle either: remember its decision instead of searching again.
  std::unordered_map<std::string, Decision> unfit_shapes;
  std::vector<Decision> decisions;
  decisions.reserve(order.size());
  for (const PendingJob* p : order) {
    const JobRequest& job = p->request;
    std::string shape = ShapeKey(job);
    if (auto it = unfit_shapes.find(shape); it != unfit_shapes.end()) {
      decisions.push_back({it->second.kind, job.key, std::nullopt, it->second.reason,
                           it->second.expected_start_ms});
      continue;
    }
    PlacementResult r = placer_.PlaceNow(state, job);
    if (r.allocation) {
      if (absl::Status st = state.Commit(*r.allocation); st.ok()) {
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
      Decision wait{DecisionKind::kWait, job.key, std::nullopt, std::move(r.reason)};
      if (options_.estimate_start_times) {
        if (std::optional<GangPlacer::StartEstimate> e =
                placer_.EarliestStart(state, job, now_ms)) {
          wait.expected_start_ms = e->start_ms;
          int64_t minutes = std::max<int64_t>(1, (e->start_ms - now_ms + 59'999) / 60'000);
          wait.reason += Cat("; expected to start in about ", minutes, " min");
        }
      }
      decisions.push_back(std::move(wait));
    }
    unfit_shapes.emplace(std::move(shape), decisions.back());
  }
  return decisions;
}

}  // namespace gpucloud::sched
