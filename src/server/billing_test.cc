// Billing: hand-computed prices of allocations (whole GPUs, a share, a MIG slice, spot) and idle
// cost; and a job's bill through the controller, kept in its status.
#include "server/billing.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/usage.h"
#include "server/controller_fixture.h"
#include "server/job_status.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

Node MakeNode(std::string name, std::string pool, std::string type, int gpus, bool mig = false) {
  Node n;
  n.name = std::move(name);
  n.pool = std::move(pool);
  n.cpu = Cores(64);
  n.memory = GiB(512);
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back(Gpu{.uuid = Cat(n.name, "-", i),
                         .index = i,
                         .type = type,
                         .memory = GpuCatalog::Default().Find(type)->memory,
                         .mig_enabled = mig});
  }
  return n;
}

NodePool Pool(std::string name, BillingClass billing, int64_t cents) {
  NodePool p;
  p.metadata.name = std::move(name);
  p.spec.gpu_type = "H100-80GB";
  p.spec.billing = billing;
  p.spec.price_per_gpu_hour = Cents(cents);
  return p;
}

TEST(Billing, AllocationsArePricedByTheirShareAtTheirNodesPools) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  PriceBook prices({{"od", Pool("od", BillingClass::kOnDemand, 400)},
                    {"spot", Pool("spot", BillingClass::kSpot, 100)}},
                   catalog);
  sched::ClusterState state(
      {MakeNode("a", "od", "H100-80GB", 4), MakeNode("b", "spot", "H100-80GB", 4),
       MakeNode("c", "", "H100-80GB", 4),  // in no pool: catalog price
       MakeNode("m", "", "A100-80GB", 1, /*mig=*/true)},
      catalog);
  sched::Allocation whole{.job = "ns/whole",
                          .replicas = {{.task = "w", .node = 0, .gpus = {{.gpu = 0}, {.gpu = 1}}},
                                       {.task = "w", .node = 2, .gpus = {{.gpu = 0}}}}};
  std::map<std::string, double> rate = UsdPerHour(state, whole, prices);
  // 2 GPUs at $4 + 1 at the H100's catalog price ($6.98), all on demand.
  EXPECT_NEAR(rate.at("on-demand"), 2 * 4.0 + 6.98, 1e-9);
  EXPECT_EQ(rate.size(), 1u);

  sched::Allocation share{.job = "ns/share",
                          .replicas = {{.task = "w",
                                        .node = 1,
                                        .gpus = {{.gpu = 0,
                                                  .mode = GpuMode::kShared,
                                                  .fraction = MilliGpu(250),
                                                  .memory = GiB(20)}}}}};
  rate = UsdPerHour(state, share, prices);
  EXPECT_NEAR(rate.at("spot"), 0.25 * 1.0, 1e-9);  // a quarter of a $1 spot GPU

  sched::Allocation mig{
      .job = "ns/mig",
      .replicas = {{.task = "w",
                    .node = 3,
                    .gpus = {{.gpu = 0, .mode = GpuMode::kMig, .mig = {"3g.40gb", 0}}}}}};
  rate = UsdPerHour(state, mig, prices);
  // 3 of the A100's 7 compute slices (0.429 GPU, rounded up to a milli-GPU) at $4.10.
  EXPECT_NEAR(rate.at("on-demand"), 0.429 * 4.10, 1e-9);

  // Idle: what no job holds, by pool.
  ASSERT_TRUE(state.Commit(whole).ok());
  ASSERT_TRUE(state.Commit(share).ok());
  std::map<std::string, double> idle = IdleUsdPerHourByPool(state, prices);
  EXPECT_NEAR(idle.at("od"), 2 * 4.0, 1e-9);
  EXPECT_NEAR(idle.at("spot"), 3.75 * 1.0, 1e-9);
  EXPECT_NEAR(idle.at(""), 3 * 6.98 + 1 * 4.10, 1e-9);  // node c's 3 free, the MIG GPU's
}

