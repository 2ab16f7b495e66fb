// The controller loop on a real SQLite store, driven pass by pass with a fake clock: the REST
// API registers nodes and takes jobs, the NodeTable stands for the agents' heartbeats.
#include "server/controller.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "api/wire.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "sched/backlog.h"
#include "server/controller_fixture.h"
#include "server/job_status.h"
#include "server/log_store.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

TEST_F(ControllerTest, AGangIsBoundInOneTransactionWithConsistentRanks) {
  Register("node-a", 4);
  Register("node-b", 4);
  Submit(GangJob("gang", 2, 4));
  Pass();
  JobStatus s = Status("gang");
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.attempt, 1);
  EXPECT_EQ(s.checkpoint_dir, "/ckpt/default/gang");
  ASSERT_EQ(s.placement.size(), 2u);
  std::vector<store::KeyValue> a = Assignments("node-a"), b = Assignments("node-b");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  // The job's status and both assignments: one revision, one transaction.
  EXPECT_EQ(a[0].mod_revision, JobRevision("gang"));
  EXPECT_EQ(b[0].mod_revision, JobRevision("gang"));
  api::Assignment r0 = *api::AssignmentFromJson(a[0].value),
                  r1 = *api::AssignmentFromJson(b[0].value);
  if (r0.rank == 1) std::swap(r0, r1);
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r1.rank, 1);
  for (const api::Assignment& x : {r0, r1}) {
    EXPECT_EQ(x.world_size, 2);
    EXPECT_EQ(x.nodes, 2);
    EXPECT_EQ(x.local_rank, 0);
    EXPECT_EQ(x.local_world_size, 1);
    EXPECT_EQ(x.master_addr, r0.node_rank == 0 ? "10.0.0.1" : "10.0.0.2");
    EXPECT_EQ(x.master_port, r0.master_port);
    EXPECT_EQ(x.gpus.size(), 4u);
    EXPECT_EQ(x.attempt, 1);
    EXPECT_EQ(x.command, (std::vector<std::string>{"python3", "train.py"}));
    ASSERT_EQ(x.hosts.size(), 2u);
    EXPECT_EQ(x.hosts[0].second, 1);
  }
  EXPECT_EQ(r0.node_rank, 0);
  EXPECT_EQ(r1.node_rank, 1);
  EXPECT_EQ(r0.hosts, r1.hosts);
  EXPECT_EQ(EventReasons("gang"), std::vector<std::string>{"Scheduled"});
}

// WhatIf: the scheduler's answer for a job not submitted, from the next pass; nothing written.
Job JobFromYaml(const std::string& yaml) {
  manifest::ParseResult p = manifest::ParseManifests(yaml, "test");
  EXPECT_TRUE(p.ok());
  return std::get<Job>(p.manifests.at(0).object);
}

TEST_F(ControllerTest, WhatIfAnswersFromTheNextPassAndWritesNothing) {
  Register("node-a", 4);
  Submit(GangJob("busy", 1, 2));
  Pass();
  const int64_t revision = store_->Revision();
  auto ask = [&](const std::string& yaml) {
    auto answer = std::async(std::launch::async, [&, yaml] {
      return controller_->WhatIf("default", JobFromYaml(yaml), absl::Seconds(20));
    });
    // The test drives the passes (no controller thread): until one has answered.
    while (answer.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) Pass();
    absl::StatusOr<WhatIfAnswer> a = answer.get();
    EXPECT_TRUE(a.ok()) << a.status();
    return a.value_or(WhatIfAnswer{});
  };
  WhatIfAnswer fits = ask(GangJob("probe", 1, 2));
  EXPECT_EQ(fits.outcome, "Bind");
  EXPECT_EQ(fits.nodes, (std::vector<std::string>{"node-a"}));
  WhatIfAnswer waits = ask(GangJob("probe", 1, 4));  // 2 of node-a's 4 GPUs are busy
  EXPECT_EQ(waits.outcome, "Wait");
  EXPECT_NE(waits.reason, "");
  WhatIfAnswer never = ask(GangJob("probe", 1, 8));  // no node has 8
  EXPECT_EQ(never.outcome, "Reject");
  EXPECT_NE(never.reason.find("8"), std::string::npos) << never.reason;
  // Asked, answered, never stored: no job, no assignment, no event.
  EXPECT_EQ(store_->Revision(), revision);
  EXPECT_EQ(Status("busy").phase, api::JobPhase::kScheduled);
}

TEST_F(ControllerTest, WhatIfWithoutAPassTimesOut) {
  absl::StatusOr<WhatIfAnswer> a =
      controller_->WhatIf("default", JobFromYaml(GangJob("probe", 1, 1)), absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsDeadlineExceeded(a.status())) << a.status();
  Pass();  // the abandoned question is gone: nothing to answer, nothing to crash on
}

TEST_F(ControllerTest, EveryAssignmentCarriesEachTasksHostsInReplicaOrder) {
  for (const char* node : {"node-a", "node-b", "node-c"}) Register(node, 4);
  Submit(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: mpi}
spec:
  tasks:
  - name: mpimaster
    command: [mpiexec, hello]
  - name: mpi-worker
    replicas: 3
    command: [sleep, "1"]
    resources: {gpu: {count: 4}}
)");
  Pass();
  ASSERT_EQ(Status("mpi").phase, api::JobPhase::kScheduled);
  std::vector<api::Assignment> all;
  std::map<std::string, std::string> node_of;  // assignment name -> node address
  for (const char* node : {"node-a", "node-b", "node-c"}) {
    for (const store::KeyValue& kv : Assignments(node)) {
      absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(kv.value);
      ASSERT_TRUE(a.ok()) << a.status();
      node_of[a->name] = Cat("10.0.0.", node[5] - 'a' + 1);
      all.push_back(*std::move(a));
    }
  }
  ASSERT_EQ(all.size(), 4u);
  std::set<std::string> workers_at;
  for (const api::Assignment& a : all) {
    EXPECT_EQ(a.task_hosts, all[0].task_hosts);  // every replica sees the same table
    ASSERT_EQ(a.task_hosts.size(), 2u);
    ASSERT_EQ(a.task_hosts.at("mpimaster").size(), 1u);
    ASSERT_EQ(a.task_hosts.at("mpi-worker").size(), 3u);
    // Its own entry, at its replica index, is its node's address.
    ASSERT_LT(a.replica, static_cast<int>(a.task_hosts.at(a.task).size()));
    EXPECT_EQ(a.task_hosts.at(a.task)[a.replica], node_of[a.name]) << a.name;
    if (a.task == "mpi-worker") workers_at.insert(node_of[a.name]);
  }
  // One worker per node (each takes a node's four GPUs).
  EXPECT_EQ(workers_at, (std::set<std::string>{"10.0.0.1", "10.0.0.2", "10.0.0.3"}));
}

