#include "api/wire.h"

#include <gtest/gtest.h>

namespace gpucloud::api {
namespace {

TEST(Wire, NodesRoundTripWithMigLayoutsAndIslands) {
  NodeInfo n;
  n.name = "node-a";
  n.address = "10.0.0.1";
  n.cpu_milli = 8000;
  n.memory_mib = 65536;
  Gpu g;
  g.index = 0;
  g.uuid = "GPU-0";
  g.type = "A100-80GB";
  g.memory = MiB(81920);
  g.mig_enabled = true;
  g.mig_layout = {{"3g.40gb", 0}, {"1g.10gb", 6}};
  g.nvlink_island = 2;
  n.gpus.push_back(g);
  n.gpu_topology = {{"X"}};
  n.max_tasks = 32;
  absl::StatusOr<NodeInfo> back = NodeFromJson(NodeToJson(n, false));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0], g);
  EXPECT_EQ(back->gpu_topology, n.gpu_topology);
  EXPECT_EQ(ToSchedulerNode(*back).gpus[0].mig_layout, g.mig_layout);
  EXPECT_EQ(ToSchedulerNode(*back).max_tasks, 32);
  // A registration that does not say keeps the default (Kubernetes' maxPods, 110).
  EXPECT_EQ(NodeFromJson("{\"metadata\": {\"name\": \"a\"}, \"status\": {}}")->max_tasks,
            kDefaultMaxTasksPerNode);
  EXPECT_EQ(NodeFromJson("{\"metadata\": {\"name\": \"a\"}, \"status\": {\"maxTasks\": -1}}")
                .status()
                .message(),
            "status.maxTasks: must be from 0 to 100000, got -1");
}

TEST(Wire, BadBodiesNameTheField) {
  EXPECT_EQ(NodeFromJson(
                "{\"metadata\": {\"name\": \"a\"}, \"status\": {\"gpus\": [{\"index\": \"x\"}]}}")
                .status()
                .message(),
            "status.gpus[0].index: must be an integer");
  EXPECT_EQ(NodeFromJson("[]").status().message(), "the body is not a JSON object");
  const std::string two_gpus =
      "{\"metadata\": {\"name\": \"a\"}, \"status\": {\"gpus\": [{\"index\": 0, \"uuid\": \"u0\", "
      "\"type\": \"T4\"}, {\"index\": 1, \"uuid\": \"u1\", \"type\": \"T4\"}], \"gpuTopology\": ";
  EXPECT_EQ(NodeFromJson(two_gpus + "[[\"X\", \"PIX\"], [\"PIX\"]]}}").status().message(),
            "status.gpuTopology[1]: must be a list of 2 strings (one per GPU)");
  EXPECT_EQ(NodeFromJson(two_gpus + "[[\"X\", \"PIX\"]]}}").status().message(),
            "status.gpuTopology: must have one row per GPU (2), has 1");
  EXPECT_TRUE(NodeFromJson(two_gpus + "[[\"X\", \"PIX\"], [\"PIX\", \"X\"]]}}").ok());
  EXPECT_EQ(HeartbeatFromJson("{\"tasks\": [{\"name\": \"a\", \"jobUid\": \"u\", \"attempt\": 1, "
                              "\"state\": \"Dancing\"}]}")
                .status()
                .message(),
            "tasks[0].state: unknown state \"Dancing\"");
  EXPECT_EQ(
      AssignmentFromJson("{\"metadata\": {\"name\": \"a\", \"namespace\": \"n\"}, \"job\": \"j\"}")
          .status()
          .message(),
      "jobUid: is required");
}

TEST(Wire, AnAssignmentWithoutACommandReachesTheAgent) {
  Assignment a;
  a.name = "ns.job.0";
  a.namespace_ = "ns";
  a.job = "job";
  a.job_uid = "u-1";
  absl::StatusOr<Assignment> back = AssignmentFromJson(AssignmentToJson(a));
  ASSERT_TRUE(back.ok()) << back.status();  // the agent fails the task with NoCommand
  EXPECT_TRUE(back->command.empty());
}

TEST(Wire, AnAssignmentCarriesItsImageAndUser) {
  Assignment a;
  a.name = "ns.job.0";
  a.namespace_ = "ns";
  a.job = "job";
  a.job_uid = "u-1";
  a.image = "registry.local:5000/team/trainer:1";
  a.image_pull_policy = PullPolicy::kNever;
  a.run_as_user = 1000;
  a.run_as_group = 0;
  a.run_as_non_root = true;
  a.command = {"--epochs", "3"};
  a.image_entrypoint = true;
  std::string json = AssignmentToJson(a);
  EXPECT_NE(json.find("\"imagePullPolicy\":\"Never\""), std::string::npos) << json;
  absl::StatusOr<Assignment> back = AssignmentFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->image, a.image);
  EXPECT_EQ(back->image_pull_policy, PullPolicy::kNever);
  EXPECT_EQ(back->run_as_user, 1000);
  EXPECT_EQ(back->run_as_group, 0);  // root's group, set: not the same as unset
  EXPECT_TRUE(back->run_as_non_root);
  EXPECT_TRUE(back->image_entrypoint);
  EXPECT_EQ(back->command, a.command);
}

