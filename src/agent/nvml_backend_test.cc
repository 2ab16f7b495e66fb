#include "agent/nvml_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "agent/exporter.h"
#include "agent/simulated_backend.h"

namespace gpucloud::agent {
namespace {

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FAKE_NVML_INIT_RC");
    unsetenv("FAKE_NVML_COUNT_RC");
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_NVLINK");
    unsetenv("FAKE_NVML_MIG");
    unsetenv("FAKE_NVML_GPM");
  }
  // Opens the fake library and discovers its GPUs (as the FAKE_NVML_* variables set them).
  static absl::StatusOr<NodeGpus> Discover() {
    absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
    if (!b.ok()) return b.status();
    return (*b)->Discover();
  }
};

TEST_F(FakeNvml, DiscoversDevicesThroughDlopen) {
  absl::StatusOr<NodeGpus> node = Discover();
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->backend, "nvml");
  EXPECT_EQ(node->driver_version, "550.54.15");
  EXPECT_EQ(node->cuda_driver_version, 12040);
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_EQ(node->gpus[1].uuid, "GPU-fake-1");
  EXPECT_EQ(node->gpus[1].pci_bus_id, "00000000:1A:00.0");
  EXPECT_EQ(node->gpus[0].memory, MiB(81559));
  EXPECT_EQ(node->gpus[0].catalog_type, "H100-80GB");
  EXPECT_FALSE(node->gpus[0].mig_enabled);
}

TEST_F(FakeNvml, MigDevicesGiveTheLayoutAndTheirUuids) {
  setenv("FAKE_NVML_GPUS", "3", 1);
  // GPU 0: 3g.40gb at 0, 1g.10gb at 5 and 4 (listed out of order), and an instance no H100
  // profile has (2 compute slices over 4 memory slices): left out. GPU 1: 7g.80gb.
  setenv("FAKE_NVML_MIG", "0:3/4@0,1/1@5,1/1@4,2/4@4;1:7/8@0", 1);
  absl::StatusOr<NodeGpus> g = Discover();
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->gpus.size(), 3u);
  EXPECT_TRUE(g->gpus[0].mig_enabled);
  EXPECT_EQ(g->gpus[0].mig_layout,
            (std::vector<MigPlacement>{{"3g.40gb", 0}, {"1g.10gb", 4}, {"1g.10gb", 5}}));
  EXPECT_EQ(
      g->gpus[0].mig_uuid_by_start,
      (std::map<int, std::string>{{0, "MIG-fake-0-0"}, {4, "MIG-fake-0-2"}, {5, "MIG-fake-0-1"}}));
  EXPECT_EQ(g->gpus[1].mig_layout, (std::vector<MigPlacement>{{"7g.80gb", 0}}));
  EXPECT_FALSE(g->gpus[2].mig_enabled);
  EXPECT_TRUE(g->gpus[2].mig_layout.empty());
}

TEST_F(FakeNvml, NvlinkIslandsFromActiveLinksAndSwitches) {
  setenv("FAKE_NVML_GPUS", "5", 1);
  setenv("FAKE_NVML_NVLINK", "0-1,2-S,3-S", 1);
  absl::StatusOr<NodeGpus> node = Discover();
  unsetenv("FAKE_NVML_NVLINK");
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_EQ(node->gpus.size(), 5u);
  EXPECT_EQ(node->gpus[0].nvlink_island, 0);
  EXPECT_EQ(node->gpus[1].nvlink_island, 0);
  EXPECT_EQ(node->gpus[2].nvlink_island, 2);  // through the NVSwitch, with GPU 3
  EXPECT_EQ(node->gpus[3].nvlink_island, 2);
  EXPECT_EQ(node->gpus[4].nvlink_island, -1);  // no links
  // The matrix nvidia-smi topo -m prints: NVLink where there is one (through the switch too),
  // else the PCIe path (the fake: pairs under one bridge, fours under one host bridge).
  using Row = std::vector<std::string>;
  EXPECT_EQ(node->topology, (std::vector<Row>{{"X", "NV1", "PHB", "PHB", "SYS"},
                                              {"NV1", "X", "PHB", "PHB", "SYS"},
                                              {"PHB", "PHB", "X", "NV1", "SYS"},
                                              {"PHB", "PHB", "NV1", "X", "SYS"},
                                              {"SYS", "SYS", "SYS", "SYS", "X"}}));
}

