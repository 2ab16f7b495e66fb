#include "agent/exporter.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "agent/simulated_backend.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

NodeGpus TwoGpus() {
  return {"nvml",
          "550.54.15",
          12040,
          {{0, "GPU-a", "NVIDIA H100", "00000000:19:00.0", MiB(81559), false, "H100-80GB"},
           {1, "GPU-b", "NVIDIA H100", "00000000:1A:00.0", MiB(81559), true, "H100-80GB"}}};
}

// The labels of GPU 0 of TwoGpus, as dcgm-exporter writes them.
constexpr char kGpu0[] =
    "{gpu=\"0\",UUID=\"GPU-a\",pci_bus_id=\"00000000:19:00.0\",device=\"nvidia0\","
    "modelName=\"NVIDIA H100\",Hostname=\"node-a\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"}";

TEST(Exporter, EveryDcgmFieldWithItsTypeWhenTheBackendReadsIt) {
  GpuSample s;
  s.index = 0;
  s.memory_temperature_c = 71;
  s.pcie_replays = 7;
  s.enc_util_percent = 11;
  s.dec_util_percent = 22;
  s.last_xid = 79;
  s.nvlink_kib = 3000;
  s.remapped_rows_correctable = 3;
  s.remapped_rows_uncorrectable = 1;
  s.row_remap_failed = false;
  s.gr_engine_active = 0.45;
  s.tensor_active = 0.125;
  std::string text = DcgmMetricsText(TwoGpus(), {s}, ExportContext{"node-a"});
  const std::pair<const char*, std::string> kWant[] = {
      {"DCGM_FI_DEV_MEMORY_TEMP gauge", "71"},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter", "7"},
      {"DCGM_FI_DEV_ENC_UTIL gauge", "11"},
      {"DCGM_FI_DEV_DEC_UTIL gauge", "22"},
      {"DCGM_FI_DEV_XID_ERRORS gauge", "79"},
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counter", "3000"},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS counter", "3"},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS counter", "1"},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE gauge", "0"},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge", "0.45"},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge", "0.125"},
  };
  for (const auto& [type, value] : kWant) {
    std::string name = std::string(type).substr(0, std::string(type).find(' '));
    EXPECT_NE(text.find(Cat("\n# TYPE ", type, "\n", name, kGpu0, " ", value, "\n")),
              std::string::npos)
        << type << "\n"
        << text;
  }
  // Nothing else was read: no other family, and no health without the agent's conditions.
  EXPECT_EQ(text.find("DCGM_FI_DEV_GPU_UTIL"), std::string::npos) << text;
  EXPECT_EQ(text.find("gpucloud_gpu_healthy"), std::string::npos) << text;
}

