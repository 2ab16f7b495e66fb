#include "agent/heartbeat_reports.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/simulated_backend.h"

namespace gpucloud::agent {
namespace {

TEST(HeartbeatReports, AnEndedTaskLeavesTheHeartbeatOnceAcknowledgedAndNotBefore) {
  const absl::Duration kLong = kEndedReportRetention + absl::Seconds(1);
  struct Case {
    const char* what;
    ReportedTask t;
    bool in_heartbeat, forgettable;
  };
  const Case cases[] = {
      {"running", {false, true, false, absl::ZeroDuration(), false}, true, false},
      {"running, assignment gone (being stopped)", {false, false, true, {}, true}, true, false},
      {"ended, still assigned", {true, true, false, absl::Seconds(1), true}, true, false},
      {"ended, still assigned, acknowledged",
       {true, true, true, absl::Seconds(1), true},
       true,
       false},
      {"ended, assigned for long", {true, true, false, kLong, true}, true, false},
      {"ended, unassigned, not acknowledged",
       {true, false, false, absl::Seconds(1), true},
       true,
       false},
      {"ended, unassigned, acknowledged", {true, false, true, absl::Seconds(1), true}, false, true},
      {"acknowledged, log not shipped", {true, false, true, absl::Seconds(1), false}, false, false},
      {"acknowledged, log not shipped, past retention",
       {true, false, true, kLong, false},
       false,
       true},
      {"never acknowledged (older server), within retention",
       {true, false, false, kEndedReportRetention, false},
       true,
       false},
      {"never acknowledged, past retention", {true, false, false, kLong, true}, false, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(InHeartbeat(c.t), c.in_heartbeat) << c.what;
    EXPECT_EQ(Forgettable(c.t), c.forgettable) << c.what;
  }
}

TEST(HeartbeatReports, AnAnswerAcknowledgesReportsInTheHeartbeatsEncoding) {
  api::TaskReport r{"default.a.0", "uid-1",      2, api::TaskState::kSucceeded, 0, 0,
                    false,         "exit code 0"};
  r.finished_ms = 1'700'000'000'000;
  api::Heartbeat h;
  h.tasks.push_back(r);
  nlohmann::json answer{{"ok", true}, {"healthReset", 0}};
  answer["acknowledged"] = nlohmann::json::parse(api::HeartbeatToJson(h))["tasks"];
  EXPECT_EQ(AcknowledgedReports(answer.dump()), h.tasks);
  EXPECT_TRUE(AcknowledgedReports(R"({"ok":true,"healthReset":0})").empty());  // older server
  EXPECT_TRUE(AcknowledgedReports("not json").empty());
  EXPECT_TRUE(AcknowledgedReports(R"({"acknowledged":[{"name":1}]})").empty());
}

// The heartbeat carries each GPU's usage from the sample; on simulated GPUs, those a task holds
// read busy, so the path to `gpuctl top` is tested without a GPU.
TEST(HeartbeatReports, EachGpusUsageComesFromTheSampleAndSimulatedBusyGpusReadBusy) {
  std::unique_ptr<GpuBackend> backend = *MakeSimulatedBackend("3xH100");
  backend->SetBusyGpus({1});
  absl::StatusOr<std::vector<GpuSample>> samples = backend->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  samples->pop_back();  // GPU 2 stopped answering (lost): no sample
  std::vector<api::GpuHealth> gpus = {{.index = 0}, {.index = 1}, {.index = 2}};
  AddGpuUsage(*samples, gpus);
  const int64_t total = (*samples)[0].fb_free->raw();
  EXPECT_GT(total, 0);
  EXPECT_EQ(gpus[0].utilization_percent, 0);
  EXPECT_EQ(gpus[0].memory_used_mib, 0);
  EXPECT_EQ(gpus[0].memory_total_mib, total);
  EXPECT_EQ(gpus[1].utilization_percent, kSimulatedBusyUtilization);
  EXPECT_EQ(gpus[1].memory_used_mib, total / 2);
  EXPECT_EQ(gpus[1].memory_total_mib, total);
  EXPECT_FALSE(gpus[2].utilization_percent.has_value());
  EXPECT_FALSE(gpus[2].memory_total_mib.has_value());
  // The task ended: idle again.
  backend->SetBusyGpus({});
  EXPECT_EQ(backend->Sample()->at(1).gpu_util_percent, 0);
  // A sample without a reading (an old driver) leaves it unknown.
  GpuSample bare;
  bare.index = 0;
  std::vector<api::GpuHealth> one = {{.index = 0}};
  AddGpuUsage({bare}, one);
  EXPECT_EQ(one[0], (api::GpuHealth{.index = 0}));
}

}  // namespace
}  // namespace gpucloud::agent
