#include "core/clock.h"

#include <gtest/gtest.h>

#include <set>

namespace gpucloud {
namespace {

TEST(Rng, SameSeedSameSequence) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs = differs || x != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, RangeCoversBoundsOnly) {
  Rng r(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    int64_t v = r.Range(-2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(FakeClock, MovesOnlyWhenTold) {
  FakeClock c(100);
  EXPECT_EQ(c.NowMillis(), 100);
  c.Advance(50);
  EXPECT_EQ(c.NowMillis(), 150);
  EXPECT_GT(SystemClock().NowMillis(), 1'600'000'000'000);
}

}  // namespace
}  // namespace gpucloud
