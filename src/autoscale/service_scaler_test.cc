#include "autoscale/service_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
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

namespace gpucloud::autoscale {
namespace {

TEST(ServiceScalerLatencyTest, BucketsAndWindowP95) {
  EXPECT_EQ(LatencyBucket(0.2), 0);
  EXPECT_EQ(LatencyBucket(1), 0);
  EXPECT_EQ(LatencyBucket(2), 4);
  EXPECT_EQ(LatencyBucket(1e12), kLatencyBuckets - 1);
  for (double ms : {1.5, 7.0, 99.0, 250.0, 4000.0}) {
    const double mid = LatencyOfBucket(LatencyBucket(ms));
    EXPECT_LT(std::abs(mid - ms) / ms, 0.2) << ms;  // within a bucket's width
  }
  std::vector<LatencyCount> c;
  AddLatency(c, 9);
  AddLatency(c, 3, 2);
  AddLatency(c, 9);
  EXPECT_EQ(c, (std::vector<LatencyCount>{{3, 2}, {9, 2}}));
  // 95 requests at ~10 ms and 5 at ~1 s: the p95 is the 95th, 10 ms; one more slow one and it
  // is the slow bucket.
  std::vector<LoadSample> s(2);
  s[0].start_ms = 0;
  s[1].start_ms = 1000;
  AddLatency(s[0].latency, LatencyBucket(10), 95);
  AddLatency(s[1].latency, LatencyBucket(1000), 5);
  EXPECT_NEAR(WindowP95(s, 2, 2000), 10, 2);
  AddLatency(s[1].latency, LatencyBucket(1000), 1);
  EXPECT_NEAR(WindowP95(s, 2, 2000), 1000, 200);
  EXPECT_NEAR(WindowP95(s, 1, 2000), 1000, 200);  // the last second only
  EXPECT_EQ(WindowP95(s, 2, 900), 0);             // none closed in that window
}

// A service whose replicas each serve 20 requests/s with 50 ms of latency unloaded, which
// grows as 50 / (1 - utilization) (an M/M/1 queue), 1 s when saturated; target p95 200 ms.
struct LatencyDrive {
  InferenceServiceSpec spec;
  std::vector<LoadSample> samples;
  ScalerMemory memory;
  int64_t now_ms = 1'000'000;
  int64_t last_request_ms = 0;
  int32_t replicas = 1;
  int32_t starting = 0;  // replicas that are not ready yet
  std::vector<int32_t> history;

  LatencyDrive() {
    spec.min_replicas = 1;
    spec.max_replicas = 20;
    spec.autoscaling.metric = ServiceMetric::kP95Latency;
    spec.autoscaling.target = 200;
  }
  static double LatencyMs(double rps, int32_t ready) {
    const double rho = ready > 0 ? rps / (20.0 * ready) : 1;
    return rho >= 0.95 ? 1000 : 50 / (1 - rho);
  }
  ScaleDecision Step(double rps) {
    LoadSample s{.start_ms = now_ms, .requests = static_cast<int64_t>(rps)};
    if (rps > 0) {
      AddLatency(s.latency, LatencyBucket(LatencyMs(rps, replicas - starting)),
                 static_cast<int64_t>(rps));
      last_request_ms = now_ms;
    }
    samples.push_back(std::move(s));
    now_ms += 1000;
    ScaleDecision d = DecideReplicas(spec, samples,
                                     {.ready = replicas - starting,
                                      .live = replicas,
                                      .last_request_ms = last_request_ms,
                                      .created_ms = 1'000'000},
                                     memory, now_ms);
    memory = d.memory;
    replicas = d.desired;
    history.push_back(d.desired);
    return d;
  }
};

TEST(ServiceScalerLatencyTest, ConvergesOnTheTargetAndHoldsWithoutOscillating) {
  LatencyDrive drive;
  ScaleDecision d;
  for (int i = 0; i < 300; ++i) d = drive.Step(60);  // needs 4 replicas: p95 200 ms
  EXPECT_EQ(drive.replicas, 4) << d.reason;
  // Doubling at most per step: 1, 2, 4.
  std::vector<int32_t> steps = {drive.history[0]};
  for (int32_t r : drive.history) {
    if (r != steps.back()) steps.push_back(r);
  }
  EXPECT_EQ(steps, (std::vector<int32_t>{2, 4}));
  EXPECT_LT(LatencyDrive::LatencyMs(60, drive.replicas), 201);
  // Load falls to 10/s: one replica less per stable window, down to 1 (100 ms p95).
  for (int i = 0; i < 400; ++i) d = drive.Step(10);
  EXPECT_EQ(drive.replicas, 1) << d.reason;
  EXPECT_NE(d.reason.find("ms over"), std::string::npos) << d.reason;
}

TEST(ServiceScalerLatencyTest, WaitsForStartingReplicasAndScalesToZeroWhenIdle) {
  LatencyDrive drive;
  drive.spec.min_replicas = 0;
  drive.replicas = 2;
  drive.starting = 1;                           // one is still loading its model
  for (int i = 0; i < 30; ++i) drive.Step(60);  // 1,000 ms with one ready
  EXPECT_EQ(drive.replicas, 2);                 // no step while it starts
  drive.starting = 0;
  for (int i = 0; i < 10; ++i) drive.Step(60);
  EXPECT_EQ(drive.replicas, 4);
  ScaleDecision d;
  std::string to_zero;
  for (int i = 0; i < 40; ++i) {
    d = drive.Step(0);
    if (d.desired == 0 && to_zero.empty()) to_zero = d.reason;
  }
  EXPECT_EQ(drive.replicas, 0) << d.reason;
  EXPECT_NE(to_zero.find("scaled to zero"), std::string::npos) << to_zero;
  d = drive.Step(1);  // a request: a replica again
  EXPECT_EQ(drive.replicas, 1) << d.reason;
}

}  // namespace
}  // namespace gpucloud::autoscale
