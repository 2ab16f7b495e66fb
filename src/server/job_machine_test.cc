#include "server/job_machine.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>

namespace gpucloud::server {
namespace {

constexpr int64_t kNow = 1'000'000;

// A running job with a "ps" task (rank 0) and a "worker" task (ranks 1 and 2), each replica on
// its own node, and what one pass observes of it.
struct Job3 {
  Job3() {
    old_.phase = api::JobPhase::kRunning;
    old_.attempt = 1;
    old_.scheduled_ms = kNow - 70'000;
    old_.attempt_started_ms = kNow - 60'000;
    old_.gpus = 3;
    const char* tasks[] = {"ps", "worker", "worker"};
    for (int rank = 0; rank < 3; ++rank) {
      PlacedReplica r;
      r.name = "ns.job." + std::to_string(rank);
      r.node = "node-" + std::to_string(rank);
      r.rank = rank;
      r.placement.task = tasks[rank];
      old_.placement.push_back(r);
      reports_.push_back(Report(api::TaskState::kRunning));
    }
    rules_.restart = {.max_restarts = 2, .backoff_seconds = 10};
    rules_.stop_grace_ms = 30'000;
  }

  static api::TaskReport Report(api::TaskState state, int exit_code = -1) {
    api::TaskReport t;
    t.state = state;
    t.exit_code = exit_code;
    return t;
  }

  std::vector<ReplicaView> Views() {
    std::vector<ReplicaView> views;
    for (size_t i = 0; i < old_.placement.size(); ++i) {
      ReplicaView v;
      v.replica = &old_.placement[i];
      v.report = &reports_[i];
      views.push_back(v);
    }
    for (auto& [i, f] : edits_) f(views[i]);
    return views;
  }

  JobStep Step() { return NextStatus(old_, Views(), rules_, kNow); }

  void Edit(size_t i, std::function<void(ReplicaView&)> f) { edits_.emplace_back(i, f); }
  void Policy(std::vector<LifecycleEvent> events, LifecycleAction a, std::string task = "",
              std::optional<int32_t> code = std::nullopt) {
    rules_.policies.push_back({std::move(events), code, a, std::move(task)});
  }

