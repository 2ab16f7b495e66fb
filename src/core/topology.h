// The cluster's network tree (zone -> spine -> leaf switch -> node) with names interned to
// dense integer ids, so that the scheduler can ask how far apart two nodes are and which nodes
// share a switch without string compares. Distances: 0 same node, 1 same leaf switch, 2 same
// spine, 3 same zone, 4 different zones. Build once per snapshot; const methods are thread-safe.
#ifndef GPUCLOUD_CORE_TOPOLOGY_H_
#define GPUCLOUD_CORE_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/node.h"

namespace gpucloud {

enum class TopologyLevel { kZone = 0, kSpine = 1, kLeaf = 2, kNode = 3 };

class ClusterTopology {
 public:
  using NodeId = int32_t;

  // Adds a node under `path`; missing zone/spine/leaf names are created. Returns the node's id,
  // or AlreadyExists when the name is taken.
  absl::StatusOr<NodeId> AddNode(std::string_view name, const TopologyPath& path);

  // Id of a node by name, or -1.
  NodeId Find(std::string_view name) const;
  const std::string& NodeName(NodeId id) const { return nodes_[id].name; }
  size_t node_count() const { return nodes_.size(); }

  // 0 same node, 1 same leaf, 2 same spine, 3 same zone, 4 otherwise.
  int Distance(NodeId a, NodeId b) const;

  // Nodes that share the given level with `id` (itself included), in id order.
  std::vector<NodeId> NodesSharing(NodeId id, TopologyLevel level) const;

  // Dense id of the domain that holds node `id` at `level` (for kNode, the node id itself), in
  // [0, DomainCount(level)). A spine is named within its zone and a leaf within its spine.
  int32_t DomainOf(NodeId id, TopologyLevel level) const;
  int32_t DomainCount(TopologyLevel level) const;

 private:
  struct NodeEntry {
    std::string name;
    int32_t zone, spine, leaf;  // interned ids; spine and leaf are unique across the tree
  };
  int32_t Intern(std::unordered_map<std::string, int32_t>& table, const std::string& key);

  std::vector<NodeEntry> nodes_;
  std::unordered_map<std::string, NodeId> node_ids_;
  std::unordered_map<std::string, int32_t> zone_ids_, spine_ids_, leaf_ids_;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_TOPOLOGY_H_
