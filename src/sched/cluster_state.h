// ClusterState: what every GPU, node CPU, node memory and task slot in a cluster snapshot is used
// for, and the one place where usage changes. The scheduler asks it whether a replica fits on a
// node (and on which GPUs), and commits or releases whole jobs through it; nothing is ever
// over-committed because every change is checked here first.
//
// Every replica takes one of its node's task slots (Node::max_tasks). A replica that asks for no
// CPU or no memory is counted as kDefaultCpuRequest or kDefaultMemoryRequest, like a Kubernetes
// LimitRange's defaultRequest, so that packing stays bounded; its placement still records what it
// asked for (0), which the agent reads as "no limit".
//
// Per GPU, exactly one mode holds at a time:
//   free     nothing runs on it;
//   whole    one replica owns it (never shared, never MIG);
//   mig      the GPU is MIG-enabled and carries instances at valid, non-overlapping starts
//            (dynamic partitioning: an instance is created where FreeMigStarts allows);
//   shared   time-sliced or MPS replicas whose fractions sum to at most 1 GPU and whose memory
//            bounds sum to at most the GPU's memory; one sharing mode per GPU.
// Whole-GPU and shared requests never land on a MIG-enabled GPU, and MIG requests only there.
//
// Owns copies of the nodes it was built from. Not thread-safe; the scheduler uses one per cycle.
#ifndef GPUCLOUD_SCHED_CLUSTER_STATE_H_
#define GPUCLOUD_SCHED_CLUSTER_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/mig.h"
#include "core/node.h"
#include "core/queue.h"
#include "core/topology.h"

namespace gpucloud::sched {

using NodeIndex = int32_t;

// What a replica that asks for no CPU (no memory) is counted as on its node.
inline constexpr MilliCpu kDefaultCpuRequest = MilliCpu(100);
inline constexpr MiB kDefaultMemoryRequest = MiB(128);
// The CPU and memory a replica asking for `cpu` and `memory` takes on its node.
constexpr MilliCpu CountedCpu(MilliCpu cpu) { return cpu.is_zero() ? kDefaultCpuRequest : cpu; }
constexpr MiB CountedMemory(MiB memory) {
  return memory.is_zero() ? kDefaultMemoryRequest : memory;
}

// What one replica asks of one node.
struct ReplicaRequest {
  GpuRequest gpu;
  MilliCpu cpu;
  MiB memory;
};

// One GPU (or part of one) given to a replica.
struct GpuAssignment {
  int32_t gpu = 0;  // index into Node::gpus
  GpuMode mode = GpuMode::kWhole;
  MigPlacement mig;   // kMig only
  MilliGpu fraction;  // kShared only
  MiB memory;         // kShared only: the memory bound reserved on the GPU
  GpuSharing sharing = GpuSharing::kTimeSlicing;  // kShared only
  bool operator==(const GpuAssignment&) const = default;
};

struct ReplicaPlacement {
  std::string task;
  int32_t replica = 0;
  NodeIndex node = 0;
  std::vector<GpuAssignment> gpus;
  MilliCpu cpu;  // as asked (0: none, counted as kDefaultCpuRequest)
  MiB memory;    // as asked (0: none, counted as kDefaultMemoryRequest)
  bool operator==(const ReplicaPlacement&) const = default;
};

// Everything one job holds. Committed and released as a unit.
struct Allocation {
  std::string job;  // a unique key, e.g. "namespace/name"
  std::vector<ReplicaPlacement> replicas;
  std::string queue;  // the queue whose quota the allocation counts against; may be empty
  // When the job is expected to end (from the user's estimate or the simulator), in ms; 0 when
  // unknown. Used to answer "when could a waiting job start".
  int64_t expected_end_ms = 0;
  // For preemption: the job's priority, whether it may be preempted by any non-preemptible job
  // (spot), when it started and when it last wrote a complete checkpoint (0 = never; work since
  // then is what preempting it loses).
  int32_t priority = 0;
  bool preemptible = false;
  int64_t start_ms = 0;
  int64_t last_checkpoint_ms = 0;
  // Periodic checkpoints every this long from start_ms (the simulator's model of a job); 0: only
  // last_checkpoint_ms counts (the server's, from what the agents report). See LastCheckpointMs.
  int64_t checkpoint_interval_ms = 0;
  // Ordering dlas: the attained GPU-time (GPU x ms) this attempt's band counts from: the job's
  // earlier attempts, or 0 when the starvation guard promoted it. Its band at time t counts
  // its GPUs x (t - start_ms) on top.
  int64_t las_service_gpu_ms = 0;
  // Preempted and within its grace period: still holds its GPUs, is not chosen again.
  bool terminating = false;
  // Not a job: capacity held for a while (a reservation's nodes during a search, a cordoned
  // node in the simulator) or a placer's trial. Its key only has to be unique. Counted in no
  // queue's use, never a preemption victim, never reported.
  bool placeholder = false;
  bool operator==(const Allocation&) const = default;
};

// A replica that takes everything of `node` (index `n`): every GPU that is not MIG-enabled, all
// its CPU and memory. For placeholders that keep a node out of use (held for a provisioning
// request, beyond a round's headroom).
ReplicaPlacement WholeNodeHold(const Node& node, NodeIndex n);

// When `a` last wrote a complete checkpoint by `now_ms`: the later of its start, its reported
// last_checkpoint_ms and its last periodic checkpoint. Work since then is what preempting it
// loses.
int64_t LastCheckpointMs(const Allocation& a, int64_t now_ms);

// The one definition of a GPU assignment's share of its GPU ("GPU equivalents"), used for
// quotas, fair share, job status, metrics, cost and reports: 1 for a whole GPU, the fraction
// for a share, and for a MIG instance its compute slices over the GPU's (3g = 3/7, rounded up
// to a milli-GPU). `type` is the GPU's catalog entry; when it is null or lacks the profile, the
// slices are read from the profile's name ("3g.40gb" -> 3), at least 1.
MilliGpu GpuShareOf(const GpuAssignment& g, const GpuType* type);

class ClusterState {
 public:
  ClusterState(std::vector<Node> nodes, const GpuCatalog& catalog);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(NodeIndex n) const { return nodes_[n]; }
  NodeIndex node_count() const { return static_cast<NodeIndex>(nodes_.size()); }

