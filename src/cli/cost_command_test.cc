#include "cli/cost_command.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

constexpr int64_t kHour = 3'600'000;

api::AttemptUsage Record(const std::string& ns, const std::string& job, const std::string& queue,
                         int64_t start_h, int64_t end_h, std::map<std::string, double> rates,
                         std::map<std::string, double> pools, double gpus) {
  api::AttemptUsage u;
  u.ns = ns;
  u.job = job;
  u.uid = ns + "-" + job;
  u.queue = queue;
  u.attempt = 1;
  u.start_ms = start_h * kHour;
  u.end_ms = end_h * kHour;
  u.usd_per_hour = std::move(rates);
  u.usd_per_hour_by_pool = std::move(pools);
  u.gpus = gpus;
  return u;
}

// Hand-computed: three attempts over hours 0..10.
//   team-a/train: hours 0-4, 8 GPUs at $2 on demand ($16/h, pool od); 3.6e6 J * 4 = 4 kWh at
//     500 g/kWh: 2 kg.
//   team-a/sweep: hours 2-6, $3/h spot (pool sp) and $1/h on demand (pool od), 2 GPUs.
//   team-b/eval:  hours 5-10, $4/h on demand (pool od), 1 GPU, queue research.
std::vector<api::AttemptUsage> Records() {
  std::vector<api::AttemptUsage> u = {
      Record("team-a", "train", "default", 0, 4, {{"on-demand", 16}}, {{"od", 16}}, 8),
      Record("team-a", "sweep", "default", 2, 6, {{"spot", 3}, {"on-demand", 1}},
             {{"sp", 3}, {"od", 1}}, 2),
      Record("team-b", "eval", "research", 5, 10, {{"on-demand", 4}}, {{"od", 4}}, 1),
  };
  u[0].energy_j = 4 * 3.6e6;
  u[0].co2e_g_per_kwh = 500;
  return u;
}

TEST(Cost, WholeAttemptsAreGroupedByNamespaceQueueJobAndClass) {
  absl::StatusOr<std::vector<CostRow>> by_ns = CostRows(Records(), "namespace", 0, 100 * kHour);
  ASSERT_TRUE(by_ns.ok()) << by_ns.status();
  ASSERT_EQ(by_ns->size(), 2u);
  EXPECT_EQ((*by_ns)[0].key, "team-a");  // most expensive first
  EXPECT_NEAR((*by_ns)[0].total, 64 + 16, 1e-9);
  EXPECT_NEAR((*by_ns)[0].by_class.at("spot"), 12, 1e-9);
  EXPECT_EQ((*by_ns)[0].jobs, 2);
  EXPECT_NEAR((*by_ns)[0].gpu_hours, 8 * 4 + 2 * 4, 1e-9);
  EXPECT_NEAR((*by_ns)[0].energy_kwh, 4, 1e-9);
  EXPECT_NEAR((*by_ns)[0].co2e_kg, 2, 1e-9);
  EXPECT_NEAR((*by_ns)[1].total, 20, 1e-9);

  absl::StatusOr<std::vector<CostRow>> by_class = CostRows(Records(), "class", 0, 100 * kHour);
  ASSERT_EQ(by_class->size(), 2u);
  EXPECT_EQ((*by_class)[0].key, "on-demand");
  EXPECT_NEAR((*by_class)[0].total, 64 + 4 + 20, 1e-9);
  EXPECT_EQ((*by_class)[0].jobs, 3);
  EXPECT_EQ((*by_class)[0].by_class.size(), 1u);  // only its own class
  EXPECT_NEAR((*by_class)[1].total, 12, 1e-9);
  // The sweep's GPU time follows its dollars: 3/4 of its 8 GPU-hours on spot.
  EXPECT_NEAR((*by_class)[1].gpu_hours, 6, 1e-9);

  absl::StatusOr<std::vector<CostRow>> by_queue = CostRows(Records(), "queue", 0, 100 * kHour);
  EXPECT_EQ((*by_queue)[0].key, "default");
  EXPECT_EQ((*by_queue)[1].key, "research");
  absl::StatusOr<std::vector<CostRow>> by_job = CostRows(Records(), "job", 0, 100 * kHour);
  EXPECT_EQ((*by_job)[0].key, "team-a/train");
}

TEST(Cost, ByPoolSplitsAnAttemptAcrossItsPools) {
  absl::StatusOr<std::vector<CostRow>> rows = CostRows(Records(), "pool", 0, 100 * kHour);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].key, "od");
  EXPECT_NEAR((*rows)[0].total, 64 + 4 + 20, 1e-9);
  EXPECT_EQ((*rows)[0].jobs, 3);
  EXPECT_TRUE((*rows)[0].by_class.empty());
  EXPECT_EQ((*rows)[1].key, "sp");
  EXPECT_NEAR((*rows)[1].total, 12, 1e-9);
}