  JobStatus old_;
  std::deque<api::TaskReport> reports_;
  std::vector<std::pair<size_t, std::function<void(ReplicaView&)>>> edits_;
  JobRules rules_;
};

class JobMachineTest : public ::testing::Test, public Job3 {};

struct Case {
  const char* name;
  std::function<void(Job3&)> setup;
  const char* phase;
  const char* next;
  const char* reason;
  int restarts;
  int interruptions;
};

TEST_F(JobMachineTest, DefaultsTableByTable) {
  const Case cases[] = {
      {"node lost", [](auto& t) { t.Edit(1, [](ReplicaView& v) { v.node_ready = false; }); },
       "Restarting", "Pending", "NodeLost", 0, 1},
      {"gpu failed",
       [](auto& t) {
         t.Edit(2, [](ReplicaView& v) { v.gpu_problem = "GPU 0 on node-2: Xid 79"; });
       },
       "Restarting", "Pending", "GpuFailed", 0, 1},
      {"task failed", [](auto& t) { t.reports_[1] = Report(api::TaskState::kFailed, 1); },
       "Restarting", "Pending", "TaskFailed", 1, 0},
      {"tempfail", [](auto& t) { t.reports_[1] = Report(api::TaskState::kFailed, 75); },
       "Restarting", "Pending", "Retrying", 0, 1},
      {"spot reclaim",
       [](auto& t) { t.Edit(0, [](ReplicaView& v) { v.reclaim_at_ms = kNow + 60'000; }); },
       "Preempting", "Pending", "SpotReclaim", 0, 1},
      {"drained", [](auto& t) { t.Edit(0, [](ReplicaView& v) { v.draining = true; }); },
       "Preempting", "Pending", "Drained", 0, 1},
      {"predicted failure",
       [](auto& t) { t.Edit(0, [](ReplicaView& v) { v.gpu_risk = "GPU 1 is likely to fail"; }); },
       "Preempting", "Pending", "PredictedFailure", 0, 1},
      {"cancelled", [](auto& t) { t.old_.cancel_requested = true; }, "Cancelling", "Cancelled",
       "Cancelled", 0, 0},
      {"all succeeded",
       [](auto& t) {
         for (auto& r : t.reports_) r = Report(api::TaskState::kSucceeded, 0);
       },
       "Succeeded", "", "Succeeded", 0, 0},
      {"one task done, no policy",
       [](auto& t) {
         t.reports_[1] = t.reports_[2] = Report(api::TaskState::kSucceeded, 0);
         t.old_.reason = "Started";
       },
       "Running", "", "Started", 0, 0},
  };
  for (const Case& c : cases) {
    Job3 t;
    c.setup(t);
    JobStep step = t.Step();
    SCOPED_TRACE(c.name);
    EXPECT_EQ(api::PhaseName(step.status.phase), c.phase);
    EXPECT_EQ(step.status.next ? api::PhaseName(*step.status.next) : "", c.next);
    EXPECT_EQ(step.status.reason, c.reason);
    EXPECT_EQ(step.status.restarts, c.restarts);
    EXPECT_EQ(step.status.interruptions, c.interruptions);
    bool changed = std::string(c.phase) != "Running";
    EXPECT_EQ(step.delete_assignments, changed);
    EXPECT_EQ(step.events.size(), changed ? 1u : 0u);
  }
}

TEST_F(JobMachineTest, FailureWithoutRestartsLeftFails) {
  old_.restarts = 2;
  reports_[2] = Report(api::TaskState::kFailed, 1);
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kStopping);
  EXPECT_EQ(step.status.next, api::JobPhase::kFailed);
  EXPECT_NE(step.status.message.find("no restarts left (2)"), std::string::npos);
}

TEST_F(JobMachineTest, CountedRestartBacksOffExponentially) {
  old_.restarts = 1;
  reports_[1] = Report(api::TaskState::kFailed, 1);
  JobStep step = Step();
  EXPECT_EQ(step.status.restarts, 2);
  EXPECT_EQ(step.status.not_before_ms, kNow + 20'000);
  EXPECT_EQ(step.status.interrupted_ms, kNow);
}

TEST_F(JobMachineTest, ScheduledBecomesRunningAndMeasuresRecovery) {
  old_.phase = api::JobPhase::kScheduled;
  old_.attempt_started_ms = 0;
  old_.interrupted_ms = kNow - 4'000;
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kRunning);
  EXPECT_EQ(step.status.attempt_started_ms, kNow);
  ASSERT_TRUE(step.recovery_seconds.has_value());
  EXPECT_DOUBLE_EQ(*step.recovery_seconds, 4.0);
  EXPECT_EQ(step.status.recoveries, 1);
  EXPECT_FALSE(step.delete_assignments);
}

// A report by an agent that says when its task ran (seconds before kNow; 0: it does not say).
api::TaskReport Timed(api::TaskState state, int exit_code, int64_t started_s, int64_t finished_s) {
  api::TaskReport t = Job3::Report(state, exit_code);
  t.started_ms = started_s == 0 ? 0 : kNow + started_s * 1000;
  t.finished_ms = finished_s == 0 ? 0 : kNow + finished_s * 1000;
  return t;
}

// Several steps between two passes (a fast task starts and ends before the controller looks):
// each is recorded, in order, at the times the agents reported.
struct FastCase {
  const char* name;
  std::function<void(Job3&)> setup;
  const char* phase;
  std::vector<std::string> reasons;  // of the step's events, in order
  int64_t started_ms;                // status.startedMs
  int64_t run_ended_ms;              // finishedMs of a success, runEndedMs of a stop
  double ran_gpu_seconds;            // productive + lost, the attempt's running time
};

TEST_F(JobMachineTest, StepsBetweenPassesAreAllRecordedAtTheAgentsTimes) {
  using api::TaskState;
  const FastCase cases[] = {
      {"started and succeeded",
       [](Job3& t) {
         for (int i = 0; i < 3; ++i)
           t.reports_[i] = Timed(TaskState::kSucceeded, 0, -50 + i, -20 + i);
       },
       "Succeeded",
       {"Started", "Succeeded"},
       kNow - 50'000,
       kNow - 18'000,
       3 * 32.0},
      {"started and succeeded, older agents",
       [](Job3& t) {
         for (auto& r : t.reports_) r = Job3::Report(TaskState::kSucceeded, 0);
       },
       "Succeeded",
       {"Started", "Succeeded"},
       kNow,
       kNow,
       0},
      {"started and one failed",
       [](Job3& t) {
         t.reports_[0] = Timed(TaskState::kFailed, 1, -50, -30);
         t.reports_[1] = t.reports_[2] = Timed(TaskState::kRunning, -1, -49, 0);
       },
       "Restarting",
       {"Started", "TaskFailed"},
       kNow - 50'000,
       kNow - 30'000,
       3 * 20.0},
      {"could not start",
       [](Job3& t) {
         t.reports_[0] = Job3::Report(TaskState::kFailed);
         t.reports_[0].message = "cannot run train.py: No such file or directory";
         t.reports_[1] = t.reports_[2] = Job3::Report(TaskState::kStarting);
       },
       "Restarting",
       {"TaskFailed"},
       0,
       0,
       0},
      {"an agent's clock ahead of the server's",
       [](Job3& t) {
         for (auto& r : t.reports_) r = Timed(TaskState::kSucceeded, 0, 5, 6);
       },
       "Succeeded",
       {"Started", "Succeeded"},
       kNow,
       kNow,
       0},
      {"an agent's clock behind the binding",
       [](Job3& t) {
         for (auto& r : t.reports_) r = Timed(TaskState::kSucceeded, 0, -100, -10);
       },
       "Succeeded",
       {"Started", "Succeeded"},
       kNow - 70'000,
       kNow - 10'000,
       3 * 60.0},
  };
  for (const FastCase& c : cases) {
    SCOPED_TRACE(c.name);
    Job3 t;
    t.old_.phase = api::JobPhase::kScheduled;
    t.old_.attempt_started_ms = 0;
    c.setup(t);
    JobStep step = t.Step();
    const JobStatus& s = step.status;
    EXPECT_EQ(api::PhaseName(s.phase), c.phase);
    std::vector<std::string> reasons;
    for (const JobEvent& e : step.events) reasons.push_back(e.reason);
    EXPECT_EQ(reasons, c.reasons);
    EXPECT_EQ(s.started_ms, c.started_ms);
    EXPECT_EQ(s.Terminal() ? s.finished_ms : s.run_ended_ms, c.run_ended_ms);
    GpuSeconds g = LiveGpuSeconds(s, kNow);
    EXPECT_DOUBLE_EQ(g.productive + g.lost, c.ran_gpu_seconds);
    if (s.Terminal()) {
      EXPECT_DOUBLE_EQ(step.settled.allocated, 3 * 70.0);  // the GPUs were held until now
      EXPECT_DOUBLE_EQ(step.settled.productive, c.ran_gpu_seconds);
    }
  }
}

// A job that recovers and ends within one pass: its recovery is measured to its tasks' start.
TEST_F(JobMachineTest, ARecoveryEndsWhenTheTasksStartedNotWhenThePassSawThem) {
  old_.phase = api::JobPhase::kScheduled;
  old_.attempt_started_ms = 0;
  old_.interrupted_ms = kNow - 80'000;
  for (auto& r : reports_) r = Timed(api::TaskState::kSucceeded, 0, -50, -20);
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(step.status.last_recovery_ms, 30'000);
  ASSERT_TRUE(step.recovery_seconds.has_value());
  EXPECT_DOUBLE_EQ(*step.recovery_seconds, 30.0);
  EXPECT_GT(step.status.gpu_seconds.goodput(), 0);
}

// Volcano's TensorFlow example: the parameter server runs for ever; the job ends when its
// workers complete.
TEST_F(JobMachineTest, TaskCompletedCompleteJobEndsTheJobAsSucceeded) {
  Policy({LifecycleEvent::kTaskCompleted}, LifecycleAction::kCompleteJob, "worker");
  reports_[1] = reports_[2] = Report(api::TaskState::kSucceeded, 0);
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kStopping);
  EXPECT_EQ(step.status.next, api::JobPhase::kSucceeded);
  EXPECT_EQ(step.status.reason, "Completed");
  EXPECT_TRUE(step.delete_assignments);
  ASSERT_EQ(step.events.size(), 1u);
  EXPECT_EQ(step.events[0].type, "Normal");
  EXPECT_NE(step.events[0].message.find("TaskCompleted -> CompleteJob"), std::string::npos);

  // The parameter server stops on SIGTERM: the job is Succeeded, its work all kept.
  old_ = step.status;
  reports_[0] = Report(api::TaskState::kStopped);
  JobStep done = Step();
  EXPECT_EQ(done.status.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(done.status.finished_ms, kNow);
  EXPECT_TRUE(done.status.placement.empty());
  EXPECT_DOUBLE_EQ(done.settled.allocated, 3 * 70.0);
  EXPECT_DOUBLE_EQ(done.settled.productive, 3 * 60.0);
  EXPECT_DOUBLE_EQ(done.settled.lost, 0);
}

TEST_F(JobMachineTest, TaskCompletedForAnotherTaskDoesNothing) {
  Policy({LifecycleEvent::kTaskCompleted}, LifecycleAction::kCompleteJob, "ps");
  reports_[1] = reports_[2] = Report(api::TaskState::kSucceeded, 0);
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kRunning);
  EXPECT_FALSE(step.delete_assignments);
}

TEST_F(JobMachineTest, PodFailedAbortJobFailsWithoutRestarting) {
  Policy({LifecycleEvent::kPodFailed}, LifecycleAction::kAbortJob);
  reports_[1] = Report(api::TaskState::kFailed, 1);
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kStopping);
  EXPECT_EQ(step.status.next, api::JobPhase::kFailed);
  EXPECT_EQ(step.status.reason, "Aborted");
  EXPECT_EQ(step.status.restarts, 0);
}

TEST_F(JobMachineTest, ExitCodePolicyMatchesItsCodeOnly) {
  Policy({}, LifecycleAction::kTerminateJob, "", 3);
  reports_[1] = Report(api::TaskState::kFailed, 4);
  EXPECT_EQ(Step().status.reason, "TaskFailed");  // the default restart
  reports_[1] = Report(api::TaskState::kFailed, 3);
  JobStep step = Step();
  EXPECT_EQ(step.status.reason, "Terminated");
  EXPECT_EQ(step.status.next, api::JobPhase::kFailed);
}

TEST_F(JobMachineTest, TaskLevelPolicyAppliesToItsTaskOnly) {
  Policy({LifecycleEvent::kTaskFailed}, LifecycleAction::kTerminateJob, "ps");
  reports_[1] = Report(api::TaskState::kFailed, 1);  // a worker
  EXPECT_EQ(Step().status.reason, "TaskFailed");
  reports_[1] = Report(api::TaskState::kRunning);
  reports_[0] = Report(api::TaskState::kFailed, 1);  // the ps
  EXPECT_EQ(Step().status.reason, "Terminated");
}

TEST_F(JobMachineTest, AnyEventMatchesInterruptionsButNotCompletion) {
  Policy({LifecycleEvent::kAny}, LifecycleAction::kAbortJob);
  Edit(0, [](ReplicaView& v) { v.node_ready = false; });
  EXPECT_EQ(Step().status.reason, "Aborted");
  edits_.clear();
  reports_[1] = reports_[2] = Report(api::TaskState::kSucceeded, 0);
  EXPECT_EQ(Step().status.phase, api::JobPhase::kRunning);
}

TEST_F(JobMachineTest, PodEvictedPolicyOnDrain) {
  Policy({LifecycleEvent::kPodEvicted}, LifecycleAction::kTerminateJob);
  Edit(2, [](ReplicaView& v) { v.draining = true; });
  JobStep step = Step();
  EXPECT_EQ(step.status.reason, "Terminated");
  EXPECT_EQ(step.status.interruptions, 0);
}

TEST_F(JobMachineTest, RestartJobOnCompletionCountsARestart) {
  Policy({LifecycleEvent::kTaskCompleted}, LifecycleAction::kRestartJob, "worker");
  reports_[1] = reports_[2] = Report(api::TaskState::kSucceeded, 0);
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kRestarting);
  EXPECT_EQ(step.status.reason, "RestartJob");
  EXPECT_EQ(step.status.restarts, 1);
}

TEST_F(JobMachineTest, RestartJobOnFailureIsTheDefault) {
  Policy({LifecycleEvent::kPodFailed}, LifecycleAction::kRestartJob);
  reports_[1] = Report(api::TaskState::kFailed, 1);
  JobStep step = Step();
  EXPECT_EQ(step.status.reason, "TaskFailed");
  EXPECT_EQ(step.status.restarts, 1);
}

TEST_F(JobMachineTest, StoppingWaitsForTasksOrTheDeadline) {
  old_.phase = api::JobPhase::kRestarting;
  old_.next = api::JobPhase::kPending;
  old_.stop_deadline_ms = kNow + 1;
  JobStep step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kRestarting);  // tasks still running
  old_.stop_deadline_ms = kNow;
  step = Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kPending);
  EXPECT_TRUE(step.status.placement.empty());
  EXPECT_EQ(step.status.stop_deadline_ms, 0);
}

