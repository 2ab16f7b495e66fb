#include "server/services.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "manifest/manifest.h"
#include "server/service_replicas.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kService[] = R"(
apiVersion: gpucloud/v1
kind: InferenceService
metadata: {name: resnet, namespace: team-a}
spec:
  template:
    name: server
    command: [python3, serve.py]
    resources: {gpu: {count: 1}}
  replicas: {min: 1, max: 4}
  autoscaling: {target: 10, stableWindow: 60s, panicWindow: 6s, scaleToZeroAfter: 30s}
  priority: 100
)";

class ServiceControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((tmp_.path() / "store.db").string()));
    ctl_ = std::make_unique<ServiceController>(*store_, clock_, load_, health_,
                                               ServiceControllerOptions{});
    // A node whose agent registered address 10.1.2.3.
    Json node = {{"apiVersion", "gpucloud/v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", "n1"}}},
                 {"status", {{"address", "10.1.2.3"}}}};
    ASSERT_TRUE(store_->Txn({{.key = "/nodes/n1", .value = node.dump()}}).ok());
  }
  void Apply(const std::string& yaml) {
    manifest::ParseResult p = manifest::ParseManifests(yaml, "svc.yaml");
    ASSERT_TRUE(p.ok()) << p.errors[0].message;
    Json doc = Json::parse(manifest::ToJson(p.manifests[0].object));
    doc["metadata"]["creationTimestamp"] = "1970-01-12T13:46:40Z";  // the clock's start
    const std::string key = "/inferenceservices/team-a/resnet";
    absl::StatusOr<store::KeyValue> old = store_->Get(key);
    if (old.ok()) {
      Json before = Json::parse(old->value);
      if (before.contains("status")) doc["status"] = before["status"];
    }
    ASSERT_TRUE(store_
                    ->Txn({{.key = key,
                            .value = doc.dump(),
                            .expect_mod_revision = old.ok() ? old->mod_revision : 0}})
                    .ok());
  }
  Json Service() { return Json::parse(store_->Get("/inferenceservices/team-a/resnet")->value); }
  // The replica jobs, by name.
  std::map<std::string, Json> Replicas() {
    std::map<std::string, Json> out;
    absl::StatusOr<store::ListResult> list = store_->List("/jobs/team-a/");
    EXPECT_TRUE(list.ok());
    if (!list.ok()) return out;
    for (const store::KeyValue& kv : list->items) {
      Json j = Json::parse(kv.value);
      out[j["metadata"]["name"].get<std::string>()] = j;
    }
    return out;
  }
  // The job controller's part: a replica runs on n1 (or ends).
  void SetPhase(const std::string& job, const std::string& phase) {
    const std::string key = Cat("/jobs/team-a/", job);
    absl::StatusOr<store::KeyValue> kv = store_->Get(key);
    ASSERT_TRUE(kv.ok());
    Json j = Json::parse(kv->value);
    j["status"]["phase"] = phase;
    j["status"]["placement"] = Json::array({Json{{"name", Cat("team-a.", job, ".0")},
                                                 {"node", "n1"},
                                                 {"rank", 0},
                                                 {"gpus", Json::array()}}});
    ASSERT_TRUE(
        store_->Txn({{.key = key, .value = j.dump(), .expect_mod_revision = kv->mod_revision}})
            .ok());
  }
  void Run(int64_t advance_ms = 1000) {
    clock_.Advance(advance_ms);
    ASSERT_TRUE(ctl_->RunOnce().ok());
  }

  testing_util::TempDir tmp_{"gpucloud-services"};
  std::unique_ptr<store::Store> store_;
  FakeClock clock_{1'000'000'000};
  gateway::LoadMeter load_{clock_};
  gateway::ReplicaHealth health_;
  std::unique_ptr<ServiceController> ctl_;
};

TEST_F(ServiceControllerTest, KeepsMinReplicasAsJobsWithPortsAndReportsEndpoints) {
  Apply(kService);
  Run();
  std::map<std::string, Json> jobs = Replicas();
  ASSERT_EQ(jobs.size(), 1u);
  const auto& [name, job] = *jobs.begin();
  EXPECT_EQ(name, "resnet-00001");
  EXPECT_EQ(job["metadata"]["labels"][std::string(kServiceLabel)], "resnet");
  EXPECT_EQ(job["spec"]["priority"], 100);
  EXPECT_EQ(job["status"]["phase"], "Pending");
  std::string port;
  for (const Json& e : job["spec"]["tasks"][0]["env"]) {
    if (e["name"] == "PORT") port = e["value"];
  }
  ASSERT_FALSE(port.empty());
  Json st = Service()["status"];
  EXPECT_EQ(st["desiredReplicas"], 1);
  EXPECT_EQ(st["replicas"], 1);
  EXPECT_EQ(st["readyReplicas"], 0);
  EXPECT_TRUE(st["endpoints"].empty());
  // Running on n1: an endpoint at the node's address, not ready until the gateway says so.
  SetPhase(name, "Running");
  Run();
  st = Service()["status"];
  ASSERT_EQ(st["endpoints"].size(), 1u);
  EXPECT_EQ(st["endpoints"][0]["address"], Cat("10.1.2.3:", port));
  EXPECT_EQ(st["endpoints"][0]["ready"], false);
  health_.Get(Cat("team-a/", name))->ready = true;
  Run();
  st = Service()["status"];
  EXPECT_EQ(st["readyReplicas"], 1);
  EXPECT_EQ(st["endpoints"][0]["ready"], true);
  // Nothing changed: nothing written.
  const int64_t rev = store_->Revision();
  Run();
  EXPECT_EQ(store_->Revision(), rev);
}

