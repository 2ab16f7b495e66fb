// The controller test fixture: the controller loop on a real SQLite store, driven pass by pass
// with a fake clock; the REST API registers nodes and takes jobs, the NodeTable stands for the
// agents' heartbeats. Test-only; used by controller_test.cc and controller_policy_test.cc.
#ifndef GPUCLOUD_SERVER_CONTROLLER_FIXTURE_H_
#define GPUCLOUD_SERVER_CONTROLLER_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api/wire.h"
#include "core/text.h"
#include "server/controller.h"
#include "server/job_status.h"
#include "server/log_store.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {

using Json = nlohmann::ordered_json;

inline std::string GangJob(const std::string& name, int replicas, int gpus, int max_restarts = 3,
                           const std::string& extra = "") {
  return Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: ", name,
             "}\nspec:\n  tasks:\n  - name: worker\n    replicas: ", replicas,
             "\n    command: [python3, train.py]\n    resources: {gpu: {count: ", gpus,
             "}}\n  restartPolicy: {maxRestarts: ", max_restarts, ", backoff: 10s}\n", extra);
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((dir_.path() / "s.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 7);
    logs_ = std::make_unique<LogStore>((dir_.path() / "logs").string());
    api_->AttachCluster(&nodes_, logs_.get(), nullptr);
    ControllerOptions o;
    o.checkpoint_root = "/ckpt";
    o.stop_grace_ms = 10'000;
    o.on_job_deleted = [this](const std::string& ns, const std::string& job) {
      logs_->RemoveJob(ns, job);
    };
    controller_ = std::make_unique<Controller>(*store_, nodes_, clock_, GpuCatalog::Default(), o);
  }

  Response Call(std::string method, std::string path, std::string body = "") {
    return api_->Handle(
        {std::move(method), std::move(path), {}, std::move(body), {"root", "", true}});
  }

  void Register(const std::string& node, int gpus, const std::string& pool = "") {
    api::NodeInfo n;
    n.name = node;
    n.pool = pool;
    if (!pool.empty()) n.labels["pool"] = pool;
    n.address = "10.0.0." + std::to_string(node.back() - 'a' + 1);
    n.cpu_milli = 64'000;
    n.memory_mib = 512 << 10;
    for (int i = 0; i < gpus; ++i) {
      Gpu g;
      g.index = i;
      g.uuid = Cat("GPU-", node, "-", i);
      g.type = "H100-80GB";
      g.memory = MiB(80 << 10);
      n.gpus.push_back(g);
    }
    Response r = Call("PUT", api::NodePath(node), api::NodeToJson(n, false));
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.body;
  }

  // Registers node "mig-a" with one A100-80GB in MIG mode, its instances a 3g.40gb at slice 0
  // and a 1g.10gb at slice 6 (what its agent reports).
  void RegisterMigNode() {
    api::NodeInfo n;
    n.name = "mig-a";
    n.address = "10.0.0.9";
    n.cpu_milli = 64'000;
    n.memory_mib = 512 << 10;
    Gpu g;
    g.index = 0;
    g.uuid = "GPU-mig-0";
    g.type = "A100-80GB";
    g.memory = MiB(80 << 10);
    g.mig_enabled = true;
    g.mig_layout = {{"3g.40gb", 0}, {"1g.10gb", 6}};
    n.gpus.push_back(g);
    ASSERT_EQ(Call("PUT", api::NodePath("mig-a"), api::NodeToJson(n, false)).status, 201);
  }

  // A one-task job `name` asking for a MIG instance of `profile`.
  void SubmitMigJob(const std::string& name, const std::string& profile) {
    Submit(Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: ", name,
               "}\nspec:\n  tasks:\n  - name: serve\n    command: [python3, serve.py]\n"
               "    resources:\n      gpu: {mig: ",
               profile, "}\n"));
  }

  void Submit(const std::string& yaml) {
    Response r = Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs", yaml);
    ASSERT_EQ(r.status, 201) << r.body;
  }

  // What every agent says now: the given task states, by assignment name.
  void Heartbeat(const std::string& node, std::vector<api::TaskReport> tasks = {}) {
    nodes_.Record(node, {std::move(tasks), {}}, clock_.NowMillis());
  }

  api::TaskReport Report(const std::string& job, int rank, api::TaskState state,
                         int exit_code = -1) {
    Json doc = Json::parse(store_->Get("/jobs/default/" + job)->value);
    JobStatus s = JobStatusFromJson(doc).value();
    return {Cat("default.", job, ".", rank),
            doc["metadata"]["uid"],
            s.attempt,
            state,
            exit_code,
            0,
            false,
            exit_code > 0 ? Cat("exit code ", exit_code) : ""};
  }

  void Pass() { ASSERT_TRUE(controller_->RunOnce().ok()); }

  // node-a and node-b with 4 GPUs; `job` (one replica of `gpus`) bound and running on one of
  // them. Returns {the job's node, the other}.
  std::pair<std::string, std::string> RunOnOneOfTwo(const std::string& job, int gpus) {
    Register("node-a", 4);
    Register("node-b", 4);
    Submit(GangJob(job, 1, gpus));
    Pass();
    std::string first = Status(job).placement.at(0).node;
    std::string other = first == "node-a" ? "node-b" : "node-a";
    Heartbeat(first, {Report(job, 0, api::TaskState::kRunning)});
    Heartbeat(other);
    Pass();
    EXPECT_EQ(Status(job).phase, api::JobPhase::kRunning);
    return {first, other};
  }

  JobStatus Status(const std::string& job) {
    return JobStatusFromJson(Json::parse(store_->Get("/jobs/default/" + job)->value)).value();
  }
  int64_t JobRevision(const std::string& job) {
    return store_->Get("/jobs/default/" + job)->mod_revision;
  }

  std::vector<store::KeyValue> Assignments(const std::string& node) {
    return store_->List(Cat("/assignments/", node, "/"))->items;
  }

  std::vector<std::string> EventReasons(const std::string& job) {
    std::vector<std::string> out;
    absl::StatusOr<store::ListResult> list = store_->List(Cat("/events/default/", job, "."));
    for (const store::KeyValue& kv : list->items) {
      out.push_back(Json::parse(kv.value)["reason"]);
    }
    return out;
  }

  testing_util::TempDir dir_;
  FakeClock clock_{1'000'000};
  NodeTable nodes_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<Controller> controller_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_CONTROLLER_FIXTURE_H_