TEST_F(JobMachineTest, StoppingOnLostNodesDoesNotWaitForThem) {
  old_.phase = api::JobPhase::kRestarting;
  old_.next = api::JobPhase::kPending;
  old_.stop_deadline_ms = kNow + 60'000;
  reports_[0] = reports_[1] = Report(api::TaskState::kStopped);
  Edit(2, [](ReplicaView& v) { v.node_ready = false; });
  EXPECT_EQ(Step().status.phase, api::JobPhase::kPending);
}

TEST_F(JobMachineTest, NodeLocalCheckpointsRememberWhereRanksRan) {
  rules_.node_local_checkpoints = true;
  old_.phase = api::JobPhase::kPreempting;
  old_.next = api::JobPhase::kPending;
  for (auto& r : reports_) r = Report(api::TaskState::kStopped);
  JobStep step = Step();
  EXPECT_EQ(step.status.checkpoint_nodes, (std::vector<std::string>{"node-0", "node-1", "node-2"}));
  EXPECT_DOUBLE_EQ(step.status.checkpoint_gpus, 3);
}

TEST_F(JobMachineTest, PendingCancelledAndTerminalJobs) {
  old_ = JobStatus{};
  old_.cancel_requested = true;
  JobStep step = NextStatus(old_, {}, rules_, kNow);
  EXPECT_EQ(step.status.phase, api::JobPhase::kCancelled);
  EXPECT_EQ(step.status.finished_ms, kNow);
  old_ = step.status;
  EXPECT_EQ(NextStatus(old_, {}, rules_, kNow + 5).status, old_);
}