  // The GPUs (or MIG instances, or shares) of node `n` that would satisfy one replica of `req`
  // now, or nullopt when it does not fit (GPUs, CPU, memory or a task slot). Whole GPUs are
  // taken from one NVLink island when one island has enough; MIG instances and shares go to the
  // fullest GPU that still fits them (best fit), keeping other GPUs whole. Deterministic. Does not
  // check labels, taints, GPU types or health: those are the filters' questions, except that
  // unhealthy GPUs are never handed out and GPU types in `req` are honoured.
  std::optional<std::vector<GpuAssignment>> FitReplica(NodeIndex n,
                                                       const ReplicaRequest& req) const;

  // Applies a job's allocation if every part of it fits; otherwise changes nothing and returns
  // FailedPrecondition naming the first part that does not (or AlreadyExists for a job that
  // already holds an allocation).
  absl::Status Commit(const Allocation& allocation);
  // Frees everything `job` holds; NotFound if it holds nothing.
  absl::Status Release(const std::string& job);
  // Marks every GPU of node `n` healthy or not (a node going down or coming back), in place: the
  // state then has a new nodes_id() (its nodes changed, so caches of node facts are stale).
  // FailedPrecondition, changing nothing, when GPUs of n are to go down while replicas are
  // placed there.
  absl::Status SetNodeGpusHealthy(NodeIndex n, bool healthy);

  const std::map<std::string, Allocation>& allocations() const { return allocations_; }

  // Free whole GPUs on a node (healthy, not MIG-enabled, nothing on them). O(1).
  int32_t FreeWholeGpus(NodeIndex n) const { return free_whole_[n]; }
  // The sum of FreeWholeGpus over all nodes. O(1).
  int64_t TotalFreeWholeGpus() const { return total_free_whole_; }
  // The nodes with exactly `free` free whole GPUs, in index order (empty beyond the largest
  // node). Kept up to date by Commit and Release, so a best-fit search walks these buckets
  // upwards from the GPUs it needs instead of scanning every node.
  const std::set<NodeIndex>& NodesWithFreeWholeGpus(int32_t free) const;
  int32_t MaxGpusPerNode() const { return static_cast<int32_t>(by_free_.size()) - 1; }

  // The nodes' network tree (node ids equal NodeIndex). Node names need not be unique here:
  // each node is registered under its index.
  const ClusterTopology& topology() const { return topology_; }

