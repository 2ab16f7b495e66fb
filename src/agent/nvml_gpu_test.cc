// On a machine with NVIDIA GPUs (CTest label `gpu`; skipped elsewhere): the real NVML through
// dlopen finds every GPU, maps it to a catalog type, and gives plausible readings.
#include <gtest/gtest.h>

#include "agent/nvml_backend.h"

namespace gpucloud::agent {
namespace {

TEST(RealNvml, DiscoversAndSamplesEveryGpu) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml();
  if (absl::IsUnavailable(b.status())) GTEST_SKIP() << b.status().message();
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<NodeGpus> node = (*b)->Discover();
  ASSERT_TRUE(node.ok()) << node.status();
  if (node->gpus.empty()) GTEST_SKIP() << "driver loaded, but no GPU";
  EXPECT_FALSE(node->driver_version.empty());
  EXPECT_GE(node->cuda_driver_version, 11000);
  for (const GpuDevice& g : node->gpus) {
    EXPECT_TRUE(g.uuid.starts_with("GPU-")) << g.uuid;
    EXPECT_FALSE(g.catalog_type.starts_with("generic-")) << g.name << " is not in the catalog";
    EXPECT_GT(g.memory.raw(), 8 * 1024);
    EXPECT_EQ(g.pci_bus_id.size(), 16u) << g.pci_bus_id;
  }
  absl::StatusOr<std::vector<GpuSample>> s = (*b)->Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), node->gpus.size());
  for (const GpuSample& x : *s) {
    ASSERT_TRUE(x.temperature_c.has_value());
    EXPECT_GT(*x.temperature_c, 0);
    EXPECT_LT(*x.temperature_c, 110);
    ASSERT_TRUE(x.power_w.has_value());
    EXPECT_GT(*x.power_w, 1.0);
    ASSERT_TRUE(x.fb_free.has_value());
  }
}

}  // namespace
}  // namespace gpucloud::agent
