// Ordering dlas (Tiresias' discretized two-dimensional LAS): bands of attained GPU-time, FIFO
// inside a band, preemption of later bands, the starvation guard, and the band a bound job
// starts from.
#include <gtest/gtest.h>

#include <algorithm>

#include "sched/registry.h"
#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

using testing_util::MakeTestNode;
using testing_util::PendingWholeGpuJob;
using testing_util::Preempted;

constexpr int64_t kHour = 3'600'000;  // ms
constexpr int64_t kGpuHour = kHour;   // GPU x ms in one GPU-hour

SchedulerOptions DlasOptions(LasConfig las = {}) {
  SchedulerOptions o;
  o.ordering = QueueOrdering::kDlas;
  o.las = std::move(las);
  return o;
}

// A running job of `gpus` whole GPUs on node `node` from GPU `first`, started at `start_ms` with
// `service` GPU x ms counted towards its band before that.
Allocation Running(std::string key, NodeIndex node, int first, int gpus, int64_t start_ms,
                   int64_t service, std::string queue = "q") {
  Allocation a{std::move(key), {{.task = "w", .node = node}}};
  for (int g = first; g < first + gpus; ++g) a.replicas[0].gpus.push_back({.gpu = g});
  a.queue = std::move(queue);
  a.start_ms = start_ms;
  a.last_checkpoint_ms = start_ms;
  a.las_service_gpu_ms = service;
  return a;
}

TEST(Dlas, BandsCountThresholdsReached) {
  const LasConfig las{.thresholds_gpu_s = {3600, 16 * 3600}};
  EXPECT_EQ(LasBand(las, 0), 0);
  EXPECT_EQ(LasBand(las, kGpuHour - 1), 0);
  EXPECT_EQ(LasBand(las, kGpuHour), 1);
  EXPECT_EQ(LasBand(las, 16 * kGpuHour - 1), 1);
  EXPECT_EQ(LasBand(las, 16 * kGpuHour), 2);
  // A running job: its service before, plus its GPUs times the time since its start.
  Allocation a = Running("ns/a", 0, 0, 4, /*start_ms=*/0, /*service=*/kGpuHour / 2);
  EXPECT_EQ(LasBandOf(las, a, 4000, kHour / 8 - 1), 0);  // 0.5 + 4 x 0.125 GPU-h, just short
  EXPECT_EQ(LasBandOf(las, a, 4000, kHour / 8), 1);
}

// Inside a band, first come first served whatever the service; the earlier band goes first.
TEST(Dlas, OrdersByBandThenSubmission) {
  const LasConfig las{.thresholds_gpu_s = {3600}};
  PendingJob old_long = PendingWholeGpuJob("ns/old-long", 1, 1, "q", 0, /*submit_ms=*/1);
  old_long.attained_gpu_ms = 2 * kGpuHour;  // band 1
  PendingJob old_short = PendingWholeGpuJob("ns/old-short", 1, 1, "q", 0, 2);
  old_short.attained_gpu_ms = kGpuHour / 2;  // band 0, more service than the next
  PendingJob fresh = PendingWholeGpuJob("ns/fresh", 1, 1, "q", 0, 3);
  std::vector<PendingJob> jobs = {fresh, old_long, old_short};
  OrderContext order{QueueOrdering::kDlas, &las, 10 * kHour};
  std::sort(jobs.begin(), jobs.end(),
            [&](const PendingJob& a, const PendingJob& b) { return QueueSortLess(order, a, b); });
  EXPECT_EQ(jobs[0].request.key, "ns/old-short");
  EXPECT_EQ(jobs[1].request.key, "ns/fresh");
  EXPECT_EQ(jobs[2].request.key, "ns/old-long");
  // Continuous LAS would put the fresh job (no service) first.
  std::sort(jobs.begin(), jobs.end(), [](const PendingJob& a, const PendingJob& b) {
    return QueueSortLess(QueueOrdering::kLas, a, b);
  });
  EXPECT_EQ(jobs[0].request.key, "ns/fresh");
}