// A task waiting for its image: an event each time the agent's reason changes (not on every
// heartbeat), Pulling as Normal, a failed pull as a Warning; the job neither fails nor counts it.
TEST_F(ControllerTest, AnImagePullIsInTheJobsEventsOnceEachTimeItChanges) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 1));
  Pass();
  api::TaskReport r = Report("job", 0, api::TaskState::kStarting);
  r.message = "Pulling: image registry.local/x:1";
  Heartbeat("node-a", {r});
  Pass();
  Heartbeat("node-a", {r});
  Pass();
  r.message = "ImagePullBackOff: image registry.local/x:1: manifest unknown; next try in 5s";
  Heartbeat("node-a", {r});
  Pass();
  Heartbeat("node-a", {r});
  Pass();
  EXPECT_EQ(EventReasons("job"),
            (std::vector<std::string>{"Scheduled", "Pulling", "ImagePullBackOff"}));
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.restarts, 0);
  EXPECT_EQ(s.tasks.at("default.job.0"),
            "Starting: ImagePullBackOff: image registry.local/x:1: manifest unknown; next try in "
            "5s");
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kRunning);
}

// Issue 21: an operator's uncordon (spec.healthReset) or pre-pull (spec.prePull) may go through
// another server than the leader, whose NodeTable answers the agent's heartbeats: the leader's
// controller tells its NodeTable what the stored node says.
TEST_F(ControllerTest, TheNodeTableLearnsHealthResetAndPrePullFromTheStoredNode) {
  Register("node-a", 1);
  Pass();
  EXPECT_EQ(nodes_.HealthReset("node-a"), 0);
  absl::StatusOr<store::KeyValue> kv = store_->Get("/nodes/node-a");
  ASSERT_TRUE(kv.ok());
  Json doc = Json::parse(kv->value);
  doc["spec"]["healthReset"] = 3;
  doc["spec"]["prePull"] = {"registry.local/train:1"};
  ASSERT_TRUE(store_->Txn({{store::Op::Kind::kPut, kv->key, doc.dump(), kv->mod_revision}}).ok());
  Pass();
  EXPECT_EQ(nodes_.HealthReset("node-a"), 3);
  EXPECT_EQ(nodes_.PrePull("node-a"), std::vector<std::string>{"registry.local/train:1"});
}

TEST_F(ControllerTest, RunsToSuccessFromTheAgentsReports) {
  Register("node-a", 4);
  Submit(GangJob("job", 2, 1));
  Pass();
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning),
                       Report("job", 1, api::TaskState::kStarting)});
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kRunning);
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kSucceeded, 0),
                       Report("job", 1, api::TaskState::kRunning)});
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kRunning);  // one of two is done
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kSucceeded, 0),
                       Report("job", 1, api::TaskState::kSucceeded, 0)});
  Pass();
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(s.finished_ms, clock_.NowMillis());
  EXPECT_TRUE(Assignments("node-a").empty());
  EXPECT_EQ(EventReasons("job"), (std::vector<std::string>{"Scheduled", "Started", "Succeeded"}));
  Pass();  // nothing more happens
  EXPECT_EQ(EventReasons("job").size(), 3u);
}

// The agent stops sending an ended task once the answer acknowledges it: only what a pass has
// read is acknowledged, so a report that arrived (or was sent again) is not enough.
TEST_F(ControllerTest, AHeartbeatAnswerAcknowledgesOnlyEndedReportsAPassHasRead) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 1));
  Pass();
  auto beat = [&](std::vector<api::TaskReport> tasks) {
    api::Heartbeat h;
    h.tasks = std::move(tasks);
    Response r = Call("POST", Cat(api::NodePath("node-a"), "/heartbeat"), api::HeartbeatToJson(h));
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["acknowledged"];
  };
  const api::TaskReport running = Report("job", 0, api::TaskState::kRunning);
  EXPECT_EQ(beat({running}), Json::array());
  Pass();
  EXPECT_EQ(beat({running}), Json::array());  // what runs is never acknowledged
  const api::TaskReport done = Report("job", 0, api::TaskState::kSucceeded, 0);
  EXPECT_EQ(beat({done}), Json::array());  // arrived, not read
  EXPECT_EQ(beat({done}), Json::array());  // sent again (an answer lost): still not read
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kSucceeded);
  Json ack = beat({done});
  ASSERT_EQ(ack.size(), 1u) << ack;
  EXPECT_EQ(ack[0]["name"], done.name);
  EXPECT_EQ(ack[0]["jobUid"], done.job_uid);
  EXPECT_EQ(ack[0]["state"], "Succeeded");
  EXPECT_EQ(beat({}).size(), 1u);  // the agent dropped it; acknowledged until the next pass
  Pass();
  EXPECT_EQ(beat({}), Json::array());
}