TEST(Cost, AWindowCountsThePartOfEachAttemptInsideIt) {
  // Hours 3-5: train 1 h ($16, a quarter of its energy), sweep 2 h ($8), eval none (starts at 5).
  absl::StatusOr<std::vector<CostRow>> rows = CostRows(Records(), "job", 3 * kHour, 5 * kHour);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].key, "team-a/train");
  EXPECT_NEAR((*rows)[0].total, 16, 1e-9);
  EXPECT_NEAR((*rows)[0].gpu_hours, 8, 1e-9);
  EXPECT_NEAR((*rows)[0].energy_kwh, 1, 1e-9);
  EXPECT_NEAR((*rows)[0].co2e_kg, 0.5, 1e-9);
  EXPECT_EQ((*rows)[1].key, "team-a/sweep");
  EXPECT_NEAR((*rows)[1].total, 8, 1e-9);
  // Nothing inside the window: no rows.
  EXPECT_TRUE(CostRows(Records(), "job", 20 * kHour, 30 * kHour)->empty());
}

TEST(Cost, FormatsTableJsonAndCsv) {
  std::vector<CostRow> rows = *CostRows(Records(), "queue", 0, 100 * kHour);
  EXPECT_EQ(FormatCost(rows, "queue", "csv"),
            "queue,jobs,total_usd,gpu_hours,energy_kwh,co2e_kg,on-demand_usd,spot_usd\n"
            "default,2,80.0000,40.0000,4.0000,2.0000,68.0000,12.0000\n"
            "research,1,20.0000,5.0000,0.0000,0.0000,20.0000,0.0000\n");
  std::string table = FormatCost(rows, "queue", "table");
  EXPECT_NE(table.find("$100.00"), std::string::npos) << table;  // the total line
  Json json = Json::parse(FormatCost(rows, "queue", "json"));
  EXPECT_EQ(json[0]["queue"], "default");
  EXPECT_EQ(json[0]["co2eKg"], 2.0);
}

TEST(Cost, AnUnknownGroupingIsRefused) {
  absl::StatusOr<std::vector<CostRow>> bad = CostRows(Records(), "user", 0, kHour);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--by: \"user\" is not namespace, queue, job, class or pool");
}

TEST(Cost, TimesAreDurationsBackDatesOrRfc3339) {
  const int64_t now = 1'800'000'000'000;
  EXPECT_EQ(*ParseCostTime("--since", "30d", now), now - 30 * 86'400'000LL);
  EXPECT_EQ(*ParseCostTime("--since", "12h", now), now - 12 * kHour);
  EXPECT_EQ(*ParseCostTime("--since", "2026-12-01", now), 1'796'083'200'000);
  EXPECT_EQ(*ParseCostTime("--until", "2026-12-01T09:00:00Z", now), 1'796'083'200'000 + 9 * kHour);
  absl::StatusOr<int64_t> bad = ParseCostTime("--since", "last week", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--since: \"last week\" is not a duration"),
            std::string::npos);
}

TEST(Cost, ARunningAttemptIsARecordEndingNow) {
  Json job = {{"metadata", {{"namespace", "team-a"}, {"name", "live"}, {"uid", "u1"}}},
              {"spec", {{"queue", "research"}, {"billing", "spot"}}},
              {"status",
               {{"phase", "Running"},
                {"attempt", 2},
                {"scheduledMs", kHour},
                {"gpus", 4.0},
                {"usdPerHour", {{"spot", 2.0}}},
                {"usdPerHourByPool", {{"sp", 2.0}}},
                {"attemptEnergyJ", 7.2e6},
                {"co2eGPerKwh", 300.0}}}};
  std::optional<api::AttemptUsage> u = api::AttemptUsageOf(job, 3 * kHour);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->uid, "u1");
  EXPECT_EQ(u->attempt, 2);
  EXPECT_EQ(u->queue, "research");
  EXPECT_TRUE(u->spot_tolerant);
  EXPECT_EQ(u->start_ms, kHour);
  EXPECT_EQ(u->end_ms, 3 * kHour);
  EXPECT_NEAR(u->co2e_g(), 600, 1e-9);
  std::vector<CostRow> rows = *CostRows({*u}, "pool", 0, 10 * kHour);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0].total, 4, 1e-9);
  // A finished job holds nothing now.
  job["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(api::AttemptUsageOf(job, 3 * kHour).has_value());
}

}  // namespace
}  // namespace gpucloud::cli