// A waiting job of band 0 preempts a running job that has crossed into band 1, which then
// checkpoints within the grace period; a running job still in band 0 is left alone.
TEST(Dlas, AWaitingJobPreemptsOnlyJobsOfALaterBand) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  // Each 4 GPUs since t=0: "long" had 15 GPU-hours before, so at 1 h it has 19 (band 1); "young"
  // had none, so it has 4 (band 0).
  ASSERT_TRUE(s.Commit(Running("ns/long", 0, 0, 4, 0, 15 * kGpuHour)).ok());
  ASSERT_TRUE(s.Commit(Running("ns/young", 0, 4, 4, 0, 0)).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default(), DlasOptions());
  PendingJob fresh = PendingWholeGpuJob("ns/fresh", 1, 4, "q", 0, kHour);
  std::vector<Decision> d = sched.Schedule(s, {fresh}, kHour);
  EXPECT_EQ(Preempted(d), std::vector<std::string>{"ns/long"});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].reason,
            "preempted by ns/fresh (it has attained more GPU-time: LAS band 1 after 0); "
            "checkpoint and stop within 30 s");
  EXPECT_EQ(d[1].reason, "waiting for 1 preempted job to stop: ns/long");

  // With 11 GPU-hours before and half an hour on 4 GPUs (13 in all), "long" is still in band 0,
  // the waiting job's: first come, first served, and nobody is preempted.
  ClusterState t({MakeTestNode("n", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(t.Commit(Running("ns/long", 0, 0, 4, 0, 11 * kGpuHour)).ok());
  ASSERT_TRUE(t.Commit(Running("ns/young", 0, 4, 4, 0, 0)).ok());
  d = sched.Schedule(t, {fresh}, kHour / 2);
  EXPECT_TRUE(Preempted(d).empty());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, DecisionKind::kWait);
}

// A waiting job of a later band preempts nobody; a higher priority never yields to a band.
TEST(Dlas, NeitherALaterBandNorALowerPriorityPreempts) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  Allocation vip = Running("ns/vip", 0, 0, 8, 0, 20 * kGpuHour);
  vip.priority = 5;
  ASSERT_TRUE(s.Commit(vip).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default(), DlasOptions());
  PendingJob fresh = PendingWholeGpuJob("ns/fresh", 1, 4, "q", 0, kHour);
  EXPECT_TRUE(Preempted(sched.Schedule(s, {fresh}, kHour)).empty());

  ClusterState t({MakeTestNode("n", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(t.Commit(Running("ns/mid", 0, 0, 8, 0, 17 * kGpuHour)).ok());
  PendingJob older = PendingWholeGpuJob("ns/older", 1, 4, "q", 0, 0);
  older.attained_gpu_ms = 30 * kGpuHour;  // band 1, like "mid": no preemption
  EXPECT_TRUE(Preempted(sched.Schedule(t, {older}, kHour)).empty());
}

// With fair share on, dlas preempts only inside the preemptor's queue; with it off, across all.
TEST(Dlas, PreemptsInsideItsQueueUnlessFairShareIsOff) {
  auto cluster = [] {
    ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
    EXPECT_TRUE(s.Commit(Running("other/long", 0, 0, 8, 0, 40 * kGpuHour, "b")).ok());
    return s;
  };
  PendingJob fresh = PendingWholeGpuJob("ns/fresh", 1, 4, "a", 0, kHour);
  ClusterState s = cluster();
  Scheduler shared(DefaultFilters(), GpuCatalog::Default(), DlasOptions());
  EXPECT_TRUE(Preempted(shared.Schedule(s, {fresh}, kHour)).empty());
  SchedulerOptions global = DlasOptions();
  global.fair_share = false;
  ClusterState t = cluster();
  Scheduler one_order(DefaultFilters(), GpuCatalog::Default(), global);
  EXPECT_EQ(Preempted(one_order.Schedule(t, {fresh}, kHour)),
            std::vector<std::string>{"other/long"});
}

// A job that waited `starvationFactor` times the wall time of its service goes back to band 0:
// ahead of a fresh job submitted before its promotion, and starting its band afresh.
TEST(Dlas, TheStarvationGuardPromotesAndTheBandStartsAfresh) {
  const LasConfig las{.thresholds_gpu_s = {3600}, .starvation_factor = 2};
  PendingJob starved = PendingWholeGpuJob("ns/starved", 1, 2, "q", 0, /*submit_ms=*/0);
  starved.attained_gpu_ms = 4 * kGpuHour;  // 2 GPUs for 2 h: promoted after waiting 4 h
  starved.waiting_since_ms = 2 * kHour;
  EXPECT_EQ(LasBandOf(las, starved, 6 * kHour - 1), 1);
  EXPECT_EQ(LasBandOf(las, starved, 6 * kHour), 0);

  PendingJob fresh = PendingWholeGpuJob("ns/fresh", 1, 2, "q", 0, 5 * kHour);
  ClusterState s({MakeTestNode("n", 2)}, GpuCatalog::Default());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default(), DlasOptions(las));
  std::vector<Decision> before = sched.Schedule(s, {fresh, starved}, 6 * kHour - 1);
  ASSERT_EQ(before.front().kind, DecisionKind::kBind);
  EXPECT_EQ(before.front().job, "ns/fresh");
  EXPECT_EQ(before.front().allocation->las_service_gpu_ms, 0);

  ClusterState t({MakeTestNode("n", 2)}, GpuCatalog::Default());
  std::vector<Decision> after = sched.Schedule(t, {fresh, starved}, 6 * kHour);
  ASSERT_EQ(after.front().kind, DecisionKind::kBind);
  EXPECT_EQ(after.front().job, "ns/starved");
  EXPECT_EQ(after.front().allocation->las_service_gpu_ms, 0);  // Tiresias resets its service

  // Without the guard's promotion, a job's band counts from all its service.
  PendingJob served = PendingWholeGpuJob("ns/served", 1, 2, "q", 0, 0);
  served.attained_gpu_ms = kGpuHour / 2;
  ClusterState u({MakeTestNode("n", 2)}, GpuCatalog::Default());
  std::vector<Decision> d = sched.Schedule(u, {served}, kHour);
  ASSERT_EQ(d.front().kind, DecisionKind::kBind);
  EXPECT_EQ(d.front().allocation->las_service_gpu_ms, kGpuHour / 2);
}

// A SchedulerConfig's dlas reaches the scheduler.
TEST(Dlas, FromConfigTakesTheBands) {
  SchedulerConfig config;
  config.ordering = QueueOrdering::kDlas;
  config.las = {.thresholds_gpu_s = {60, 120}, .starvation_factor = 1.5};
  absl::StatusOr<std::unique_ptr<Scheduler>> s =
      Scheduler::FromConfig(config, {}, GpuCatalog::Default());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().ordering, QueueOrdering::kDlas);
  EXPECT_EQ((*s)->options().las, config.las);
}

}  // namespace
}  // namespace gpucloud::sched
