// `gpucloud sim --autoscale`: the production autoscaler on the simulator's virtual clock.
#include "sim/elastic.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpucloud::sim {
namespace {

NodePool Pool(std::string name, int max_nodes, BillingClass billing = BillingClass::kOnDemand,
              std::string provider = "sim") {
  NodePool p;
  p.metadata.name = std::move(name);
  p.spec.gpu_type = "V100-16GB";
  p.spec.gpus_per_node = 8;
  p.spec.max_nodes = max_nodes;
  p.spec.billing = billing;
  p.spec.price_per_gpu_hour = billing == BillingClass::kSpot ? Cents(100) : Cents(300);
  p.spec.provider = std::move(provider);
  return p;
}

Trace Csv(const std::string& text) {
  absl::StatusOr<Trace> t = ReadTrace(text, "csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

SimOptions Elastic(int64_t boot_s = 100) {
  SimOptions o;
  o.elastic.enabled = true;
  o.elastic.boot_s = boot_s;
  o.placement = {1.0, 1.0, 1.0};  // no slowdown: times stay hand-computable
  return o;
}

SimResult Simulated(const Trace& t, const SimCluster& c, const SimOptions& o) {
  absl::StatusOr<SimResult> r = Simulate(t, c, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

// A 16-GPU gang on an empty pool of 8-GPU machines: one request for two machines; the gang
// starts only when both are up (boots take 50-150 s); after it ends the machines idle for
// scaleDownAfter and are removed, and a later 1-GPU job gets one machine of its own.
TEST(ElasticSim, AGangGetsTwoMachinesAtOnceWhichGoAwayWhenIdle) {
  SimCluster c = ClusterFromPools("t", {Pool("v100", 4)});
  SimResult r =
      Simulated(Csv("id,submit,duration,gpus\ngang,0,1000,16\nlate,5000,100,1\n"), c, Elastic());
  ASSERT_EQ(r.jobs.size(), 2u);
  const JobOutcome& gang = r.jobs[0];
  ASSERT_EQ(gang.state, JobState::kFinished);
  ASSERT_TRUE(gang.first_start_s);
  EXPECT_GE(*gang.first_start_s, 50);
  EXPECT_LE(*gang.first_start_s, 150);
  EXPECT_EQ(*gang.end_s, *gang.first_start_s + 1000);
  EXPECT_TRUE(r.autoscaled);
  EXPECT_EQ(r.capacity.requests, 2);     // the gang's, then the late job's
  EXPECT_EQ(r.capacity.nodes_added, 3);  // two for the gang, one for the late job
  EXPECT_EQ(r.capacity.nodes_removed, 2);
  EXPECT_EQ(r.capacity.peak_nodes, 2);
  EXPECT_EQ(r.capacity.cancelled, 0);
  const JobOutcome& late = r.jobs[1];
  ASSERT_EQ(late.state, JobState::kFinished);
  EXPECT_GE(*late.first_start_s, 5050);  // the gang's machines were gone: it waited for a boot
  // Paid: each machine from its request to its removal (or the end); the gang's two were
  // removed 10 minutes after it ended.
  const double gang_machine_hours = 2.0 * (*gang.end_s + 600) / 3600.0;
  const double late_machine_hours = (r.end_s - 5000) / 3600.0;
  EXPECT_NEAR(r.capacity.gpu_hours_provisioned, 8 * (gang_machine_hours + late_machine_hours),
              1e-6);
  EXPECT_NEAR(r.capacity.capacity_cost_usd.at("on-demand"), 3.0 * r.capacity.gpu_hours_provisioned,
              1e-6);
}

// Machines that never come up: the request is cancelled at the boot timeout, the pool backs
// off, and the next pool that fits gets the job; nothing ran on the first pool.
TEST(ElasticSim, AStockOutMovesTheGangToTheNextPool) {
  SimCluster c = ClusterFromPools(
      "t", {Pool("cheap", 4, BillingClass::kOnDemand), Pool("dear", 4, BillingClass::kOnDemand)});
  c.price_of_pool[1] = Cents(500);  // "dear" costs more: "cheap" is asked first
  c.pools[1].spec.price_per_gpu_hour = Cents(500);
  SimOptions o = Elastic();
  o.elastic.boot_failure_by_pool["cheap"] = 0.999;  // a stock-out: its machines never come up
  SimResult r = Simulated(Csv("id,submit,duration,gpus\ngang,0,1000,16\n"), c, o);
  ASSERT_EQ(r.jobs.size(), 1u);
  ASSERT_EQ(r.jobs[0].state, JobState::kFinished);
  EXPECT_EQ(r.capacity.cancelled, 1);
  EXPECT_EQ(r.capacity.requests, 2);
  // It ran on "dear": 16 GPUs for 1000 s at $5.
  EXPECT_NEAR(r.cost_usd.at("on-demand"), 16 * 1000 / 3600.0 * 5, 1e-6);
  // It cannot start before the first request timed out (10 minutes).
  EXPECT_GE(*r.jobs[0].first_start_s, 600);
}

TEST(ElasticSim, SpotCapacityOnlyForJobsThatAcceptIt) {
  NodePool spot = Pool("spot", 4, BillingClass::kSpot);
  spot.spec.taints.push_back({std::string(kSpotTaintKey), "true", "NoSchedule"});
  SimCluster c = ClusterFromPools("t", {Pool("od", 4, BillingClass::kOnDemand), spot});
  Trace t = Csv("id,submit,duration,gpus\na,0,3600,8\nb,0,3600,8\n");
  SimOptions o = Elastic();
  SimResult none = Simulated(t, c, o);
  EXPECT_TRUE(none.capacity.capacity_cost_usd.contains("on-demand"));
  EXPECT_FALSE(none.capacity.capacity_cost_usd.contains("spot"));
  o.elastic.spot_share = 1;
  SimResult all = Simulated(t, c, o);
  EXPECT_TRUE(all.capacity.capacity_cost_usd.contains("spot"));
  EXPECT_FALSE(all.capacity.capacity_cost_usd.contains("on-demand"));
  EXPECT_LT(all.capacity.capacity_cost_usd.at("spot"),
            none.capacity.capacity_cost_usd.at("on-demand"));
}

// Spot machines taken back with a two-minute notice: the job on them checkpoints and stops
// within it (its work kept), waits for a new machine and finishes; every notice is counted.
TEST(ElasticSim, ReclaimedSpotMachinesMoveTheirJobsWithTheirWorkKept) {
  NodePool spot = Pool("spot", 8, BillingClass::kSpot);
  spot.spec.taints.push_back({std::string(kSpotTaintKey), "true", "NoSchedule"});
  SimCluster c = ClusterFromPools("t", {spot});
  SimOptions o = Elastic();
  o.elastic.spot_share = 1;
  o.elastic.spot_reclaims_per_hour = 2;  // a machine lives half an hour on average
  o.checkpoint_interval_s = 600;
  Trace t = Csv("id,submit,duration,gpus\nlong,0,20000,8\n");
  SimResult r = Simulated(t, c, o);
  ASSERT_EQ(r.jobs.size(), 1u);
  const JobOutcome& j = r.jobs[0];
  ASSERT_EQ(j.state, JobState::kFinished);
  EXPECT_GT(r.capacity.spot_reclaims, 2);              // over 5.5 hours at 2 an hour
  EXPECT_EQ(j.preemptions, r.capacity.spot_reclaims);  // each notice moved it once
  EXPECT_EQ(j.restarts, 0);                            // none of it without notice
  EXPECT_EQ(j.gpu_seconds_lost, 0);
  // It ran 20,000 s in all; the rest is waiting for machines to boot after each reclaim.
  EXPECT_GT(*j.end_s - *j.first_start_s, 20000);
  EXPECT_LT(*j.end_s - *j.first_start_s, 20000 + (r.capacity.spot_reclaims + 1) * 200);
  // The same seed, the same run.
  SimResult again = Simulated(t, c, o);
  EXPECT_EQ(again.jobs[0].end_s, j.end_s);
}

// Static pools do not scale: --autoscale on them changes nothing, and a fixed cluster pays for
// every machine for the whole run.
TEST(ElasticSim, StaticPoolsAreFixedAndPaidForTheWholeRun) {
  NodePool fixed = Pool("fixed", 2, BillingClass::kOnDemand, "static");
  SimCluster c = ClusterFromPools("t", {fixed});
  Trace t = Csv("id,submit,duration,gpus\na,0,100,8\nb,0,100,8\nc,0,100,8\n");
  SimOptions plain;
  plain.placement = {1.0, 1.0, 1.0};
  SimResult a = Simulated(t, c, plain);
  SimResult b = Simulated(t, c, Elastic());
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].first_start_s, b.jobs[i].first_start_s) << i;
  }
  EXPECT_EQ(b.capacity.requests, 0);
  EXPECT_EQ(a.end_s, 200);
  EXPECT_NEAR(a.capacity.gpu_hours_provisioned, 2 * 8 * 200 / 3600.0, 1e-9);
  EXPECT_NEAR(a.capacity.capacity_cost_usd.at("on-demand"), 3.0 * 2 * 8 * 200 / 3600.0, 1e-9);
}

TEST(ElasticSim, BadOptionsAreRefused) {
  SimCluster c = ClusterFromPools("t", {Pool("v100", 1)});
  SimOptions o = Elastic();
  o.elastic.boot_failure = 1;
  absl::StatusOr<SimResult> r = Simulate(Csv("id,submit,duration,gpus\na,0,1,1\n"), c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("boot failure"), std::string::npos);
  o = Elastic();
  o.prediction.mode = PredictionMode::kObserve;
  EXPECT_FALSE(Simulate(Csv("id,submit,duration,gpus\na,0,1,1\n"), c, o).ok());
}

}  // namespace
}  // namespace gpucloud::sim