// A failed replica raises PodFailed and TaskFailed together: the policies' order decides, so
// the task-level policy (first) wins over a job-level one for the other event.
TEST_F(JobMachineTest, TaskLevelTaskFailedBeatsJobLevelPodFailed) {
  Policy({LifecycleEvent::kTaskFailed}, LifecycleAction::kRestartJob, "worker");
  Policy({LifecycleEvent::kPodFailed}, LifecycleAction::kAbortJob);
  reports_[1] = Report(api::TaskState::kFailed, 1);
  JobStep step = Step();
  EXPECT_EQ(step.status.reason, "TaskFailed");  // the default restart, counted
  EXPECT_EQ(step.status.restarts, 1);
}

// One failed replica's default restart does not hide another's AbortJob.
TEST_F(JobMachineTest, ALaterFailuresAbortIsNotHiddenByAnEarlierRestart) {
  Policy({LifecycleEvent::kPodFailed}, LifecycleAction::kRestartJob, "ps");
  Policy({LifecycleEvent::kPodFailed}, LifecycleAction::kAbortJob, "worker");
  reports_[0] = Report(api::TaskState::kFailed, 1);
  reports_[2] = Report(api::TaskState::kFailed, 1);
  EXPECT_EQ(Step().status.reason, "Aborted");
}

