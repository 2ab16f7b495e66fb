// The autoscaler's decisions: a pure function of (the scheduler's snapshot, the jobs its last
// cycle left waiting for room, the node pools, the provisioning requests in flight, node idle
// times, now) to provisioning requests, cancellations, back-offs and scale-downs. No I/O, no
// clock, no threads; the server's autoscaler controller and `gpucloud sim --autoscale` call the
// same code, and providers (exec scripts, local agents, the simulator's virtual boots) carry
// the plan out.
//
// Scale up. Jobs the scheduler left waiting because nothing has room (Decision::capacity_bound),
// in the scheduler's order, skipping those a request in flight was made for. Each is asked of
// the scheduler itself ("could it run if these nodes existed": Scheduler::PlaceOn, with its
// filters and topology) on hypothetical empty nodes of each pool that may grow, cheapest price
// per GPU-hour first; spot pools only for jobs that accept spot (billing: spot). Jobs are packed
// onto this round's new nodes of a pool by the same placer, so eight 1-GPU jobs ask for one
// 8-GPU node, not eight. Jobs that share a new node, and all the nodes of a gang, form one
// provisioning request: created all or none, held (the caller keeps every job off its nodes
// until all of them are Ready), cancelled whole. A pool never grows past maxNodes (counting
// nodes it has and nodes requested), and the cluster never past AutoscalerOptions' maxima of
// GPUs and of dollars per hour. A pool below minNodes is brought up to it by a request for no
// job.
//
// Boot timeout and failures. A request not Ready (every node) within boot_timeout_ms of its
// creation, or one its provider reports failed, is cancelled (its nodes deleted) and its pool
// backed off for backoff_ms with the reason; its jobs are considered again in the same round
// for the other pools (a stock-out moves to the next pool that fits).
//
// Scale down. A node of a pool that may shrink, idle (no allocation; the caller leaves
// cordoned nodes out of idle_since_ms) for scale_down_after_ms, not part of a request in
// flight, not in reserved_nodes, and not taking its pool below minNodes, is deleted (after a
// drain by the caller); the most expensive first. A node that is not Ready (not_ready) counts
// for its pool and is deleted once it has been so for scale_down_after_ms. Reserved pools are
// commitments billed whether used or not, so their nodes are never scaled down. Pools of the
// "static" provider never change.
//
// Thread-compatible: Decide is const but caches per-pool hypothetical nodes and per-shape
// answers (like Scheduler's own caches); one Autoscaler per caller.
#ifndef GPUCLOUD_AUTOSCALE_AUTOSCALER_H_
#define GPUCLOUD_AUTOSCALE_AUTOSCALER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node_pool.h"
#include "sched/cluster_state.h"
#include "sched/scheduler.h"

namespace gpucloud::autoscale {

inline constexpr int64_t kDefaultScaleDownAfterMs = 10 * 60'000;
inline constexpr int64_t kDefaultBootTimeoutMs = 10 * 60'000;
inline constexpr int64_t kDefaultBackoffMs = 5 * 60'000;

struct AutoscalerOptions {
  int64_t scale_down_after_ms = kDefaultScaleDownAfterMs;
  int64_t boot_timeout_ms = kDefaultBootTimeoutMs;  // Slurm's ResumeTimeout
  int64_t backoff_ms = kDefaultBackoffMs;
  int64_t max_gpus = 0;                     // cluster-wide, counting nodes requested; 0: no maximum
  MicroUsd max_usd_per_hour = MicroUsd(0);  // cluster-wide, at pools' prices; 0: no maximum
  // New nodes one round may request per pool (bounds the hypothetical nodes a round builds);
  // jobs beyond it are asked again next round.
  int32_t max_new_nodes_per_round = 256;
};

// A pool as the autoscaler sees it now.
struct PoolState {
  NodePool pool;
  int64_t backoff_until_ms = 0;  // no scale-up before this
  std::string backoff_reason;
};

// Nodes created together for a set of jobs (a gang's, or small jobs packed together): all or
// none.
struct ProvisioningRequest {
  std::string id;  // unique among requests; the caller's
  std::string pool;
  std::vector<std::string> nodes;  // the names the new nodes get
  std::vector<std::string> jobs;   // the jobs it is held for (empty: minNodes)
  int64_t created_ms = 0;
  // Filled by the caller for requests in flight:
  int32_t ready = 0;    // of `nodes`, how many are Ready
  std::string failure;  // the provider's error; non-empty: failed
  bool operator==(const ProvisioningRequest&) const = default;
};

struct AutoscalerInput {
  // The scheduler's snapshot (every node that exists, jobs' holdings committed). Borrowed.
  const sched::ClusterState* state = nullptr;
  // The jobs the last cycle decided to wait, with their decisions' capacity_bound, in the
  // order the scheduler looked at them. Borrowed.
  std::vector<const sched::PendingJob*> waiting;
  std::vector<PoolState> pools;
  std::vector<ProvisioningRequest> in_flight;
  // Node name -> since when it has had no task (absent: it runs one or the caller does not know).
  std::map<std::string, int64_t> idle_since_ms;
  // Nodes that must not be scaled down (a backfill reservation's; the server and simulator
  // pass none yet).
  std::set<std::string> reserved_nodes;
  // Nodes on their way out (a scale-down or cancellation being carried out): their names are
  // taken, but they count for nothing.
  std::set<std::string> leaving;
  // Nodes that exist but are not Ready (not in `state`), by name: their pool, and since when.
  // They count for their pool and the cluster's maxima, keep their names, and are scaled down
  // once not Ready for scale_down_after_ms.
  struct NotReady {
    std::string pool;
    int32_t gpus = 0;
    int64_t since_ms = 0;
  };
  std::map<std::string, NotReady> not_ready;
  // By node index in `state`: machines that do not exist (the simulator keeps a slot for every
  // machine a pool could have and holds the ones not created, or still booting, down). They
  // count for nothing and their names are free, unless a request in flight names them. Empty:
  // every node of `state` exists.
  std::vector<bool> absent;
  int64_t now_ms = 0;
};

struct ScaleUp {
  ProvisioningRequest request;  // id left empty: the caller names it
  std::string reason;  // "scale up h100-spot by 2 for gang team-a/llm: 16 GPUs pending, ..."
};
struct Cancel {
  std::string request;  // ProvisioningRequest::id
  std::string reason;
};
struct Backoff {
  std::string pool;
  int64_t until_ms = 0;
  std::string reason;
};
struct ScaleDown {
  std::string node;
  std::string pool;
  std::string reason;
};
// Waiting jobs no pool can add nodes for (jobs alike share one), and why (per pool).
struct Unmet {
  std::vector<std::string> jobs;
  std::string reason;
};

struct Plan {
  std::vector<Cancel> cancels;
  std::vector<Backoff> backoffs;
  std::vector<ScaleUp> ups;
  std::vector<ScaleDown> downs;
  std::vector<Unmet> unmet;
  bool empty() const { return cancels.empty() && ups.empty() && downs.empty(); }
};

class Autoscaler {
 public:
  // Borrows `scheduler` and `catalog`, which must outlive it.
  Autoscaler(const sched::Scheduler& scheduler, const GpuCatalog& catalog,
             AutoscalerOptions options = {})
      : scheduler_(scheduler), catalog_(catalog), options_(options) {}
  Autoscaler(const Autoscaler&) = delete;
  Autoscaler& operator=(const Autoscaler&) = delete;

