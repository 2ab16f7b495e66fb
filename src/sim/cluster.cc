#include "sim/cluster.h"

#include "autoscale/pool_nodes.h"
#include "core/text.h"

namespace gpucloud::sim {
namespace {

constexpr int kLeavesPerSpine = 8;

NodePool Pool(std::string name, std::string type, int gpus, int nodes, int per_leaf = 32) {
  NodePool p;
  p.metadata.name = std::move(name);
  p.metadata.namespace_.clear();
  p.spec.gpu_type = std::move(type);
  p.spec.gpus_per_node = gpus;
  p.spec.min_nodes = nodes;
  p.spec.max_nodes = nodes;
  p.spec.labels[std::string(autoscale::kNodesPerLeafLabel)] = std::to_string(per_leaf);
  return p;
}

}  // namespace

int64_t SimCluster::TotalGpus() const {
  int64_t total = 0;
  for (const Node& n : nodes) total += static_cast<int64_t>(n.gpus.size());
  return total;
}

SimCluster ClusterFromPools(std::string name, std::vector<NodePool> pools,
                            const GpuCatalog& catalog) {
  SimCluster c;
  c.name = std::move(name);
  c.pools = std::move(pools);
  int leaf = 0;  // leaves are numbered across the cluster; pools never share one
  for (size_t p = 0; p < c.pools.size(); ++p) {
    const NodePoolSpec& spec = c.pools[p].spec;
    c.price_of_pool.push_back(EffectivePricePerGpuHour(spec, catalog));
    const int per_leaf = autoscale::NodesPerLeaf(spec);
    for (int i = 0; i < spec.max_nodes; ++i) {
      if (i > 0 && i % per_leaf == 0) ++leaf;
      Node n = autoscale::PoolNode(
          c.pools[p], i, {"zone-0", Cat("spine-", leaf / kLeavesPerSpine), Cat("leaf-", leaf)},
          catalog);
      c.nodes.push_back(std::move(n));
      c.pool_of_node.push_back(static_cast<int>(p));
    }
    ++leaf;
  }
  return c;
}

absl::StatusOr<SimCluster> ClusterFromPreset(std::string_view name, const GpuCatalog& catalog) {
  if (name == "tiresias") {
    return ClusterFromPools("tiresias", {Pool("n32g4", "V100-16GB", 4, 32)}, catalog);
  }
  if (name == "pollux") return ClusterFromPools("pollux", {Pool("g4", "T4", 4, 16)}, catalog);
  if (name == "philly") {
    return ClusterFromPools(
        "philly", {Pool("g8", "V100-16GB", 8, 250), Pool("g2", "V100-16GB", 2, 300)}, catalog);
  }
  if (name == "pai") {
    return ClusterFromPools("pai", {Pool("v100", "V100-16GB", 8, 750), Pool("t4", "T4", 2, 250)},
                            catalog);
  }
  return absl::NotFoundError(
      Cat("unknown cluster preset \"", name, "\" (known: ", kClusterPresets, ")"));
}

}  // namespace gpucloud::sim
