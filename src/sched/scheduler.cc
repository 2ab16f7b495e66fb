#include "sched/scheduler.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace gpucloud::sched {

bool QueueSortLess(const PendingJob& a, const PendingJob& b) {
  return std::forward_as_tuple(-int64_t{a.priority}, a.submit_ms, a.request.key) <
         std::forward_as_tuple(-int64_t{b.priority}, b.submit_ms, b.request.key);
}

std::vector<Decision> Scheduler::Schedule(ClusterState& state,
                                          const std::vector<PendingJob>& pending,
                                          int64_t now_ms) const {
  (void)now_ms;  // used by backfill and aging, which come next
  std::vector<const PendingJob*> order;
  order.reserve(pending.size());
  for (const PendingJob& p : pending) order.push_back(&p);
  std::sort(order.begin(), order.end(),
            [](const PendingJob* a, const PendingJob* b) { return QueueSortLess(*a, *b); });

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
      decisions.push_back({it->second.kind, job.key, std::nullopt, it->second.reason});
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
      decisions.push_back({DecisionKind::kWait, job.key, std::nullopt, std::move(r.reason)});
    }
    unfit_shapes.emplace(std::move(shape), decisions.back());
  }
  return decisions;
}

}  // namespace gpucloud::sched
