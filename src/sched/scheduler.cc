#include "sched/scheduler.h"

#include <algorithm>
#include <tuple>

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
  std::vector<Decision> decisions;
  decisions.reserve(order.size());
  for (const PendingJob* p : order) {
    const JobRequest& job = p->request;
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
  }
  return decisions;
}

}  // namespace gpucloud::sched
