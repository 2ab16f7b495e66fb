#include "core/gpu_catalog.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

const GpuCatalog& Cat() { return GpuCatalog::Default(); }

TEST(GpuCatalog, HasTheRequiredModels) {
  for (const char* name : {"V100-16GB", "V100-32GB", "T4", "A10", "L40S", "A100-40GB", "A100-80GB",
                           "H100-80GB", "H200-141GB", "RTX-4090"}) {
    const GpuType* t = Cat().Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_GT(t->memory.raw(), 0) << name;
    EXPECT_GT(t->compute_capability, 0) << name;
    EXPECT_GT(t->on_demand_price_per_hour.raw(), 0) << name;
    EXPECT_GT(t->relative_speed_milli, 0) << name;
  }
  EXPECT_EQ(Cat().Find("h100-80gb")->name, "H100-80GB");
  EXPECT_EQ(Cat().Find("H100-80GB")->arch, GpuArch::kHopper);
  EXPECT_EQ(Cat().Find("H100-80GB")->compute_capability, 90);
}

TEST(GpuCatalog, MigProfilesMatchNvidiaTables) {
  const GpuType* a100 = Cat().Find("A100-40GB");
  ASSERT_TRUE(a100->mig_capable());
  const MigProfile* p = a100->FindMigProfile("3g.20gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->valid_starts, (std::vector<int>{0, 4}));
  EXPECT_EQ(p->max_instances, 2);
  EXPECT_NE(Cat().Find("H100-80GB")->FindMigProfile("1g.10gb+me"), nullptr);
  EXPECT_NE(Cat().Find("H200-141GB")->FindMigProfile("7g.141gb"), nullptr);
  EXPECT_EQ(Cat().Find("A100-40GB")->FindMigProfile("3g.40gb"), nullptr);
  EXPECT_FALSE(Cat().Find("T4")->mig_capable());
  EXPECT_FALSE(Cat().Find("V100-32GB")->mig_capable());
  EXPECT_EQ(Cat().TypesWithMigProfile("1g.10gb").size(), 3u);  // A100-40 (2x mem), A100-80, H100
}

TEST(GpuCatalog, ResolvesWhatUsersWrite) {
  auto names = [](const std::vector<const GpuType*>& v) {
    std::vector<std::string> out;
    for (auto* t : v) out.push_back(t->name);
    return out;
  };
  EXPECT_EQ(names(Cat().Resolve("h100")), (std::vector<std::string>{"H100-80GB"}));
  EXPECT_EQ(names(Cat().Resolve("a100")), (std::vector<std::string>{"A100-40GB", "A100-80GB"}));
  EXPECT_EQ(names(Cat().Resolve("nvidia-a100")),
            (std::vector<std::string>{"A100-40GB", "A100-80GB"}));
  EXPECT_EQ(names(Cat().Resolve("NVIDIA-A100-SXM4-80GB")), (std::vector<std::string>{"A100-80GB"}));
  EXPECT_EQ(names(Cat().Resolve("rtx-4090")), (std::vector<std::string>{"RTX-4090"}));
  EXPECT_EQ(names(Cat().Resolve("a10")), (std::vector<std::string>{"A10"}));
  EXPECT_TRUE(Cat().Resolve("b200").empty());
  EXPECT_TRUE(Cat().Resolve("").empty());
}

TEST(GpuCatalog, MapsHardwareNames) {
  struct Case {
    const char* reported;
    int64_t mib;
    const char* want;
  };
  for (const Case& c :
       {Case{"Tesla V100-SXM2-16GB", 16160, "V100-16GB"},
        Case{"Tesla V100-SXM2-32GB", 32510, "V100-32GB"}, Case{"Tesla T4", 15360, "T4"},
        Case{"NVIDIA A10", 23028, "A10"}, Case{"NVIDIA L40S", 46068, "L40S"},
        Case{"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
        Case{"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
        Case{"NVIDIA H100 80GB HBM3", 81559, "H100-80GB"},
        Case{"NVIDIA H200", 143771, "H200-141GB"},
        Case{"NVIDIA GeForce RTX 4090", 24564, "RTX-4090"}}) {
    GpuType t = Cat().FromHardware(c.reported, MiB(c.mib));
    EXPECT_EQ(t.name, c.want) << c.reported;
    EXPECT_FALSE(t.generic);
  }
}

TEST(GpuCatalog, UnknownHardwareIsGenericWithRealMemory) {
  GpuType t = Cat().FromHardware("NVIDIA B200", MiB(183359));
  EXPECT_TRUE(t.generic);
  EXPECT_EQ(t.name, "generic-b200");
  EXPECT_EQ(t.memory.raw(), 183359);
  EXPECT_FALSE(t.mig_capable());
  // A known family with memory far from every catalog entry (H100 NVL, 94 GB) is generic too.
  GpuType nvl = Cat().FromHardware("NVIDIA H100 NVL", MiB(95830));
  EXPECT_TRUE(nvl.generic);
  EXPECT_EQ(nvl.name, "generic-h100-nvl");
  EXPECT_EQ(Cat().FromHardware("", MiB(0)).name, "generic-gpu");
}

}  // namespace
}  // namespace gpucloud
