#include "autoscale/pool_nodes.h"

#include <charconv>

#include "core/text.h"

namespace gpucloud::autoscale {

int NodesPerLeaf(const NodePoolSpec& spec) {
  auto it = spec.labels.find(std::string(kNodesPerLeafLabel));
  if (it == spec.labels.end()) return kDefaultNodesPerLeaf;
  int v = 0;
  auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return ec == std::errc() && end == it->second.data() + it->second.size() && v > 0
             ? v
             : kDefaultNodesPerLeaf;
}

std::string PoolNodeName(std::string_view pool, int index) { return Cat(pool, "-", index); }

Node PoolNode(const NodePool& pool, int index, TopologyPath path, const GpuCatalog& catalog) {
  const NodePoolSpec& spec = pool.spec;
  const GpuType* type = catalog.Find(spec.gpu_type);
  Node n;
  n.name = PoolNodeName(pool.metadata.name, index);
  n.pool = pool.metadata.name;
  n.cpu = Cores(16 * spec.gpus_per_node);
  n.memory = GiB(128 * spec.gpus_per_node);
  n.cuda_version = 12040;
  n.labels = spec.labels;
  n.taints = spec.taints;
  n.topology = std::move(path);
  for (int g = 0; g < spec.gpus_per_node; ++g) {
    n.gpus.push_back(Gpu{.uuid = Cat("GPU-", n.name, "-", g),
                         .index = g,
                         .type = spec.gpu_type,
                         .memory = type ? type->memory : GiB(16),
                         .nvlink_island = 0});
  }
  return n;
}

}  // namespace gpucloud::autoscale
