// The simulated cluster: nodes built from node pools (gpucloud/v1 NodePool manifests, or a
// preset matching a paper's cluster), with a leaf/spine topology and a price per GPU-hour per
// node. Value type; thread-compatible.
//
// A pool contributes maxNodes nodes (the simulator does not autoscale). Its nodes sit under leaf
// switches of 32 nodes (label gpucloud.io/nodes-per-leaf overrides), eight leaves to a spine.
#ifndef GPUCLOUD_SIM_CLUSTER_H_
#define GPUCLOUD_SIM_CLUSTER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/node_pool.h"

namespace gpucloud::sim {

struct SimCluster {
  std::string name;
  std::vector<NodePool> pools;
  std::vector<Node> nodes;
  std::vector<int> pool_of_node;        // index into pools
  std::vector<MicroUsd> price_of_pool;  // per GPU-hour
  int64_t TotalGpus() const;
};

inline constexpr std::string_view kClusterPresets = "tiresias, pollux, philly, pai";

// Presets: "tiresias" (32 nodes x 4 V100 on one switch, as in Tiresias' n32g4), "pollux"
// (16 x 4 T4, as in Pollux), "philly" (250 x 8 + 300 x 2 V100: 550 nodes, 2,600 GPUs, like the
// Philly cluster), "pai" (750 x 8 V100 + 250 x 2 T4: 6,500 GPUs, the Alibaba PAI 2020 scale).
absl::StatusOr<SimCluster> ClusterFromPreset(std::string_view name,
                                             const GpuCatalog& catalog = GpuCatalog::Default());
// Builds the cluster from pools (in order).
SimCluster ClusterFromPools(std::string name, std::vector<NodePool> pools,
                            const GpuCatalog& catalog = GpuCatalog::Default());

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_CLUSTER_H_
