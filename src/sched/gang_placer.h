// Gang placement: where can a job run now, all of its gang or nothing, and could it ever run.
//
// Algorithm (one job):
//   1. Filter: nodes every filter plugin accepts (labels, taints, CUDA, health, GPU types).
//   2. Topology: try to fit all replicas inside one domain, tightest level first: one node, one
//      leaf switch, one spine, one zone, then the whole cluster. Within a level every domain is
//      tried and the best fit wins (the one left with the fewest free GPUs), so that emptier
//      domains stay whole for larger gangs.
//   3. Inside a domain, replicas go one by one to the node where they fit (GPUs, CPU, memory
//      and a task slot: ClusterState::FitReplica) leaving the fewest free whole GPUs (best
//      fit); each is committed tentatively so that the next sees it.
//   4. If no domain holds every replica, the cluster-wide attempt may still hold at least the
//      gang size (minAvailable); fewer is a failure and nothing is held.
// The ClusterState is used as scratch space and is left exactly as it was found.
// Deterministic: nodes and domains are visited in index order and ties keep that order.
// Not thread-safe (it borrows the ClusterState and caches filter results).
#ifndef GPUCLOUD_SCHED_GANG_PLACER_H_
#define GPUCLOUD_SCHED_GANG_PLACER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/cluster_state.h"
#include "sched/job_request.h"
#include "sched/plugin.h"

namespace gpucloud::sched {

struct PlacementResult {
  std::optional<Allocation> allocation;  // set when the job fits now; not yet committed
  std::string reason;                    // why it does not fit, when it does not
  bool reservation = false;              // it would fit, but only on nodes reserved for another job
};

class GangPlacer {
 public:
  // Borrows `filters` and `scores`, which must outlive the placer. Without score plugins the
  // first node in best-fit order wins; with them, a few candidates per free-GPU count (and, for
  // MIG and shared requests, the first few nodes in best-fit order) are scored and the highest
  // weighted sum wins. Multi-node gangs are placed by topology and best fit only.
  explicit GangPlacer(const std::vector<std::unique_ptr<FilterPlugin>>& filters,
                      const std::vector<WeightedScore>* scores = nullptr)
      : filters_(filters), scores_(scores) {}

  // Where `job` can run now in `state`. Leaves `state` unchanged.
  PlacementResult PlaceNow(ClusterState& state, const JobRequest& job) const;
  // The same answer by the plain algorithm above, without the free-GPU index: the reference
  // that tests compare PlaceNow with.
  PlacementResult PlaceNowLinearForTest(ClusterState& state, const JobRequest& job) const;

  // When `job` could start if running jobs end when expected: `now_ms` if it fits now, else
  // the earliest expected end after which it fits, with the placement it would get then.
  // nullopt when it does not fit even after every job with a known end has ended. Binary search
  // over the end times (placement is assumed to get no harder as jobs end), releasing and
  // re-committing running jobs in `state` as it goes: O(running jobs) commits and O(log) placement
  // searches, no copy. Leaves `state` as it found it, its version() stamp included.
  struct StartEstimate {
    int64_t start_ms = 0;
    Allocation allocation;
  };
  std::optional<StartEstimate> EarliestStart(ClusterState& state, const JobRequest& job,
                                             int64_t now_ms) const;
  // The same for a job known not to fit now: only later starts are searched.
  std::optional<StartEstimate> EarliestLaterStart(ClusterState& state, const JobRequest& job,
                                                  int64_t now_ms) const;

  // Whether `job` could ever run on these nodes, were they empty, uncordoned and healthy.
  // nullopt if it could; otherwise the reason, e.g. "task trainer needs 16 GPUs of H100-80GB on
  // one node; the largest such node has 8".
  std::optional<std::string> WhyNeverFits(const std::vector<Node>& nodes, const GpuCatalog& catalog,
                                          const JobRequest& job) const;
  // The same, on a state built by EmptyCluster (reusable across jobs; left unchanged).
  std::optional<std::string> WhyNeverFits(ClusterState& empty, const JobRequest& job) const;
  // Whether node `n` passes every filter for `job` (cached like placement's own checks).
  std::vector<bool> EligibleMask(const ClusterState& state, const JobRequest& job) const;
  // `nodes` with nothing allocated, no cordons and every GPU healthy.
  static ClusterState EmptyCluster(const std::vector<Node>& nodes, const GpuCatalog& catalog);

 private:
  // Nodes that pass every filter, and "reason -> count" for the others. Cached per node set
  // and filter signature (filters look only at static facts of nodes).
  struct Eligibility {
    std::vector<NodeIndex> nodes;
    std::map<std::string, int> rejections;
    // Per topology level (0 node, 1 leaf, 2 spine, 3 zone): `nodes` grouped by domain, in
    // first-seen order; filled on first use (topology is static, like the filters' answers).
    mutable std::vector<std::vector<std::vector<NodeIndex>>> groups;
  };
  const std::vector<std::vector<NodeIndex>>& GroupsByDomain(const ClusterState& state,
                                                            const Eligibility& e,
                                                            int level_index) const;
  const Eligibility& EligibleNodes(const ClusterState& state, const JobRequest& job) const;
  // Level 0 through the free-GPU index, for jobs of whole GPUs (or none): walks nodes by free
  // GPUs upwards from what the job needs, filtering lazily; the first node that holds the whole
  // job is the best fit. nullopt when no single node can hold it now.
  // `needed` is job.WholeGpusNeeded().
  std::optional<Allocation> PlaceOnOneNodeIndexed(ClusterState& state, const JobRequest& job,
                                                  int64_t needed) const;
  // Levels `first_level`.. (0 node, 1 leaf, 2 spine, 3 zone) by scanning domains, then spread.
  // `pruned` skips domains with too few free GPUs and tries the rest best fit first, stopping
  // at the first that holds the job; unpruned tries every domain (the reference).
  PlacementResult PlaceAcrossDomains(ClusterState& state, const JobRequest& job, int first_level,
                                     bool pruned) const;
  bool PassesFilters(const JobRequest& job, const Node& node) const;
  // Places replicas on `domain` (node indices) one by one; returns the placements made, at
  // most all replicas, stopping at the first that does not fit.
  std::vector<ReplicaPlacement> Trial(ClusterState& state, const JobRequest& job,
                                      const std::vector<NodeIndex>& domain) const;

  struct Candidate {
    NodeIndex node = 0;
    std::vector<ReplicaPlacement> placed;
  };
  bool Scoring() const { return scores_ != nullptr && !scores_->empty(); }
  // The index of the candidate with the highest weighted, normalized score (the first on ties).
  size_t BestByScore(const ClusterState& state, const JobRequest& job,
                     const std::vector<Candidate>& candidates) const;

  const std::vector<std::unique_ptr<FilterPlugin>>& filters_;
  const std::vector<WeightedScore>* scores_;
  // nodes_id -> filter signature -> eligibility. At most two node sets are kept (the cluster
  // and its empty twin used for feasibility); entries are dropped when a third appears.
  mutable std::map<uint64_t, std::unordered_map<std::string, Eligibility>> eligible_cache_;
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_GANG_PLACER_H_
