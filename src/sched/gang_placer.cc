#include "sched/gang_placer.h"

#include <algorithm>
#include <map>

#include "core/text.h"

namespace gpucloud::sched {
namespace {

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return Cat(n, " ", n == 1 ? one : many);
}

// "0/5 nodes are available: 3 have no H100-80GB GPU, 2 are cordoned" in kube-scheduler's style.
std::string SummarizeRejections(int total, const std::map<std::string, int>& rejections) {
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [reason, count] : rejections) sorted.push_back({-count, reason});
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> parts;
  for (const auto& [neg, reason] : sorted) parts.push_back(Cat(-neg, " x ", reason));
  return Cat("0/", total, " nodes are available: ", Join(parts, "; "));
}

// Free whole GPUs left in `domain` (the best-fit measure between domains).
int64_t FreeGpusIn(const ClusterState& state, const std::vector<NodeIndex>& domain) {
  int64_t free = 0;
  for (NodeIndex n : domain) free += state.FreeWholeGpus(n);
  return free;
}

}  // namespace

std::vector<NodeIndex> GangPlacer::EligibleNodes(const ClusterState& state, const JobRequest& job,
                                                 std::map<std::string, int>* rejections) const {
  std::vector<NodeIndex> out;
  for (NodeIndex n = 0; n < state.node_count(); ++n) {
    std::optional<std::string> why;
    for (const std::unique_ptr<FilterPlugin>& f : filters_) {
      why = f->Filter(job, state.node(n));
      if (why) break;
    }
    if (why) {
      if (rejections != nullptr) ++(*rejections)[*why];
    } else {
      out.push_back(n);
    }
  }
  return out;
}

std::vector<ReplicaPlacement> GangPlacer::Trial(ClusterState& state, const JobRequest& job,
                                                const std::vector<NodeIndex>& domain) const {
  std::vector<ReplicaPlacement> placed;
  std::vector<std::string> tentative;
  bool stop = false;
  for (const TaskRequest& task : job.tasks) {
    for (int32_t r = 0; r < task.replicas && !stop; ++r) {
      NodeIndex best = -1;
      int32_t best_left = 0;
      std::vector<GpuAssignment> best_fit;
      for (NodeIndex n : domain) {
        std::optional<std::vector<GpuAssignment>> fit = state.FitReplica(n, task.per_replica);
        if (!fit) continue;
        int32_t left = state.FreeWholeGpus(n);
        if (task.per_replica.gpu.mode == GpuMode::kWhole) left -= task.per_replica.gpu.count;
        if (best < 0 || left < best_left) {
          best = n;
          best_left = left;
          best_fit = std::move(*fit);
        }
      }
      if (best < 0) {
        stop = true;
        break;
      }
      ReplicaPlacement p{
          task.name, r, best, std::move(best_fit), task.per_replica.cpu, task.per_replica.memory};
      std::string key = Cat(job.key, "#trial#", placed.size());
      if (!state.Commit(Allocation{key, {p}}).ok()) {  // FitReplica said yes: cannot happen
        stop = true;
        break;
      }
      tentative.push_back(std::move(key));
      placed.push_back(std::move(p));
    }
  }
  for (const std::string& key : tentative) (void)state.Release(key);
  return placed;
}

