// gpuctl top nodes|jobs against a real in-process server whose node table holds a heartbeat:
// utilization and memory from the agent's sample, `<unknown>` once the sample is stale.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/wire.h"
#include "cli/gpuctl_fixture.h"
#include "core/text.h"
#include "server/node_table.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

class GpuctlTopTest : public GpuctlServerFixture {
 protected:
  GpuctlTopTest() : GpuctlServerFixture("gpuctl-top", 1'700'000'000'000) {}
  void Attach(server::RestApi& api) override { api.AttachCluster(&nodes_, nullptr, nullptr); }

  server::Response Call(const std::string& method, const std::string& path, const std::string& body,
                        server::Identity who) {
    return api_->Handle({method, path, {}, body, std::move(who)});
  }
  static server::Identity Admin() { return {"root", "", true}; }
  static server::Identity Agent(const std::string& node) {
    server::Identity n;
    n.user = "node:" + node;
    n.node = true;
    n.node_name = node;
    return n;
  }
  void Register(const std::string& node, int gpus) {
    api::NodeInfo n;
    n.name = node;
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
    ASSERT_EQ(Call("PUT", api::NodePath(node), api::NodeToJson(n, false), Admin()).status, 201);
  }
  void Beat(const std::string& node, const std::vector<api::GpuHealth>& gpus) {
    api::Heartbeat hb;
    hb.gpus = gpus;
    ASSERT_EQ(
        Call("POST", api::NodePath(node) + "/heartbeat", api::HeartbeatToJson(hb), Agent(node))
            .status,
        200);
  }
  static api::GpuHealth Reading(int index, int util, int64_t used) {
    api::GpuHealth g{.index = index};
    g.utilization_percent = util;
    g.memory_used_mib = used;
    g.memory_total_mib = 81'559;
    return g;
  }
  // A job of the default namespace, Running on `placement` (as the controller writes it).
  void RunningJob(const std::string& name, const std::string& placement) {
    std::string manifest = Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: ", name,
                               "}\nspec:\n  tasks: [{name: main, command: [x]}]\n");
    ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs", manifest, Admin()).status,
              201);
    const std::string key = "/jobs/default/" + name;
    Json stored = Json::parse(store_->Get(key)->value);
    stored["status"]["phase"] = "Running";
    stored["status"]["placement"] = Json::parse(placement);
    ASSERT_TRUE(store_->Txn({{store::Op::Kind::kPut, key, stored.dump(), std::nullopt}}).ok());
  }

  server::NodeTable nodes_;
};

TEST_F(GpuctlTopTest, TopShowsEachNodesAndJobsUtilizationUntilItIsStale) {
  Register("gpu-a", 2);
  Register("gpu-b", 1);
  RunningJob("train", R"([{"node": "gpu-a", "gpus": [{"index": 0, "mode": "whole"}]}])");
  Beat("gpu-a", {Reading(0, 90, 40'960), Reading(1, 0, 0)});
  Beat("gpu-b", {{.index = 0, .healthy = false, .reason = "Xid 79"}});  // an older agent's
  Ran top = Gpuctl({"top"});
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_EQ(top.out, Gpuctl({"top", "nodes"}).out);
  EXPECT_NE(top.out.find("gpu-a                Ready                            2     1     0     "
                         "1  45%        40Gi/159.3Gi       default/train\n"),
            std::string::npos)
      << top.out;
  // gpu-b's only GPU is unhealthy: out, not free; its usage unknown.
  EXPECT_NE(top.out.find("gpu-b                Ready                            1     0     1     "
                         "0  <unknown>  <unknown>          -\n"),
            std::string::npos)
      << top.out;
  Ran jobs = Gpuctl({"top", "jobs"});
  ASSERT_EQ(jobs.code, 0) << jobs.err;
  EXPECT_EQ(
      jobs.out,
      "JOB                                       GPUS  UTIL       MEMORY             NODES\n"
      "default/train                                1  90%        40Gi/79.6Gi        gpu-a\n");
  EXPECT_EQ(Gpuctl({"top", "jobs", "-n", "default"}).out, jobs.out);
  // No heartbeat for longer than five heartbeat periods: unknown, not the last reading.
  clock_.Advance(server::kGpuUsageFreshMs + 1);
  top = Gpuctl({"top"});
  EXPECT_NE(top.out.find("gpu-a                Ready                            2     1     0     "
                         "1  <unknown>  <unknown>          default/train\n"),
            std::string::npos)
      << top.out;
  EXPECT_NE(Gpuctl({"top", "jobs"})
                .out.find("default/train                                1  "
                          "<unknown>  <unknown>          gpu-a\n"),
            std::string::npos);
}

}  // namespace
}  // namespace gpucloud::cli
