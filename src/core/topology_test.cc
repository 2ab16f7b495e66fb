#include "core/topology.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

TEST(ClusterTopology, Distances) {
  ClusterTopology t;
  auto a = *t.AddNode("a", {"z1", "s1", "l1"});
  auto b = *t.AddNode("b", {"z1", "s1", "l1"});
  auto c = *t.AddNode("c", {"z1", "s1", "l2"});
  auto d = *t.AddNode("d", {"z1", "s2", "l1"});  // leaf "l1" under another spine: not a's leaf
  auto e = *t.AddNode("e", {"z2", "s1", "l1"});
  EXPECT_EQ(t.Distance(a, a), 0);
  EXPECT_EQ(t.Distance(a, b), 1);
  EXPECT_EQ(t.Distance(a, c), 2);
  EXPECT_EQ(t.Distance(a, d), 3);
  EXPECT_EQ(t.Distance(a, e), 4);
  EXPECT_EQ(t.Find("c"), c);
  EXPECT_EQ(t.Find("zz"), -1);
  EXPECT_EQ(t.NodesSharing(a, TopologyLevel::kLeaf), (std::vector<int32_t>{a, b}));
  EXPECT_EQ(t.NodesSharing(a, TopologyLevel::kSpine), (std::vector<int32_t>{a, b, c}));
  EXPECT_EQ(t.NodesSharing(a, TopologyLevel::kZone), (std::vector<int32_t>{a, b, c, d}));
  EXPECT_EQ(t.AddNode("a", {"z1", "s1", "l1"}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(t.DomainOf(a, TopologyLevel::kLeaf), t.DomainOf(b, TopologyLevel::kLeaf));
  EXPECT_NE(t.DomainOf(a, TopologyLevel::kLeaf), t.DomainOf(d, TopologyLevel::kLeaf));
  EXPECT_EQ(t.DomainOf(a, TopologyLevel::kSpine), t.DomainOf(c, TopologyLevel::kSpine));
  EXPECT_EQ(t.DomainOf(e, TopologyLevel::kNode), e);
  EXPECT_EQ(t.DomainCount(TopologyLevel::kZone), 2);
  EXPECT_EQ(t.DomainCount(TopologyLevel::kSpine), 3);
  EXPECT_EQ(t.DomainCount(TopologyLevel::kLeaf), 4);
  EXPECT_EQ(t.DomainCount(TopologyLevel::kNode), 5);
}

}  // namespace
}  // namespace gpucloud