// A reserved pool commits to its minNodes machines: those not up are paid for as idle.
TEST(Billing, AReservedPoolsCommitmentIsPaidWhetherItsMachinesAreUpOrNot) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  NodePool res = Pool("res", BillingClass::kReserved, 150);
  res.spec.min_nodes = 3;
  res.spec.gpus_per_node = 4;
  NodePool od = Pool("od", BillingClass::kOnDemand, 400);
  od.spec.min_nodes = 3;  // on demand: only what is up is paid for
  PriceBook prices({{"res", res}, {"od", od}}, catalog);
  sched::ClusterState state({MakeNode("r1", "res", "H100-80GB", 4)}, catalog);
  sched::Allocation job{.job = "ns/j",
                        .replicas = {{.task = "w", .node = 0, .gpus = {{.gpu = 0}}}}};
  ASSERT_TRUE(state.Commit(job).ok());
  std::map<std::string, double> idle = IdleUsdPerHourByPool(state, prices);
  // r1's 3 free GPUs and the 2 machines of 4 that are not up, at $1.50.
  EXPECT_NEAR(idle.at("res"), (3 + 2 * 4) * 1.5, 1e-9);
  EXPECT_FALSE(idle.contains("od"));
}

TEST(Billing, AnAttemptIsBilledFromItsBindingToItsEnd) {
  JobStatus s;
  s.phase = api::JobPhase::kRunning;
  s.scheduled_ms = 1000;
  s.usd_per_hour = {{"on-demand", 8.0}, {"spot", 1.0}};
  {  // what users see of it (gpuctl reads the stored status through the API's type)
    Json doc;
    JobStatusToJson(s, doc);
    absl::StatusOr<api::JobStatus> seen = api::JobStatusOf(doc);
    ASSERT_TRUE(seen.ok()) << seen.status();
    EXPECT_NEAR(api::CostSoFar(*seen, 1000 + 1'800'000).at("on-demand"), 4.0, 1e-9);  // 30 min
  }
  SettleAttempt(s, 1000 + 5'400'000, /*completed=*/true, 0);  // 1.5 hours
  EXPECT_NEAR(s.cost_usd.at("on-demand"), 12.0, 1e-9);
  EXPECT_NEAR(s.cost_usd.at("spot"), 1.5, 1e-9);
  EXPECT_TRUE(s.usd_per_hour.empty());
  SettleAttempt(s, 1000 + 9'000'000, true, 0);  // settling again adds nothing
  EXPECT_NEAR(s.cost_usd.at("on-demand"), 12.0, 1e-9);
  // Kept in the stored status.
  Json doc;
  JobStatusToJson(s, doc);
  absl::StatusOr<JobStatus> back = JobStatusFromJson(doc);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cost_usd, s.cost_usd);
}

// Through the controller: a NodePool's price reaches the job's status when it is bound, the
// ended attempt's cost is in the status the job ends with (the same write), and in /metrics.
TEST_F(ControllerTest, AJobIsBilledAtItsNodesPoolsPrice) {
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodepools",
                 "apiVersion: gpucloud/v1\nkind: NodePool\nmetadata: {name: h100-spot}\n"
                 "spec: {gpuType: H100-80GB, gpusPerNode: 4, billing: spot, "
                 "pricePerGpuHour: \"2.00\"}\n")
                .status,
            201);
  Register("node-a", 4, "h100-spot");
  Submit(GangJob("train", 1, 2));
  Pass();
  JobStatus s = Status("train");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_NEAR(s.usd_per_hour.at("spot"), 2 * 2.0, 1e-9);
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kRunning)});
  Pass();
  clock_.Advance(30 * 60'000);  // ms
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  s = Status("train");
  ASSERT_EQ(s.phase, api::JobPhase::kSucceeded) << s.message;
  EXPECT_NEAR(s.cost_usd.at("spot"), 4.0 * 0.5, 1e-6);  // $4/hour for half an hour
  std::string metrics = RenderClusterMetrics(controller_->Metrics());
  EXPECT_NE(metrics.find("gpucloud_cost_usd_total{namespace=\"default\",queue=\"default\","
                         "class=\"spot\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpucloud_idle_cost_usd_total{pool=\"h100-spot\"}"), std::string::npos);
}

