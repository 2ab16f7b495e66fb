#include "api/job_status.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

namespace gpucloud::api {
namespace {

using Json = nlohmann::json;

absl::StatusOr<JobStatus> Decode(const std::string& status) {
  return JobStatusFromJson(Json::parse(status));
}

TEST(JobPhase, EveryPhaseNameParsesBackToItself) {
  std::set<std::string_view> names;
  for (JobPhase p : kAllJobPhases) {
    EXPECT_EQ(ParsePhase(PhaseName(p)), p) << PhaseName(p);
    names.insert(PhaseName(p));
  }
  EXPECT_EQ(names.size(), kAllJobPhases.size()) << "two phases share a name";
  // The names design.md and the server's documents use.
  EXPECT_EQ(PhaseName(JobPhase::kPending), "Pending");
  EXPECT_EQ(PhaseName(JobPhase::kCancelling), "Cancelling");
  EXPECT_EQ(PhaseName(JobPhase::kStopping), "Stopping");
}

TEST(JobPhase, UnknownNamesAreRefused) {
  for (std::string_view bad : {"", "pending", "RUNNING", "Runing", "Running ", "Active", "Done"}) {
    EXPECT_EQ(ParsePhase(bad), std::nullopt) << bad;
  }
}

TEST(JobPhase, Classes) {
  struct Case {
    JobPhase phase;
    bool terminal, stopping, active, holds;
  };
  const Case kCases[] = {
      {JobPhase::kPending, false, false, false, false},
      {JobPhase::kScheduled, false, false, true, true},
      {JobPhase::kRunning, false, false, true, true},
      {JobPhase::kSucceeded, true, false, false, false},
      {JobPhase::kFailed, true, false, false, false},
      {JobPhase::kCancelled, true, false, false, false},
      {JobPhase::kPreempting, false, true, false, true},
      {JobPhase::kRestarting, false, true, false, true},
      {JobPhase::kCancelling, false, true, false, true},
      {JobPhase::kStopping, false, true, false, true},
  };
  ASSERT_EQ(std::size(kCases), kAllJobPhases.size());
  for (const Case& c : kCases) {
    EXPECT_EQ(IsTerminal(c.phase), c.terminal) << c.phase;
    EXPECT_EQ(IsStopping(c.phase), c.stopping) << c.phase;
    EXPECT_EQ(IsActive(c.phase), c.active) << c.phase;
    JobStatus s;
    s.phase = c.phase;
    EXPECT_EQ(s.HoldsGpus(), c.holds) << c.phase;
  }
}

TEST(JobStatusWire, MissingFieldsKeepTheirDefaults) {
  for (const char* doc : {"null", "{}", R"({"phase": null, "attempt": null})"}) {
    absl::StatusOr<JobStatus> s = Decode(doc);
    ASSERT_TRUE(s.ok()) << doc << ": " << s.status();
    EXPECT_EQ(*s, JobStatus{}) << doc;
  }
  // A job without a status is a new Pending job; unknown fields are the server's business.
  absl::StatusOr<JobStatus> s = JobStatusOf(Json::parse(R"({"metadata": {"name": "a"}})"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->phase, JobPhase::kPending);
  s = Decode(R"({"phase": "Running", "checkpointNodes": ["a"], "futureField": {"x": 1}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->phase, JobPhase::kRunning);
}

TEST(JobStatusWire, WrongTypesAndUnknownPhasesNameTheField) {
  struct Case {
    const char* status;
    const char* error;
  };
  const Case kCases[] = {
      {R"({"phase": "Runing"})",
       "status.phase: unknown phase \"Runing\" (one of Pending, Scheduled, Running, Succeeded, "
       "Failed, Cancelled, Preempting, Restarting, Cancelling, Stopping)"},
      {R"({"phase": 3})", "status.phase: must be a string"},
      {R"({"phase": "Stopping", "next": "Later"})", "status.next: unknown phase \"Later\""},
      {R"({"attempt": "2"})", "status.attempt: must be an integer"},
      {R"({"attempt": 1.5})", "status.attempt: must be an integer"},
      {R"({"message": 7})", "status.message: must be a string"},
      {R"({"cancelRequested": "yes"})", "status.cancelRequested: must be true or false"},
      {R"({"gpus": "2"})", "status.gpus: must be a number"},
      {R"({"masterPort": "29500"})", "status.masterPort: must be an integer"},
      {R"({"gpuSeconds": {"lost": []}})", "status.gpuSeconds.lost: must be a number"},
      {R"({"gpuSeconds": 3})", "status.gpuSeconds: must be an object"},
      {R"({"gpuUsage": {"utilization": "90%"}})",
       "status.gpuUsage.utilization: must be an integer"},
      {R"({"placement": {}})", "status.placement: must be a list"},
      {R"({"placement": [{"node": "a"}, {"node": 1}]})",
       "status.placement[1].node: must be a string"},
      {R"({"placement": [{"gpus": [{"index": "0"}]}]})",
       "status.placement[0].gpus[0].index: must be an integer"},
      {R"({"placement": ["a"]})", "status.placement[0]: must be an object"},
      {R"({"tasks": {"a.b.0": 1}})", "status.tasks.a.b.0: must be a string"},
      {R"([])", "status: must be an object"},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<JobStatus> s = Decode(c.status);
    ASSERT_FALSE(s.ok()) << c.status;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.status;
    EXPECT_TRUE(std::string(s.status().message()).starts_with(c.error))
        << c.status << ": " << s.status().message();
  }
  EXPECT_EQ(
      JobStatusOf(Json::parse(R"({"status": {"phase": "X"}})")).status().message().substr(0, 13),
      "status.phase:");
}

JobStatus Full() {
  JobStatus s;
  s.phase = JobPhase::kStopping;
  s.next = JobPhase::kSucceeded;
  s.attempt = 3;
  s.restarts = 1;
  s.interruptions = 1;
  s.reason = "Completed";
  s.message = "every task ended";
  s.submitted_ms = 1000;
  s.not_before_ms = 1500;
  s.scheduled_ms = 2000;
  s.started_ms = 2100;
  s.finished_ms = 0;
  s.stop_deadline_ms = 9000;
  s.interrupted_ms = 2500;
  s.recoveries = 1;
  s.last_recovery_ms = 400;
  s.cancel_requested = true;
  s.delete_requested = true;
  s.checkpoint_dir = "/ckpt/default/train";
  s.gpus = 2.5;
  s.attempt_started_ms = 2200;
  s.last_checkpoint_ms = 2600;
  s.last_replicated_ms = 2550;
  s.gpu_seconds = {10, 8, 1};
  s.master_port = 29517;
  PlacedReplica r0{"default.train.0", "node-a", 0, "worker", 0, 4000, 8192, {}};
  r0.gpus = {{0, "whole"}, {3, "mig", "3g.40gb", 4}};
  PlacedReplica r1{"default.train.1", "node-b", 1, "worker", 1, 4000, 8192, {}};
  r1.gpus = {{1, "shared", "", 0, 500, 20480, true}};
  s.placement = {r0, r1};
  s.tasks = {{"default.train.0", "Succeeded"}, {"default.train.1", "Running"}};
  s.gpu_usage = GpuUsage{2, 1, 87, 40000, 81920, 123456};
  return s;
}

TEST(JobStatusWire, RoundTrips) {
  std::vector<JobStatus> cases = {JobStatus{}, Full()};
  for (JobPhase p : kAllJobPhases) {
    JobStatus s;
    s.phase = p;
    if (IsStopping(p)) s.next = JobPhase::kPending;
    cases.push_back(s);
  }
  JobStatus unknown_usage;
  unknown_usage.gpu_usage = GpuUsage{1, 0, std::nullopt, std::nullopt, std::nullopt, 0};
  cases.push_back(unknown_usage);
  for (const JobStatus& s : cases) {
    const std::string json = JobStatusToJson(s);
    absl::StatusOr<JobStatus> back = Decode(json);
    ASSERT_TRUE(back.ok()) << json << ": " << back.status();
    EXPECT_EQ(*back, s) << json;
    EXPECT_EQ(JobStatusToJson(*back), json);
  }
}

TEST(JobStatusWire, WritesTheServersKeys) {
  // The keys and their order as server/job_status.cc writes them (goodput derived).
  EXPECT_EQ(JobStatusToJson(JobStatus{}),
            R"({"phase":"Pending","attempt":0,"restarts":0,"interruptions":0})");
  JobStatus s;
  s.phase = JobPhase::kRestarting;
  s.next = JobPhase::kPending;
  s.gpu_seconds = {4, 3, 1};
  s.master_port = 29500;
  EXPECT_EQ(JobStatusToJson(s),
            R"({"phase":"Restarting","next":"Pending","attempt":0,"restarts":0,)"
            R"("interruptions":0,"gpuSeconds":{"allocated":4.0,"productive":3.0,"lost":1.0,)"
            R"("goodput":0.75},"masterPort":29500})");
}

}  // namespace
}  // namespace gpucloud::api