// A task that starts and ends between two passes (a trivial job on a busy node): the job
// still starts, at its task's own time, before it succeeds, and its running time counts.
TEST_F(ControllerTest, AJobWhoseTaskEndedBeforeThePassSawItRunStillStarts) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 2));
  Pass();  // bound at t0
  const int64_t t0 = clock_.NowMillis();
  clock_.Advance(100);
  api::TaskReport r = Report("job", 0, api::TaskState::kSucceeded, 0);
  r.started_ms = t0 + 20;
  r.finished_ms = t0 + 60;
  Heartbeat("node-a", {r});
  Pass();
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(s.started_ms, t0 + 20);
  EXPECT_EQ(s.finished_ms, t0 + 60);
  EXPECT_EQ(EventReasons("job"), (std::vector<std::string>{"Scheduled", "Started", "Succeeded"}));
  EXPECT_DOUBLE_EQ(s.gpu_seconds.allocated, 2 * 0.1);    // held until the pass freed them
  EXPECT_DOUBLE_EQ(s.gpu_seconds.productive, 2 * 0.04);  // ran 40 ms
  EXPECT_GT(s.gpu_seconds.goodput(), 0);
  EXPECT_DOUBLE_EQ(controller_->Metrics().job_gpu_seconds.productive, 2 * 0.04);
  // An older agent says nothing of the times: the pass's own time stands for both.
  Submit(GangJob("old", 1, 2));
  Pass();
  clock_.Advance(100);
  Heartbeat("node-a", {Report("old", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  s = Status("old");
  EXPECT_EQ(s.phase, api::JobPhase::kSucceeded);
  EXPECT_EQ(s.started_ms, clock_.NowMillis());
  EXPECT_EQ(s.finished_ms, clock_.NowMillis());
  EXPECT_EQ(EventReasons("old"), (std::vector<std::string>{"Scheduled", "Started", "Succeeded"}));
}

TEST_F(ControllerTest, AFailedTaskRestartsAfterBackOffThenTheJobFails) {
  Register("node-a", 4);
  Submit(GangJob("job", 2, 1, /*max_restarts=*/1));
  Pass();
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kFailed, 3),
                       Report("job", 1, api::TaskState::kRunning)});
  Pass();
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kRestarting);  // rank 1 still runs: its GPUs stay reserved
  EXPECT_EQ(s.restarts, 1);
  EXPECT_TRUE(Assignments("node-a").empty());  // so the agent stops rank 1
  EXPECT_NE(s.message.find("exit code 3"), std::string::npos) << s.message;
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kFailed, 3),
                       Report("job", 1, api::TaskState::kStopped, 0)});
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kPending);
  EXPECT_EQ(s.not_before_ms, clock_.NowMillis() + 10'000);
  clock_.Advance(9'000);
  Heartbeat("node-a");
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kPending);  // still backing off
  clock_.Advance(1'000);
  Heartbeat("node-a");
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.attempt, 2);
  ASSERT_EQ(Assignments("node-a").size(), 2u);
  EXPECT_EQ(api::AssignmentFromJson(Assignments("node-a")[0].value)->restart_count, 1);
  // A report of the old attempt changes nothing (fencing by attempt).
  Heartbeat("node-a", {{"default.job.0",
                        Json::parse(store_->Get("/jobs/default/job")->value)["metadata"]["uid"], 1,
                        api::TaskState::kFailed, 3, 0, false, ""}});
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kScheduled);
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kFailed, 3),
                       Report("job", 1, api::TaskState::kFailed, 3)});
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kFailed);
  EXPECT_NE(s.message.find("no restarts left"), std::string::npos) << s.message;
}

TEST_F(ControllerTest, ALostNodeRestartsItsJobsElsewhereWithoutUsingRestarts) {
  Register("node-a", 4);
  Register("node-b", 4);
  Submit(GangJob("job", 1, 4));
  Pass();
  std::string first = Status("job").placement[0].node;
  std::string other = first == "node-a" ? "node-b" : "node-a";
  Heartbeat(first, {Report("job", 0, api::TaskState::kRunning)});
  Heartbeat(other);
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kRunning);
  clock_.Advance(2'000);
  Heartbeat(other);
  Pass();
  EXPECT_EQ(Status("job").phase,
            api::JobPhase::kRunning);  // 2 s without a heartbeat is not yet lost
  clock_.Advance(1'500);
  Heartbeat(other);
  Pass();
  JobStatus s = Status("job");
  Json node = Json::parse(store_->Get("/nodes/" + first)->value);
  EXPECT_FALSE(node["status"]["ready"].get<bool>());
  EXPECT_EQ(node["status"]["readyReason"], "HeartbeatsMissed");
  // Stopped at once (nothing to wait for on a lost node) and placed on the other node.
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.attempt, 2);
  EXPECT_EQ(s.restarts, 0);
  EXPECT_EQ(s.interruptions, 1);
  ASSERT_EQ(s.placement.size(), 1u);
  EXPECT_EQ(s.placement[0].node, other);
  std::vector<std::string> reasons = EventReasons("job");
  EXPECT_EQ(reasons, (std::vector<std::string>{"Scheduled", "Started", "NodeLost", "Scheduled"}));
}

TEST_F(ControllerTest, AJobThatCannotFitSaysWhyOnce) {
  Register("node-a", 4);
  Submit(GangJob("big", 1, 8));
  Pass();
  Pass();
  JobStatus s = Status("big");
  EXPECT_EQ(s.phase, api::JobPhase::kPending);
  EXPECT_EQ(s.reason, "Unschedulable");
  EXPECT_FALSE(s.message.empty());
  EXPECT_EQ(EventReasons("big"), std::vector<std::string>{"Unschedulable"});
}

TEST_F(ControllerTest, CancelStopsTheTasksWithGraceAndDeleteRemovesTheJobAfterwards) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 1));
  Pass();
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  const LogKey log{"default", "job", 0, 0};
  ASSERT_TRUE(logs_->Append(log, 0, "epoch 1\n").ok());
  Response r = Call("DELETE", "/apis/gpucloud/v1/namespaces/default/jobs/job");
  EXPECT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(logs_->Size(log), 8);  // the job still runs: its log stays
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kCancelling);
  EXPECT_TRUE(Assignments("node-a").empty());
  Pass();
  EXPECT_EQ(Status("job").phase,
            api::JobPhase::kCancelling);  // the task still runs (its grace period)
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kStopped, 0)});
  Pass();
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/jobs/default/job").status()));
  EXPECT_TRUE(store_->List("/events/default/job.")->items.empty());
  // Its logs went with it: a new job of the same name does not find them.
  EXPECT_EQ(logs_->Size(log), 0);
}