TEST_F(FakeNvml, XidEventsArriveThroughTheEventSet) {
  setenv("FAKE_NVML_XIDS", "1:79,0:48", 1);
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<XidEvent> xids = (*b)->TakeXids();
  unsetenv("FAKE_NVML_XIDS");
  ASSERT_EQ(xids.size(), 2u);
  EXPECT_EQ(xids[0].gpu, 1);
  EXPECT_EQ(xids[0].xid, 79);
  EXPECT_EQ(xids[1].gpu, 0);
  EXPECT_EQ(xids[1].xid, 48);  // a double-bit ECC event counts as Xid 48
  EXPECT_TRUE((*b)->TakeXids().empty());
}

TEST_F(FakeNvml, SamplesLeaveUnsupportedReadingsUnset) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<GpuSample>> s = (*b)->Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].gpu_util_percent, 87);
  EXPECT_EQ((*s)[0].temperature_c, 64);
  EXPECT_DOUBLE_EQ(*(*s)[0].power_w, 412.5);
  EXPECT_EQ((*s)[0].energy_mj, 123456789u);
  EXPECT_EQ((*s)[0].fb_used, MiB(1024));
  EXPECT_EQ((*s)[0].ecc_corrected, 5u);
  EXPECT_EQ((*s)[0].remapped_rows, 4u);
  EXPECT_FALSE((*s)[0].sm_clock_mhz.has_value());  // the fake says NOT_SUPPORTED
}

TEST_F(FakeNvml, SamplesReadDcgmExportersOtherDefaultFields) {
  setenv("FAKE_NVML_GPUS", "3", 1);
  setenv("FAKE_NVML_NVLINK", "0-1", 1);
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<std::vector<GpuSample>> s = (*b)->Sample();
  unsetenv("FAKE_NVML_NVLINK");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  const GpuSample& g = (*s)[0];
  EXPECT_EQ(g.pcie_replays, 7u);
  EXPECT_EQ(g.enc_util_percent, 11);
  EXPECT_EQ(g.dec_util_percent, 22);
  EXPECT_EQ(g.memory_temperature_c, 71);  // a field value (NVML_FI_DEV_MEMORY_TEMP)
  EXPECT_EQ(g.nvlink_kib, 3000u);         // data sent plus received, over all links
  EXPECT_EQ(g.remapped_rows_correctable, 3u);
  EXPECT_EQ(g.remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(g.row_remap_failed, false);
  EXPECT_FALSE((*s)[2].nvlink_kib.has_value());  // no NVLink: the field is not supported
  // Xids are watched once TakeXids registered the GPUs: none yet is 0, not unknown.
  EXPECT_FALSE(g.last_xid.has_value());
  // GPM is not supported here (FAKE_NVML_GPM unset): no profiling ratios.
  EXPECT_FALSE(g.gr_engine_active.has_value());
  EXPECT_FALSE(g.tensor_active.has_value());
}

TEST_F(FakeNvml, TheLastXidOfEachGpuOnceTheEventSetWatchesThem) {
  setenv("FAKE_NVML_XIDS", "1:31,1:79", 1);
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->TakeXids().size(), 2u);
  unsetenv("FAKE_NVML_XIDS");
  absl::StatusOr<std::vector<GpuSample>> s = (*b)->Sample();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0].last_xid, 0);
  EXPECT_EQ((*s)[1].last_xid, 79);
}