// Why a task is not running yet, once per change: pulls are Normal, failed pulls Warnings with
// their reason, anything else Normal "Starting".
TEST_F(JobMachineTest, StartingMessagesBecomeEventsOnce) {
  old_.phase = api::JobPhase::kScheduled;
  reports_[1] = reports_[2] = Report(api::TaskState::kStarting);  // nothing running yet
  const std::pair<const char*, std::pair<const char*, const char*>> cases[] = {
      {"Pulling: registry.local/train:1", {"Normal", "Pulling"}},
      {"ImagePullBackOff: 401 from registry.local", {"Warning", "ImagePullBackOff"}},
      {"ErrImageNeverPull: not on the node", {"Warning", "ErrImageNeverPull"}},
      {"waiting for: the checkpoint lock", {"Normal", "Starting"}},
  };
  for (const auto& [message, want] : cases) {
    reports_[0] = Report(api::TaskState::kStarting);
    reports_[0].message = message;
    JobStep step = Step();
    ASSERT_EQ(step.events.size(), 1u) << message;
    EXPECT_EQ(step.events[0].type, want.first) << message;
    EXPECT_EQ(step.events[0].reason, want.second) << message;
    old_.tasks = step.status.tasks;  // the same message again: no new event
    EXPECT_TRUE(Step().events.empty()) << message;
  }
}

