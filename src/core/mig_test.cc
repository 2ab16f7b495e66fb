#include "core/mig.h"

#include <gtest/gtest.h>

#include "core/clock.h"

namespace gpucloud {
namespace {

const GpuType& H100() { return *GpuCatalog::Default().Find("H100-80GB"); }

TEST(Mig, ValidLayouts) {
  EXPECT_TRUE(ValidateMigLayout(H100(), {}).ok());
  EXPECT_TRUE(ValidateMigLayout(H100(), {{"7g.80gb", 0}}).ok());
  EXPECT_TRUE(ValidateMigLayout(H100(), {{"3g.40gb", 0}, {"3g.40gb", 4}}).ok());
  EXPECT_TRUE(ValidateMigLayout(H100(), {{"4g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}}).ok());
  std::vector<MigPlacement> seven;
  for (int i = 0; i < 7; ++i) seven.push_back({"1g.10gb", i});
  EXPECT_TRUE(ValidateMigLayout(H100(), seven).ok());
}

TEST(Mig, InvalidLayouts) {
  EXPECT_EQ(ValidateMigLayout(H100(), {{"3g.40gb", 2}}).message(),
            "instance 0: 3g.40gb cannot start at slice 2");
  EXPECT_EQ(ValidateMigLayout(H100(), {{"3g.40gb", 0}, {"2g.20gb", 2}}).message(),
            "instance 1: 2g.20gb at slice 2 overlaps another instance");
  EXPECT_EQ(ValidateMigLayout(H100(), {{"1g.10gb+me", 0}, {"1g.10gb+me", 1}}).message(),
            "instance 1: more than 1 instances of 1g.10gb+me");
  EXPECT_EQ(ValidateMigLayout(H100(), {{"1g.5gb", 0}}).message(),
            "instance 0: H100-80GB has no MIG profile 1g.5gb");
  EXPECT_FALSE(ValidateMigLayout(*GpuCatalog::Default().Find("T4"), {{"1g.5gb", 0}}).ok());
}

TEST(Mig, FreeStarts) {
  const MigProfile& g3 = *H100().FindMigProfile("3g.40gb");
  EXPECT_EQ(FreeMigStarts(H100(), {}, g3), (std::vector<int>{0, 4}));
  EXPECT_EQ(FreeMigStarts(H100(), {{"1g.10gb", 1}}, g3), (std::vector<int>{4}));
  EXPECT_TRUE(FreeMigStarts(H100(), {{"1g.10gb", 1}, {"1g.10gb", 5}}, g3).empty());
}

// Property: greedily adding random instances at the starts FreeMigStarts offers never yields an
// invalid layout, and memory slices in use never exceed eight.
TEST(Mig, RandomGreedyLayoutsStayValid) {
  Rng rng(42);
  for (const char* name : {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"}) {
    const GpuType& t = *GpuCatalog::Default().Find(name);
    for (int round = 0; round < 500; ++round) {
      std::vector<MigPlacement> layout;
      for (int step = 0; step < 12; ++step) {
        const MigProfile& p = t.mig_profiles[rng.Uniform(t.mig_profiles.size())];
        std::vector<int> starts = FreeMigStarts(t, layout, p);
        if (starts.empty()) continue;
        layout.push_back({p.name, starts[rng.Uniform(starts.size())]});
        ASSERT_TRUE(ValidateMigLayout(t, layout).ok());
      }
      int slices = 0;
      for (const MigPlacement& m : layout) slices += t.FindMigProfile(m.profile)->memory_slices;
      EXPECT_LE(slices, kMigMemorySlices);
    }
  }
}

}  // namespace
}  // namespace gpucloud