TEST_F(FakeNvml, GpmGivesProfilingRatiosBetweenTwoSamplesOfTheGpuAndItsMigInstances) {
  // A handle of our own keeps the fake loaded after the backend closes it, to count its
  // GPM samples left allocated.
  void* fake = dlopen(FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(fake, nullptr);
  auto live = reinterpret_cast<int (*)()>(dlsym(fake, "nvmlGpmLiveForTest"));
  ASSERT_NE(live, nullptr);
  setenv("FAKE_NVML_GPM", "1", 1);
  setenv("FAKE_NVML_MIG", "1:3/4@0,1/1@4", 1);
  {
    absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE((*b)->Discover().ok());
    absl::StatusOr<std::vector<GpuSample>> first = (*b)->Sample();
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_FALSE((*first)[0].gr_engine_active.has_value());  // one sample: no interval yet
    absl::StatusOr<std::vector<GpuSample>> s = (*b)->Sample();
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_DOUBLE_EQ(*(*s)[0].gr_engine_active, 0.45);  // GPM's 45 %, as DCGM's ratio
    EXPECT_DOUBLE_EQ(*(*s)[0].tensor_active, 0.125);
    EXPECT_TRUE((*s)[0].mig.empty());
    // GPU 1's MIG instances, each with its GPU instance id, profile, memory and GPM ratios.
    ASSERT_EQ((*s)[1].mig.size(), 2u);
    const GpuSample::MigInstance& i = (*s)[1].mig[1];
    EXPECT_EQ(i.gpu_instance_id, 2);
    EXPECT_EQ(i.profile, "1g.10gb");
    EXPECT_EQ(i.start, 4);
    EXPECT_EQ(i.fb_used, MiB(1024));
    EXPECT_DOUBLE_EQ(*i.tensor_active, 0.125);
    EXPECT_EQ(live(), 4);  // the latest sample of 2 GPUs and 2 MIG instances is kept...
  }
  EXPECT_EQ(live(), 0);  // ...and freed with the backend
  unsetenv("FAKE_NVML_GPM");
  dlclose(fake);
}

TEST_F(FakeNvml, ErrorsAreNamed) {
  EXPECT_EQ(OpenNvml(FAKE_NVML_NO_UUID).status().message(),
            "NVML library lacks the required symbol nvmlDeviceGetUUID");
  EXPECT_TRUE(absl::IsUnavailable(OpenNvml("/nonexistent/libnvidia-ml.so.1").status()));
  setenv("FAKE_NVML_INIT_RC", "9", 1);
  absl::Status s = OpenNvml(FAKE_NVML).status();
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(s.message(), "NVML: the NVIDIA driver is not loaded");
  setenv("FAKE_NVML_INIT_RC", "999", 1);
  EXPECT_EQ(OpenNvml(FAKE_NVML).status().message(), "nvmlInit_v2 failed: Unknown Error (999)");
  unsetenv("FAKE_NVML_INIT_RC");
  setenv("FAKE_NVML_COUNT_RC", "15", 1);
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = OpenNvml(FAKE_NVML);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->Discover().status().message(), "nvmlDeviceGetCount_v2 failed: fake error (15)");
}

TEST(Simulated, SpecsAndErrors) {
  absl::StatusOr<std::unique_ptr<GpuBackend>> b = MakeSimulatedBackend("2xh100,1xT4");
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<NodeGpus> node = (*b)->Discover();
  ASSERT_EQ(node->gpus.size(), 3u);
  EXPECT_EQ(node->gpus[0].catalog_type, "H100-80GB");
  EXPECT_EQ(node->gpus[2].catalog_type, "T4");
  EXPECT_EQ(node->gpus[2].uuid, "GPU-simulated-2");
  EXPECT_EQ(MakeSimulatedBackend("8xB300").status().message().substr(0, 40),
            "--simulate: \"8xB300\": unknown GPU type (");
  EXPECT_EQ(MakeSimulatedBackend("lots").status().message(),
            "--simulate: \"lots\" is not COUNTxTYPE such as 8xH100 (1 to 64 GPUs)");
}

