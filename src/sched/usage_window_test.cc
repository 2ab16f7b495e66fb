// UsageWindow: the fair-share window's history, as the server and the simulator keep it.
#include "sched/usage_window.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

constexpr int64_t kHour = 3'600'000;

TEST(UsageWindow, AnAttemptCountsInFullUntilTheWindowPassesItsEnd) {
  UsageWindow w(24 * kHour);
  w.Add(10 * kHour, "a", "H100-80GB", 8);
  w.Add(12 * kHour, "a", "H100-80GB", 2);
  w.Add(11 * kHour, "b", "T4", 1.5);  // in any order
  w.Advance(30 * kHour);
  EXPECT_EQ(w.history(), (QueueHistory{{"a", {{"H100-80GB", 10}}}, {"b", {{"T4", 1.5}}}}));
  w.Advance(34 * kHour);  // the window [10 h, 34 h]: the attempt that ended at 10 h is out
  EXPECT_EQ(w.history(), (QueueHistory{{"a", {{"H100-80GB", 2}}}, {"b", {{"T4", 1.5}}}}));
  w.Advance(36 * kHour);
  EXPECT_TRUE(w.history().empty());  // exactly nothing, not what subtraction leaves
  w.Advance(20 * kHour);             // never back
  w.Add(11 * kHour, "b", "T4", 1);   // ended before the window: ignored
  w.Add(13 * kHour, "b", "T4", 0);   // used nothing
  EXPECT_TRUE(w.history().empty());
}

TEST(UsageWindow, GpusByTypeSumsEachNodesType) {
  testing_util::NodeOptions t4;
  t4.type = "T4";
  ClusterState s({testing_util::MakeTestNode("h", 8), testing_util::MakeTestNode("t", 4, t4)},
                 GpuCatalog::Default());
  Allocation a{"ns/j",
               {{.task = "w", .node = 0, .gpus = {{.gpu = 0}, {.gpu = 1}}},
                {.task = "w", .node = 1, .gpus = {{.gpu = 2}}}}};
  EXPECT_EQ(GpusByType(s, a), (std::map<std::string, double>{{"H100-80GB", 2}, {"T4", 1}}));
}

}  // namespace
}  // namespace gpucloud::sched
