// The replicas of an inference service (core/inference_service.h) as jobs: a replica's job
// document (autoscale::ReplicaJobSpec with its name, port and labels), replica names and ports,
// and the write that stops one. Which replicas to start and stop is autoscale::PlanReplicas
// (autoscale/replica_plan.h). Pure functions; thread-compatible.
#ifndef GPUCLOUD_SERVER_SERVICE_REPLICAS_H_
#define GPUCLOUD_SERVER_SERVICE_REPLICAS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "autoscale/replica_plan.h"
#include "core/inference_service.h"
#include "core/job.h"
#include "store/store.h"

namespace gpucloud::server {

// Labels of a replica's job: the service it belongs to, and the template it runs (a hash of
// everything in the spec that a replica's job is made of).
inline constexpr std::string_view kServiceLabel = "gpucloud.io/service";
inline constexpr std::string_view kServiceTemplateLabel = "gpucloud.io/service-template";
// Replicas' ports, unique among the cluster's replicas (a replica listens on $PORT of its node:
// tasks share their node's network): 10000-17999, below the master ports and Linux's ephemeral
// range; `gpuctl notebook` draws its ports from 18000-19999, so the two never meet.
inline constexpr int kServicePortBase = 10000;
inline constexpr int kServicePortCount = 8000;

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

// The plan is autoscale's (shared with the simulator).
using autoscale::PlanReplicas;
using autoscale::ReplicaPlan;
using autoscale::ReplicaView;

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SERVICE_REPLICAS_H_
