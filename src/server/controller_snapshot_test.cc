// What the controller hands the scheduler about each job (issue 18): the same facts the
// simulator gives it — attained service for `ordering: las`, the last checkpoint for preemption,
// expected ends that survive a rebuild of the scheduler's view of the nodes.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/controller_fixture.h"

namespace gpucloud::server {
namespace {

class ControllerSnapshotTest : public ControllerTest {
 protected:
  void UseScheduler(const SchedulerConfig& config) {
    ControllerOptions o;
    o.checkpoint_root = "/ckpt";
    o.stop_grace_ms = 10'000;
    o.scheduler = config;
    controller_ = std::make_unique<Controller>(*store_, nodes_, clock_, GpuCatalog::Default(), o);
  }

  // Rewrites the stored job's status as if earlier attempts had held `gpu_seconds` of GPU time.
  void SetAttained(const std::string& job, double gpu_seconds) {
    store::KeyValue kv = *store_->Get("/jobs/default/" + job);
    Json doc = Json::parse(kv.value);
    doc["status"]["gpuSeconds"] = Json{{"allocated", gpu_seconds}, {"productive", gpu_seconds}};
    ASSERT_TRUE(
        store_->Txn({{store::Op::Kind::kPut, "/jobs/default/" + job, doc.dump(2), kv.mod_revision}})
            .ok());
  }
};

TEST_F(ControllerSnapshotTest, LasStartsTheJobWithLessAttainedServiceFirst) {
  SchedulerConfig config;
  config.ordering = QueueOrdering::kLas;
  UseScheduler(config);
  // The veteran came first (FIFO would start it) but has had an hour of GPU time already.
  Submit(GangJob("veteran", 1, 1));
  SetAttained("veteran", 3600);
  clock_.Advance(1'000);
  Submit(GangJob("newcomer", 1, 1));
  Register("node-a", 1);
  Pass();
  EXPECT_EQ(Status("newcomer").phase, api::JobPhase::kScheduled);
  EXPECT_EQ(Status("veteran").phase, api::JobPhase::kPending);
}

// Ordering dlas: a running job is preempted for a fresh one only once its service (the attempts
// before, as bound, plus this one's GPU time) has crossed into a later band.
TEST_F(ControllerSnapshotTest, DlasPreemptsARunningJobOnceItsServiceCrossesABand) {
  SchedulerConfig config;
  config.ordering = QueueOrdering::kDlas;
  config.las.thresholds_gpu_s = {3600};
  UseScheduler(config);
  Register("node-a", 1);
  Submit(GangJob("veteran", 1, 1));
  SetAttained("veteran", 1800);  // half a GPU-hour in earlier attempts
  Pass();
  ASSERT_EQ(Status("veteran").phase, api::JobPhase::kScheduled);
  EXPECT_EQ(Status("veteran").las_service_gpu_ms, 1'800'000);
  Heartbeat("node-a", {Report("veteran", 0, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Status("veteran").phase, api::JobPhase::kRunning);

  clock_.Advance(20 * 60'000);  // 50 GPU-minutes: still band 0, like the newcomer
  Submit(GangJob("newcomer", 1, 1));
  Heartbeat("node-a", {Report("veteran", 0, api::TaskState::kRunning)});
  Pass();
  EXPECT_EQ(Status("veteran").phase, api::JobPhase::kRunning);
  EXPECT_EQ(Status("newcomer").phase, api::JobPhase::kPending);

  clock_.Advance(11 * 60'000);  // 61 GPU-minutes: band 1
  Heartbeat("node-a", {Report("veteran", 0, api::TaskState::kRunning)});
  Pass();
  EXPECT_EQ(Status("veteran").phase, api::JobPhase::kPreempting) << Status("veteran").message;
  EXPECT_EQ(Status("newcomer").message, "waiting for 1 preempted job to stop: default/veteran");
}

// Fair share counts the GPU-hours of attempts that ended in its window (before, no caller passed
// any history and fairShare.window changed nothing): queue a has used an hour, so b's job starts
// first though a's came first and the tie between equal shares would go to a.
TEST_F(ControllerSnapshotTest, FairShareRemembersTheWindowsGpuHours) {
  UseScheduler(SchedulerConfig{});
  Register("node-a", 1);
  Submit(GangJob("a-old", 1, 1, 3, "  queue: a\n"));
  Pass();
  Heartbeat("node-a", {Report("a-old", 0, api::TaskState::kRunning)});
  Pass();
  clock_.Advance(3'600'000);
  Heartbeat("node-a", {Report("a-old", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  ASSERT_EQ(Status("a-old").phase, api::JobPhase::kSucceeded);
  ASSERT_EQ(Status("a-old").usage.size(), 1u);
  EXPECT_EQ(Status("a-old").usage[0].gpu_type, "H100-80GB");
  EXPECT_NEAR(Status("a-old").usage[0].gpu_seconds, 3600, 1);
  Submit(GangJob("a-new", 1, 1, 3, "  queue: a\n"));
  clock_.Advance(1);
  Submit(GangJob("b-new", 1, 1, 3, "  queue: b\n"));
  Heartbeat("node-a");
  Pass();
  EXPECT_EQ(Status("b-new").phase, api::JobPhase::kScheduled);
  EXPECT_EQ(Status("a-new").phase, api::JobPhase::kPending);
}

// The Fragmentation score protects the request mix of the jobs waiting and running now, not
// Philly's: with only single-GPU jobs there is nothing to strand, so the job goes to best fit's
// node (2 free GPUs); Philly's mix, with its 4- and 8-GPU jobs, would keep that node whole and
// pick the one with 3.
TEST_F(ControllerSnapshotTest, FragmentationProtectsTheCurrentJobsMix) {
  SchedulerConfig config;
  config.scores = {{"Fragmentation", 1, {}}};
  UseScheduler(config);
  Register("node-a", 2);
  Register("node-b", 3);
  Submit(GangJob("one", 1, 1));
  Pass();
  ASSERT_EQ(Status("one").phase, api::JobPhase::kScheduled);
  EXPECT_EQ(Status("one").placement.at(0).node, "node-a");
}

TEST_F(ControllerSnapshotTest, PreemptionTakesTheVictimThatLosesLeastSinceItsCheckpoint) {
  UseScheduler(SchedulerConfig{});
  Register("node-a", 2);
  // Two spot jobs started together; the tie-breaker (the key) would pick aa-plain.
  Submit(GangJob("aa-plain", 1, 1, 3, "  billing: spot\n"));
  Submit(GangJob("zz-ckpt", 1, 1, 3, "  billing: spot\n"));
  Pass();
  ASSERT_EQ(Status("aa-plain").phase, api::JobPhase::kScheduled);
  ASSERT_EQ(Status("zz-ckpt").phase, api::JobPhase::kScheduled);
  Heartbeat("node-a", {Report("aa-plain", 0, api::TaskState::kRunning),
                       Report("zz-ckpt", 0, api::TaskState::kRunning)});
  Pass();
  clock_.Advance(10 * 60'000);
  // zz-ckpt wrote a checkpoint just now: preempting it loses almost nothing, aa-plain 10 min.
  api::TaskReport saved = Report("zz-ckpt", 0, api::TaskState::kRunning);
  saved.checkpoint_ms = clock_.NowMillis();
  Heartbeat("node-a", {Report("aa-plain", 0, api::TaskState::kRunning), saved});
  Pass();
  ASSERT_EQ(Status("zz-ckpt").last_checkpoint_ms, clock_.NowMillis());
  clock_.Advance(1'000);
  Heartbeat("node-a", {Report("aa-plain", 0, api::TaskState::kRunning), saved});
  Submit(GangJob("urgent", 1, 1));
  Pass();
  EXPECT_EQ(Status("zz-ckpt").phase, api::JobPhase::kPreempting) << Status("zz-ckpt").message;
  EXPECT_EQ(Status("aa-plain").phase, api::JobPhase::kRunning);
}

TEST_F(ControllerSnapshotTest, ExpectedEndsSurviveARebuildOfTheNodes) {
  SchedulerConfig config;
  config.estimate_start_times = true;
  UseScheduler(config);
  Register("node-a", 1);
  Submit(GangJob("long", 1, 1, 3, "  runtimeEstimate: 1h\n"));
  Pass();
  ASSERT_EQ(Status("long").phase, api::JobPhase::kScheduled);
  Submit(GangJob("next", 1, 1));
  Pass();
  const std::string before = Status("next").message;
  ASSERT_NE(before.find("expected to start in"), std::string::npos) << before;
  // A node joins: the scheduler's view of the nodes, and with it every holding, is rebuilt.
  Register("node-b", 0);
  Pass();
  EXPECT_EQ(Status("next").message, before);
}

// One definition of a request's GPU share (sched::GpuShareOf): a 3g MIG instance is 3/7 of an
// A100 rounded up to a milli-GPU, in the job's status and in the cluster's metrics alike (the
// metrics counted MIG instances as 0, the status as exactly 3/7).
TEST_F(ControllerSnapshotTest, AMigInstanceCountsTheSameGpuShareInStatusAndMetrics) {
  RegisterMigNode();
  SubmitMigJob("infer", "3g.40gb");
  Pass();
  JobStatus s = Status("infer");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled) << s.message;
  EXPECT_DOUBLE_EQ(s.gpus, 0.429);
  EXPECT_DOUBLE_EQ(controller_->Metrics().gpus_allocated_by_type["A100-80GB"], 0.429);
}

}  // namespace
}  // namespace gpucloud::server