TEST_F(JobMachineTest, PreemptedJobsCheckpointAndWaitForCapacity) {
  JobStep step = Preempt(old_, rules_, "preempted for team/urgent: priority", 5'000, kNow);
  EXPECT_EQ(step.status.phase, api::JobPhase::kPreempting);
  EXPECT_EQ(step.status.next, api::JobPhase::kPending);
  EXPECT_EQ(step.status.reason, "Preempted");
  EXPECT_EQ(step.status.interruptions, 1);
  EXPECT_EQ(step.status.interrupted_ms, kNow);
  EXPECT_EQ(step.status.run_ended_ms, kNow);
  EXPECT_EQ(step.status.stop_deadline_ms, kNow + 5'000 + 5'000);  // its grace, not the job's
  EXPECT_TRUE(step.delete_assignments);
  ASSERT_EQ(step.events.size(), 1u);
  EXPECT_EQ(step.events[0].type, "Warning");
  EXPECT_EQ(step.events[0].message, "preempted for team/urgent: priority");
}

TEST_F(JobMachineTest, PodEvictedPolicyAppliesToPreemptionToo) {
  Policy({LifecycleEvent::kPodEvicted}, LifecycleAction::kTerminateJob, "worker");
  JobStep step = Preempt(old_, rules_, "preempted for team/urgent: priority", 5'000, kNow);
  EXPECT_EQ(step.status.phase, api::JobPhase::kStopping);
  EXPECT_EQ(step.status.next, api::JobPhase::kFailed);
  EXPECT_EQ(step.status.reason, "Terminated");
  EXPECT_EQ(step.status.interruptions, 0);
  EXPECT_EQ(step.status.stop_deadline_ms, kNow + 5'000 + 5'000);
}

TEST(MatchPolicy, FirstMatchDecidesAndTaskLevelFirst) {
  std::vector<LifecyclePolicy> p = {
      {{LifecycleEvent::kPodFailed}, std::nullopt, LifecycleAction::kTerminateJob, "ps"},
      {{LifecycleEvent::kPodFailed}, std::nullopt, LifecycleAction::kAbortJob, ""},
  };
  EXPECT_EQ(MatchPolicy(p, LifecycleEvent::kPodFailed, "ps", 1), &p[0]);
  EXPECT_EQ(MatchPolicy(p, LifecycleEvent::kPodFailed, "worker", 1), &p[1]);
  EXPECT_EQ(MatchPolicy(p, LifecycleEvent::kPodEvicted, "worker", std::nullopt), nullptr);
}

}  // namespace
}  // namespace gpucloud::server
