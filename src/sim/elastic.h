// Elastic capacity in the simulator (`gpucloud sim --autoscale`): which of a cluster's machines
// exist, boot, are held for a provisioning request or are deleted, decided by the production
// autoscaler (autoscale::Autoscaler) on the simulator's scheduler state, and what the machines
// cost while they exist.
//
// The simulated cluster keeps a node slot for every machine a pool could have (maxNodes); a
// machine that does not exist, or still boots, is held down there (no capacity), as the server
// leaves a node that is not Ready out of the scheduler's view. Pools of the "static" provider
// exist whole from the start; the others start at minNodes and follow the autoscaler. A requested
// machine boots in boot_s x U[0.5, 1.5] or, with probability boot_failure, never comes up (the
// autoscaler's boot timeout then cancels its request). Machines of a request that are up are
// held (a placeholder allocation) until all of its machines are, so that a gang never binds
// partly on new nodes. Machines are billed from their request to their deletion (or the end of
// the run), at their pool's price.
//
// Owned by one Simulation; not thread-safe. No I/O, no clock; randomness from its own seeded
// stream.
#ifndef GPUCLOUD_SIM_ELASTIC_H_
#define GPUCLOUD_SIM_ELASTIC_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autoscale/autoscaler.h"
#include "core/clock.h"
#include "sched/cluster_state.h"
#include "sched/scheduler.h"
#include "sim/cluster.h"

namespace gpucloud::sim {

// The taint spot pools carry so that only jobs that accept spot land there; with --spot-share,
// the simulator gives those jobs a toleration of it (Exists, NoSchedule).
inline constexpr std::string_view kSpotTaintKey = "gpucloud.io/spot";

struct ElasticOptions {
  bool enabled = false;
  autoscale::AutoscalerOptions autoscaler;
  int64_t boot_s = 300;     // median boot time of a machine
  double boot_failure = 0;  // probability a machine never comes up, in [0, 1)
  std::map<std::string, double> boot_failure_by_pool;  // overrides it per pool (stock-outs)
  // Share of the trace's jobs that accept spot capacity (drawn from the seed; they tolerate
  // kSpotTaintKey, which spot pools should carry).
  double spot_share = 0;
  // Spot machines taken back by the cloud: this many per machine-hour (exponential), each with
  // a notice of spot_notice_s (AWS's two minutes) in which its jobs checkpoint and stop.
  double spot_reclaims_per_hour = 0;
  int64_t spot_notice_s = 120;
};

// What the elastic part of a run did and cost.
struct ElasticResult {
  int64_t requests = 0;  // provisioning requests made
  int64_t nodes_added = 0;
  int64_t nodes_removed = 0;                        // scaled down or cancelled
  int64_t cancelled = 0;                            // requests cancelled (boot timeout)
  double gpu_hours_provisioned = 0;                 // GPUs x hours billed
  std::map<std::string, double> capacity_cost_usd;  // billing class -> dollars for machines
  int32_t peak_nodes = 0;
  int64_t spot_reclaims = 0;  // spot machines taken back
};

class ElasticCapacity {
 public:
  using NodeIndex = sched::NodeIndex;
  // Borrows everything; all must outlive it.
  ElasticCapacity(const SimCluster& cluster, const ElasticOptions& options,
                  const sched::Scheduler& scheduler, const GpuCatalog& catalog, uint64_t seed);

  bool enabled() const { return options_.enabled; }
  // Whether machine `n` exists now (up, possibly held); booting and absent ones do not.
  bool Up(NodeIndex n) const { return life_[n] == Life::kUp; }
  // Whether machine `n` is up and held for its provisioning request (not all of it is up).
  bool Held(NodeIndex n) const { return Up(n) && request_of_.contains(n); }

  // The bookkeeping of tasks: `a` was bound (committed) or released at `now_s`.
  void Placed(const sched::Allocation& a);
  void Released(const sched::Allocation& a, int64_t now_s);
  // When machines that went idle since the last call will have idled long enough to be scaled
  // down (the simulation runs a round then, if IdleDue).
  std::vector<int64_t> TakeIdleWakes() { return std::exchange(idle_wakes_s_, {}); }
  // Whether some machine has idled long enough at `now_s` (a round may scale it down).
  bool IdleDue(int64_t now_s) const;

