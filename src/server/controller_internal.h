// The controller's private pieces shared by its source files (controller.cc: the loop, nodes and
// jobs; controller_schedule.cc: scheduling): what a pass derives from each cached document, and
// the pass itself. Not for use outside the controller.
// Value types; thread-compatible (one pass at a time, on the controller's thread).
#ifndef GPUCLOUD_SERVER_CONTROLLER_INTERNAL_H_
#define GPUCLOUD_SERVER_CONTROLLER_INTERNAL_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/wire.h"
#include "manifest/manifest.h"
#include "sched/job_request.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"
#include "server/billing.h"
#include "server/controller.h"
#include "server/job_status.h"
#include "server/node_table.h"
#include "server/object_cache.h"

namespace gpucloud::server::controller_detail {

// What a pass derives once per change of a job document.
struct JobEntry {
  std::optional<Job> job;  // nullopt when the stored spec does not parse (never, unless edited)
  JobStatus status;
  std::string ns, name, uid, key;  // key: "ns/name", the scheduler's job key
  sched::JobView view;             // what the scheduler's input is built from (ViewOf)
  // The scheduler's view of a pending job, made once (its shape key is cached inside).
  mutable std::optional<sched::PendingJob> request;
};

// What a pass derives once per change of a node document.
struct NodeEntry {
  std::shared_ptr<const api::NodeInfo> info;  // null when the stored document does not parse
  bool unschedulable = false;
  bool draining = false;
  bool stored_ready = false;
  int64_t reclaim_at_ms = 0;  // a spot reclamation notice: the node goes away then
  // What the agent is told with each heartbeat answer (spec.healthReset, spec.prePull): the
  // NodeTable learns it from here too, since the API that changed it may be another server's.
  int64_t health_reset = 0;
  std::vector<std::string> pre_pull;
  mutable bool told = false;  // given to the NodeTable
};

// metadata.uid of a stored document, or "".
std::string UidOf(const nlohmann::ordered_json& doc);
// The entry derived from a cached job (made on first use, kept until the document changes).
const JobEntry& JobOf(CachedObject& o);
const NodeEntry& NodeOf(CachedObject& o);
// Where the assignment `name` for `node` is stored.
std::string AssignmentKey(const std::string& node, const std::string& name);

// One controller pass: what it read (reports, ready nodes and their state) and what it found.
struct Pass {
  int64_t now_ms = 0;
  std::map<std::string, NodeReport> reports;
  // Ready nodes, by name, with the agents' GPU health applied; cordoned ones included.
  std::map<std::string, std::shared_ptr<const api::NodeInfo>> ready;
  std::string nodes_fingerprint;  // what the scheduler's node list was built from
  std::set<std::string> cordoned, draining;
  std::set<std::string> held;
  // Registered nodes that are not Ready: their pool and GPUs (for the autoscaler).
  std::map<std::string, std::pair<std::string, int32_t>>
      not_ready;  // the autoscaler's (ControllerOptions::autoscaling): cordoned too
  std::map<std::string, int64_t> reclaiming;  // node -> when it is reclaimed (ms)
  // Node -> GPU index -> why the agent's failure-risk model expects it to fail.
  std::map<std::string, std::map<int, std::string>> at_risk;
  ClusterMetrics metrics;
  std::vector<double> bind_latencies;    // seconds, of first attempts bound in this pass
  std::vector<double> recovery_seconds;  // jobs running again after a failure, this pass
  GpuSeconds settled;                    // GPU time of the attempts that ended in this pass
  std::map<std::array<std::string, 3>, double> cost_usd;  // what they cost (ClusterMetrics)
  std::map<std::string, double> idle_cost_usd;            // idle cost this pass, by pool
  double dt_s = 0;  // the time since the last pass (what this pass's view of the nodes counts)
  // Whether this pass refreshes the per-job GPU time on /metrics (at most every 5 s: a map of
  // every running job is not worth building 10 times a second, and scrapes are 15 s apart).
  bool live_jobs_due = false;
  // Namespaces over their budget this pass (budgets.h): what their waiting jobs are told, and
  // those whose running jobs are stopped; the waiting jobs kept out of scheduling.
  std::map<std::string, std::string> over_budget;
  std::vector<CachedObject*> over_budget_waiting;
  // Node -> the master ports of jobs whose rank 0 is there (MasterPortsOn; built when needed).
  std::optional<std::map<std::string, std::set<int>>> master_ports;
};

// Who a job is, for its usage records (billing.h): a job that no longer parses counts in the
// default queue and as not accepting spot.
JobIdentity IdentityOf(const JobEntry& e);
// The cost `after` has beyond `before`, by billing class, added to pass.cost_usd under the job's
// namespace and queue (gpucloud_cost_usd_total).
void AddCostDelta(Pass& pass, const JobEntry& e, const JobStatus& before, const JobStatus& after);

}  // namespace gpucloud::server::controller_detail

#endif  // GPUCLOUD_SERVER_CONTROLLER_INTERNAL_H_
