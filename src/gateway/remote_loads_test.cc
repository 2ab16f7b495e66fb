#include "gateway/remote_loads.h"

#include <gtest/gtest.h>

namespace gpucloud::gateway {
namespace {

TEST(RemoteLoadsTest, ReportsRoundTripAndBadOnesAreErrors) {
  LoadReport r{.updated_ms = 5000,
               .samples = {{3000, 1.5, 4, {{12, 3}, {40, 1}}}, {4000, 2, 1}},
               .in_flight = 2,
               .queued = 1,
               .last_request_ms = 4500};
  absl::StatusOr<LoadReport> back = LoadReportFromJson(LoadReportToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->updated_ms, 5000);
  ASSERT_EQ(back->samples.size(), 2u);
  EXPECT_DOUBLE_EQ(back->samples[0].concurrency, 1.5);
  EXPECT_EQ(back->samples[1].requests, 1);
  EXPECT_EQ(back->samples[0].latency, r.samples[0].latency);
  EXPECT_TRUE(back->samples[1].latency.empty());
  EXPECT_FALSE(LoadReportFromJson(R"({"samples": [[1, 2, 3, [[500, 1]]]]})").ok());
  EXPECT_EQ(back->queued, 1);
  EXPECT_FALSE(LoadReportFromJson("[]").ok());
  EXPECT_FALSE(LoadReportFromJson(R"({"samples": [[1, 2]]})").ok());
  EXPECT_FALSE(LoadReportFromJson(R"({"samples": [["a", 2, 3]]})").ok());
}

TEST(RemoteLoadsTest, GatewaysAddUpAndOverlappingReportsCountOnce) {
  RemoteLoads remote;
  // Gateway a reports seconds 1-2, then 2-3 (second 2 again, revised): counted once.
  remote.Add("a", "ns/s", {.updated_ms = 3000, .samples = {{1000, 1, 1}, {2000, 2, 2}}});
  remote.Add("a", "ns/s",
             {.updated_ms = 4000, .samples = {{2000, 3, 3}, {3000, 4, 4}}, .queued = 2});
  remote.Add("b", "ns/s",
             {.updated_ms = 4000, .samples = {{3000, 10, 1}}, .last_request_ms = 3900});
  // A report older than one already read changes nothing.
  remote.Add("a", "ns/s", {.updated_ms = 3500, .samples = {{3000, 100, 100}}});
  LoadMeter::Reading local;
  local.samples = {{3000, 0.5, 1, {{7, 1}}}};
  remote.Add(
      "b", "ns/s",
      {.updated_ms = 4100, .samples = {{3000, 10, 1, {{7, 2}, {9, 1}}}}, .last_request_ms = 3900});
  local.queued = 1;
  remote.MergeInto("ns/s", 4500, &local);
  ASSERT_EQ(local.samples.size(), 3u);
  EXPECT_DOUBLE_EQ(local.samples[0].concurrency, 1);     // second 1: a
  EXPECT_DOUBLE_EQ(local.samples[1].concurrency, 3);     // second 2: a's revision
  EXPECT_DOUBLE_EQ(local.samples[2].concurrency, 14.5);  // second 3: local + a + b
  EXPECT_EQ(local.samples[2].requests, 6);
  EXPECT_EQ(local.samples[2].latency,
            (std::vector<autoscale::LatencyCount>{{7, 3}, {9, 1}}));  // latencies add up too
  EXPECT_EQ(local.queued, 3);
  EXPECT_EQ(local.last_request_ms, 3900);
  // Stale gateways count for nothing now; their seconds stay until they are old.
  LoadMeter::Reading later;
  remote.MergeInto("ns/s", 4000 + RemoteLoads::kStaleMs + 1, &later);
  EXPECT_EQ(later.queued, 0);
  EXPECT_EQ(later.samples.size(), 3u);
  remote.Prune(4000 + RemoteLoads::kKeepMs + RemoteLoads::kStaleMs + 1000);
  LoadMeter::Reading gone;
  remote.MergeInto("ns/s", 0, &gone);
  EXPECT_TRUE(gone.samples.empty());
}

}  // namespace
}  // namespace gpucloud::gateway