TEST(Simulated, AYamlFileGivesTypesNvlinkIslandsAndMigLayouts) {
  std::string dir = ::testing::TempDir();
  std::string good = dir + "/sim-good.yaml", bad = dir + "/sim-bad.yaml",
              worse = dir + "/sim-worse.yaml";
  std::ofstream(good) << "gpus:\n  - {type: H100, count: 2, nvlinkIsland: 0}\n"
                         "  - {type: A100-80GB, mig: [3g.40gb@0, 2g.20gb@4, 1g.10gb@6]}\n";
  absl::StatusOr<std::unique_ptr<GpuBackend>> b =
      MakeSimulatedBackend(good, GpuCatalog::Default(), "n1");
  ASSERT_TRUE(b.ok()) << b.status();
  NodeGpus node = *(*b)->Discover();
  ASSERT_EQ(node.gpus.size(), 3u);
  EXPECT_EQ(node.gpus[0].catalog_type, "H100-80GB");
  EXPECT_EQ(node.gpus[1].nvlink_island, 0);
  EXPECT_EQ(node.gpus[1].uuid, "GPU-sim-n1-1");
  EXPECT_TRUE(node.gpus[2].mig_enabled);
  ASSERT_EQ(node.gpus[2].mig_layout.size(), 3u);
  EXPECT_EQ(node.gpus[2].mig_layout[1].profile, "2g.20gb");
  EXPECT_EQ(node.gpus[2].mig_layout[1].start, 4);
  std::ofstream(bad) << "gpus:\n  - {type: A100-80GB, mig: [3g.40gb@1]}\n";
  absl::StatusOr<std::unique_ptr<GpuBackend>> e = MakeSimulatedBackend(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("gpus[0].mig: "), std::string::npos) << e.status();
  std::ofstream(worse) << "gpus:\n  - {type: H100, cnt: 2}\n";
  e = MakeSimulatedBackend(worse);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("gpus[0].cnt: unknown field"), std::string::npos)
      << e.status();
}

TEST(Exporter, DcgmNamesAndLabelsInPrometheusTextFormat) {
  NodeGpus node{
      "nvml",
      "550.54.15",
      12040,
      {{0, "GPU-a", "NVIDIA \"H100\"", "00000000:19:00.0", MiB(81559), false, "H100-80GB"}}};
  GpuSample s;
  s.index = 0;
  s.gpu_util_percent = 87;
  s.energy_mj = 1000;
  std::string text = DcgmMetricsText(node, {s}, "host-1");
  EXPECT_EQ(text,
            "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in "
            "mJ).\n"
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\",pci_bus_id=\"00000000:"
            "19:00.0\",device=\"nvidia0\",modelName=\"NVIDIA \\\"H100\\\"\",Hostname=\"host-1\","
            "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 1000\n"
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
            "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",pci_bus_id=\"00000000:19:00.0\","
            "device=\"nvidia0\",modelName=\"NVIDIA \\\"H100\\\"\",Hostname=\"host-1\","
            "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 87\n");
}

TEST(Exporter, TaskLabelsAreNamespaceJobNameAndTaskNeverJob) {
  NodeGpus node{"nvml",
                "550.54.15",
                12040,
                {{0, "GPU-a", "H100", "00000000:19:00.0", MiB(81559), false, "H100-80GB"},
                 {1, "GPU-b", "H100", "00000000:1a:00.0", MiB(81559), false, "H100-80GB"}}};
  GpuSample a, b;
  a.index = 0;
  a.gpu_util_percent = 87;
  b.index = 1;
  b.gpu_util_percent = 0;
  std::map<int, GpuOwner> owners = {{0, {"team-a", "train", "worker-0"}}};
  std::string text = DcgmMetricsText(node, {a, b}, "host-1", &owners);
  // Prometheus sets `job` (the scrape job) on every series: a target's own `job` label would
  // be renamed exported_job, so the task's job is `job_name`.
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"550.54.15\",namespace=\"team-a\","
                      "job_name=\"train\",task=\"worker-0\"} 87\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("job=\""), std::string::npos) << text;
}

TEST(Exporter, TaskEnergyIsACounterNamedTotalWithEscapedLabels) {
  EXPECT_EQ(TaskEnergyMetricsText({}, "host-1"),
            "# HELP gpucloud_task_energy_joules_total Energy of the GPUs a task used while it "
            "ran.\n# TYPE gpucloud_task_energy_joules_total counter\n");
  std::string text = TaskEnergyMetricsText({{"ns", "train", "w\"0", 1, 2, 1234.5}}, "host-1");
  EXPECT_NE(text.find("\ngpucloud_task_energy_joules_total{namespace=\"ns\",job_name=\"train\","
                      "task=\"w\\\"0\",rank=\"1\",attempt=\"2\",Hostname=\"host-1\"} 1234.5\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace gpucloud::agent
