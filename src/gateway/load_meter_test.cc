#include "gateway/load_meter.h"

#include <gtest/gtest.h>

namespace gpucloud::gateway {
namespace {

TEST(LoadMeterTest, IntegratesInFlightPerSecond) {
  FakeClock clock(10'000);
  LoadMeter m(clock);
  m.Arrived("a/s");  // 10.000: one in flight
  clock.Advance(500);
  m.Arrived("a/s");  // 10.500: two
  clock.Advance(250);
  m.Finished("a/s", 750);  // 10.750: one (its latency counted in second 10)
  clock.Advance(2250);     // 13.000: seconds 10 and 11 and 12 closed
  LoadMeter::Reading r = m.Read("a/s", 60);
  ASSERT_EQ(r.samples.size(), 3u);
  EXPECT_EQ(r.samples[0].start_ms, 10'000);
  EXPECT_DOUBLE_EQ(r.samples[0].concurrency, 0.5 * 1 + 0.25 * 2 + 0.25 * 1);
  EXPECT_EQ(r.samples[0].requests, 2);
  EXPECT_DOUBLE_EQ(r.samples[1].concurrency, 1);  // held through second 11
  EXPECT_EQ(r.samples[0].latency,
            (std::vector<autoscale::LatencyCount>{{autoscale::LatencyBucket(750), 1}}));
  EXPECT_EQ(r.samples[1].requests, 0);
  EXPECT_TRUE(r.samples[1].latency.empty());
  EXPECT_DOUBLE_EQ(r.samples[2].concurrency, 1);
  EXPECT_EQ(r.in_flight, 1);
  EXPECT_EQ(r.last_request_ms, 10'500);
  EXPECT_EQ(r.requests_total, 2);
  EXPECT_EQ(m.Read("a/s", 1).samples.size(), 1u);
  EXPECT_TRUE(m.Read("other/s", 60).samples.empty());
}

TEST(LoadMeterTest, QuietSecondsLeaveNoSamplesAndHistoryIsBounded) {
  FakeClock clock(0);
  LoadMeter m(clock);
  m.Arrived("a/s");
  m.Finished("a/s");
  clock.Advance(10'000);
  LoadMeter::Reading r = m.Read("a/s", 60);
  ASSERT_EQ(r.samples.size(), 1u);  // only the second with the request
  m.Arrived("a/s");                 // held for two hours: at most kMaxSeconds samples
  clock.Advance(7'200'000);
  r = m.Read("a/s", 1'000'000);
  EXPECT_LE(r.samples.size(), LoadMeter::kMaxSeconds);
  EXPECT_GE(r.samples.size(), LoadMeter::kMaxSeconds - 1);
  m.Queued("a/s", 2);
  m.Queued("a/s", -1);
  EXPECT_EQ(m.Read("a/s", 1).queued, 1);
  m.Forget("a/s");
  EXPECT_EQ(m.Read("a/s", 1).requests_total, 0);
}

}  // namespace
}  // namespace gpucloud::gateway