TEST(Wire, AnOlderServersAssignmentIsAHostProcessWithTheAgentsUser) {
  absl::StatusOr<Assignment> a = AssignmentFromJson(
      "{\"metadata\": {\"name\": \"a\", \"namespace\": \"n\"}, \"job\": \"j\", "
      "\"jobUid\": \"u\", \"attempt\": 1, \"rank\": 0, \"worldSize\": 1}");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->image.empty());
  EXPECT_EQ(a->image_pull_policy, PullPolicy::kDefault);
  EXPECT_FALSE(a->run_as_user.has_value());
  EXPECT_FALSE(a->run_as_group.has_value());
  EXPECT_FALSE(a->run_as_non_root);
  EXPECT_FALSE(a->image_entrypoint);
  // An image without a policy gets Kubernetes' default.
  std::string base =
      "{\"metadata\": {\"name\": \"a\", \"namespace\": \"n\"}, \"job\": \"j\", "
      "\"jobUid\": \"u\", \"attempt\": 1, \"rank\": 0, \"worldSize\": 1, ";
  a = AssignmentFromJson(base + "\"image\": \"trainer\"}");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->image_pull_policy, PullPolicy::kAlways);
  a = AssignmentFromJson(base + "\"image\": \"trainer:2\"}");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->image_pull_policy, PullPolicy::kIfNotPresent);
  EXPECT_EQ(AssignmentFromJson(base + "\"runAsUser\": -1}").status().message(),
            "runAsUser: must be in [0, 2147483647]");
  EXPECT_EQ(AssignmentFromJson(base + "\"runAsGroup\": \"0\"}").status().message(),
            "runAsGroup: must be an integer");
  EXPECT_EQ(AssignmentFromJson(base + "\"image\": \"t\", \"imagePullPolicy\": \"Sometimes\"}")
                .status()
                .message(),
            "imagePullPolicy: must be Always, IfNotPresent or Never");
}

TEST(Wire, AnAssignmentCarriesEveryTasksHostsForVolcanosFiles) {
  Assignment a;
  a.name = "ns.job.0";
  a.namespace_ = "ns";
  a.job = "job";
  a.job_uid = "u-1";
  a.task_hosts = {{"mpimaster", {"10.0.0.1"}}, {"mpi-worker", {"10.0.0.2", "10.0.0.2"}}};
  std::string json = AssignmentToJson(a);
  EXPECT_NE(json.find(R"("taskHosts":{"mpi-worker":["10.0.0.2","10.0.0.2"],"mpimaster":)"),
            std::string::npos)
      << json;
  absl::StatusOr<Assignment> back = AssignmentFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->task_hosts, a.task_hosts);
  // None: the key is left out, and an older server's assignment (without it) decodes empty.
  a.task_hosts.clear();
  json = AssignmentToJson(a);
  EXPECT_EQ(json.find("taskHosts"), std::string::npos) << json;
  back = AssignmentFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->task_hosts.empty());
  // Wrong types are refused, naming the field.
  std::string base =
      "{\"metadata\": {\"name\": \"a\", \"namespace\": \"n\"}, \"job\": \"j\", "
      "\"jobUid\": \"u\", \"attempt\": 1, \"rank\": 0, \"worldSize\": 1, \"taskHosts\": ";
  auto why = [&](const std::string& task_hosts) {
    return std::string(AssignmentFromJson(base + task_hosts + "}").status().message());
  };
  EXPECT_EQ(why(R"(["10.0.0.1"])"), "taskHosts: must be a map of task name to addresses");
  EXPECT_EQ(why(R"({"w": "10.0.0.1"})"), "taskHosts.w: must be a list of strings");
  EXPECT_EQ(why(R"({"w": ["a", 1]})"), "taskHosts.w[1]: must be a string");
}

