#include "core/topology.h"

#include "core/text.h"

namespace gpucloud {

int32_t ClusterTopology::Intern(std::unordered_map<std::string, int32_t>& table,
                                const std::string& key) {
  auto [it, inserted] = table.emplace(key, static_cast<int32_t>(table.size()));
  return it->second;
}

absl::StatusOr<ClusterTopology::NodeId> ClusterTopology::AddNode(std::string_view name,
                                                                 const TopologyPath& path) {
  std::string key(name);
  if (node_ids_.contains(key)) {
    return absl::AlreadyExistsError(Cat("node ", name, " is already in the topology"));
  }
  // A spine belongs to one zone and a leaf to one spine: qualify their names by their parents
  // so that "spine-1" in two zones are two spines.
  std::string spine = Cat(path.zone, "/", path.spine);
  std::string leaf = Cat(spine, "/", path.leaf);
  NodeEntry e{key, Intern(zone_ids_, path.zone), Intern(spine_ids_, spine),
              Intern(leaf_ids_, leaf)};
  NodeId id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(std::move(e));
  node_ids_.emplace(std::move(key), id);
  return id;
}

ClusterTopology::NodeId ClusterTopology::Find(std::string_view name) const {
  auto it = node_ids_.find(std::string(name));
  return it == node_ids_.end() ? -1 : it->second;
}

int ClusterTopology::Distance(NodeId a, NodeId b) const {
  if (a == b) return 0;
  const NodeEntry& x = nodes_[a];
  const NodeEntry& y = nodes_[b];
  if (x.leaf == y.leaf) return 1;
  if (x.spine == y.spine) return 2;
  if (x.zone == y.zone) return 3;
  return 4;
}

int32_t ClusterTopology::DomainOf(NodeId id, TopologyLevel level) const {
  const NodeEntry& e = nodes_[id];
  switch (level) {
    case TopologyLevel::kZone:
      return e.zone;
    case TopologyLevel::kSpine:
      return e.spine;
    case TopologyLevel::kLeaf:
      return e.leaf;
    case TopologyLevel::kNode:
      break;
  }
  return id;
}

int32_t ClusterTopology::DomainCount(TopologyLevel level) const {
  switch (level) {
    case TopologyLevel::kZone:
      return static_cast<int32_t>(zone_ids_.size());
    case TopologyLevel::kSpine:
      return static_cast<int32_t>(spine_ids_.size());
    case TopologyLevel::kLeaf:
      return static_cast<int32_t>(leaf_ids_.size());
    case TopologyLevel::kNode:
      break;
  }
  return static_cast<int32_t>(nodes_.size());
}

std::vector<ClusterTopology::NodeId> ClusterTopology::NodesSharing(NodeId id,
                                                                   TopologyLevel level) const {
  std::vector<NodeId> out;
  const int max_distance = 3 - static_cast<int>(level);
  for (NodeId other = 0; other < static_cast<NodeId>(nodes_.size()); ++other) {
    if (Distance(id, other) <= max_distance) out.push_back(other);
  }
  return out;
}

}  // namespace gpucloud
