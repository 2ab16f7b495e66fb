// The one snapshot builder (sched/snapshot.h): what the scheduler is given for each job's view.
#include "sched/snapshot.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

using testing_util::MakeTestNode;

constexpr int64_t kHour = 3'600'000;

Job OneGpuJob(int gpus, std::string queue = "q", std::optional<int64_t> estimate_s = {}) {
  Job j;
  TaskSpec t;
  t.name = "w";
  t.resources.gpu.mode = GpuMode::kWhole;
  t.resources.gpu.count = gpus;
  j.spec.tasks = {t};
  j.spec.queue = std::move(queue);
  j.spec.runtime_estimate_seconds = estimate_s;
  return j;
}

HeldReplica On(const std::string& node, std::vector<int> gpus) {
  HeldReplica r;
  r.node = node;
  r.placement.task = "w";
  for (int g : gpus) r.placement.gpus.push_back({.gpu = g});
  return r;
}

TEST(Snapshot, AHoldingJobHoldsWhatItWasBoundWithItsTimesAndCheckpoint) {
  Job job = OneGpuJob(2, "q", 7200);
  JobView v;
  v.phase = JobViewPhase::kHolding;
  v.placement = {On("b", {0, 1})};
  v.bound_ms = 10 * kHour;
  v.last_checkpoint_ms = 11 * kHour;
  v.las_service_gpu_ms = 5000;
  Snapshot s = BuildSnapshot({MakeTestNode("a", 2), MakeTestNode("b", 2)}, {{"ns/j", &job, &v}},
                             kHour, 12 * kHour, GpuCatalog::Default());
  ASSERT_TRUE(s.holding_conflicts.empty());
  const Allocation& a = s.state->allocations().at("ns/j");
  EXPECT_EQ(a.replicas.at(0).node, s.index.at("b"));
  EXPECT_EQ(a.start_ms, 10 * kHour);         // not started yet: bound counts
  EXPECT_EQ(a.expected_end_ms, 12 * kHour);  // bound + the estimate, whenever it is rebuilt
  EXPECT_EQ(a.last_checkpoint_ms, 11 * kHour);
  EXPECT_EQ(a.las_service_gpu_ms, 5000);
  EXPECT_FALSE(a.terminating);
  EXPECT_TRUE(s.pending.empty());

  v.started_ms = 10 * kHour + 5000;
  v.phase = JobViewPhase::kStopping;
  s = BuildSnapshot({MakeTestNode("a", 2), MakeTestNode("b", 2)}, {{"ns/j", &job, &v}}, kHour,
                    12 * kHour, GpuCatalog::Default());
  EXPECT_EQ(s.state->allocations().at("ns/j").start_ms, 10 * kHour + 5000);
  EXPECT_TRUE(s.state->allocations().at("ns/j").terminating);
}

TEST(Snapshot, ALostNodeHoldsNothingAndAnUnhealthyGpuIsLeftOut) {
  Job job = OneGpuJob(2);
  JobView v;
  v.phase = JobViewPhase::kHolding;
  v.placement = {On("gone", {0, 1}), On("a", {0, 1})};
  Node a = MakeTestNode("a", 2);
  a.gpus[1].healthy = false;
  Snapshot s = BuildSnapshot({a}, {{"ns/j", &job, &v}}, kHour, kHour, GpuCatalog::Default());
  const Allocation& held = s.state->allocations().at("ns/j");
  ASSERT_EQ(held.replicas.size(), 1u);
  EXPECT_EQ(held.replicas[0].gpus.size(), 1u);
  EXPECT_EQ(held.replicas[0].gpus[0].gpu, 0);
}

TEST(Snapshot, WaitingJobsAreDueOnceTheirBackOffHasPassedWithTheirService) {
  Job job = OneGpuJob(1);
  JobView due, later;
  due.phase = later.phase = JobViewPhase::kWaiting;
  due.submit_ms = 5;
  due.attained_gpu_ms = 1234;
  due.waiting_since_ms = 99;
  later.not_before_ms = 2 * kHour;
  Snapshot s =
      BuildSnapshot({MakeTestNode("a", 1)}, {{"ns/due", &job, &due}, {"ns/later", &job, &later}},
                    kHour, kHour, GpuCatalog::Default());
  ASSERT_EQ(s.pending.size(), 1u);
  EXPECT_EQ(s.pending[0].request.key, "ns/due");
  EXPECT_EQ(s.pending[0].submit_ms, 5);
  EXPECT_EQ(s.pending[0].attained_gpu_ms, 1234);
  EXPECT_EQ(s.pending[0].waiting_since_ms, 99);
  EXPECT_EQ(s.pending[0].queue, "q");
}

TEST(Snapshot, TheWindowRemembersEndedAttemptsAndTheMixCountsLiveJobsOnly) {
  Job small = OneGpuJob(1, "a"), big = OneGpuJob(4, "b");
  JobView ended, waiting;
  ended.phase = JobViewPhase::kOther;
  ended.usage = {{.end_ms = 9 * kHour, .gpu_type = "H100-80GB", .gpu_seconds = 7200},
                 {.end_ms = 1 * kHour, .gpu_type = "H100-80GB", .gpu_seconds = 3600}};
  waiting.phase = JobViewPhase::kWaiting;
  Snapshot s =
      BuildSnapshot({MakeTestNode("n", 8)}, {{"ns/e", &big, &ended}, {"ns/w", &small, &waiting}},
                    /*window_ms=*/6 * kHour, 10 * kHour, GpuCatalog::Default());
  // The attempt that ended at 9 h is in the 6 h window, the one at 1 h is not.
  EXPECT_DOUBLE_EQ(s.history.at("b").at("H100-80GB"), 2.0);
  // Only the waiting job is in the request mix.
  ASSERT_EQ(s.workload.size(), 1u);
  EXPECT_EQ(s.workload[0].gpus.raw(), 1000);
}

TEST(Snapshot, HoldingsThatDoNotFitAreReported) {
  Job job = OneGpuJob(1);
  JobView v;
  v.phase = JobViewPhase::kHolding;
  v.placement = {On("a", {0})};
  Snapshot s = BuildSnapshot({MakeTestNode("a", 1)}, {{"ns/one", &job, &v}, {"ns/two", &job, &v}},
                             kHour, kHour, GpuCatalog::Default());
  EXPECT_EQ(s.holding_conflicts, std::vector<std::string>{"ns/two"});
}

}  // namespace
}  // namespace gpucloud::sched
