// The node model: one GPU machine as the control plane sees it. GPUs carry their UUID, catalog
// type, memory, MIG layout, NVLink island and NUMA node; the node carries CPU, memory, task
// slots, labels, taints, its pool, driver and CUDA versions, and its place in the network
// topology.
// Value types; thread-compatible.
#ifndef GPUCLOUD_CORE_NODE_H_
#define GPUCLOUD_CORE_NODE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/mig.h"
#include "core/node_pool.h"
#include "core/quantity.h"

namespace gpucloud {

struct Gpu {
  std::string uuid;  // "GPU-..." as NVML reports it
  int index = 0;     // NVML index on its node
  std::string type;  // catalog name ("H100-80GB" or "generic-...")
  MiB memory;
  std::string pci_bus_id;
  bool mig_enabled = false;
  std::vector<MigPlacement> mig_layout;  // instances configured when MIG is enabled
  int nvlink_island = -1;  // GPUs with the same island id are NVLink-connected; -1 = none
  int numa_node = -1;
  bool healthy = true;
  bool operator==(const Gpu&) const = default;
};

// Where a node sits in the network: zone -> spine -> leaf switch -> node.
struct TopologyPath {
  std::string zone;
  std::string spine;
  std::string leaf;
  bool operator==(const TopologyPath&) const = default;
};

// Tasks (replicas) one node runs at most unless it says otherwise: Kubernetes' maxPods default.
inline constexpr int32_t kDefaultMaxTasksPerNode = 110;

struct Node {
  std::string name;
  std::vector<Gpu> gpus;
  MilliCpu cpu;
  MiB memory;
  // Task slots: replicas the scheduler places on it at most, whatever they ask for (a CPU-only
  // replica asking for nothing still takes one).
  int32_t max_tasks = kDefaultMaxTasksPerNode;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  std::string pool;
  std::string driver_version;  // e.g. "550.54.15"
  int cuda_version = 0;        // NVML encoding, 12040 = 12.4
  TopologyPath topology;
  bool cordoned = false;
  bool operator==(const Node&) const = default;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_NODE_H_