TEST(Wire, AssignmentsAndHeartbeatsRoundTrip) {
  Assignment a;
  a.name = "ns.job.1";
  a.namespace_ = "ns";
  a.job = "job";
  a.job_uid = "u-1";
  a.attempt = 3;
  a.rank = 1;
  a.world_size = 2;
  a.hosts = {{"10.0.0.1", 1}, {"10.0.0.2", 1}};
  a.gpus = {{0, "GPU-0", "shared", "", 0, 500, true}};
  a.command = {"python3", "train.py"};
  a.env = {{"A", "1"}};
  absl::StatusOr<Assignment> back = AssignmentFromJson(AssignmentToJson(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hosts, a.hosts);
  EXPECT_EQ(back->gpus[0].fraction_milli, 500);
  EXPECT_TRUE(back->gpus[0].mps);
  EXPECT_EQ(back->command, a.command);
  Heartbeat h{{{"ns.job.1", "u-1", 3, TaskState::kFailed, 3, 0, true, "killed by the OOM killer",
                1'700'000'000'123, 1'700'000'000'000}},
              {{0, false, "Xid 79"}, {1, true, "", true, "4 rows remapped in 6 h"}}};
  absl::StatusOr<Heartbeat> hb = HeartbeatFromJson(HeartbeatToJson(h));
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->tasks, h.tasks);
  EXPECT_EQ(hb->gpus, h.gpus);
}

TEST(Wire, ATaskReportCarriesItsOwnStartAndEnd) {
  TaskReport t{"ns.job.0", "u-1", 1, TaskState::kSucceeded, 0, 0, false, "exit code 0"};
  t.started_ms = 1'700'000'000'100;
  t.finished_ms = 1'700'000'000'104;
  std::string json = HeartbeatToJson({{t}, {}});
  EXPECT_NE(json.find("\"startedMs\":1700000000100"), std::string::npos) << json;
  EXPECT_NE(json.find("\"finishedMs\":1700000000104"), std::string::npos) << json;
  absl::StatusOr<Heartbeat> hb = HeartbeatFromJson(json);
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->tasks.at(0), t);
  // A task that has not started says nothing of it; an older agent's report decodes with 0.
  t.started_ms = t.finished_ms = 0;
  json = HeartbeatToJson({{t}, {}});
  EXPECT_EQ(json.find("startedMs"), std::string::npos) << json;
  EXPECT_EQ(json.find("finishedMs"), std::string::npos) << json;
  hb = HeartbeatFromJson(
      R"({"tasks": [{"name": "a", "jobUid": "u", "attempt": 1, "state": "Succeeded"}]})");
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->tasks.at(0).started_ms, 0);
  EXPECT_EQ(hb->tasks.at(0).finished_ms, 0);
  EXPECT_FALSE(HeartbeatFromJson(R"({"tasks": [{"name": "a", "jobUid": "u", "attempt": 1, )"
                                 R"("state": "Running", "startedMs": "soon"}]})")
                   .ok());
}

TEST(Wire, AHeartbeatCarriesEachGpusUsageAndAnOlderOneParses) {
  GpuHealth busy{.index = 0, .healthy = true};
  busy.utilization_percent = 87;
  busy.memory_used_mib = 40'960;
  busy.memory_total_mib = 81'559;
  GpuHealth partial{.index = 1, .healthy = false, .reason = "Xid 79"};
  partial.memory_total_mib = 81'559;  // memory known, utilization not (MIG mode, say)
  std::string json = HeartbeatToJson({{}, {busy, partial}});
  EXPECT_NE(json.find(R"("utilization":87,"memoryUsedMiB":40960,"memoryTotalMiB":81559)"),
            std::string::npos)
      << json;
  absl::StatusOr<Heartbeat> hb = HeartbeatFromJson(json);
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->gpus, (std::vector<GpuHealth>{busy, partial}));
  EXPECT_FALSE(hb->gpus[1].utilization_percent.has_value());
  // Nothing measured: nothing sent.
  json = HeartbeatToJson({{}, {{.index = 2}}});
  EXPECT_EQ(json.find("utilization"), std::string::npos) << json;
  EXPECT_EQ(json.find("memory"), std::string::npos) << json;
  // An older agent's heartbeat (health only): every usage field unknown.
  hb = HeartbeatFromJson(R"({"tasks": [], "gpus": [{"index": 0, "healthy": true, "reason": ""}]})");
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_FALSE(hb->gpus.at(0).utilization_percent.has_value());
  EXPECT_FALSE(hb->gpus.at(0).memory_used_mib.has_value());
  EXPECT_FALSE(hb->gpus.at(0).memory_total_mib.has_value());
  // Bad values name the field.
  auto why = [](const std::string& gpu) {
    return std::string(HeartbeatFromJson(R"({"gpus": [)" + gpu + "]}").status().message());
  };
  EXPECT_EQ(why(R"({"index": 0, "utilization": 101})"),
            "gpus[0].utilization: must be a percentage (0 to 100), is 101");
  EXPECT_EQ(why(R"({"index": 0, "utilization": "high"})"),
            "gpus[0].utilization: must be an integer");
  EXPECT_EQ(why(R"({"index": 0, "memoryUsedMiB": -1})"),
            "gpus[0].memoryUsedMiB: must not be negative, is -1");
  EXPECT_EQ(why(R"({"index": 0, "memoryTotalMiB": 1.5})"),
            "gpus[0].memoryTotalMiB: must be an integer");
}

}  // namespace
}  // namespace gpucloud::api
