#include "core/failure_risk.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

constexpr int64_t kHour = 3600'000;

TEST(FailureRiskModel, RowRemapsInQuickSuccessionFlagTheGpu) {
  FailureRiskModel m;
  m.Observe(RiskSignal::kRowRemap, 1, 0);
  m.Observe(RiskSignal::kRowRemap, 1, kHour);
  EXPECT_FALSE(m.AtRisk(kHour));
  m.Observe(RiskSignal::kWatchXid, 1, 2 * kHour);  // Xid 63: a remap recorded
  EXPECT_TRUE(m.AtRisk(2 * kHour)) << m.Explain(2 * kHour);
  EXPECT_NE(m.Explain(2 * kHour).find("2 rows remapped"), std::string::npos)
      << m.Explain(2 * kHour);
}

TEST(FailureRiskModel, EvidenceHalvesEveryHalfLife) {
  FailureRiskModel m;
  m.Observe(RiskSignal::kRowRemap, 4, 0);  // 6.0
  EXPECT_DOUBLE_EQ(m.Score(0), 6.0);
  EXPECT_NEAR(m.Score(6 * kHour), 3.0, 1e-9);
  EXPECT_NEAR(m.Score(12 * kHour), 1.5, 1e-9);
  EXPECT_FALSE(m.AtRisk(6 * kHour));
}

TEST(FailureRiskModel, SparseBenignNoiseNeverAddsUp) {
  // A corrected-ECC burst and a thermal excursion every 6 hours for a month: the steady state
  // of the decayed score stays under the threshold (a lifetime count would not).
  FailureRiskModel m;
  double peak = 0;
  for (int64_t t = 0; t < 30 * 24 * kHour; t += 6 * kHour) {
    m.Observe(RiskSignal::kCorrectedEcc, 30, t);
    m.Observe(RiskSignal::kThermal, 1, t);
    peak = std::max(peak, m.Score(t));
  }
  EXPECT_LT(peak, m.params().threshold);
  EXPECT_GT(peak, 1.0);  // it does keep some memory
}

TEST(FailureRiskModel, ACorrectedEccBurstCountsOnlyUpToItsCap) {
  FailureRiskModel m;
  m.Observe(RiskSignal::kCorrectedEcc, 1'000'000, 0);
  EXPECT_DOUBLE_EQ(m.Score(0), 2.0);
  m.Observe(RiskSignal::kCorrectedEcc, 50, 0);  // a rising rate still adds up
  EXPECT_DOUBLE_EQ(m.Score(0), 3.0);
  m.Observe(RiskSignal::kCorrectedEcc, 100, 0);
  EXPECT_TRUE(m.AtRisk(0));
}

TEST(FailureRiskModel, ResetForgetsAndNonPositiveAmountsAreIgnored) {
  FailureRiskModel m;
  m.Observe(RiskSignal::kRowRemap, 10, 0);
  m.Observe(RiskSignal::kThermal, -5, 0);
  EXPECT_DOUBLE_EQ(m.Score(0), 15.0);
  m.Reset();
  EXPECT_DOUBLE_EQ(m.Score(0), 0.0);
  EXPECT_EQ(m.Explain(0), "score 0.0 < 4");
}

}  // namespace
}  // namespace gpucloud