TEST(Exporter, AFieldTheBackendCannotReadIsLeftOutNotZero) {
  GpuSample s;
  s.index = 0;
  s.gpu_util_percent = 5;
  std::string text = DcgmMetricsText(TwoGpus(), {s}, ExportContext{"node-a"});
  for (const char* name :
       {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ENC_UTIL"}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name << "\n" << text;
  }
  EXPECT_NE(text.find(Cat("DCGM_FI_DEV_GPU_UTIL", kGpu0, " 5\n")), std::string::npos) << text;
}

TEST(Exporter, MigInstancesCarryGpuIProfileAndGpuIIdAndTheirTasksLabels) {
  GpuSample s;
  s.index = 1;
  s.temperature_c = 50;
  s.fb_used = MiB(80000);  // the whole GPU: not shown, its instances are
  s.mig = {{1, "3g.40gb", 0, MiB(100), MiB(40000), 0.5, 0.25},
           {2, "1g.10gb", 4, MiB(0), MiB(9000), std::nullopt, std::nullopt}};
  std::multimap<int, GpuOwner> owners = {{1, {"team", "train", "worker-0", 4}}};
  std::string text = DcgmMetricsText(TwoGpus(), {s}, {"node-a", &owners});
  const std::string gpu1 =
      "gpu=\"1\",UUID=\"GPU-b\",pci_bus_id=\"00000000:1A:00.0\",device=\"nvidia1\","
      "modelName=\"NVIDIA H100\"";
  const std::string tail = ",Hostname=\"node-a\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"";
  EXPECT_NE(text.find(Cat("DCGM_FI_DEV_FB_USED{", gpu1, ",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\"",
                          tail, "} 100\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(Cat("DCGM_FI_DEV_FB_USED{", gpu1, ",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"2\"",
                          tail, ",namespace=\"team\",job_name=\"train\",task=\"worker-0\"} 0\n")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(Cat("DCGM_FI_PROF_GR_ENGINE_ACTIVE{", gpu1,
                          ",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\"", tail, "} 0.5\n")),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("GPU_I_ID=\"2\"" + tail + "} 0.25"), std::string::npos) << text;
  EXPECT_EQ(text.find(" 80000\n"), std::string::npos) << text;
  // A reading of the GPU itself has no instance labels, and no instance's task.
  EXPECT_NE(text.find(Cat("DCGM_FI_DEV_GPU_TEMP{", gpu1, tail, "} 50\n")), std::string::npos)
      << text;
}

// Two tasks time-slice GPU 1: its readings are neither's, so they carry no task's labels.
TEST(Exporter, ASharedGpusSeriesNameNoOneTask) {
  GpuSample s;
  s.index = 1;
  s.temperature_c = 50;
  std::multimap<int, GpuOwner> one = {{1, {"team", "a", "worker-0", -1}}};
  std::multimap<int, GpuOwner> two = {{1, {"team", "a", "worker-0", -1}},
                                      {1, {"team", "b", "worker-0", -1}}};
  EXPECT_NE(DcgmMetricsText(TwoGpus(), {s}, {"node-a", &one}).find("job_name=\"a\""),
            std::string::npos);
  std::string shared = DcgmMetricsText(TwoGpus(), {s}, {"node-a", &two});
  EXPECT_EQ(shared.find("job_name="), std::string::npos) << shared;
  EXPECT_NE(shared.find("DCGM_FI_DEV_GPU_TEMP{"), std::string::npos) << shared;
}

TEST(Exporter, AHealthGaugePerGpuWithTheReasonAndLostGpusToo) {
  GpuSample s;
  s.index = 0;
  s.gpu_util_percent = 1;
  std::map<int, GpuCondition> health = {{1, {false, "Xid 79 (GPU fell off the bus)", false, ""}}};
  std::string text = DcgmMetricsText(TwoGpus(), {s}, {"node-a", nullptr, &health});
  EXPECT_NE(text.find("# TYPE gpucloud_gpu_healthy gauge\n"
                      "gpucloud_gpu_healthy{gpu=\"0\",UUID=\"GPU-a\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(Cat("gpucloud_gpu_healthy", kGpu0, " 1\n")), std::string::npos) << text;
  // GPU 1 sent no sample (it fell off the bus), and is still shown: unhealthy, with why.
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"550.54.15\",reason=\"Xid 79 (GPU fell off the "
                      "bus)\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(Cat("gpucloud_gpu_at_risk", kGpu0, " 0\n")), std::string::npos) << text;
}

TEST(Exporter, TheSimulatedBackendReadsEveryFieldAndItsMigInstances) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = MakeSimulatedBackend("2xH100");
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->Inject("xid", 1, 79).ok());
  absl::StatusOr<NodeGpus> node = (*b)->Discover();
  absl::StatusOr<std::vector<GpuSample>> samples = (*b)->Sample();
  ASSERT_TRUE(node.ok() && samples.ok());
  std::string text = DcgmMetricsText(*node, *samples, ExportContext{"sim"});
  for (const char* name :
       {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}) {
    EXPECT_NE(text.find(Cat("\n# TYPE ", name, " ")), std::string::npos) << name << "\n" << text;
  }
  EXPECT_NE(text.find("DCGM_FI_DEV_XID_ERRORS{gpu=\"1\""), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"simulated\"} 79\n"), std::string::npos) << text;
  // No NVLink island given: no NVLink, so no NVLink traffic.
  EXPECT_EQ(text.find("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpucloud::agent