TEST_F(ControllerTest, AStopDeadlineEndsAStopThatNeverCompletes) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 1));
  Pass();
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs/job/cancel").status, 202);
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kCancelling);
  clock_.Advance(15'001);  // grace (10 s) + 5 s
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kCancelled);
}

TEST_F(ControllerTest, CordonKeepsNewJobsOffAndDrainMovesRunningOnes) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 4));
  Pass();
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodes/node-a/cordon").status, 200);
  Register("node-b", 4);
  Submit(GangJob("second", 1, 1));
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kRunning)});
  Heartbeat("node-b");
  Pass();
  EXPECT_EQ(Status("second").placement.at(0).node, "node-b");
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodes/node-a/drain").status, 200);
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kPreempting);
  EXPECT_EQ(Status("job").reason, "Drained");
  Heartbeat("node-a", {Report("job", 0, api::TaskState::kStopped, 0)});
  Pass();
  // node-b has 3 GPUs free after `second`: the 4-GPU job waits, not back on node-a.
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kPending);
  EXPECT_EQ(s.interruptions, 1);
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodes/node-a/uncordon").status, 200);
  Heartbeat("node-a");
  Pass();
  EXPECT_EQ(Status("job").phase, api::JobPhase::kScheduled);
  EXPECT_EQ(Status("job").placement.at(0).node, "node-a");
}

TEST_F(ControllerTest, AnUnhealthyGpuRestartsItsJobOnHealthyGpus) {
  Register("node-a", 4);
  Register("node-b", 4);
  Submit(GangJob("job", 1, 4));
  Pass();
  std::string first = Status("job").placement.at(0).node;
  std::string other = first == "node-a" ? "node-b" : "node-a";
  Heartbeat(other);
  nodes_.Record(first,
                {{Report("job", 0, api::TaskState::kRunning)},
                 {{0, true, ""},
                  {1, false, "Xid 79 (GPU has fallen off the bus)"},
                  {2, true, ""},
                  {3, true, ""}}},
                clock_.NowMillis());
  Pass();
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kRestarting);
  EXPECT_EQ(s.reason, "GpuFailed");
  EXPECT_NE(s.message.find("GPU 1 on " + first + ": Xid 79"), std::string::npos) << s.message;
  nodes_.Record(first,
                {{Report("job", 0, api::TaskState::kStopped, 0)},
                 {{0, true, ""},
                  {1, false, "Xid 79 (GPU has fallen off the bus)"},
                  {2, true, ""},
                  {3, true, ""}}},
                clock_.NowMillis());
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);  // 3 healthy GPUs left there: the other node
  EXPECT_EQ(s.placement.at(0).node, other);
  EXPECT_EQ(s.interruptions, 1);
  EXPECT_EQ(s.restarts, 0);
}

TEST_F(ControllerTest, AMigJobGetsAnInstanceTheAgentRegistered) {
  RegisterMigNode();
  SubmitMigJob("infer", "1g.10gb");
  Pass();
  JobStatus s = Status("infer");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled) << s.message;
  ASSERT_EQ(s.placement.at(0).placement.gpus.size(), 1u);
  EXPECT_EQ(s.placement[0].placement.gpus[0].mode, GpuMode::kMig);
  EXPECT_EQ(s.placement[0].placement.gpus[0].mig.profile, "1g.10gb");
  EXPECT_EQ(s.placement[0].placement.gpus[0].mig.start, 6);
  api::Assignment a = *api::AssignmentFromJson(Assignments("mig-a").at(0).value);
  EXPECT_EQ(a.gpus.at(0).mode, "mig");
  EXPECT_EQ(a.gpus[0].mig_profile, "1g.10gb");
}

