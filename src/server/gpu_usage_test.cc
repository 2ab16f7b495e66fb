// GPU usage from heartbeats to the API: a node's GPUs' latest readings in GET nodes while they
// are fresh, unknown once stale; a job's from the GPUs its placement holds.
#include "server/gpu_usage.h"

#include <gtest/gtest.h>

#include "api/wire.h"
#include "core/text.h"
#include "server/rest_fixture.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // as the server's documents are

api::GpuHealth Busy(int index, int util, int64_t used, int64_t total) {
  api::GpuHealth g{.index = index};
  g.utilization_percent = util;
  g.memory_used_mib = used;
  g.memory_total_mib = total;
  return g;
}

TEST(NodeTableUsage, IsKeptApartFromHealthAndGoesStale) {
  NodeTable t;
  api::Heartbeat h;
  h.gpus = {Busy(0, 90, 1000, 80'000), {.index = 1}};
  EXPECT_TRUE(t.Record("n1", h, 1'000));
  // The same health with new readings is nothing new for the controller.
  h.gpus[0] = Busy(0, 40, 2000, 80'000);
  EXPECT_FALSE(t.Record("n1", h, 2'000));
  EXPECT_FALSE(t.Get("n1")->heartbeat->gpus[0].utilization_percent.has_value());
  std::vector<GpuUsage> u = t.Usage("n1", 2'000);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0], (GpuUsage{0, 40, 2000, 80'000, 2'000}));
  EXPECT_EQ(u[1], (GpuUsage{1, std::nullopt, std::nullopt, std::nullopt, 2'000}));
  EXPECT_EQ(t.Usage("n1", 2'000 + kGpuUsageFreshMs).size(), 2u);
  EXPECT_TRUE(t.Usage("n1", 2'001 + kGpuUsageFreshMs).empty());
  EXPECT_TRUE(t.Usage("other", 2'000).empty());
  t.Forget("n1");
  EXPECT_TRUE(t.Usage("n1", 2'000).empty());
}

TEST(Summarize, AveragesUtilizationAndAddsUpMemoryOverWhatWasMeasured) {
  EXPECT_EQ(Summarize(4, {}), (UsageSummary{.gpus = 4}));
  UsageSummary s = Summarize(
      3,
      {{0, 90, 1000, 80'000, 7}, {1, 45, 500, 80'000, 5}, {2, std::nullopt, 100, std::nullopt, 3}});
  EXPECT_EQ(s.gpus, 3);
  EXPECT_EQ(s.measured_gpus, 2);
  EXPECT_EQ(s.utilization_percent, 68);  // 67.5, rounded
  EXPECT_EQ(s.memory_used_mib, 1500);    // GPU 2 lacks its total: left out
  EXPECT_EQ(s.memory_total_mib, 160'000);
  EXPECT_EQ(s.sampled_ms, 5);
}

class GpuUsageApiTest : public RestFixture {
 protected:
  GpuUsageApiTest() : RestFixture(/*with_cluster=*/true) {}
  void SetUp() override {
    RestFixture::SetUp();
    api::NodeInfo n;
    n.name = "n1";
    n.cpu_milli = 64'000;
    n.memory_mib = 512 << 10;
    for (int i = 0; i < 2; ++i) {
      Gpu g;
      g.index = i;
      g.uuid = Cat("GPU-n1-", i);
      g.type = "H100-80GB";
      g.memory = MiB(80 << 10);
      n.gpus.push_back(g);
    }
    ASSERT_EQ(Call("PUT", api::NodePath("n1"), api::NodeToJson(n, false)).status, 201);
  }
  void Beat(const std::vector<api::GpuHealth>& gpus) {
    api::Heartbeat hb;
    hb.gpus = gpus;
    ASSERT_EQ(Call("POST", api::NodePath("n1") + "/heartbeat", api::HeartbeatToJson(hb), {}, Node())
                  .status,
              200);
  }
};

TEST_F(GpuUsageApiTest, AHeartbeatsUsageIsInGetNodesUntilItIsStale) {
  Json before = Body(Call("GET", api::NodePath("n1")));
  EXPECT_FALSE(before["status"]["gpus"][0].contains("utilization")) << before.dump();
  EXPECT_FALSE(before["status"].contains("gpuUsage"));
  Beat({Busy(0, 87, 40'960, 81'559), Busy(1, 13, 1'024, 81'559)});
  const int64_t beat_ms = clock_.NowMillis();
  Json got = Body(Call("GET", api::NodePath("n1"), "", {}, Tenant()));
  const Json& g0 = got["status"]["gpus"][0];
  EXPECT_EQ(g0["utilization"], 87);
  EXPECT_EQ(g0["memoryUsedMiB"], 40'960);
  EXPECT_EQ(g0["memoryTotalMiB"], 81'559);
  EXPECT_EQ(g0["sampledAtMs"], beat_ms);
  EXPECT_TRUE(g0["healthy"]);
  EXPECT_EQ(got["status"]["gpuUsage"],
            Json::parse(R"({"gpus": 2, "measuredGpus": 2, "utilization": 50,
                            "memoryUsedMiB": 41984, "memoryTotalMiB": 163118, "sampledAtMs": )" +
                        std::to_string(beat_ms) + "}"));
  Json listed = Body(Call("GET", "/apis/gpucloud/v1/nodes"));
  EXPECT_EQ(listed["items"][0]["status"]["gpus"][1]["utilization"], 13);
  // Five heartbeat periods without one: stale, so unknown (absent), not the last value.
  clock_.Advance(kGpuUsageFreshMs);
  EXPECT_EQ(Body(Call("GET", api::NodePath("n1")))["status"]["gpus"][0]["utilization"], 87);
  clock_.Advance(1);
  Json stale = Body(Call("GET", api::NodePath("n1")));
  EXPECT_FALSE(stale["status"]["gpus"][0].contains("utilization")) << stale.dump();
  EXPECT_FALSE(stale["status"]["gpus"][0].contains("sampledAtMs"));
  EXPECT_FALSE(stale["status"].contains("gpuUsage"));
  // An older agent's heartbeat (health only) says nothing of usage.
  Beat({{.index = 0}, {.index = 1}});
  Json old = Body(Call("GET", api::NodePath("n1")));
  EXPECT_FALSE(old["status"]["gpus"][0].contains("utilization"));
  EXPECT_EQ(old["status"]["gpuUsage"]["measuredGpus"], 0);
  EXPECT_FALSE(old["status"]["gpuUsage"].contains("utilization"));
}

TEST_F(GpuUsageApiTest, AJobsUsageIsThatOfTheWholeGpusItHolds) {
  Beat({Busy(0, 80, 30'000, 81'559), Busy(1, 20, 10'000, 81'559)});
  const std::string job = R"({"metadata": {"name": "train", "namespace": "team-a"},
    "status": {"phase": "Running", "placement": [
      {"node": "n1", "gpus": [{"index": 0, "mode": "whole"}]},
      {"node": "n1", "gpus": [{"index": 1, "mode": "shared", "fractionMilli": 500}]},
      {"node": "gone", "gpus": [{"index": 0, "mode": "whole"}]}]}})";
  OrderedJson with = OrderedJson::parse(job);
  ApplyLiveJobUsage(nodes_, clock_.NowMillis(), with);
  EXPECT_EQ(Json::parse(with["status"]["gpuUsage"].dump()),
            Json::parse(Cat(R"({"gpus": 3, "measuredGpus": 1, "utilization": 80,
                            "memoryUsedMiB": 30000, "memoryTotalMiB": 81559, "sampledAtMs": )",
                            clock_.NowMillis(), "}")));
  // Through the API: GET jobs/NAME computes it when read.
  ASSERT_EQ(Call("POST", kJobs, kRestTestJob).status, 201);
  const std::string key = "/jobs/team-a/train";
  Json stored = Json::parse(store_->Get(key)->value);
  stored["status"] = Json::parse(job)["status"];
  ASSERT_TRUE(store_->Txn({{store::Op::Kind::kPut, key, stored.dump(), std::nullopt}}).ok());
  Json got = Body(Call("GET", std::string(kJobs) + "/train", "", {}, Tenant()));
  EXPECT_EQ(got["status"]["gpuUsage"]["utilization"], 80) << got.dump();
  // Stale: the job's GPUs are counted, their usage unknown. Ended: no usage at all.
  clock_.Advance(kGpuUsageFreshMs + 1);
  got = Body(Call("GET", std::string(kJobs) + "/train"));
  EXPECT_EQ(got["status"]["gpuUsage"], Json::parse(R"({"gpus": 3, "measuredGpus": 0})"));
  OrderedJson ended = OrderedJson::parse(job);
  ended["status"]["phase"] = "Succeeded";
  ApplyLiveJobUsage(nodes_, clock_.NowMillis(), ended);
  EXPECT_FALSE(ended["status"].contains("gpuUsage"));
}

}  // namespace
}  // namespace gpucloud::server
