// The server's autoscaler controller: runs the pure autoscaler (autoscale/autoscaler.h) after
// every controller pass, on the scheduler's own view and the jobs its cycle left waiting for
// room, and carries the plan out through the pools' node providers (server/node_provider.h).
//
//   - Scale up: a provisioning request (durable under /autoscaler/requests/{id}, so that a new
//     leader knows what is on its way) is handed to the pool's provider; its machines join as
//     agents with `--pool`. Its nodes are held (cordoned in the scheduler's view, HeldNodes)
//     until every one of them is Ready, so that a gang never binds partly on new nodes; then the
//     request is done and the scheduler places its jobs. The jobs get an Event ("ScaleUp").
//   - A request whose provider fails, or that is not Ready within the boot timeout, is
//     cancelled: its machines deleted, its pool backed off, its jobs asked of the next pool.
//   - Scale down: a node idle for scaleDownAfter is cordoned (held) for one pass; if still idle
//     then, its machine is deleted through the provider and its Node object (and certificate)
//     removed from the store.
//   - The pools come with each pass (the controller's own cache of them); a worker thread
//     makes every provider call and store write: a pass never waits for a script or a boot.
//
// Owned by the leader's term, beside the Controller (which calls HeldNodes and AfterPass).
// Thread-safe: AfterPass from the controller's thread, HeldNodes and Metrics from any.
#ifndef GPUCLOUD_SERVER_AUTOSCALING_H_
#define GPUCLOUD_SERVER_AUTOSCALING_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "autoscale/autoscaler.h"
#include "core/gpu_catalog.h"
#include "server/node_provider.h"
#include "store/store.h"

namespace gpucloud::server {

struct AutoscalingOptions {
  autoscale::AutoscalerOptions autoscaler;
  std::optional<LocalProviderOptions> local;  // set: pools may use provider "local"
  JoinInfo join;                              // what exec scripts are told
  int64_t tick_ms = 1000;                     // how often failed deletions are tried again
  // Called after the autoscaler deleted a Node object at `revision` (the server forgets its
  // heartbeats and certificate as DELETE /nodes/{name} does).
  std::function<void(const std::string& node, int64_t revision)> forget_node;
};

// What /metrics shows of the autoscaler (gpucloud_autoscaler_*).
struct AutoscalingMetrics {
  std::map<std::string, int64_t> scale_ups;    // by pool: requests made
  std::map<std::string, int64_t> nodes_added;  // by pool
  std::map<std::string, int64_t> scale_downs;  // by pool: nodes removed when idle
  std::map<std::string, int64_t> cancels;      // by pool: requests cancelled
  int64_t requests_in_flight = 0;
  int64_t unmet_jobs = 0;  // waiting for room that no pool can add nodes for (last pass)
};
std::string RenderAutoscalingMetrics(const AutoscalingMetrics& m);

class Autoscaling {
 public:
  // Borrows `store` and `catalog`, which must outlive it.
  Autoscaling(store::Store& store, const GpuCatalog& catalog, AutoscalingOptions options);
  ~Autoscaling();  // Stop
  Autoscaling(const Autoscaling&) = delete;
  Autoscaling& operator=(const Autoscaling&) = delete;

  // Loads the requests in flight from the store and starts the worker.
  void Start();
  void Stop();

  // Nodes the scheduler must leave alone this pass: those of requests in flight, and those
  // being scaled down.
  std::set<std::string> HeldNodes() const;
  // One autoscaler round on the pass's view (`state`: Ready nodes, held ones cordoned, every
  // job's holdings) and the jobs its cycle left waiting for room. Quick: the provider calls and
  // store writes it decides go to the worker.
  // `not_ready`: the registered nodes that are not Ready (so not in `state`), by name: their
  // pool and GPUs (they count for their pool, and go once not Ready for scaleDownAfter).
  using NotReadyNodes = std::map<std::string, std::pair<std::string, int32_t>>;
  // `reserved`: the nodes the scheduler's cycle reserved (backfill, preemptors): never removed.
  void AfterPass(const sched::Scheduler& scheduler, const sched::ClusterState& state,
                 const std::vector<const sched::PendingJob*>& waiting,
                 const NotReadyNodes& not_ready, const std::map<std::string, NodePool>& pools,
                 int64_t now_ms, const std::set<std::string>& reserved = {});
  AutoscalingMetrics Metrics() const;

 private:
  struct Request {
    autoscale::ProvisioningRequest spec;
    std::string failure;  // the provider's error, once it failed
    // Every node Ready: no longer held, so that the next pass may place its jobs; forgotten
    // after that pass (its jobs count as covered until then).
    bool complete = false;
  };
  struct Action {
    enum class Kind { kCreate, kDelete, kForget } kind;
    std::string pool;
    std::vector<std::string> nodes;
    std::string request;         // kCreate, kForget: the request's id
    std::vector<store::Op> ops;  // kCreate: the request's record and its jobs' events
  };
  void Work();
  void LoadRequests();
  void Do(Action& a);
  // The provider of pool `pool_name` as the last pass saw it (copied into `pool`), made on first
  // use and again when its spec.provider changes; FailedPrecondition for a pool no longer there,
  // InvalidArgument for a provider that cannot be made.
  absl::StatusOr<NodeProvider*> ProviderOf(const std::string& pool_name, NodePool* pool);
  void Queue(Action a);                           // mu_ held
  std::set<std::string> HeldNodesLocked() const;  // mu_ held

  store::Store& store_;
  const GpuCatalog& catalog_;
  AutoscalingOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, NodePool> pools_;  // by name, as the last pass gave them
  std::map<std::string, autoscale::Backoff> backoffs_;
  std::map<std::string, Request> requests_;  // in flight, by id
  // Scale-down decided (deleted after a pass held), and handed to the worker for deletion
  // (until deleted; a failed deletion is tried again a tick later): node -> pool.
  std::map<std::string, std::string> draining_;
  std::map<std::string, std::string> removing_;
  std::map<std::string, int64_t> idle_since_ms_;
  std::map<std::string, int64_t> not_ready_since_ms_;
  std::vector<Action> retry_;  // deletions that failed, queued again on the next tick
  std::deque<Action> actions_;
  AutoscalingMetrics metrics_;
  uint64_t seq_ = 0;
  // The controller's thread only:
  const sched::Scheduler* scheduler_ = nullptr;
  std::unique_ptr<autoscale::Autoscaler> autoscaler_;
  // The worker's only:
  std::map<std::string, std::unique_ptr<NodeProvider>> providers_;  // by pool
  std::map<std::string, std::string> provider_specs_;               // the spec each was made for
  std::thread worker_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_AUTOSCALING_H_
