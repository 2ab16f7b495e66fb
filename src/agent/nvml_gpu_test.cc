// On a machine with NVIDIA GPUs (CTest label `gpu`; skipped elsewhere): the real NVML through
// dlopen finds every GPU, maps it to a catalog type, and gives plausible readings that agree
// with nvidia-smi's own (discovery exactly; temperature and power within sampling noise), and
// the exporter publishes those readings under dcgm-exporter's names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "agent/exporter.h"
#include "agent/nvml_backend.h"
#include "core/text.h"

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

// nvidia-smi's CSV rows for `fields`, one vector of cells per GPU; empty without nvidia-smi.
std::vector<std::vector<std::string>> NvidiaSmi(const std::string& fields) {
  std::vector<std::vector<std::string>> rows;
  FILE* p = popen(
      ("nvidia-smi --query-gpu=" + fields + " --format=csv,noheader,nounits 2>/dev/null").c_str(),
      "r");
  if (p == nullptr) return rows;
  char line[1024];
  while (fgets(line, sizeof line, p) != nullptr) {
    std::vector<std::string> cells;
    std::stringstream in(line);
    std::string cell;
    while (std::getline(in, cell, ',')) {
      size_t a = cell.find_first_not_of(" \n"), b = cell.find_last_not_of(" \n");
      cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
    }
    rows.push_back(std::move(cells));
  }
  pclose(p);
  return rows;
}

TEST(RealNvml, AgreesWithNvidiaSmiAndTheExporterPublishesIt) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml();
  if (absl::IsUnavailable(b.status())) GTEST_SKIP() << b.status().message();
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<std::vector<std::string>> smi = NvidiaSmi(
      "uuid,name,memory.total,pci.bus_id,driver_version,temperature.gpu,power.draw,mig.mode."
      "current");
  if (smi.empty()) GTEST_SKIP() << "no nvidia-smi to compare with";
  absl::StatusOr<NodeGpus> node = (*b)->Discover();
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_EQ(node->gpus.size(), smi.size());
  absl::StatusOr<std::vector<GpuSample>> samples = (*b)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  for (size_t i = 0; i < smi.size(); ++i) {
    const std::vector<std::string>& row = smi[i];
    ASSERT_EQ(row.size(), 8u);
    const GpuDevice& g = node->gpus[i];
    EXPECT_EQ(g.uuid, row[0]);
    EXPECT_EQ(g.name, row[1]);
    EXPECT_EQ(g.memory.raw(), std::atoll(row[2].c_str())) << "MiB";
    EXPECT_EQ(g.pci_bus_id, row[3]);
    EXPECT_EQ(node->driver_version, row[4]);
    EXPECT_EQ(g.mig_enabled, row[7] == "Enabled");
    const GpuSample& s = (*samples)[i];
    ASSERT_TRUE(s.temperature_c.has_value());
    EXPECT_NEAR(*s.temperature_c, std::atoi(row[5].c_str()), 5);
    if (s.power_w && row[6] != "[N/A]") {
      double smi_w = std::atof(row[6].c_str());
      EXPECT_NEAR(*s.power_w, smi_w, std::max(30.0, 0.3 * smi_w));
    }
  }
  // The exporter: dcgm-exporter's names and labels, with these readings.
  std::string text = DcgmMetricsText(*node, *samples, "host");
  for (size_t i = 0; i < smi.size(); ++i) {
    std::string labels = Cat("gpu=\"", i, "\",UUID=\"", node->gpus[i].uuid, "\"");
    EXPECT_NE(text.find("DCGM_FI_DEV_GPU_TEMP{" + labels), std::string::npos) << text;
    EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE{" + labels), std::string::npos) << text;
    EXPECT_NE(text.find("DCGM_FI_DEV_FB_USED{" + labels), std::string::npos) << text;
  }
}

// Hopper and later (compute capability 9.0+): GPM's profiling ratios between two samples (GPM
// wants them 100 ms or more apart: the wait is the measurement interval), and the readings that
// every data-centre GPU of that age has. Not yet run on real hardware when written.
TEST(RealNvml, GpmRatiosAndTheOtherDcgmFieldsOnHopper) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml();
  if (absl::IsUnavailable(b.status())) GTEST_SKIP() << b.status().message();
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<std::vector<std::string>> smi = NvidiaSmi("compute_cap,mig.mode.current");
  if (smi.empty()) GTEST_SKIP() << "no nvidia-smi to tell the architecture";
  ASSERT_TRUE((*b)->Discover().ok());
  ASSERT_TRUE((*b)->Sample().ok());
  usleep(300'000);
  absl::StatusOr<std::vector<GpuSample>> s = (*b)->Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), smi.size());
  int hopper = 0;
  for (size_t i = 0; i < smi.size(); ++i) {
    if (std::atof(smi[i][0].c_str()) < 9.0 || smi[i][1] == "Enabled") continue;
    ++hopper;
    const GpuSample& x = (*s)[i];
    ASSERT_TRUE(x.gr_engine_active.has_value()) << "GPU " << i << ": no GPM reading";
    EXPECT_GE(*x.gr_engine_active, 0.0);
    EXPECT_LE(*x.gr_engine_active, 1.0);
    ASSERT_TRUE(x.tensor_active.has_value());
    EXPECT_GE(*x.tensor_active, 0.0);
    EXPECT_LE(*x.tensor_active, 1.0);
    EXPECT_TRUE(x.pcie_replays.has_value());
    EXPECT_TRUE(x.remapped_rows_correctable.has_value());
    ASSERT_TRUE(x.memory_temperature_c.has_value());  // HBM
    EXPECT_GT(*x.memory_temperature_c, 0);
    EXPECT_LT(*x.memory_temperature_c, 110);
  }
  if (hopper == 0) GTEST_SKIP() << "no GPU of compute capability 9.0 or later outside MIG mode";
}

}  // namespace
}  // namespace gpucloud::agent
