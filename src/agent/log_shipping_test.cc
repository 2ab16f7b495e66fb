#include "agent/log_shipping.h"

#include <gtest/gtest.h>

namespace gpucloud::agent {
namespace {

constexpr LogLimits kLimits{.rotate_bytes = 100, .max_backlog = 400, .bytes_per_pass = 50};

TEST(PlanLogShipping, ShipsInBoundedPiecesAndRotatesOnlyWhatWasShipped) {
  EXPECT_EQ(PlanLogShipping(30, 0, kLimits).ship, 30);
  EXPECT_FALSE(PlanLogShipping(30, 0, kLimits).rotate);
  // Over the rotation size but not all shipped: ship a piece, do not rotate yet.
  ShipPlan p = PlanLogShipping(150, 0, kLimits);
  EXPECT_EQ(p.ship, 50);
  EXPECT_FALSE(p.rotate);
  EXPECT_EQ(p.drop, 0);
  // The last piece: then rotate.
  p = PlanLogShipping(150, 100, kLimits);
  EXPECT_EQ(p.ship, 50);
  EXPECT_TRUE(p.rotate);
  // Nothing new and small: nothing to do.
  p = PlanLogShipping(30, 30, kLimits);
  EXPECT_EQ(p.ship, 0);
  EXPECT_FALSE(p.rotate);
}

TEST(PlanLogShipping, ABacklogOverTheBoundIsDroppedAndCounted) {
  ShipPlan p = PlanLogShipping(1000, 100, kLimits);
  EXPECT_EQ(p.drop, 900);
  EXPECT_EQ(p.ship, 0);
  EXPECT_TRUE(p.rotate);
  EXPECT_EQ(PlanLogShipping(500, 100, kLimits).drop, 0);  // exactly the bound: kept
}

TEST(PlanLogShipping, EveryByteIsShippedOrCountedAsDropped) {
  // A task writing 37 bytes between passes, a server taking 50 a pass: nothing is lost and
  // the file stays bounded.
  int64_t size = 0, read = 0, shipped = 0, written = 0, dropped = 0, max_size = 0;
  for (int pass = 0; pass < 1000; ++pass) {
    size += 37;
    written += 37;
    max_size = std::max(max_size, size);
    ShipPlan p = PlanLogShipping(size, read, kLimits);
    dropped += p.drop;
    read += p.ship;
    shipped += p.ship;
    if (p.rotate) size = read = 0;
  }
  EXPECT_EQ(shipped + dropped + (size - read), written);
  EXPECT_EQ(dropped, 0);
  EXPECT_LE(max_size, kLimits.rotate_bytes + 2 * 37);
}

TEST(DroppedLogMarker, SaysHowMuchAndWhere) {
  std::string m = DroppedLogMarker(900, "/var/lib/gpucloud/logs/x.log.1", "node-a");
  EXPECT_NE(m.find("900 bytes"), std::string::npos);
  EXPECT_NE(m.find("x.log.1 on node node-a"), std::string::npos);
  EXPECT_TRUE(m.starts_with("\n") && m.ends_with("]\n"));
}

}  // namespace
}  // namespace gpucloud::agent
