#include "core/tco.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

constexpr int64_t kHour = 3'600'000;

TcoUsage Use(int64_t from_h, int64_t to_h, double gpus, bool spot = false) {
  return {"H100-80GB", from_h * kHour, to_h * kHour, gpus, spot, 0};
}

TcoOptions Options() {
  TcoOptions o;
  o.since_ms = 0;
  o.until_ms = 10 * kHour;
  o.amortization_years = 1;
  o.ops_per_gpu_year = 0;
  o.usd_per_kwh = 0.2;
  o.pue = 1.0;
  // $35,040 over one year is $4 an hour.
  o.prices["H100-80GB"] = {
      .on_demand = 4, .reserved = 2, .spot = 1, .purchase = 35'040, .watts = 500};
  return o;
}

// Hand-computed: a steady 2 GPUs (hours 0-10), 2 more for hours 0-2, and a spot-tolerant 4 for
// hours 5-7. Use: 4 GPUs (0-2), 2 (2-5), 6 (5-7), 2 (7-10): 32 GPU-hours, peak 6.
std::vector<TcoUsage> Usage() { return {Use(0, 10, 2), Use(0, 2, 2), Use(5, 7, 4, true)}; }

TEST(Tco, PricesTheUsageFourWaysWithHandComputedAnswers) {
  TcoReport r = ComputeTco(Usage(), Options());
  ASSERT_EQ(r.scenarios.size(), 4u);
  EXPECT_NEAR(r.gpu_hours, 32, 1e-9);
  EXPECT_NEAR(r.peak_gpus.at("H100-80GB"), 6, 1e-9);
  EXPECT_NEAR(r.scenarios[0].usd, 32 * 4.0, 1e-9);
  // Reserved base 2 (10 h x $2 each) + on demand above: 2 GPUs x 2 h + 4 x 2 h = 12 GPU-h x $4.
  // (Base 1: $108, base 3: $92, base 4: $96.)
  EXPECT_NEAR(r.scenarios[1].usd, 40 + 12 * 4.0, 1e-9);
  EXPECT_NE(r.scenarios[1].how.find("reserved 2 x H100-80GB"), std::string::npos);
  // The firm jobs: base 2 + 2 GPUs x 2 h on demand ($56); the spot job's 8 GPU-h at $1.
  EXPECT_NEAR(r.scenarios[2].usd, 56 + 8.0, 1e-9);
  // Owned: 6 GPUs for 10 h at $4/h amortized ($240) + 32 GPU-h x 0.5 kW x $0.2.
  EXPECT_NEAR(r.scenarios[3].usd, 240 + 32 * 0.5 * 0.2, 1e-9);
  EXPECT_EQ(r.scenarios[r.cheapest].name, "reserved+spot");
  std::string table = FormatTco(r);
  EXPECT_NE(table.find("reserved+spot is cheapest, $64.00 (50%) less than on-demand and $24.00 "
                       "less than the next best"),
            std::string::npos)
      << table;
}

TEST(Tco, MeasuredEnergyAndTheWindowAreUsed) {
  std::vector<TcoUsage> u = Usage();
  u[0].energy_j = 2 * 3.6e6;  // 2 kWh measured instead of 10 h x 2 x 0.5 kW
  TcoReport r = ComputeTco(u, Options());
  EXPECT_NEAR(r.scenarios[3].usd, 240 + (2 + 2 * 2 * 0.5 + 4 * 2 * 0.5) * 0.2, 1e-9);
  // Only hours 6-10: 2 GPUs throughout, 4 more for hour 6-7 (the spot job).
  TcoOptions late = Options();
  late.since_ms = 6 * kHour;
  r = ComputeTco(Usage(), late);
  EXPECT_NEAR(r.hours, 4, 1e-9);
  EXPECT_NEAR(r.gpu_hours, 2 * 4 + 4 * 1, 1e-9);
  EXPECT_NEAR(r.scenarios[0].usd, 12 * 4.0, 1e-9);
}

TEST(Tco, OwnedWinsForASteadyFleetOverItsLife) {
  TcoOptions o = Options();
  o.until_ms = 8'760 * kHour;  // a year, 8 GPUs busy throughout
  o.amortization_years = 4;
  TcoReport r = ComputeTco({Use(0, 8'760, 8)}, o);
  EXPECT_EQ(r.scenarios[r.cheapest].name, "owned");
  // Reserved covers it all: 8 x 8,760 h x $2.
  EXPECT_NEAR(r.scenarios[1].usd, 8 * 8'760 * 2.0, 1e-6);
}

TEST(Tco, DefaultsComeFromTheCatalogAndTheHardwareTable) {
  TcoPrices p = DefaultTcoPrices(*GpuCatalog::Default().Find("H100-80GB"));
  EXPECT_NEAR(p.on_demand, 6.98, 1e-9);
  EXPECT_NEAR(p.reserved, 6.98 * 0.6, 1e-9);
  EXPECT_NEAR(p.spot, 6.98 * 0.3, 1e-9);
  EXPECT_NEAR(p.purchase, 30'000 * 1.3, 1e-9);
  EXPECT_EQ(p.watts, 700);
  EXPECT_TRUE(ComputeTco({}, Options()).scenarios.size() == 4);
}

}  // namespace
}  // namespace gpucloud