TEST_F(ServiceControllerTest, ScalesOnTheGatewaysLoadAndBackDownToIdleReplicasOnly) {
  Apply(kService);
  Run();
  SetPhase("resnet-00001", "Running");
  health_.Get("team-a/resnet-00001")->ready = true;
  Run();
  // 35 requests in flight for 6 s: the panic window asks for 4 (at max).
  for (int i = 0; i < 35; ++i) load_.Arrived("team-a/resnet");
  for (int i = 0; i < 6; ++i) Run();
  std::map<std::string, Json> jobs = Replicas();
  EXPECT_EQ(jobs.size(), 4u);
  std::set<std::string> ports;
  for (const auto& [name, j] : jobs) {
    for (const Json& e : j["spec"]["tasks"][0]["env"]) {
      if (e["name"] == "PORT") ports.insert(e["value"].get<std::string>());
    }
  }
  EXPECT_EQ(ports.size(), 4u) << "every replica has a port of its own";
  Json st = Service()["status"];
  EXPECT_EQ(st["desiredReplicas"], 4);
  ASSERT_FALSE(st["history"].empty());
  EXPECT_EQ(st["history"].back()["to"], 4);
  EXPECT_NE(st["history"].back()["reason"].get<std::string>().find("panic"), std::string::npos);
  for (const auto& [name, j] : jobs) {
    SetPhase(name, "Running");
    health_.Get(Cat("team-a/", name))->ready = true;
  }
  // The load ends; one replica stays busy with a long request.
  for (int i = 0; i < 35; ++i) load_.Finished("team-a/resnet");
  health_.Get("team-a/resnet-00002")->in_flight = 1;
  for (int i = 0; i < 130; ++i) Run();
  jobs = Replicas();
  int stopping = 0;
  for (const auto& [name, j] : jobs)
    stopping += j["status"].value("deleteRequested", false) ? 1 : 0;
  EXPECT_EQ(stopping, 3);
  EXPECT_FALSE(jobs["resnet-00002"]["status"].value("deleteRequested", false))
      << "a busy replica is never the one stopped";
}

// On p95 latency: slow answers through the gateway's meter add a replica, with the latency
// in the status and the history.
TEST_F(ServiceControllerTest, ScalesOnTheGatewaysP95Latency) {
  std::string yaml = kService;
  yaml.replace(yaml.find("autoscaling: {target: 10,"), 25,
               "autoscaling: {metric: p95Latency, target: 100,");
  Apply(yaml);
  Run();
  SetPhase("resnet-00001", "Running");
  health_.Get("team-a/resnet-00001")->ready = true;
  Run();
  // Ten requests a second answered in 400 ms, for 8 s.
  for (int s = 0; s < 8; ++s) {
    for (int i = 0; i < 10; ++i) {
      load_.Arrived("team-a/resnet");
      load_.Finished("team-a/resnet", 400);
    }
    Run();
  }
  EXPECT_EQ(Replicas().size(), 2u);
  Json st = Service()["status"];
  EXPECT_EQ(st["desiredReplicas"], 2);
  EXPECT_EQ(st["load"]["metric"], "p95Latency");
  EXPECT_GT(st["load"]["panic"].get<double>(), 350);
  EXPECT_NE(st["history"].back()["reason"].get<std::string>().find("p95 latency"),
            std::string::npos)
      << st["history"].back();
}