  // Distinct for every ClusterState built (copies share it: they hold the same nodes). Lets
  // callers cache facts that depend only on the nodes, such as which ones a filter accepts.
  uint64_t nodes_id() const { return nodes_id_; }
  // The same, except that it stays when SetNodeGpusHealthy changes GPUs' health: equal stamps
  // mean the same nodes but for their GPUs' health (what an empty, healthy twin depends on).
  uint64_t shape_id() const { return shape_id_; }
  // A stamp of the allocations: a new value, unique across every ClusterState, after each
  // successful Commit and Release (copies share it: they hold the same allocations), except
  // that a search which puts back exactly what it took out restores the stamp it found
  // (RestoreVersion). Equal stamps mean equal allocations, so a caller may reuse an answer
  // computed from them.
  uint64_t version() const { return version_; }
  // For a search that takes allocations out and commits the very same ones back (GangPlacer::
  // EarliestLaterStart): the stamp from before it, `before`, since the allocations are equal
  // again; answers cached under that stamp stay good. Only after such a search.
  void RestoreVersion(uint64_t before) { version_ = before; }
  // GPUs an allocation takes per GPU type, plus all types under "*": a MIG instance counts as
  // its share of the GPU's compute (3g = 3/7, rounded up to a milli-GPU), a share as its
  // fraction.
  std::map<std::string, MilliGpu> UsageByType(const Allocation& a) const;
  // The share of a GPU ("GPU equivalents") assignment `g` on node `n` takes; see GpuShareOf.
  MilliGpu ShareOf(NodeIndex n, const GpuAssignment& g) const;
  // Queue -> GPU type (and "*") -> GPUs held by the committed jobs (keys without '#'), kept up
  // to date by Commit and Release, so a scheduling cycle need not walk every running job.
  const std::map<std::string, std::map<std::string, MilliGpu>>& QueueUsage() const {
    return queue_usage_;
  }
  // Healthy GPUs (MIG-enabled or not) per GPU type: the capacity queues' shares are taken of.
  const std::map<std::string, MilliGpu>& HealthyGpusByType() const { return healthy_by_type_; }
  // How much of GPU `g` of node `n` a whole-GPU or shared request could still use: 1 GPU when it
  // is free, what the shares leave when it is shared, 0 when it is taken whole, MIG-enabled or
  // unhealthy. For the Fragmentation score.
  MilliGpu FreeShare(NodeIndex n, int32_t g) const;
  MilliCpu FreeCpu(NodeIndex n) const;
  MiB FreeMemory(NodeIndex n) const;
  // Replicas node `n` can still take (Node::max_tasks less those placed; 0 when over). O(1).
  int32_t FreeTaskSlots(NodeIndex n) const { return free_slots_[n]; }

  // Recomputes all usage from the committed allocations and compares it with the incremental
  // bookkeeping and with capacity; OK when nothing is over-committed. For tests and audits.
  absl::Status CheckInvariants() const;

 private:
  struct GpuUse {
    GpuMode mode = GpuMode::kNone;  // kNone = free
    std::vector<MigPlacement> mig;
    MilliGpu shared_fraction;
    MiB shared_memory;
    int32_t shared_replicas = 0;
    GpuSharing sharing = GpuSharing::kTimeSlicing;
  };
  struct NodeUse {
    std::vector<GpuUse> gpus;
    MilliCpu cpu;  // counted (CountedCpu), as is memory
    MiB memory;
    int32_t tasks = 0;  // replicas placed
  };

  const GpuType* TypeOf(const Gpu& gpu) const;
  bool TypeAccepted(const Gpu& gpu, const GpuRequest& req) const;
  MiB SharedMemoryBound(const Gpu& gpu, const GpuRequest& req) const;
  std::optional<std::vector<GpuAssignment>> FitWhole(NodeIndex n, const GpuRequest& req) const;
  std::optional<std::vector<GpuAssignment>> FitMig(NodeIndex n, const GpuRequest& req) const;
  std::optional<std::vector<GpuAssignment>> FitShared(NodeIndex n, const GpuRequest& req) const;
  // Checks one replica's assignment against `use` (the usage it would be added to) and adds it;
  // leaves `use` unchanged when it does not fit.
  absl::Status Apply(const ReplicaPlacement& r, std::vector<NodeUse>& use) const;
  void Remove(const ReplicaPlacement& r);  // RemoveUse and UpdateIndex
  void RemoveUse(const ReplicaPlacement& r);
  int32_t CountFreeWholeGpus(NodeIndex n) const;
  void UpdateIndex(NodeIndex n);  // free_whole_, by_free_ and free_slots_ of node n

  std::vector<Node> nodes_;
  const GpuCatalog* catalog_;  // not owned; a pointer so that states can be assigned
  std::vector<NodeUse> use_;
  std::map<std::string, Allocation> allocations_;
  ClusterTopology topology_;
  uint64_t nodes_id_;
  uint64_t shape_id_;
  uint64_t version_;
  std::vector<int32_t> free_whole_;           // per node, = CountFreeWholeGpus
  int64_t total_free_whole_ = 0;              // their sum
  std::vector<int32_t> free_slots_;           // per node, max_tasks less tasks (at least 0)
  std::vector<std::set<NodeIndex>> by_free_;  // by_free_[k]: nodes with k free whole GPUs
  std::map<std::string, MilliGpu> healthy_by_type_;
  std::map<std::string, std::map<std::string, MilliGpu>> queue_usage_;
  void CountQueueUsage(const Allocation& a, int sign);
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_CLUSTER_STATE_H_
