// The tables of gpuctl top nodes and top jobs: known, partly known and unknown usage.
#include "cli/top_format.h"

#include <gtest/gtest.h>

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

TEST(TopFormat, UsageIsReadFromStatusGpuUsageAndWhatIsMissingIsUnknown) {
  TopUsage u = TopUsageOf(Json::parse(R"({"status": {"gpuUsage": {"gpus": 2,
      "measuredGpus": 2, "utilization": 50, "memoryUsedMiB": 41984, "memoryTotalMiB": 163118}}})"));
  EXPECT_EQ(u.measured_gpus, 2);
  EXPECT_EQ(u.utilization_percent, 50);
  EXPECT_EQ(u.memory_used_mib, 41984);
  EXPECT_EQ(u.memory_total_mib, 163118);
  for (const char* none : {R"({})", R"({"status": {}})", R"({"status": {"gpuUsage": 3}})",
                           R"({"status": {"gpuUsage": {"utilization": "high"}}})"}) {
    TopUsage n = TopUsageOf(Json::parse(none));
    EXPECT_FALSE(n.utilization_percent.has_value()) << none;
    EXPECT_FALSE(n.memory_used_mib.has_value()) << none;
  }
}

TEST(TopFormat, AJobsUsageComesFromItsDecodedStatus) {
  TopUsage u = TopUsageOf(api::GpuUsage{4, 3, 70, 1024, 4096, 1});
  EXPECT_EQ(u.measured_gpus, 3);
  EXPECT_EQ(u.utilization_percent, 70);
  EXPECT_EQ(u.memory_used_mib, 1024);
  EXPECT_EQ(u.memory_total_mib, 4096);
  TopUsage none = TopUsageOf(std::optional<api::GpuUsage>());
  EXPECT_EQ(none.measured_gpus, 0);
  EXPECT_FALSE(none.utilization_percent.has_value());
}

TEST(TopFormat, HumanMiB) {
  struct Case {
    int64_t mib;
    const char* shown;
  } cases[] = {{0, "0Mi"},     {512, "512Mi"},   {1023, "1023Mi"},
               {1024, "1Gi"},  {40'960, "40Gi"}, {81'559, "79.6Gi"},
               {1'075, "1Gi"}, {1'076, "1.1Gi"}, {1'154'048, "1127Gi"}};
  for (const Case& c : cases) EXPECT_EQ(HumanMiB(c.mib), c.shown) << c.mib;
}

TEST(TopFormat, NodesTable) {
  TopUsage busy{2, 50, 41'984, 163'118};
  TopUsage half{1, 90, std::nullopt, std::nullopt};  // memory unknown
  std::vector<TopNodeRow> rows = {
      {"gpu-a", "Ready", {2, 1, 0, 1}, busy, {"team-a/train"}},
      {"gpu-b", "Ready,SchedulingDisabled", {4, 0, 1, 3}, half, {}},
      {"gpu-c", "NotReady", {8, 0, 0, 8}, {}, {}},  // no fresh sample
  };
  EXPECT_EQ(FormatTopNodes(rows),
            "NODE                 STATUS                        GPUS  USED   OUT  FREE  UTIL       "
            "MEMORY             JOBS\n"
            "gpu-a                Ready                            2     1     0     1  50%        "
            "41Gi/159.3Gi       team-a/train\n"
            "gpu-b                Ready,SchedulingDisabled         4     0     1     3  90%        "
            "<unknown>          -\n"
            "gpu-c                NotReady                         8     0     0     8  <unknown>  "
            "<unknown>          -\n"
            "TOTAL                                                14     1     1    12  63%        "
            "41Gi/159.3Gi       \n");
  EXPECT_EQ(FormatTopNodes({}),
            "NODE                 STATUS                        GPUS  USED   OUT  FREE  UTIL       "
            "MEMORY             JOBS\n"
            "TOTAL                                                 0     0     0     0  <unknown>  "
            "<unknown>          \n");
}

TEST(TopFormat, JobsTable) {
  std::vector<TopJobRow> rows = {
      {"team-a/train", 3, {1, 80, 30'000, 81'559}, {"gpu-a", "gpu-b"}},
      {"team-a/shared", 1, {}, {"gpu-a"}},  // a shared GPU: not measured per job
      {"team-b/cpu-only", 0, {}, {"gpu-c"}},
  };
  EXPECT_EQ(
      FormatTopJobs(rows),
      "JOB                                       GPUS  UTIL       MEMORY             NODES\n"
      "team-a/train                                 3  80%        29.3Gi/79.6Gi      "
      "gpu-a,gpu-b\n"
      "team-a/shared                                1  <unknown>  <unknown>          gpu-a\n"
      "team-b/cpu-only                              0  -          -                  gpu-c\n");
}

}  // namespace
}  // namespace gpucloud::cli
