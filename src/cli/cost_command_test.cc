#include "cli/cost_command.h"

#include <gtest/gtest.h>

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

Json JobDoc(const std::string& ns, const std::string& name, const std::string& queue,
            const std::string& phase, Json cost, Json rate = nullptr, int64_t scheduled_ms = 0) {
  Json status = {{"phase", phase}, {"costUsd", cost}};
  if (!rate.is_null()) {
    status["usdPerHour"] = rate;
    status["scheduledMs"] = scheduled_ms;
  }
  Json spec = Json::object();
  if (!queue.empty()) spec["queue"] = queue;
  return {{"apiVersion", "gpucloud/v1"},
          {"kind", "Job"},
          {"metadata", {{"namespace", ns}, {"name", name}}},
          {"spec", spec},
          {"status", status}};
}

TEST(Cost, JobsAreGroupedAndTheRunningOnesCountedUpToNow) {
  std::vector<Json> jobs = {
      JobDoc("team-a", "done", "research", "Succeeded", {{"on-demand", 10.0}}),
      JobDoc("team-a", "spot", "", "Succeeded", {{"spot", 1.5}}),
      // Running: $2 ended, $4/hour on demand since 30 minutes before `now`: $4 in all.
      JobDoc("team-b", "live", "research", "Running", {{"on-demand", 2.0}}, {{"on-demand", 4.0}},
             1'000'000),
  };
  const int64_t now = 1'000'000 + 30 * 60'000;
  absl::StatusOr<std::vector<CostRow>> by_ns = CostRows(jobs, "namespace", now);
  ASSERT_TRUE(by_ns.ok()) << by_ns.status();
  ASSERT_EQ(by_ns->size(), 2u);
  EXPECT_EQ((*by_ns)[0].key, "team-a");  // most expensive first
  EXPECT_NEAR((*by_ns)[0].total, 11.5, 1e-9);
  EXPECT_EQ((*by_ns)[0].jobs, 2);
  EXPECT_NEAR((*by_ns)[1].total, 4.0, 1e-9);

  absl::StatusOr<std::vector<CostRow>> by_class = CostRows(jobs, "class", now);
  ASSERT_EQ(by_class->size(), 2u);
  EXPECT_EQ((*by_class)[0].key, "on-demand");
  EXPECT_NEAR((*by_class)[0].total, 14.0, 1e-9);
  EXPECT_EQ((*by_class)[0].jobs, 2);

  absl::StatusOr<std::vector<CostRow>> by_queue = CostRows(jobs, "queue", now);
  EXPECT_EQ((*by_queue)[0].key, "research");
  EXPECT_NEAR((*by_queue)[0].total, 14.0, 1e-9);
  EXPECT_EQ((*by_queue)[1].key, "default");

  EXPECT_EQ(FormatCost(*by_queue, "queue", "csv"),
            "queue,jobs,total_usd,on-demand_usd,spot_usd\n"
            "research,2,14.0000,14.0000,0.0000\n"
            "default,1,1.5000,0.0000,1.5000\n");
  std::string table = FormatCost(*by_queue, "queue", "table");
  EXPECT_NE(table.find("research"), std::string::npos) << table;
  EXPECT_NE(table.find("$15.50"), std::string::npos) << table;  // the total line
  Json json = Json::parse(FormatCost(*by_ns, "namespace", "json"));
  EXPECT_EQ(json[0]["namespace"], "team-a");

  absl::StatusOr<std::vector<CostRow>> bad = CostRows(jobs, "pool", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--by: \"pool\" is not namespace, queue, job or class");
}

}  // namespace
}  // namespace gpucloud::cli