PlacementResult GangPlacer::PlaceNow(ClusterState& state, const JobRequest& job) const {
  std::map<std::string, int> rejections;
  std::vector<NodeIndex> eligible = EligibleNodes(state, job, &rejections);
  if (eligible.empty()) return {std::nullopt, SummarizeRejections(state.node_count(), rejections)};
  const int32_t total = job.TotalReplicas();

  // Domains per level, tightest first: node, leaf switch, spine, zone.
  auto domain_key = [&](NodeIndex n, int level) -> std::string {
    const Node& node = state.node(n);
    switch (level) {
      case 0:
        return node.name;
      case 1:
        return Cat(node.topology.zone, "/", node.topology.spine, "/", node.topology.leaf);
      case 2:
        return Cat(node.topology.zone, "/", node.topology.spine);
      default:
        return node.topology.zone;
    }
  };
  for (int level = 0; level < 4; ++level) {
    std::map<std::string, std::vector<NodeIndex>> domains;
    std::vector<std::string> order;  // first-seen order keeps the result deterministic
    for (NodeIndex n : eligible) {
      std::string key = domain_key(n, level);
      if (!domains.contains(key)) order.push_back(key);
      domains[key].push_back(n);
    }
    std::optional<std::vector<ReplicaPlacement>> best;
    int64_t best_left = 0;
    for (const std::string& key : order) {
      const std::vector<NodeIndex>& domain = domains[key];
      std::vector<ReplicaPlacement> placed = Trial(state, job, domain);
      if (static_cast<int32_t>(placed.size()) < total) continue;
      int64_t left = FreeGpusIn(state, domain);
      if (!best || left < best_left) {
        best = std::move(placed);
        best_left = left;
      }
    }
    if (best) return {Allocation{job.key, std::move(*best)}, ""};
  }
  // No single domain holds everything: spread over the cluster, keeping at least the gang.
  std::vector<ReplicaPlacement> placed = Trial(state, job, eligible);
  if (static_cast<int32_t>(placed.size()) >= job.gang_size) {
    return {Allocation{job.key, std::move(placed)}, ""};
  }
  return {std::nullopt,
          Cat("waiting for capacity: ", Plural(placed.size(), "replica fits", "replicas fit"),
              " now, the gang needs ", job.gang_size, " together")};
}

std::optional<std::string> GangPlacer::WhyNeverFits(const std::vector<Node>& nodes,
                                                    const GpuCatalog& catalog,
                                                    const JobRequest& job) const {
  std::vector<Node> empty = nodes;
  for (Node& n : empty) {
    n.cordoned = false;  // cordons and broken GPUs are temporary
    for (Gpu& g : n.gpus) g.healthy = true;
  }
  ClusterState state(std::move(empty), catalog);
  std::map<std::string, int> rejections;
  std::vector<NodeIndex> eligible = EligibleNodes(state, job, &rejections);
  if (eligible.empty()) return SummarizeRejections(state.node_count(), rejections);
  for (const TaskRequest& task : job.tasks) {
    bool fits_somewhere = false;
    int32_t largest = 0;
    for (NodeIndex n : eligible) {
      fits_somewhere = fits_somewhere || state.FitReplica(n, task.per_replica).has_value();
      int32_t gpus = 0;
      for (const Gpu& g : state.node(n).gpus) {
        const std::vector<std::string>& types = task.per_replica.gpu.types;
        if (!g.mig_enabled && (types.empty() || std::count(types.begin(), types.end(), g.type))) {
          ++gpus;
        }
      }
      largest = std::max(largest, gpus);
    }
    if (fits_somewhere) continue;
    const GpuRequest& gpu = task.per_replica.gpu;
    std::string types = gpu.types.empty() ? "any type" : Join(gpu.types, " or ");
    if (gpu.mode == GpuMode::kWhole && gpu.count > largest) {
      return Cat("task ", task.name, " needs ", gpu.count, " GPUs of ", types,
                 " on one node; the largest such node has ", largest);
    }
    return Cat("task ", task.name, " fits on no eligible node (", types,
               gpu.mode == GpuMode::kMig ? Cat(", MIG ", gpu.mig_profile) : std::string(), ", CPU ",
               task.per_replica.cpu.raw(), "m, memory ", task.per_replica.memory.raw(), "Mi)");
  }
  std::vector<ReplicaPlacement> placed = Trial(state, job, eligible);
  if (static_cast<int32_t>(placed.size()) < job.gang_size) {
    return Cat("the gang needs ", job.gang_size,
               " replicas together; the eligible nodes hold at most ", placed.size());
  }
  return std::nullopt;
}

}  // namespace gpucloud::sched
