// The replicas of an inference service (core/inference_service.h) as jobs: what a replica's job
// is, and which replicas to start and stop to reach a desired count — scaling and rolling
// updates as one pure plan (a ReplicaSet and a Deployment's rollout in one). The service
// controller (services.h) carries the plan out. Pure functions; thread-compatible.
#ifndef GPUCLOUD_SERVER_SERVICE_REPLICAS_H_
#define GPUCLOUD_SERVER_SERVICE_REPLICAS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/inference_service.h"
#include "core/job.h"
#include "store/store.h"

namespace gpucloud::server {

// Labels of a replica's job: the service it belongs to, and the template it runs (a hash of
// everything in the spec that a replica's job is made of).
inline constexpr std::string_view kServiceLabel = "gpucloud.io/service";
inline constexpr std::string_view kServiceTemplateLabel = "gpucloud.io/service-template";
// Replicas' ports, unique among the cluster's replicas (a replica listens on $PORT of its node:
// tasks share their node's network). Below the master ports and Linux's ephemeral range.
inline constexpr int kServicePortBase = 10000;
inline constexpr int kServicePortCount = 10000;

// The template hash of `spec` (16 hex digits; stable across builds: FNV-1a of its JSON).
std::string TemplateHash(const InferenceService& svc);

// The job of replica `name` of `svc`, listening on `port`: the template's task (its env
// given PORT and GPUCLOUD_SERVICE_PORT = port, GPUCLOUD_SERVICE = the service's name), the
// service's queue, priority, billing, node selector and tolerations, the labels above. A
// failed task restarts in place up to three times (back-off from 1 s); a replica that fails
// for good is replaced.
Job ReplicaJob(const InferenceService& svc, const std::string& name, int port,
               const std::string& template_hash);

// The name of the service's `n`th replica: "<service>-<n in 5 base-36 digits>".
std::string ReplicaName(std::string_view service, int64_t n);

// The first port of the service range not in `used`, searched from a place that depends on
// `name` (so that replicas made together spread); 0 when every one is used.
int FreeServicePort(const std::set<int>& used, std::string_view name);

// The write that stops a replica whose job document is `doc` at `mod_revision`: cancel and
// delete (the job controller stops its tasks, then removes the job), compare-and-swap.
store::Op StopReplicaOp(const std::string& key, const nlohmann::ordered_json& doc,
                        int64_t mod_revision);

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

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SERVICE_REPLICAS_H_