  // What the simulation is to do to its state and event queue.
  struct Effects {
    std::vector<NodeIndex> up;      // bring up (healthy) ...
    std::vector<NodeIndex> hold;    // ... and hold with a placeholder (request incomplete)
    std::vector<NodeIndex> unhold;  // release the hold: the request is complete
    std::vector<NodeIndex> remove;  // release any hold and take down: deleted or cancelled
    // Machine n comes up at t (an event to push; `generation` tells a stale one).
    struct Boot {
      NodeIndex node;
      int64_t t;
      int32_t generation;
    };
    std::vector<Boot> boots;
    // Spot machine n gets its reclamation notice at t (an event to push).
    std::vector<Boot> notices;
    // Spot machine n got its notice: its jobs are to checkpoint and stop by `gone.t`, when it
    // goes (an event to push).
    std::vector<NodeIndex> noticed;
    std::vector<Boot> gone;
    // Run a round again then: for a boot timeout or the end of a back-off (jobs may wait for
    // it: the replay must go on), and for a node idle long enough to scale down (the replay
    // need not go on for it).
    int64_t wake_live_s = INT64_MAX;
    int64_t wake_idle_s = INT64_MAX;
    bool changed() const { return !up.empty() || !unhold.empty() || !remove.empty(); }
  };

  // One autoscaler round at `now_s` over the jobs waiting for room; `reserved`: the nodes the
  // last scheduling cycle's reservations plan to use (never removed).
  Effects Round(const sched::ClusterState& state,
                const std::vector<const sched::PendingJob*>& waiting, int64_t now_s,
                const std::vector<NodeIndex>& reserved = {});
  // Machine `n` finished booting (generation as pushed); ignored when stale.
  Effects Booted(NodeIndex n, int32_t generation, int64_t now_s);
  // The first reclamation notices of the spot machines up at the start.
  Effects Start();
  // Spot machine `n`'s reclamation notice (generation as pushed); ignored when stale. A machine
  // held for its request gets its notice later.
  Effects Notice(NodeIndex n, int32_t generation, int64_t now_s);
  // The noticed machine goes (the simulation has stopped what still ran there).
  Effects Gone(NodeIndex n, int32_t generation, int64_t now_s);
  // Bills machines still there at the end.
  ElasticResult Finish(int64_t now_s);

 private:
  enum class Life { kAbsent, kBooting, kUp };
  struct Request {
    autoscale::ProvisioningRequest spec;
    std::vector<NodeIndex> nodes;
  };
  void Bill(NodeIndex n, int64_t now_s);
  // Machine `n` is deleted (scaled down, cancelled while booting or up, taken back): billed
  // until now, absent from now on.
  void Remove(NodeIndex n, int64_t now_s, Effects& fx);
  void StartBilling(NodeIndex n, int64_t now_s);
  void NextWake(int64_t now_s, Effects& fx) const;
  // When an up spot machine gets its next notice (nothing for other machines).
  void ScheduleNotice(NodeIndex n, int64_t now_s, Effects& fx);

  const SimCluster& cluster_;
  ElasticOptions options_;
  autoscale::Autoscaler autoscaler_;
  Rng rng_;
  Rng reclaim_rng_;  // its own stream: boots draw the same with reclaims on or off
  std::vector<Life> life_;
  std::vector<int32_t> generation_;    // bumped when a machine is requested or removed
  std::vector<int32_t> tasks_;         // replicas placed (jobs only, no holds)
  std::vector<int64_t> billed_since_;  // -1: not billed
  std::map<std::string, NodeIndex> by_name_;
  std::map<std::string, int64_t> idle_since_ms_;
  std::map<std::string, Request> requests_;  // in flight, by id
  std::map<NodeIndex, std::string> request_of_;
  std::map<std::string, autoscale::PoolState> pools_;  // by name, with back-offs
  std::vector<int64_t> idle_wakes_s_;
  int64_t next_request_ = 1;
  int32_t up_count_ = 0;
  ElasticResult result_;
};

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_ELASTIC_H_
