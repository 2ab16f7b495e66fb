// Which replicas of an inference service to start and stop to reach a desired count — scaling
// and rolling updates as one pure plan (a ReplicaSet and a Deployment's rollout in one) — and
// what a replica's job is. The server's service controller (server/services.h) carries the plan
// out; the simulator (sim/service_replay.h) follows the same plan, so that a replay scales as
// production does. Pure functions; thread-compatible.
#ifndef GPUCLOUD_AUTOSCALE_REPLICA_PLAN_H_
#define GPUCLOUD_AUTOSCALE_REPLICA_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/inference_service.h"
#include "core/job.h"

namespace gpucloud::autoscale {

// The spec of one replica's job: the template's task (one replica), the service's queue,
// priority, billing, node selector and tolerations. A failed task restarts in place up to three
// times (back-off from 1 s); a replica that fails for good is replaced.
JobSpec ReplicaJobSpec(const InferenceServiceSpec& spec);

struct ReplicaView {
  std::string job;
  bool current = true;  // runs the service's current template
  enum class State { kPending, kStarting, kReady, kStopping, kEnded };
  State state = State::kPending;  // kStarting: running, not ready yet
  int64_t in_flight = 0;          // requests the gateway has in flight on it
};

struct ReplicaPlan {
  int32_t create = 0;              // new replicas of the current template
  std::vector<std::string> stop;   // replicas to stop and delete (their jobs cancelled)
  std::vector<std::string> clear;  // ended replicas to delete (they are replaced)
  bool waiting_for_idle = false;   // a ready replica would go, but none is idle yet
};

// What to do to reach `desired` replicas of the current template, from `replicas`:
//   - ended replicas are cleared (and so replaced while the count is short);
//   - scaling up creates; scaling down stops pending replicas first, then starting ones, then
//     ready ones with no request in flight (never a busy one: it waits for one to be idle);
//   - a rolling update starts current replicas at most `max_surge` beyond `desired` and stops
//     old ones (not ready ones at once, ready ones, idlest first, while the ready count stays at
//     least desired - max_unavailable).
ReplicaPlan PlanReplicas(const InferenceServiceSpec& spec, int32_t desired,
                         const std::vector<ReplicaView>& replicas);

}  // namespace gpucloud::autoscale

#endif  // GPUCLOUD_AUTOSCALE_REPLICA_PLAN_H_
