// Lifecycle policies through the controller: a Volcano job as its users write it, bound,
// reported on by its agents and ended by its policy.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/controller_fixture.h"

namespace gpucloud::server {
namespace {

std::string Example(const std::string& path) {
  std::ifstream in(std::string(GPUCLOUD_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Volcano's TensorFlow example: the parameter server serves for ever; the job completes when
// its workers do (TaskCompleted -> CompleteJob on the worker task).
TEST_F(ControllerTest, VolcanoTensorFlowJobCompletesWhenItsWorkersDo) {
  Register("node-a", 4);
  Submit(Example("examples/volcano/tensorflow-ps.yaml"));
  Pass();
  JobStatus s = Status("tensorflow-ps");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled);
  ASSERT_EQ(s.placement.size(), 3u);  // rank 0 the ps, ranks 1 and 2 the workers
  Heartbeat("node-a", {Report("tensorflow-ps", 0, api::TaskState::kRunning),
                       Report("tensorflow-ps", 1, api::TaskState::kRunning),
                       Report("tensorflow-ps", 2, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Status("tensorflow-ps").phase, api::JobPhase::kRunning);

  // One worker done: nothing yet.
  Heartbeat("node-a", {Report("tensorflow-ps", 0, api::TaskState::kRunning),
                       Report("tensorflow-ps", 1, api::TaskState::kSucceeded, 0),
                       Report("tensorflow-ps", 2, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Status("tensorflow-ps").phase, api::JobPhase::kRunning);

  // Both: the ps is stopped, and the job succeeds once it has.
  Heartbeat("node-a", {Report("tensorflow-ps", 0, api::TaskState::kRunning),
                       Report("tensorflow-ps", 1, api::TaskState::kSucceeded, 0),
                       Report("tensorflow-ps", 2, api::TaskState::kSucceeded, 0)});
  Pass();
  s = Status("tensorflow-ps");
  EXPECT_EQ(s.phase, api::JobPhase::kStopping);
  EXPECT_EQ(s.next, api::JobPhase::kSucceeded);
  EXPECT_EQ(s.reason, "Completed");
  EXPECT_TRUE(Assignments("node-a").empty());  // the agent stops the ps
  Heartbeat("node-a", {Report("tensorflow-ps", 0, api::TaskState::kStopped),
                       Report("tensorflow-ps", 1, api::TaskState::kSucceeded, 0),
                       Report("tensorflow-ps", 2, api::TaskState::kSucceeded, 0)});
  Pass();
  s = Status("tensorflow-ps");
  EXPECT_EQ(s.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(s.restarts, 0);
  std::vector<std::string> reasons = EventReasons("tensorflow-ps");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "Completed"), reasons.end());
}

TEST_F(ControllerTest, PodFailedAbortJobEndsTheJobWithoutRestarts) {
  Register("node-a", 4);
  Submit(GangJob("abort", 2, 1, 3, "  policies:\n  - events: [PodFailed]\n    action: AbortJob\n"));
  Pass();
  Heartbeat("node-a", {Report("abort", 0, api::TaskState::kRunning),
                       Report("abort", 1, api::TaskState::kFailed, 2)});
  Pass();
  JobStatus s = Status("abort");
  EXPECT_EQ(s.reason, "Aborted");
  EXPECT_EQ(s.next, api::JobPhase::kFailed);
  EXPECT_EQ(s.restarts, 0);
}

TEST_F(ControllerTest, TwoJobsWithRankZeroOnOneNodeGetDifferentMasterPorts) {
  Register("node-a", 4);
  Submit(GangJob("one", 1, 1));
  Submit(GangJob("two", 1, 1));
  Pass();
  JobStatus a = Status("one"), b = Status("two");
  ASSERT_EQ(a.phase, api::JobPhase::kScheduled);
  ASSERT_EQ(b.phase, api::JobPhase::kScheduled);
  EXPECT_NE(a.master_port, 0);
  EXPECT_NE(a.master_port, b.master_port);
  for (const store::KeyValue& kv : Assignments("node-a")) {
    absl::StatusOr<api::Assignment> x = api::AssignmentFromJson(kv.value);
    ASSERT_TRUE(x.ok());
    EXPECT_EQ(x->master_port, x->job == "one" ? a.master_port : b.master_port);
  }
}

}  // namespace
}  // namespace gpucloud::server
