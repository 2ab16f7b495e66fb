#include "autoscale/replica_plan.h"

#include <algorithm>

namespace gpucloud::autoscale {
namespace {

using State = ReplicaView::State;

// The order replicas go in when there are too many: those that serve nothing first.
int StopRank(const ReplicaView& r) {
  switch (r.state) {
    case State::kPending:
      return 0;
    case State::kStarting:
      return 1;
    default:
      return 2;
  }
}

// Picks up to `n` of `live` to stop, in StopRank order and, among ready ones, only idle ones.
// Returns how many ready ones it could not take because they were busy.
int TakeForStop(std::vector<const ReplicaView*> live, int n, std::vector<std::string>* stop) {
  std::stable_sort(live.begin(), live.end(), [](const ReplicaView* a, const ReplicaView* b) {
    if (StopRank(*a) != StopRank(*b)) return StopRank(*a) < StopRank(*b);
    return a->in_flight < b->in_flight;
  });
  int busy = 0;
  for (const ReplicaView* r : live) {
    if (n <= 0) break;
    if (r->state == State::kReady && r->in_flight > 0) {
      ++busy;
      continue;
    }
    stop->push_back(r->job);
    --n;
  }
  return n > 0 ? std::min(n, busy) : 0;
}

}  // namespace

JobSpec ReplicaJobSpec(const InferenceServiceSpec& s) {
  JobSpec spec;
  TaskSpec task = s.task;
  task.replicas = 1;
  spec.tasks = {std::move(task)};
  spec.queue = s.queue;
  spec.priority = s.priority;
  spec.billing = s.billing;
  spec.node_selector = s.node_selector;
  spec.tolerations = s.tolerations;
  spec.restart.max_restarts = 3;
  spec.restart.backoff_seconds = 1;  // a replica down is capacity missing now
  return spec;
}

ReplicaPlan PlanReplicas(const InferenceServiceSpec& spec, int32_t desired,
                         const std::vector<ReplicaView>& replicas) {
  ReplicaPlan p;
  std::vector<const ReplicaView*> cur, old;
  int cur_ready = 0, old_ready = 0;
  for (const ReplicaView& r : replicas) {
    if (r.state == State::kEnded) {
      p.clear.push_back(r.job);
      continue;
    }
    if (r.state == State::kStopping) continue;
    (r.current ? cur : old).push_back(&r);
    if (r.state == State::kReady) ++(r.current ? cur_ready : old_ready);
  }
  const int n_cur = static_cast<int>(cur.size());
  if (old.empty()) {
    if (n_cur < desired) p.create = desired - n_cur;
    if (n_cur > desired) p.waiting_for_idle = TakeForStop(cur, n_cur - desired, &p.stop) > 0;
    return p;
  }
  // A rolling update: new replicas within the surge, old ones as the ready count allows.
  const int total = n_cur + static_cast<int>(old.size());
  p.create = std::max(0, std::min(desired - n_cur, desired + spec.max_surge - total));
  std::vector<const ReplicaView*> old_ready_ones;
  for (const ReplicaView* r : old) {
    if (r->state == State::kReady) {
      old_ready_ones.push_back(r);
    } else {
      p.stop.push_back(r->job);  // serves nothing yet: it would only be replaced later
    }
  }
  const int min_ready = std::max(0, desired - spec.max_unavailable);
  const int may_stop = std::min(old_ready, cur_ready + old_ready - min_ready);
  if (may_stop > 0) {
    p.waiting_for_idle = TakeForStop(old_ready_ones, may_stop, &p.stop) > 0;
  }
  return p;
}

}  // namespace gpucloud::autoscale
