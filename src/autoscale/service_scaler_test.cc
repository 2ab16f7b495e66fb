#include "autoscale/service_scaler.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpucloud::autoscale {
namespace {

InferenceServiceSpec Spec(int32_t min, int32_t max, int32_t target = 10) {
  InferenceServiceSpec s;
  s.min_replicas = min;
  s.max_replicas = max;
  s.autoscaling.target = target;
  s.autoscaling.stable_window_seconds = 60;
  s.autoscaling.panic_window_seconds = 6;
  s.autoscaling.scale_to_zero_after_seconds = 30;
  return s;
}

// Drives the scaler second by second with a load curve (concurrency per second), as the
// service controller does, feeding back the memory; replicas become ready at once.
struct Drive {
  InferenceServiceSpec spec;
  std::vector<LoadSample> samples;
  ScalerMemory memory;
  int64_t now_ms = 1'000'000;
  int64_t last_request_ms = 0;
  int32_t replicas = 0;
  std::vector<int32_t> history;

  ScaleDecision Step(double concurrency, int64_t queued = 0) {
    samples.push_back({now_ms, concurrency, concurrency > 0 ? 1 : 0});
    if (concurrency > 0 || queued > 0) last_request_ms = now_ms;
    now_ms += 1000;
    ScaleDecision d = DecideReplicas(spec, samples,
                                     {.ready = replicas,
                                      .live = replicas,
                                      .queued = queued,
                                      .last_request_ms = last_request_ms,
                                      .created_ms = 1'000'000},
                                     memory, now_ms);
    memory = d.memory;
    replicas = d.desired;
    history.push_back(d.desired);
    return d;
  }
  int Changes() const {
    int n = 0;
    for (size_t i = 1; i < history.size(); ++i) n += history[i] != history[i - 1];
    return n;
  }
};

TEST(ServiceScalerTest, WindowAverageCountsMissingSecondsAsIdle) {
  std::vector<LoadSample> s = {{0, 10, 5}, {1000, 20, 7}, {5000, 30, 1}};
  EXPECT_DOUBLE_EQ(WindowAverage(ServiceMetric::kConcurrency, s, 6, 6000), 60.0 / 6);
  EXPECT_DOUBLE_EQ(WindowAverage(ServiceMetric::kRps, s, 6, 6000), 13.0 / 6);
  // A second still in progress is not counted; one before the window neither.
  EXPECT_DOUBLE_EQ(WindowAverage(ServiceMetric::kConcurrency, s, 2, 5500), 0);
  EXPECT_DOUBLE_EQ(WindowAverage(ServiceMetric::kConcurrency, s, 5, 6000), 50.0 / 5);
}

TEST(ServiceScalerTest, SteadyLoadGetsLoadOverTarget) {
  Drive r{.spec = Spec(1, 10)};
  r.replicas = 1;
  for (int i = 0; i < 120; ++i) r.Step(30);
  EXPECT_EQ(r.replicas, 3);
  EXPECT_LE(r.Changes(), 3);
}

TEST(ServiceScalerTest, BurstPanicsAndHoldsTheCountForAStableWindow) {
  Drive r{.spec = Spec(1, 20)};
  r.replicas = 1;
  for (int i = 0; i < 60; ++i) r.Step(5);
  ASSERT_EQ(r.replicas, 1);
  ScaleDecision d;
  for (int i = 0; i < 6; ++i) d = r.Step(100);  // a burst: 10 replicas' worth
  EXPECT_TRUE(d.panic);
  EXPECT_GE(r.replicas, 5) << d.reason;
  const int32_t at_panic = r.replicas;
  for (int i = 0; i < 30; ++i) d = r.Step(5);  // the burst is over, panic holds
  EXPECT_GE(r.replicas, at_panic);
  for (int i = 0; i < 120; ++i) r.Step(5);  // a stable window later it goes back
  EXPECT_EQ(r.replicas, 1);
}

TEST(ServiceScalerTest, NoOscillationAroundABoundary) {
  Drive r{.spec = Spec(1, 10)};
  r.replicas = 3;
  for (int i = 0; i < 120; ++i) r.Step(28);
  ASSERT_EQ(r.replicas, 3);
  r.history.clear();
  // +-10 % around 2.8 replicas' worth, for ten minutes: the count must not follow.
  for (int i = 0; i < 600; ++i) r.Step(i % 20 < 10 ? 25.2 : 30.8);
  EXPECT_LE(r.Changes(), 1);
  // Removing replicas waits until the rest would run under 80 % of the target.
  r.history.clear();
  for (int i = 0; i < 120; ++i) r.Step(17);  // ceil(17 / 8) = 3: stays
  EXPECT_EQ(r.replicas, 3);
  for (int i = 0; i < 120; ++i) r.Step(15);  // ceil(15 / 8) = 2
  EXPECT_EQ(r.replicas, 2);
}

TEST(ServiceScalerTest, ScalesToZeroOnlyWhenIdleAndBackOnARequest) {
  Drive r{.spec = Spec(0, 4)};
  r.replicas = 1;
  for (int i = 0; i < 10; ++i) r.Step(3);
  EXPECT_EQ(r.replicas, 1);
  for (int i = 0; i < 29; ++i) r.Step(0);
  EXPECT_EQ(r.replicas, 1) << "inside scaleToZeroAfter";
  for (int i = 0; i < 60; ++i) r.Step(0);
  EXPECT_EQ(r.replicas, 0);
  ScaleDecision d = r.Step(0, /*queued=*/1);
  EXPECT_EQ(r.replicas, 1);
  EXPECT_EQ(d.reason, "a request arrived");
}

TEST(ServiceScalerTest, AWaitingRequestKeepsAStartingReplica) {
  // The replica is still starting (its node boots): no request was served, but one waits.
  InferenceServiceSpec spec = Spec(0, 4);
  ScalerMemory m{.desired = 1};
  ScaleDecision d = DecideReplicas(
      spec, {}, {.ready = 0, .live = 1, .queued = 1, .last_request_ms = 1'000, .created_ms = 0}, m,
      10'000'000);
  EXPECT_EQ(d.desired, 1);
  // The same without the waiting request, long idle: zero.
  d = DecideReplicas(spec, {}, {.ready = 0, .live = 1, .last_request_ms = 1'000, .created_ms = 0},
                     m, 10'000'000);
  EXPECT_EQ(d.desired, 0);
}

TEST(ServiceScalerTest, ANewServiceWithMinZeroStartsWithNone) {
  InferenceServiceSpec spec = Spec(0, 4);
  ScaleDecision d = DecideReplicas(spec, {}, {.created_ms = 5'000}, {}, 6'000);
  EXPECT_EQ(d.desired, 0);
}

TEST(ServiceScalerTest, ClampedToMinAndMax) {
  Drive r{.spec = Spec(2, 3)};
  r.replicas = 2;
  for (int i = 0; i < 70; ++i) r.Step(0);
  EXPECT_EQ(r.replicas, 2);
  ScaleDecision d;
  for (int i = 0; i < 70; ++i) d = r.Step(1000);
  EXPECT_EQ(r.replicas, 3);
  EXPECT_NE(d.reason.find("at max 3"), std::string::npos) << d.reason;
}

TEST(ServiceScalerTest, RequestsPerSecond) {
  Drive r{.spec = Spec(1, 10, /*target=*/50)};
  r.spec.autoscaling.metric = ServiceMetric::kRps;
  r.replicas = 1;
  for (int i = 0; i < 70; ++i) {
    r.samples.push_back({r.now_ms, 1, 200});
    r.last_request_ms = r.now_ms;
    r.now_ms += 1000;
    ScaleDecision d = DecideReplicas(r.spec, r.samples, {.ready = r.replicas, .live = r.replicas},
                                     r.memory, r.now_ms);
    r.memory = d.memory;
    r.replicas = d.desired;
  }
  EXPECT_EQ(r.replicas, 4);  // 200 requests/s at 50 per replica
}

}  // namespace
}  // namespace gpucloud::autoscale
