// The nodes a node pool adds: one definition of "a machine of this pool", used by the
// simulator's clusters and by the autoscaler's hypothetical nodes, so that both place jobs on
// the same machines. Pure functions; thread-safe.
#ifndef GPUCLOUD_AUTOSCALE_POOL_NODES_H_
#define GPUCLOUD_AUTOSCALE_POOL_NODES_H_

#include <string>
#include <string_view>

#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/node_pool.h"

namespace gpucloud::autoscale {

// Leaf switches of a pool's nodes hold this many nodes unless the pool's label
// gpucloud.io/nodes-per-leaf says otherwise (a positive integer).
inline constexpr int kDefaultNodesPerLeaf = 32;
inline constexpr std::string_view kNodesPerLeafLabel = "gpucloud.io/nodes-per-leaf";
int NodesPerLeaf(const NodePoolSpec& spec);

// The name of a pool's `index`th node: "<pool>-<index>".
std::string PoolNodeName(std::string_view pool, int index);

// Node `index` of `pool`: spec.gpus_per_node GPUs of its type (one NVLink island; memory from
// the catalog, 16 GiB for a type it does not know), 16 cores and 128 GiB per GPU, CUDA 12.4,
// the pool's labels and taints, at topology `path`.
Node PoolNode(const NodePool& pool, int index, TopologyPath path, const GpuCatalog& catalog);

}  // namespace gpucloud::autoscale

#endif  // GPUCLOUD_AUTOSCALE_POOL_NODES_H_