  const AutoscalerOptions& options() const { return options_; }

  Plan Decide(const AutoscalerInput& in) const;

 private:
  struct Round;
  struct PoolPlan;
  // Cancels requests past their boot timeout or failed; backs their pools off.
  void Expire(const AutoscalerInput& in, Round& round, Plan& plan) const;
  // Finds the cheapest pool that can add nodes for `p` (of the round's shape id `shape`) and
  // places it there; false if none, with each pool's reason appended to `why` when given.
  bool PlaceOnNewNodes(const sched::PendingJob& p, size_t shape, Round& round,
                       std::string* why) const;
  // The round's requests, from the jobs placed on each pool's new nodes.
  void Requests(const AutoscalerInput& in, Round& round, Plan& plan) const;
  void ScaleDowns(const AutoscalerInput& in, const Round& round, Plan& plan) const;
  // Borrows the pool's template for the round, its nodes beyond the round's headroom held.
  void Prepare(PoolPlan& plan) const;
  // Releases what the round committed on the templates (they are kept for the next round).
  void Release(Round& round) const;
  // Marks hypothetical node `n` requested and counts it against the cluster's maxima.
  void Open(PoolPlan& plan, sched::NodeIndex n, Round& round) const;
  bool WithinMaxima(const Round& round, int64_t gpus, MicroUsd price) const;
  // Opens the nodes that bring each pool up to its minNodes.
  void OpenMinNodes(Round& round) const;
  // `nodes` hypothetical empty nodes of `pool`, under their own leaves.
  std::unique_ptr<sched::ClusterState> EmptyPoolState(const NodePool& pool, int nodes) const;

  // Whether `p` could ever run on the pool's nodes (as many as one round may add), were they
  // empty: nullopt if so, else why not. Kept per pool, shape and task names (the answer names
  // a task) across rounds, until the pool's spec changes (at most 4,096 answers per pool).
  const std::optional<std::string>& NeverFits(const NodePool& pool,
                                              const sched::PendingJob& p) const;

  const sched::Scheduler& scheduler_;
  const GpuCatalog& catalog_;
  AutoscalerOptions options_;
  // A pool's hypothetical new nodes, as many as one round may add, kept across rounds until its
  // spec changes: `empty` answers "could it ever run here" (`answers`, by shape key); `plan` is
  // what rounds place on (each releases its commits at its end).
  struct Template {
    NodePoolSpec spec;
    std::unique_ptr<sched::ClusterState> empty;
    std::unique_ptr<sched::ClusterState> plan;
    std::unordered_map<std::string, std::optional<std::string>> answers;
  };
  Template& TemplateOf(const NodePool& pool) const;
  mutable std::map<std::string, Template> templates_;  // by pool name
};

// Whether `pool` may grow or shrink at all (its provider is not "static").
bool Scales(const NodePoolSpec& pool);

}  // namespace gpucloud::autoscale

#endif  // GPUCLOUD_AUTOSCALE_AUTOSCALER_H_
