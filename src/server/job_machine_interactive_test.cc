// The job machine's interactive jobs (JobRules::interactive): idle timeout with its warning,
// maximum duration, and no restart elsewhere.
#include <gtest/gtest.h>

#include <functional>

#include "server/job_machine.h"

namespace gpucloud::server {
namespace {

constexpr int64_t kNow = 10'000'000;

struct Interactive {
  Interactive() {
    old.phase = api::JobPhase::kRunning;
    old.attempt = 1;
    old.started_ms = kNow - 600'000;
    old.attempt_started_ms = old.started_ms;
    for (int rank = 0; rank < 2; ++rank) {
      PlacedReplica r;
      r.name = "ns.nb." + std::to_string(rank);
      r.node = "node-" + std::to_string(rank);
      r.rank = rank;
      r.placement.task = "main";
      old.placement.push_back(r);
      api::TaskReport t;
      t.state = api::TaskState::kRunning;
      reports.push_back(t);
    }
    rules.restart = {.max_restarts = 3, .backoff_seconds = 10};
    rules.interactive = InteractiveSpec{.idle_timeout_seconds = 100, .max_duration_seconds = 3600};
  }
  JobStep Step(std::function<void(std::vector<ReplicaView>&)> edit = nullptr) {
    std::vector<ReplicaView> views;
    for (size_t i = 0; i < old.placement.size(); ++i) {
      views.push_back(ReplicaView{.replica = &old.placement[i], .report = &reports[i]});
    }
    if (edit) edit(views);
    return NextStatus(old, views, rules, kNow);
  }
  JobStatus old;
  std::vector<api::TaskReport> reports;
  JobRules rules;
};

TEST(InteractiveJobs, StopOnlyWhenEveryReplicaIsIdleForTheTimeout) {
  Interactive t;
  t.reports[0].idle_ms = 150'000;
  t.reports[1].idle_ms = 10'000;  // still in use
  JobStep step = t.Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kRunning);
  EXPECT_TRUE(step.events.empty());
  t.reports[1].idle_ms = 100'000;
  step = t.Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kCancelling);
  EXPECT_EQ(step.status.next, api::JobPhase::kCancelled);
  EXPECT_EQ(step.status.reason, "IdleTimeout");
  EXPECT_TRUE(step.delete_assignments);
  EXPECT_NE(step.status.message.find("1m40s"), std::string::npos) << step.status.message;
}

TEST(InteractiveJobs, WarnOnceAnIdleStretchNearsItsEndAndAgainAfterUse) {
  Interactive t;
  // 100 s timeout: the warning at max(80 s, 40 s).
  t.reports[0].idle_ms = t.reports[1].idle_ms = 79'000;
  EXPECT_TRUE(t.Step().events.empty());
  t.reports[0].idle_ms = t.reports[1].idle_ms = 81'000;
  JobStep warned = t.Step();
  ASSERT_EQ(warned.events.size(), 1u);
  EXPECT_EQ(warned.events[0].reason, "IdleWarning");
  EXPECT_NE(warned.events[0].message.find("stopped in 19s"), std::string::npos)
      << warned.events[0].message;
  EXPECT_TRUE(warned.status.idle_warned);
  t.old = warned.status;
  EXPECT_TRUE(t.Step().events.empty());  // once per stretch
  t.reports[0].idle_ms = 0;              // used again
  t.old = t.Step().status;
  EXPECT_FALSE(t.old.idle_warned);
  t.reports[0].idle_ms = 90'000;
  EXPECT_EQ(t.Step().events.size(), 1u);
}

TEST(InteractiveJobs, StopAfterTheirMaximumDuration) {
  Interactive t;
  t.old.started_ms = kNow - 3'600'000;
  JobStep step = t.Step();
  EXPECT_EQ(step.status.reason, "MaxDurationExceeded");
  EXPECT_EQ(step.status.next, api::JobPhase::kCancelled);
  t.old.started_ms = kNow - 3'599'000;
  EXPECT_EQ(t.Step().status.phase, api::JobPhase::kRunning);
  t.rules.interactive->max_duration_seconds = 0;  // no limit
  t.old.started_ms = 1;
  EXPECT_EQ(t.Step().status.phase, api::JobPhase::kRunning);
}

TEST(InteractiveJobs, AreNeverRestartedElsewhere) {
  struct Case {
    const char* name;
    std::function<void(Interactive&, std::vector<ReplicaView>&)> edit;
    const char* reason;
    const char* said;
  };
  const Case cases[] = {
      {"node lost", [](auto&, auto& v) { v[1].node_ready = false; }, "NodeLost",
       "node node-1 stopped heartbeating"},
      {"gpu failed", [](auto&, auto& v) { v[0].gpu_problem = "GPU 0 on node-0: Xid 79"; },
       "GpuFailed", "Xid 79"},
      {"task failed",
       [](auto& t, auto&) {
         t.reports[0].state = api::TaskState::kFailed;
         t.reports[0].exit_code = 1;
       },
       "TaskFailed", "rank 0 on node-0"},
      {"drained", [](auto&, auto& v) { v[0].draining = true; }, "Drained", "being drained"},
      {"spot", [](auto&, auto& v) { v[0].reclaim_at_ms = kNow + 60'000; }, "SpotReclaim",
       "is reclaimed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Interactive t;
    JobStep step = t.Step([&](std::vector<ReplicaView>& v) { c.edit(t, v); });
    EXPECT_EQ(step.status.next, api::JobPhase::kFailed);
    EXPECT_EQ(step.status.reason, c.reason);
    EXPECT_EQ(step.status.restarts, 0);
    EXPECT_EQ(step.status.interruptions, 0);
    EXPECT_NE(step.status.message.find("not restarted elsewhere"), std::string::npos);
    EXPECT_NE(step.status.message.find(c.said), std::string::npos) << step.status.message;
    EXPECT_EQ(step.status.message.find("restarting"), std::string::npos) << step.status.message;
  }
  Interactive t;
  JobStep preempted = Preempt(t.old, t.rules, "for team-b/urgent", 5'000, kNow);
  EXPECT_EQ(preempted.status.phase, api::JobPhase::kPreempting);
  EXPECT_EQ(preempted.status.next, api::JobPhase::kFailed);
  EXPECT_EQ(preempted.status.reason, "Preempted");
}

TEST(InteractiveJobs, BatchJobsIgnoreIdleness) {
  Interactive t;
  t.rules.interactive.reset();
  t.reports[0].idle_ms = t.reports[1].idle_ms = 1'000'000;
  t.old.started_ms = 1;
  JobStep step = t.Step();
  EXPECT_EQ(step.status.phase, api::JobPhase::kRunning);
  EXPECT_TRUE(step.events.empty());
}

}  // namespace
}  // namespace gpucloud::server