TEST_F(ControllerTest, ASpotNoticeRequeuesTheJobAndItsRecoveryIsMeasured) {
  auto [first, other] = RunOnOneOfTwo("spot", 4);
  Response bad = Call("POST", Cat("/apis/gpucloud/v1/nodes/", first, "/reclaim"));
  EXPECT_EQ(bad.status, 400) << bad.body;  // the notice period is required
  ASSERT_EQ(api_->Handle({"POST",
                          Cat("/apis/gpucloud/v1/nodes/", first, "/reclaim"),
                          {{"seconds", "60"}},
                          "",
                          {"root", "", true}})
                .status,
            200);
  Pass();
  JobStatus s = Status("spot");
  EXPECT_EQ(s.phase, api::JobPhase::kPreempting);
  EXPECT_EQ(s.reason, "SpotReclaim");
  EXPECT_NE(s.message.find("reclaimed in 60 s"), std::string::npos) << s.message;
  EXPECT_EQ(s.stop_deadline_ms,
            clock_.NowMillis() + 10'000 + 5'000);  // the grace, well before 60 s
  clock_.Advance(1'000);
  Heartbeat(first, {Report("spot", 0, api::TaskState::kStopped, 0)});
  Heartbeat(other);
  Pass();
  s = Status("spot");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.placement.at(0).node, other);  // not back on the reclaimed node
  clock_.Advance(1'500);
  Heartbeat(other, {Report("spot", 0, api::TaskState::kRunning)});
  Heartbeat(first);
  Pass();
  s = Status("spot");
  EXPECT_EQ(s.phase, api::JobPhase::kRunning);
  EXPECT_EQ(s.recoveries, 1);
  EXPECT_EQ(s.last_recovery_ms, 2'500);
  EXPECT_EQ(s.interrupted_ms, 0);
  EXPECT_EQ(controller_->Metrics().recovery_count, 1);
  EXPECT_DOUBLE_EQ(controller_->Metrics().recovery_sum, 2.5);
}

TEST_F(ControllerTest, MetricsCountJobsGpusAndBindLatency) {
  Register("node-a", 4);
  Submit(GangJob("job", 1, 2));
  clock_.Advance(7);
  Heartbeat("node-a");
  Pass();
  ClusterMetrics m = controller_->Metrics();
  EXPECT_EQ(m.gpus_total_by_type["H100-80GB"], 4);
  EXPECT_DOUBLE_EQ(m.gpus_allocated_by_type["H100-80GB"], 2.0);
  EXPECT_EQ(m.bind_latency_count, 1);
  EXPECT_DOUBLE_EQ(m.bind_latency_sum, 0.007);
  std::string text = RenderClusterMetrics(m);
  EXPECT_NE(text.find("gpucloud_gpus{type=\"H100-80GB\",state=\"free\"} 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("gpucloud_scheduling_latency_seconds_bucket{le=\"0.01\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpucloud_nodes{ready=\"true\"} 1"), std::string::npos) << text;
}

// The family of each line of a metrics text: the name in "# HELP name" / "# TYPE name", else
// the HELP family the sample's name starts with ("" when none does).
std::vector<std::string> FamiliesOfLines(const std::string& text) {
  std::vector<std::string> families;
  std::string current;
  for (const std::string& line : SplitAny(text, "\n")) {
    if (line.empty()) continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    if (line.starts_with("# ")) {
      name = line.substr(7, line.find(' ', 7) - 7);
      if (line.starts_with("# HELP ")) current = name;
      families.push_back(name == current ? name : "");
    } else {
      bool belongs =
          name == current ||
          (name.starts_with(current + "_") &&
           (name.ends_with("_bucket") || name.ends_with("_sum") || name.ends_with("_count")));
      families.push_back(belongs ? current : "");
    }
  }
  return families;
}

TEST(RenderClusterMetrics, FamiliesAreContiguousTypedAndJobsAreLabelledJobName) {
  ClusterMetrics m;
  m.bind_latency_bounds = {0.1, 1};
  m.bind_latency_counts = {1, 2, 3};
  m.bind_latency_sum = 4;
  m.bind_latency_count = 3;
  m.recovery_count = 2;
  m.recovery_sum = 30;
  m.recovery_max = 20;
  m.live_jobs = {{"default/train", {64, 60, 4}}};
  std::string text = RenderClusterMetrics(m);
  std::vector<std::string> families = FamiliesOfLines(text);
  std::set<std::string> done;
  std::string current;
  for (size_t i = 0; i < families.size(); ++i) {
    ASSERT_FALSE(families[i].empty()) << "line " << i << " has no HELP of its own:\n" << text;
    if (families[i] == current) continue;
    EXPECT_FALSE(done.contains(families[i])) << families[i] << " comes back:\n" << text;
    done.insert(current = families[i]);
  }
  EXPECT_TRUE(done.contains("gpucloud_job_recovery_seconds_max")) << text;
  EXPECT_NE(text.find("gpucloud_job_goodput_ratio{namespace=\"default\",job_name=\"train\"} "),
            std::string::npos)
      << text;
  // `job` is Prometheus' target label: a scraped `job` would become exported_job.
  EXPECT_EQ(text.find(",job=\""), std::string::npos) << text;
}

TEST_F(ControllerTest, GoodputCountsWorkAfterTheLastCheckpointAsLostWhenANodeDies) {
  Register("node-a", 4);
  Register("node-b", 4);
  Submit(GangJob("job", 1, 2));
  Pass();  // bound at t0
  const int64_t t0 = clock_.NowMillis();
  std::string first = Status("job").placement.at(0).node;
  std::string other = first == "node-a" ? "node-b" : "node-a";
  clock_.Advance(1'000);
  Heartbeat(first, {Report("job", 0, api::TaskState::kRunning)});
  Heartbeat(other);
  Pass();  // running from t0 + 1 s
  EXPECT_EQ(Status("job").attempt_started_ms, t0 + 1'000);
  EXPECT_DOUBLE_EQ(Status("job").gpus, 2.0);
  clock_.Advance(10'000);
  api::TaskReport r = Report("job", 0, api::TaskState::kRunning);
  r.checkpoint_ms = t0 + 7'000;  // a checkpoint 6 s into the run
  Heartbeat(first, {r});
  Heartbeat(other);
  Pass();
  EXPECT_EQ(Status("job").last_checkpoint_ms, t0 + 7'000);
  // The node dies; it is declared lost 3.5 s later (t0 + 14.5 s): the 7.5 s since the
  // checkpoint are lost on 2 GPUs.
  clock_.Advance(3'500);
  Heartbeat(other);
  Pass();
  JobStatus s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_DOUBLE_EQ(s.gpu_seconds.allocated, 2 * 14.5);
  EXPECT_DOUBLE_EQ(s.gpu_seconds.productive, 2 * 6.0);
  EXPECT_DOUBLE_EQ(s.gpu_seconds.lost, 2 * 7.5);
  // The second attempt starts 1 s later and succeeds after 20 s: all of it productive.
  clock_.Advance(1'000);
  Heartbeat(other, {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  clock_.Advance(20'000);
  Heartbeat(other, {Report("job", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kSucceeded);
  EXPECT_DOUBLE_EQ(s.gpu_seconds.allocated, 2 * (14.5 + 21));
  EXPECT_DOUBLE_EQ(s.gpu_seconds.productive, 2 * (6.0 + 20));
  EXPECT_DOUBLE_EQ(s.gpu_seconds.lost, 2 * 7.5);
  ClusterMetrics m = controller_->Metrics();
  EXPECT_DOUBLE_EQ(m.job_gpu_seconds.lost, 15.0);
  EXPECT_DOUBLE_EQ(m.job_gpu_seconds.productive, 52.0);
  std::string text = RenderClusterMetrics(m);
  EXPECT_NE(text.find("gpucloud_job_gpu_seconds_total{kind=\"lost\"} 15"), std::string::npos)
      << text;
  // The summary endpoint says the same.
  Json summary = Json::parse(ClusterSummaryJson(m, 1234));
  EXPECT_DOUBLE_EQ(summary["jobGpuSeconds"]["lost"].get<double>(), 15.0);
  EXPECT_NEAR(summary["jobGpuSeconds"]["goodput"].get<double>(), 52.0 / 71.0, 1e-9);
  EXPECT_EQ(summary["asOfMs"], 1234);
  // The leader publishes its summary again when its shape changes, not as time adds up.
  ClusterMetrics later = m;
  later.gpu_seconds_registered += 100;
  later.job_gpu_seconds.productive += 10;
  EXPECT_EQ(ClusterSummaryShape(later), ClusterSummaryShape(m));
  later.jobs_by_phase["Running"] += 1;
  EXPECT_NE(ClusterSummaryShape(later), ClusterSummaryShape(m));
}

TEST_F(ControllerTest, AvailabilityIsTheShareOfGpuTimeOnReadyNodesWithHealthyGpus) {
  Register("node-a", 4);
  Register("node-b", 4);
  Heartbeat("node-a");
  Heartbeat("node-b");
  Pass();
  // 10 s with everything fine: 80 GPU-seconds, all available.
  clock_.Advance(1'000);
  for (int i = 0; i < 10; ++i) {
    Heartbeat("node-a");
    nodes_.Record("node-b", {{}, {{3, false, "Xid 79"}}}, clock_.NowMillis());
    Pass();
    clock_.Advance(1'000);
  }
  ClusterMetrics m = controller_->Metrics();
  // The first pass after the start counts nothing; then 10 passes of 1 s: node-b's GPU 3 is
  // unhealthy from the first of them.
  EXPECT_DOUBLE_EQ(m.gpu_seconds_registered, 8 * 10.0);
  EXPECT_DOUBLE_EQ(m.gpu_seconds_available, 7 * 10.0);
  EXPECT_DOUBLE_EQ(m.availability(), 7.0 / 8.0);
  EXPECT_NE(RenderClusterMetrics(m).find("gpucloud_cluster_availability 0.875"), std::string::npos);
  Response r = Call("GET", "/apis/gpucloud/v1/cluster");
  EXPECT_EQ(r.status, 404);  // no summary attached in this test's API
}

TEST_F(ControllerTest, AGpuAtRiskMovesItsJobWithACheckpointAndTakesNoNewWork) {
  auto [first, other] = RunOnOneOfTwo("job", 4);
  api::GpuHealth risky{2, true, "", true, "12 rows remapped in 6 h"};
  nodes_.Record(first, {{Report("job", 0, api::TaskState::kRunning)}, {risky}}, clock_.NowMillis());
  Heartbeat(other);
  Pass();
  JobStatus s = Status("job");
  // A graceful move (the task gets its grace period to checkpoint), not a failure restart.
  EXPECT_EQ(s.phase, api::JobPhase::kPreempting);
  EXPECT_EQ(s.reason, "PredictedFailure");
  EXPECT_NE(s.message.find("GPU 2 on " + first + " is likely to fail (12 rows remapped in 6 h)"),
            std::string::npos)
      << s.message;
  EXPECT_TRUE(Assignments(first).empty());
  nodes_.Record(first, {{Report("job", 0, api::TaskState::kStopped, 0)}, {risky}},
                clock_.NowMillis());
  Heartbeat(other);
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.placement.at(0).node, other);  // 3 GPUs left on the first node: not enough
  EXPECT_EQ(s.restarts, 0);
  // A one-GPU job may go to the first node, but never to GPU 2.
  Submit(GangJob("small", 3, 1));
  nodes_.Record(first, {{}, {risky}}, clock_.NowMillis());
  Heartbeat(other, {Report("job", 0, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Status("small").placement.size(), 3u);
  for (const PlacedReplica& r : Status("small").placement) {
    ASSERT_EQ(r.node, first);
    EXPECT_NE(r.placement.gpus.at(0).gpu, 2);
  }
  EXPECT_EQ(controller_->Metrics().gpus_total_by_type["H100-80GB"], 7);
}

TEST_F(ControllerTest, TheTasksImageAndUserReachItsAssignment) {
  Register("node-a", 4);
  Submit(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: img}
spec:
  tasks:
  - name: entry
    image: registry.local:5000/team/trainer:1
    args: [--epochs, "3"]
    securityContext: {runAsUser: 1000, runAsGroup: 100, runAsNonRoot: true}
  - name: cmd
    image: registry.local:5000/team/trainer
    command: [python3, train.py]
  - name: host
    command: [sleep, "1"]
)");
  Pass();
  std::map<std::string, api::Assignment> by_task;
  for (const store::KeyValue& kv : Assignments("node-a")) {
    absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(kv.value);
    ASSERT_TRUE(a.ok()) << a.status();
    by_task[a->task] = *a;
  }
  ASSERT_EQ(by_task.size(), 3u);
  const api::Assignment& entry = by_task["entry"];
  EXPECT_EQ(entry.image, "registry.local:5000/team/trainer:1");
  EXPECT_EQ(entry.image_pull_policy, PullPolicy::kIfNotPresent);  // tagged, not latest
  EXPECT_TRUE(entry.image_entrypoint);
  EXPECT_EQ(entry.command, (std::vector<std::string>{"--epochs", "3"}));
  EXPECT_EQ(entry.run_as_user, 1000);
  EXPECT_EQ(entry.run_as_group, 100);
  EXPECT_TRUE(entry.run_as_non_root);
  const api::Assignment& cmd = by_task["cmd"];
  EXPECT_EQ(cmd.image_pull_policy, PullPolicy::kAlways);  // no tag: latest
  EXPECT_FALSE(cmd.image_entrypoint);
  EXPECT_EQ(cmd.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_FALSE(cmd.run_as_user.has_value());
  EXPECT_FALSE(cmd.run_as_non_root);
  const api::Assignment& host = by_task["host"];
  EXPECT_TRUE(host.image.empty());
  EXPECT_EQ(host.image_pull_policy, PullPolicy::kDefault);
  EXPECT_FALSE(host.image_entrypoint);
}

TEST_F(ControllerTest, CheckpointDirsResolveInsideTheNamespacesTree) {
  Register("node-a", 4);
  Submit(GangJob("rel", 1, 1, 3, "  checkpoint: {dir: runs-rel}\n"));
  Submit(GangJob("abs", 1, 1, 3, "  checkpoint: {dir: /ckpt/default/x/../abs}\n"));
  Pass();
  EXPECT_EQ(Status("rel").checkpoint_dir, "/ckpt/default/runs-rel");
  EXPECT_EQ(Status("abs").checkpoint_dir, "/ckpt/default/abs");
}

// This test's API has no checkpoint root (it checks nothing): the job is stored as a job from
// before the check would be, and the controller refuses to bind it.
TEST_F(ControllerTest, AStoredJobWithACheckpointDirOutsideItsTreeFailsWithoutRunning) {
  Register("node-a", 4);
  Submit(GangJob("escape", 1, 4, 3, "  checkpoint: {dir: /ckpt/other-team/train}\n"));
  Pass();
  JobStatus s = Status("escape");
  EXPECT_EQ(s.phase, api::JobPhase::kFailed);
  EXPECT_EQ(s.reason, "InvalidSpec");
  EXPECT_EQ(s.message,
            "spec.checkpoint.dir: must lie inside the namespace's checkpoint tree /ckpt/default/ "
            "(or be relative to it), got \"/ckpt/other-team/train\"");
  EXPECT_EQ(s.attempt, 0);
  EXPECT_TRUE(Assignments("node-a").empty());
  EXPECT_EQ(EventReasons("escape"), (std::vector<std::string>{"InvalidSpec"}));
  // Its GPUs were not kept: a job asking for all of them is bound next.
  Submit(GangJob("next", 1, 4));
  Pass();
  EXPECT_EQ(Status("next").phase, api::JobPhase::kScheduled);
  EXPECT_EQ(Status("escape").phase, api::JobPhase::kFailed);
}

// A job whose checkpoints are on its node's disk; its node dies after the first checkpoint
// (t0 + 5 s) was written and the second (t0 + 9 s) was not replicated yet.
class NodeLocalCheckpoints : public ControllerTest {
 protected:
  JobStatus RunThenLoseTheNode(bool replicate) {
    Register("node-a", 4);
    Register("node-b", 4);
    Submit(GangJob("job", 1, 2, 3,
                   Cat("  checkpoint: {dir: /ckpt/default/shared, nodeLocal: true",
                       replicate ? ", replicate: true" : "", "}\n")));
    Pass();
    t0_ = clock_.NowMillis();
    first_ = Status("job").placement.at(0).node;
    other_ = first_ == "node-a" ? "node-b" : "node-a";
    std::optional<api::Assignment> a =
        api::AssignmentFromJson(Assignments(first_).at(0).value).value_or(api::Assignment{});
    EXPECT_TRUE(a->checkpoint_node_local);
    EXPECT_EQ(a->checkpoint_replicate, replicate);
    EXPECT_EQ(a->checkpoint_dir, "/ckpt/default/shared");
    Heartbeat(first_, {Report("job", 0, api::TaskState::kRunning)});
    Heartbeat(other_);
    Pass();  // running from t0
    clock_.Advance(10'000);
    api::TaskReport r = Report("job", 0, api::TaskState::kRunning);
    r.checkpoint_ms = t0_ + 9'000;
    r.replicated_ms = replicate ? t0_ + 5'000 : 0;
    Heartbeat(first_, {r});
    Heartbeat(other_);
    Pass();
    clock_.Advance(3'500);  // node lost at t0 + 13.5 s
    Heartbeat(other_);
    Pass();
    return Status("job");
  }
  int64_t t0_ = 0;
  std::string first_, other_;
};

TEST_F(NodeLocalCheckpoints, ARestartElsewhereResumesFromTheReplicaAndCountsTheRestAsLost) {
  JobStatus s = RunThenLoseTheNode(/*replicate=*/true);
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_EQ(s.placement.at(0).node, other_);
  EXPECT_NE(s.message.find("resuming from the replica in /ckpt/default/shared"), std::string::npos)
      << s.message;
  // Kept: 5 s of 13.5 on 2 GPUs (the replica's), not 9 (the lost node's newest).
  EXPECT_DOUBLE_EQ(s.gpu_seconds.productive, 2 * 5.0);
  EXPECT_DOUBLE_EQ(s.gpu_seconds.lost, 2 * 8.5);
  EXPECT_EQ(s.last_checkpoint_ms, t0_ + 5'000);
  EXPECT_TRUE(s.checkpoint_nodes.empty());
}

TEST_F(NodeLocalCheckpoints, WithoutAReplicaTheJobStartsFromScratchAndSaysSo) {
  JobStatus s = RunThenLoseTheNode(/*replicate=*/false);
  EXPECT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_NE(s.message.find("resuming from scratch: the checkpoints were on the local disk of " +
                           first_ + " and are not replicated"),
            std::string::npos)
      << s.message;
  EXPECT_DOUBLE_EQ(s.gpu_seconds.productive, 0);
  EXPECT_DOUBLE_EQ(s.gpu_seconds.lost, 2 * 13.5);
  EXPECT_EQ(s.last_checkpoint_ms, 0);
  std::vector<std::string> reasons = EventReasons("job");
  ASSERT_FALSE(reasons.empty());
  EXPECT_EQ(reasons.back(), "Scheduled");
}

// gpuctl images pull --pool: durable on every node of the pool, told to its agents with each
// heartbeat answer, kept over a re-registration; bad input changes nothing.
TEST_F(ControllerTest, APrePullReachesThePoolsAgentsAndOutlivesReRegistration) {
  Register("spot-a", 4, "spot");
  Register("od-a", 4, "on-demand");
  auto prepull = [&](const std::string& pool, std::map<std::string, std::string> query,
                     bool admin = true) {
    return api_->Handle({"POST",
                         Cat("/apis/gpucloud/v1/pools/", pool, "/prepull"),
                         std::move(query),
                         "",
                         {admin ? "root" : "bob", "", admin}});
  };
  auto heartbeat = [&](const std::string& node) {
    return Json::parse(
        Call("POST", Cat(api::NodePath(node), "/heartbeat"), api::HeartbeatToJson({})).body);
  };
  int64_t rev = store_->Revision();
  EXPECT_EQ(prepull("spot", {}).status, 400);
  EXPECT_EQ(prepull("spot", {{"image", "--privileged"}}).status, 400);
  EXPECT_EQ(prepull("spot", {{"image", "r.local/x:1"}}, false).status, 403);
  EXPECT_EQ(prepull("none", {{"image", "r.local/x:1"}}).status, 404);
  EXPECT_EQ(store_->Revision(), rev);  // nothing written
  Response r = prepull("spot", {{"image", "r.local/big:1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["nodes"], Json::parse(R"(["spot-a"])"));
  ASSERT_EQ(prepull("spot", {{"image", "r.local/small:2"}}).status, 200);
  ASSERT_EQ(prepull("spot", {{"image", "r.local/big:1"}}).status, 200);  // again: moves last
  EXPECT_EQ(heartbeat("spot-a")["prePull"], Json::parse(R"(["r.local/small:2", "r.local/big:1"])"));
  EXPECT_FALSE(heartbeat("od-a").contains("prePull"));
  Register("spot-a", 4, "spot");  // the agent restarts
  EXPECT_EQ(Json::parse(store_->Get("/nodes/spot-a")->value)["spec"]["prePull"].size(), 2u);
  EXPECT_EQ(heartbeat("spot-a")["prePull"].size(), 2u);
}

TEST_F(ControllerTest, APoolNoticeReachesEveryNodeOfThePoolAndOutlivesReRegistration) {
  Register("spot-a", 4, "spot");
  Register("spot-b", 4, "spot");
  Register("od-a", 4, "on-demand");
  Submit(GangJob("job", 2, 4, 3, "  nodeSelector: {pool: spot}\n"));
  Pass();
  JobStatus s = Status("job");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled) << s.message;
  for (const char* n : {"spot-a", "spot-b", "od-a"}) Heartbeat(n);
  Heartbeat(s.placement.at(0).node, {Report("job", 0, api::TaskState::kRunning)});
  Heartbeat(s.placement.at(1).node, {Report("job", 1, api::TaskState::kRunning)});
  Pass();
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/pools/spot/reclaim").status, 400);  // no notice period
  auto reclaim = [&](const std::string& pool) {
    return api_->Handle({"POST",
                         Cat("/apis/gpucloud/v1/pools/", pool, "/reclaim"),
                         {{"seconds", "60"}},
                         "",
                         {"root", "", true}});
  };
  EXPECT_EQ(reclaim("none").status, 404);
  Response r = reclaim("spot");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["nodes"], Json::parse(R"(["spot-a", "spot-b"])"));
  for (const char* n : {"spot-a", "spot-b"}) {
    Json node = Json::parse(store_->Get(Cat("/nodes/", n))->value);
    EXPECT_EQ(node["spec"]["reclaimAtMs"], clock_.NowMillis() + 60'000) << n;
    EXPECT_TRUE(node["spec"]["unschedulable"].get<bool>());
  }
  EXPECT_FALSE(Json::parse(store_->Get("/nodes/od-a")->value)["spec"].contains("reclaimAtMs"));
  Register("spot-a", 4, "spot");  // the agent restarts: the notice stays
  EXPECT_TRUE(Json::parse(store_->Get("/nodes/spot-a")->value)["spec"].contains("reclaimAtMs"));
  Pass();
  s = Status("job");
  EXPECT_EQ(s.phase, api::JobPhase::kPreempting);
  EXPECT_EQ(s.reason, "SpotReclaim");
}

// Issue 15: namespace "flood" has many pending jobs (GPUCLOUD_FLOOD_JOBS, default 3,000; each
// one a copy of one submitted job, written to the store directly) that wait for node-a's 8 GPUs,
// and namespace "other" one small job that fits on node-b. The first pass binds "other"'s job,
// and no pass decides (and so writes the status of) more of "flood"'s jobs than the scheduler's
// per-namespace budget. Prints each pass's stages (the figures in docs/scheduler.md).
TEST_F(ControllerTest, AFloodedNamespaceCannotHoldUpAnother) {
  Register("node-a", 8);
  Register("node-b", 4);
  Heartbeat("node-a");
  Heartbeat("node-b");
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/namespaces/flood/jobs", GangJob("f0", 1, 8)).status,
            201);
  Json doc = Json::parse(store_->Get("/jobs/flood/f0")->value);  // as submitted: Pending
  Pass();                                                        // f0 takes node-a
  Pass();  // and the controller's cache has seen that write
  ASSERT_EQ(JobStatusFromJson(Json::parse(store_->Get("/jobs/flood/f0")->value))->phase,
            api::JobPhase::kScheduled);
  const char* env = std::getenv("GPUCLOUD_FLOOD_JOBS");
  const int flood = env != nullptr ? std::atoi(env) : 3000;
  std::vector<store::Op> ops;
  for (int i = 1; i <= flood; ++i) {
    doc["metadata"]["name"] = Cat("f", i);
    doc["metadata"]["uid"] = Cat("uid-f", i);
    ops.push_back({store::Op::Kind::kPut, Cat("/jobs/flood/f", i), doc.dump(), 0});
    // Batches of 1,024: ObjectCache reads the change log in pages of 4,096 events and, today,
    // skips the rest of a revision that a page boundary cuts through.
    if (ops.size() == 1024 || i == flood) {
      ASSERT_TRUE(store_->Txn(ops).ok());
      ops.clear();
    }
  }
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/namespaces/other/jobs", GangJob("small", 1, 1)).status,
            201);
  const int64_t before = store_->Revision();
  for (int pass = 1; pass <= 3; ++pass) {
    Pass();
    ClusterMetrics m = controller_->Metrics();
    std::cout << "pass " << pass << " with " << flood << " flood jobs: " << m.last_pass_seconds
              << " s";
    for (const auto& [stage, s] : m.stage_seconds) std::cout << " " << stage << "=" << s;
    std::cout << std::endl;
    EXPECT_EQ(m.jobs_deferred, flood - sched::NamespaceBudgetLimits{}.max_waiting);
    if (pass == 1) {
      EXPECT_EQ(JobStatusFromJson(Json::parse(store_->Get("/jobs/other/small")->value))->phase,
                api::JobPhase::kScheduled);
    }
  }
  // Every write is one transaction per decided job (its status and events): at most the budget
  // of flood's waiting jobs, plus other's bind, in all three passes (later passes repeat the same
  // reasons, which are not written again).
  EXPECT_LE(store_->Revision() - before, sched::NamespaceBudgetLimits{}.max_waiting + 1);
}

}  // namespace
}  // namespace gpucloud::server