// The books balance: what the jobs cost plus what was idle is what the machines cost, pass by
// pass (one 4-GPU node at $2/GPU-hour for an hour; a 2-GPU job on it for the first half).
TEST_F(ControllerTest, JobsCostPlusIdleCostIsWhatTheMachinesCost) {
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodepools",
                 "apiVersion: gpucloud/v1\nkind: NodePool\nmetadata: {name: p}\n"
                 "spec: {gpuType: H100-80GB, gpusPerNode: 4, pricePerGpuHour: \"2.00\"}\n")
                .status,
            201);
  Register("node-a", 4, "p");
  Heartbeat("node-a");
  Pass();  // the books open here
  Submit(GangJob("train", 1, 2));
  Pass();
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kRunning)});
  Pass();
  for (int minute = 0; minute < 30; minute += 5) {  // passes every 5 minutes, as ticks would
    clock_.Advance(5 * 60'000);
    Heartbeat("node-a", {Report("train", 0, api::TaskState::kRunning)});
    Pass();
  }
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  ASSERT_EQ(Status("train").phase, api::JobPhase::kSucceeded);
  for (int minute = 0; minute < 30; minute += 5) {
    clock_.Advance(5 * 60'000);
    Heartbeat("node-a");
    Pass();
  }
  ClusterMetrics m = controller_->Metrics();
  double jobs = 0, idle = 0;
  for (const auto& [k, usd] : m.cost_usd) jobs += usd;
  for (const auto& [pool, usd] : m.idle_cost_usd) idle += usd;
  EXPECT_NEAR(jobs, 2 * 0.5 * 2.0, 1e-6);                  // 2 GPUs for half an hour
  EXPECT_NEAR(idle, 2 * 0.5 * 2.0 + 4 * 0.5 * 2.0, 1e-6);  // 2 idle, then 4
  EXPECT_NEAR(jobs + idle, 4 * 1.0 * 2.0, 1e-6);           // the machine, for the hour
  EXPECT_NEAR(m.idle_cost_usd.at("p"), idle, 1e-9);
}

// Metering: the ended attempt's usage record is written with the status that settles it, carries
// its tasks' energy and carbon (pool intensity x PUE), is served by the API for a window, and
// outlives the job and the server.
TEST_F(ControllerTest, AnEndedAttemptLeavesAUsageRecordThatOutlivesItsJob) {
  ControllerOptions o;
  o.checkpoint_root = "/ckpt";
  o.carbon = {.pue = 1.5, .default_intensity = 100};
  controller_ = std::make_unique<Controller>(*store_, nodes_, clock_, GpuCatalog::Default(), o);
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodepools",
                 "apiVersion: gpucloud/v1\nkind: NodePool\nmetadata: {name: green}\n"
                 "spec: {gpuType: H100-80GB, gpusPerNode: 4, pricePerGpuHour: \"2.00\", "
                 "carbonIntensity: 400}\n")
                .status,
            201);
  Register("node-a", 4, "green");
  Submit(GangJob("train", 1, 2));
  Pass();
  const int64_t bound = clock_.NowMillis();
  JobStatus s = Status("train");
  ASSERT_EQ(s.phase, api::JobPhase::kScheduled);
  EXPECT_NEAR(s.co2e_g_per_kwh, 400 * 1.5, 1e-9);
  EXPECT_NEAR(s.usd_per_hour_by_pool.at("green"), 4.0, 1e-9);
  api::TaskReport running = Report("train", 0, api::TaskState::kRunning);
  running.energy_j = 1e6;
  Heartbeat("node-a", {running});
  Pass();
  EXPECT_NEAR(Status("train").attempt_energy_j, 1e6, 1e-9);  // kept with the Running write
  clock_.Advance(30 * 60'000);
  api::TaskReport done = Report("train", 0, api::TaskState::kSucceeded, 0);
  done.energy_j = 7.2e6;  // 2 kWh
  Heartbeat("node-a", {done});
  Pass();
  s = Status("train");
  ASSERT_EQ(s.phase, api::JobPhase::kSucceeded) << s.message;
  EXPECT_NEAR(s.energy_j, 7.2e6, 1e-6);
  EXPECT_NEAR(s.co2e_g, 2 * 600.0, 1e-6);

  Response r = Call("GET", "/apis/gpucloud/v1/namespaces/default/usage");
  ASSERT_EQ(r.status, 200) << r.body;
  nlohmann::json items = nlohmann::json::parse(r.body)["items"];
  ASSERT_EQ(items.size(), 1u) << r.body;
  absl::StatusOr<api::AttemptUsage> u = api::UsageFromJson(items[0]);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->job, "train");
  EXPECT_EQ(u->attempt, 1);
  EXPECT_EQ(u->start_ms, bound);
  EXPECT_EQ(u->end_ms, bound + 30 * 60'000);
  EXPECT_NEAR(u->usd_per_hour.at("on-demand"), 4.0, 1e-9);
  EXPECT_NEAR(u->gpus, 2.0, 1e-9);
  EXPECT_NEAR(u->energy_j, 7.2e6, 1e-6);
  EXPECT_NEAR(u->co2e_g(), 1200, 1e-6);
  // A window after it ended holds nothing; a bad bound is refused, naming it.
  auto get = [&](const std::string& target) {
    Request q{"GET", "", {}, "", {"root", "", true}};
    ParseTarget(target, &q);
    return api_->Handle(q);
  };
  r = get(Cat("/apis/gpucloud/v1/usage?since=", bound + 29 * 60'000));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["items"].size(), 1u) << r.body;
  r = get(Cat("/apis/gpucloud/v1/usage?since=", bound + 31 * 60'000));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["items"].size(), 0u) << r.body;
  r = get("/apis/gpucloud/v1/usage?since=yesterday");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("since: \\\"yesterday\\\" is not a time"), std::string::npos) << r.body;

  // The job goes; its record stays, and is still there after the server is killed.
  ASSERT_EQ(Call("DELETE", "/apis/gpucloud/v1/namespaces/default/jobs/train").status, 200);
  Pass();
  ASSERT_TRUE(absl::IsNotFound(store_->Get("/jobs/default/train").status()));
  const std::string key = api::UsageKey(*u);
  controller_.reset();
  api_.reset();
  store_.reset();
  store_ = std::move(*store::OpenSqliteStore((dir_.path() / "s.db").string()));
  absl::StatusOr<store::KeyValue> kept = store_->Get(key);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*api::UsageFromJson(nlohmann::json::parse(kept->value)), *u);
}

// A spot price that changes over time (priceSchedule): a running attempt is re-rated when the
// period changes, the part at the old price kept as its own usage record.
TEST_F(ControllerTest, ARunningAttemptIsReratedWhenItsPoolsPriceChanges) {
  ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodepools",
                 "apiVersion: gpucloud/v1\nkind: NodePool\nmetadata: {name: sp}\n"
                 "spec:\n  gpuType: H100-80GB\n  gpusPerNode: 4\n  billing: spot\n"
                 "  priceSchedule:\n"
                 "  - {from: \"1970-01-01T00:00:00Z\", until: \"1970-01-01T01:00:00Z\", "
                 "pricePerGpuHour: \"1.00\"}\n"
                 "  - {from: \"1970-01-01T01:00:00Z\", pricePerGpuHour: \"3.00\"}\n")
                .status,
            201);
  Register("node-a", 4, "sp");
  Submit(GangJob("train", 1, 2));
  Pass();
  const int64_t bound = clock_.NowMillis();  // 00:16:40
  ASSERT_EQ(Status("train").phase, api::JobPhase::kScheduled);
  EXPECT_NEAR(Status("train").usd_per_hour.at("spot"), 2.0, 1e-9);
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kRunning)});
  Pass();
  clock_.Advance(3'600'000 - bound);  // 01:00:00: the price is $3
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kRunning)});
  Pass();
  JobStatus s = Status("train");
  EXPECT_NEAR(s.usd_per_hour.at("spot"), 6.0, 1e-9);
  EXPECT_EQ(s.billed_from_ms, 3'600'000);
  const double first = 2.0 * (3'600'000 - bound) / 3.6e6;
  EXPECT_NEAR(s.cost_usd.at("spot"), first, 1e-9);
  clock_.Advance(30 * 60'000);
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kSucceeded, 0)});
  Pass();
  s = Status("train");
  ASSERT_EQ(s.phase, api::JobPhase::kSucceeded);
  EXPECT_NEAR(s.cost_usd.at("spot"), first + 6.0 * 0.5, 1e-9);
  // Two records, one per price; together they are the job's cost.
  Response r = Call("GET", "/apis/gpucloud/v1/namespaces/default/usage");
  const nlohmann::json items = nlohmann::json::parse(r.body)["items"];
  ASSERT_EQ(items.size(), 2u) << r.body;
  double sum = 0;
  for (const nlohmann::json& j : items) {
    api::AttemptUsage u = *api::UsageFromJson(j);
    EXPECT_EQ(u.attempt, 1);
    sum += u.usd_per_hour.at("spot") * u.hours();
  }
  EXPECT_NEAR(sum, s.cost_usd.at("spot"), 1e-9);
  EXPECT_EQ(api::UsageFromJson(items[0])->end_ms, 3'600'000);
}

}  // namespace
}  // namespace gpucloud::server
