#include "agent/health.h"

#include <gtest/gtest.h>

#include "agent/simulated_backend.h"

namespace gpucloud::agent {
namespace {

GpuSample Sample(int gpu, int temp = 40, uint64_t ecc = 0, uint64_t energy = 1000) {
  GpuSample s;
  s.index = gpu;
  s.temperature_c = temp;
  s.ecc_uncorrected = ecc;
  s.energy_mj = energy;
  return s;
}

TEST(Xid, ClassesFollowNvidiasCatalog) {
  EXPECT_EQ(ClassifyXid(79), XidClass::kDrain);
  EXPECT_EQ(ClassifyXid(48), XidClass::kDrain);
  EXPECT_EQ(ClassifyXid(13), XidClass::kApplication);
  EXPECT_EQ(ClassifyXid(94), XidClass::kWatch);
  EXPECT_EQ(ClassifyXid(999), XidClass::kUnknown);
  EXPECT_EQ(DescribeXid(79), "Xid 79 (GPU has fallen off the bus)");
}

TEST(HealthMonitor, DrainClassXidsMarkAGpuUnhealthyApplicationFaultsDoNot) {
  HealthMonitor h;
  EXPECT_FALSE(h.OnXid(1, 13, 0));  // the application's fault
  EXPECT_FALSE(h.OnXid(1, 94, 0));  // contained ECC: restart the application only
  EXPECT_TRUE(h.OnXid(1, 79, 0));
  EXPECT_FALSE(h.OnXid(1, 48, 0));  // already unhealthy: the first cause stays
  EXPECT_FALSE(h.conditions().at(1).healthy);
  EXPECT_EQ(h.conditions().at(1).reason, "Xid 79 (GPU has fallen off the bus)");
  EXPECT_TRUE(h.OnXid(2, 999, 0));  // unknown: unhealthy, as NVIDIA's device plugin does
}

TEST(HealthMonitor, SamplesEccHeatAndLostGpus) {
  HealthMonitor h({.max_temperature_c = 90, .hot_samples = 3});
  EXPECT_FALSE(h.OnSamples({Sample(0), Sample(1), Sample(2)}, 3, 0));
  EXPECT_TRUE(h.OnSamples({Sample(0, 40, 2), Sample(1), Sample(2)}, 3, 0));
  EXPECT_EQ(h.conditions().at(0).reason, "2 uncorrectable ECC errors");
  EXPECT_FALSE(h.OnSamples({Sample(0, 40, 2), Sample(1, 95), Sample(2)}, 3, 0));
  EXPECT_FALSE(h.OnSamples({Sample(0, 40, 2), Sample(1, 95), Sample(2)}, 3, 0));
  EXPECT_TRUE(h.OnSamples({Sample(0, 40, 2), Sample(1, 95), Sample(2)}, 3, 0));  // third hot sample
  EXPECT_NE(h.conditions().at(1).reason.find("overheating: 95 C"), std::string::npos);
  EXPECT_TRUE(h.OnSamples({Sample(0, 40, 2), Sample(1, 95)}, 3, 0));  // GPU 2 stopped answering
  EXPECT_EQ(h.conditions().at(2).reason, "the GPU is lost (no answer from the driver)");
}

TEST(HealthMonitor, ComesBackOnlyAfterAResetOrTheOperatorsWord) {
  HealthMonitor h;
  h.OnSamples({Sample(0, 40, 0, 5000)}, 1, 0);
  h.OnXid(0, 79, 0);
  EXPECT_FALSE(h.OnSamples({Sample(0, 40, 0, 6000)}, 1, 0));  // still unhealthy: sticky
  EXPECT_FALSE(h.conditions().at(0).healthy);
  EXPECT_TRUE(h.OnSamples({Sample(0, 40, 0, 100)}, 1, 0));  // energy counter restarted: reset
  EXPECT_TRUE(h.conditions().at(0).healthy);
  h.OnXid(0, 79, 0);
  EXPECT_TRUE(h.ResetAll());
  EXPECT_TRUE(h.conditions().at(0).healthy);
}

TEST(HealthMonitor, PrecursorsPutAHealthyGpuAtRiskUntilTheOperatorResetsIt) {
  HealthMonitor h;
  auto sample = [](uint64_t corrected, uint64_t rows) {
    GpuSample s = Sample(0);
    s.ecc_corrected = corrected;
    s.remapped_rows = rows;
    return s;
  };
  const int64_t minute = 60'000;
  EXPECT_FALSE(h.OnSamples({sample(500, 7)}, 1, 0));       // first readings: baselines, not news
  EXPECT_FALSE(h.OnSamples({sample(560, 8)}, 1, minute));  // +60 corrected (1.2), +1 row (1.5)
  EXPECT_FALSE(h.conditions().at(0).at_risk);
  EXPECT_TRUE(h.OnXid(0, 92, 2 * minute));  // high single-bit rate: 1.5 more -> 4.2
  const GpuCondition& c = h.conditions().at(0);
  EXPECT_TRUE(c.healthy);
  EXPECT_TRUE(c.at_risk);
  EXPECT_NE(c.risk.find("1 rows remapped"), std::string::npos) << c.risk;
  EXPECT_NE(c.risk.find("1 watch-class Xids"), std::string::npos) << c.risk;
  // A counter that went down (driver reload) is a new baseline, not a negative signal.
  EXPECT_FALSE(h.OnSamples({sample(3, 8)}, 1, 2 * minute));
  EXPECT_TRUE(h.ResetAll());
  EXPECT_FALSE(h.conditions().at(0).at_risk);
  EXPECT_FALSE(h.OnSamples({sample(3, 8)}, 1, 2 * minute));
}

TEST(HealthMonitor, AtRiskStaysUntilTheOperatorLooksAndUnhealthyReplacesIt) {
  HealthMonitor h;
  GpuSample hot = Sample(0, 88);  // within 5 C of the 90 C limit: an excursion
  GpuSample cool = Sample(0, 60);
  int64_t t = 0;
  bool flagged = false;
  for (int i = 0; i < 10; ++i, t += 60'000) {
    h.OnSamples({hot}, 1, t);
    h.OnSamples({cool}, 1, t + 30'000);
    flagged = flagged || h.conditions().at(0).at_risk;
  }
  EXPECT_TRUE(flagged);  // 10 excursions in 10 minutes: 0.5 each
  // A day later the evidence has faded, but the GPU stays out until the operator looked.
  EXPECT_FALSE(h.OnSamples({cool}, 1, t + 24 * 3600'000));
  EXPECT_TRUE(h.conditions().at(0).at_risk);
  EXPECT_TRUE(h.ResetAll());
  EXPECT_FALSE(h.conditions().at(0).at_risk);
  // Flagged again; then it fails: unhealthy, no longer "at risk".
  for (int i = 0; i < 10; ++i, t += 60'000)
    h.OnSamples({hot}, 1, t), h.OnSamples({cool}, 1, t + 30'000);
  ASSERT_TRUE(h.conditions().at(0).at_risk);
  h.OnXid(0, 79, t);
  for (int i = 0; i < 8; ++i) h.OnSamples({hot}, 1, t), h.OnSamples({cool}, 1, t);
  EXPECT_FALSE(h.conditions().at(0).healthy);
  EXPECT_FALSE(h.conditions().at(0).at_risk);
}

TEST(SimulatedFaults, InjectedFaultsShowInSamplesAndEvents) {
  auto b = *MakeSimulatedBackend("2xH100");
  ASSERT_TRUE(b->Inject("xid", 1, 79).ok());
  ASSERT_TRUE(b->Inject("temperature", 0, 97).ok());
  ASSERT_TRUE(b->Inject("ecc", 0, 3).ok());
  ASSERT_TRUE(b->Inject("ecc-corrected", 1, 40).ok());
  ASSERT_TRUE(b->Inject("remap", 1, 2).ok());
  std::vector<XidEvent> xids = b->TakeXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].gpu, 1);
  EXPECT_EQ(xids[0].xid, 79);
  EXPECT_TRUE(b->TakeXids().empty());
  std::vector<GpuSample> s = *b->Sample();
  EXPECT_EQ(*s[0].temperature_c, 97);
  EXPECT_EQ(*s[0].ecc_uncorrected, 3u);
  EXPECT_EQ(*s[1].ecc_corrected, 40u);
  EXPECT_EQ(*s[1].remapped_rows, 2u);
  ASSERT_TRUE(b->Inject("lost", 1, 0).ok());
  EXPECT_EQ(b->Sample()->size(), 1u);
  ASSERT_TRUE(b->Inject("reset", 1, 0).ok());
  EXPECT_EQ(b->Sample()->size(), 2u);
  EXPECT_FALSE(b->Inject("melt", 0, 1).ok());
  EXPECT_FALSE(b->Inject("xid", 7, 79).ok());
}

}  // namespace
}  // namespace gpucloud::agent