// The namespace's job quota holds for replicas: with room for 3 jobs and one training job
// there, a service asking for 4 gets 2, and its status says why.
TEST_F(ServiceControllerTest, ReplicasStayWithinTheNamespacesJobQuota) {
  ctl_ = std::make_unique<ServiceController>(*store_, clock_, load_, health_,
                                             ServiceControllerOptions{.max_jobs_per_namespace = 3});
  ASSERT_TRUE(
      store_->Txn({{.key = "/jobs/team-a/train", .value = R"({"metadata":{"name":"train"}})"}})
          .ok());
  std::string yaml = kService;
  yaml.replace(yaml.find("replicas: {min: 1, max: 4}"), 26, "replicas: {min: 4, max: 4}");
  Apply(yaml);
  Run();
  std::map<std::string, Json> jobs = Replicas();
  EXPECT_EQ(jobs.size(), 3u);  // train and two replicas
  Json st = Service()["status"];
  EXPECT_EQ(st["desiredReplicas"], 4);
  EXPECT_EQ(st["replicas"], 2);
  EXPECT_EQ(st["quotaExceeded"],
            "namespace team-a holds 1 jobs, its quota is 3: 2 replica(s) not started");
  Run();  // still full: nothing more
  EXPECT_EQ(Replicas().size(), 3u);
}

TEST_F(ServiceControllerTest, ATemplateChangeRollsAndADeletedServiceTakesItsReplicas) {
  Apply(kService);
  Run();
  SetPhase("resnet-00001", "Running");
  health_.Get("team-a/resnet-00001")->ready = true;
  Run();
  std::string changed = kService;
  changed.replace(changed.find("serve.py"), 8, "serve2.py");
  Apply(changed);
  Run();
  std::map<std::string, Json> jobs = Replicas();
  ASSERT_EQ(jobs.size(), 2u);  // the surge: a new one beside the old
  EXPECT_EQ(jobs["resnet-00002"]["spec"]["tasks"][0]["command"][1], "serve2.py");
  EXPECT_FALSE(jobs["resnet-00001"]["status"].value("deleteRequested", false));
  SetPhase("resnet-00002", "Running");
  health_.Get("team-a/resnet-00002")->ready = true;
  Run();
  jobs = Replicas();
  EXPECT_TRUE(jobs["resnet-00001"]["status"].value("deleteRequested", false))
      << "the old replica goes once the new one is ready";
  ASSERT_TRUE(
      store_->Txn({{.kind = store::Op::Kind::kDelete, .key = "/inferenceservices/team-a/resnet"}})
          .ok());
  Run();
  for (const auto& [name, j] : Replicas()) {
    EXPECT_TRUE(j["status"].value("deleteRequested", false)) << name;
  }
}

TEST_F(ServiceControllerTest, ScaleFromZeroOnAWaitingRequest) {
  std::string zero = kService;
  zero.replace(zero.find("min: 1"), 6, "min: 0");
  Apply(zero);
  Run();
  EXPECT_TRUE(Replicas().empty());
  load_.Arrived("team-a/resnet");
  load_.Queued("team-a/resnet", 1);
  Run(10);
  EXPECT_EQ(Replicas().size(), 1u);
  EXPECT_EQ(Service()["status"]["history"].back()["reason"], "a request arrived");
  ServiceMetrics m = ctl_->Metrics();
  EXPECT_EQ(m.services["team-a/resnet"].desired, 1);
  EXPECT_NE(RenderServiceMetrics(m).find(
                "gpucloud_service_replicas_desired{namespace=\"team-a\",service=\"resnet\"} 1"),
            std::string::npos);
}

TEST_F(ServiceControllerTest, OtherServersGatewaysLoadCounts) {
  // This server's gateway saw nothing; another server's published 45 requests in flight (its
  // reports lag a second: the panic window sees five of its six seconds).
  ctl_ = std::make_unique<ServiceController>(
      *store_, clock_, load_, health_,
      ServiceControllerOptions{.merge_remote = true, .local_gateway = "mine"});
  Apply(kService);
  Run();
  ASSERT_EQ(Replicas().size(), 1u);
  for (int i = 0; i < 8; ++i) {
    gateway::LoadReport r{.updated_ms = clock_.NowMillis(), .in_flight = 45};
    for (int k = 1; k <= 3; ++k) {
      const int64_t start = clock_.NowMillis() - clock_.NowMillis() % 1000 - k * 1000;
      r.samples.push_back({start, 45, 5});
    }
    ASSERT_TRUE(store_
                    ->Txn({{.key = "/serviceload/other/team-a/resnet",
                            .value = gateway::LoadReportToJson(r)}})
                    .ok());
    Run(1000);
  }
  EXPECT_EQ(Service()["status"]["desiredReplicas"], 4);
  // Its own reports are not read back (they are in its meter already), and a report a minute
  // old is deleted.
  gateway::LoadReport own{.updated_ms = clock_.NowMillis(), .samples = {{0, 1000, 1}}};
  ASSERT_TRUE(store_
                  ->Txn({{.key = "/serviceload/mine/team-a/resnet",
                          .value = gateway::LoadReportToJson(own)}})
                  .ok());
  clock_.Advance(61'000);
  Run();
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/serviceload/other/team-a/resnet").status()));
}

}  // namespace
}  // namespace gpucloud::server
