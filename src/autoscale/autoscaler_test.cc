#include "autoscale/autoscaler.h"

#include <random>

#include "autoscale/pool_nodes.h"
#include "gtest/gtest.h"
#include "sched/registry.h"

namespace gpucloud::autoscale {
namespace {

using sched::ClusterState;
using sched::PendingJob;

constexpr int64_t kMin = 60'000;

NodePool Pool(std::string name, std::string type, int gpus, int min_nodes, int max_nodes,
              BillingClass billing = BillingClass::kOnDemand, int64_t cents_per_gpu_hour = 0) {
  NodePool p;
  p.metadata.name = std::move(name);
  p.spec.gpu_type = std::move(type);
  p.spec.gpus_per_node = gpus;
  p.spec.min_nodes = min_nodes;
  p.spec.max_nodes = max_nodes;
  p.spec.billing = billing;
  p.spec.provider = "local";
  if (cents_per_gpu_hour > 0) p.spec.price_per_gpu_hour = Cents(cents_per_gpu_hour);
  return p;
}

PendingJob Job(std::string key, int replicas, int gpus_each, bool spot = false,
               std::string type = "") {
  PendingJob p;
  p.request.key = std::move(key);
  sched::ReplicaRequest r{.gpu = {.mode = GpuMode::kWhole, .count = gpus_each}};
  if (!type.empty()) r.gpu.types = {type};
  p.request.tasks.push_back({"w", replicas, r});
  p.request.gang_size = replicas;
  p.preemptible = spot;
  return p;
}

// A cluster of existing nodes: `count` nodes of each pool, named as the pool names them.
class Fixture : public ::testing::Test {
 protected:
  Fixture() : scheduler_(sched::DefaultFilters(), GpuCatalog::Default()) {}

  void Nodes(const NodePool& pool, int count) {
    for (int i = 0; i < count; ++i) {
      nodes_.push_back(PoolNode(pool, i, {"z", "s", "l"}, GpuCatalog::Default()));
    }
  }
  Plan Decide(std::vector<NodePool> pools, const std::vector<PendingJob>& waiting,
              AutoscalerOptions options = {}) {
    state_ = std::make_unique<ClusterState>(nodes_, GpuCatalog::Default());
    for (const sched::Allocation& a : running_) EXPECT_TRUE(state_->Commit(a).ok()) << a.job;
    in_.state = state_.get();
    in_.waiting.clear();
    for (const PendingJob& p : waiting) in_.waiting.push_back(&p);
    in_.pools.clear();
    for (NodePool& p : pools) in_.pools.push_back({std::move(p)});
    Autoscaler autoscaler(scheduler_, GpuCatalog::Default(), options);
    return autoscaler.Decide(in_);
  }
  // Job `key` holds `gpus` whole GPUs of node `node` (an index into nodes_).
  void Running(std::string key, int node, int gpus) {
    sched::Allocation a;
    a.job = std::move(key);
    sched::ReplicaPlacement r{.task = "w", .node = node};
    for (int g = 0; g < gpus; ++g) r.gpus.push_back({.gpu = g});
    a.replicas.push_back(r);
    running_.push_back(a);
  }

  sched::Scheduler scheduler_;
  std::vector<Node> nodes_;
  std::vector<sched::Allocation> running_;
  std::unique_ptr<ClusterState> state_;
  AutoscalerInput in_;
};

TEST_F(Fixture, AGangOfSixteenGpusAsksForTwoEightGpuNodesInOneRequest) {
  Plan plan = Decide({Pool("h100", "H100-80GB", 8, 0, 10)}, {Job("team-a/llm", 2, 8)});
  ASSERT_EQ(plan.ups.size(), 1u);
  const ProvisioningRequest& r = plan.ups[0].request;
  EXPECT_EQ(r.pool, "h100");
  EXPECT_EQ(r.nodes, (std::vector<std::string>{"h100-0", "h100-1"}));
  EXPECT_EQ(r.jobs, (std::vector<std::string>{"team-a/llm"}));
  EXPECT_NE(plan.ups[0].reason.find("scale up h100 by 2 for gang team-a/llm: 16 GPUs"),
            std::string::npos)
      << plan.ups[0].reason;
  EXPECT_TRUE(plan.downs.empty());
  EXPECT_TRUE(plan.unmet.empty());
}

TEST_F(Fixture, SmallJobsArePackedOntoOneNewNode) {
  std::vector<PendingJob> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(Job("ns/j" + std::to_string(i), 1, 1));
  jobs.push_back(Job("ns/j8", 1, 1));  // the ninth needs a second node
  Plan plan = Decide({Pool("h100", "H100-80GB", 8, 0, 10)}, jobs);
  ASSERT_EQ(plan.ups.size(), 2u);
  EXPECT_EQ(plan.ups[0].request.nodes, std::vector<std::string>{"h100-0"});
  EXPECT_EQ(plan.ups[0].request.jobs.size(), 8u);
  EXPECT_EQ(plan.ups[1].request.nodes, std::vector<std::string>{"h100-1"});
  EXPECT_EQ(plan.ups[1].request.jobs, std::vector<std::string>{"ns/j8"});
}

TEST_F(Fixture, NewNodesTakeTheLowestFreeNames) {
  NodePool pool = Pool("h100", "H100-80GB", 8, 0, 10);
  Nodes(pool, 2);  // h100-0 and h100-1 exist
  Running("ns/busy0", 0, 8);
  Running("ns/busy1", 1, 8);
  in_.in_flight.push_back(
      {.id = "r1", .pool = "h100", .nodes = {"h100-2"}, .jobs = {"ns/other"}, .created_ms = 0});
  Plan plan = Decide({pool}, {Job("ns/a", 1, 8)});
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.ups[0].request.nodes, std::vector<std::string>{"h100-3"});
}

TEST_F(Fixture, SpotPoolsOnlyForJobsThatAcceptSpot) {
  std::vector<NodePool> pools = {Pool("od", "H100-80GB", 8, 0, 10),
                                 Pool("spot", "H100-80GB", 8, 0, 10, BillingClass::kSpot)};
  Plan plan = Decide(pools, {Job("ns/tolerant", 1, 8, /*spot=*/true), Job("ns/strict", 1, 8)});
  ASSERT_EQ(plan.ups.size(), 2u);
  // Pools are visited cheapest first: spot (30% of on-demand) before on-demand.
  EXPECT_EQ(plan.ups[0].request.pool, "spot");
  EXPECT_EQ(plan.ups[0].request.jobs, std::vector<std::string>{"ns/tolerant"});
  EXPECT_EQ(plan.ups[1].request.pool, "od");
  EXPECT_EQ(plan.ups[1].request.jobs, std::vector<std::string>{"ns/strict"});
}

TEST_F(Fixture, TheCheapestPoolThatFitsWins) {
  std::vector<NodePool> pools = {Pool("dear", "H100-80GB", 8, 0, 10, BillingClass::kOnDemand, 900),
                                 Pool("cheap", "H100-80GB", 8, 0, 10, BillingClass::kOnDemand, 300),
                                 Pool("v100", "V100-16GB", 8, 0, 10, BillingClass::kOnDemand, 100)};
  // Only H100s will do: the V100 pool is cheaper but does not fit.
  Plan plan = Decide(pools, {Job("ns/a", 1, 8, false, "H100-80GB")});
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.ups[0].request.pool, "cheap");
  EXPECT_NE(plan.ups[0].reason.find("$3.00/GPU-hour"), std::string::npos) << plan.ups[0].reason;
}

TEST_F(Fixture, AGangTooLargeForAPoolsMaximumGoesToTheNextPoolOrIsUnmet) {
  std::vector<NodePool> pools = {Pool("small", "H100-80GB", 8, 0, 1, BillingClass::kOnDemand, 100),
                                 Pool("big", "H100-80GB", 8, 0, 4, BillingClass::kOnDemand, 200)};
  Plan plan = Decide(pools, {Job("ns/gang", 2, 8), Job("ns/huge", 8, 8)});
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.ups[0].request.pool, "big");
  EXPECT_EQ(plan.ups[0].request.jobs, std::vector<std::string>{"ns/gang"});
  ASSERT_EQ(plan.unmet.size(), 1u);
  EXPECT_EQ(plan.unmet[0].jobs, std::vector<std::string>{"ns/huge"});
  EXPECT_NE(plan.unmet[0].reason.find("no pool can add nodes for it"), std::string::npos);
}

TEST_F(Fixture, TheClusterMaximumOfGpusAndDollarsHolds) {
  AutoscalerOptions o;
  o.max_gpus = 8;
  Plan plan =
      Decide({Pool("h100", "H100-80GB", 8, 0, 10)}, {Job("ns/a", 1, 8), Job("ns/b", 1, 8)}, o);
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.ups[0].request.jobs, std::vector<std::string>{"ns/a"});
  ASSERT_EQ(plan.unmet.size(), 1u);
  EXPECT_NE(plan.unmet[0].reason.find("maximum"), std::string::npos) << plan.unmet[0].reason;

  AutoscalerOptions dollars;
  dollars.max_usd_per_hour = MicroUsd(8 * 2'000'000);  // one node at $2/GPU-hour
  plan = Decide({Pool("h100", "H100-80GB", 8, 0, 10, BillingClass::kOnDemand, 200)},
                {Job("ns/a", 1, 8), Job("ns/b", 1, 8)}, dollars);
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.unmet.size(), 1u);
}

TEST_F(Fixture, JobsOfARequestInFlightAreNotAskedForAgain) {
  in_.in_flight.push_back({.id = "r1",
                           .pool = "h100",
                           .nodes = {"h100-0", "h100-1"},
                           .jobs = {"ns/gang"},
                           .created_ms = 0});
  in_.now_ms = kMin;
  Plan plan = Decide({Pool("h100", "H100-80GB", 8, 0, 10)}, {Job("ns/gang", 2, 8)});
  EXPECT_TRUE(plan.ups.empty());
  EXPECT_TRUE(plan.cancels.empty());
}

TEST_F(Fixture, AStockOutCancelsTheRequestBacksOffAndMovesToTheNextPool) {
  std::vector<NodePool> pools = {Pool("cheap", "H100-80GB", 8, 0, 10, BillingClass::kOnDemand, 100),
                                 Pool("dear", "H100-80GB", 8, 0, 10, BillingClass::kOnDemand, 200)};
  NodePool cheap = pools[0];
  Nodes(cheap, 1);  // one of the two came up; the other never did
  in_.in_flight.push_back({.id = "r1",
                           .pool = "cheap",
                           .nodes = {"cheap-0", "cheap-1"},
                           .jobs = {"ns/gang"},
                           .created_ms = 0,
                           .ready = 1});
  in_.now_ms = 10 * kMin;
  Plan plan = Decide(pools, {Job("ns/gang", 2, 8)});
  ASSERT_EQ(plan.cancels.size(), 1u);
  EXPECT_EQ(plan.cancels[0].request, "r1");
  EXPECT_NE(plan.cancels[0].reason.find("1 of 2 nodes Ready after 10 min"), std::string::npos)
      << plan.cancels[0].reason;
  ASSERT_EQ(plan.backoffs.size(), 1u);
  EXPECT_EQ(plan.backoffs[0].pool, "cheap");
  EXPECT_EQ(plan.backoffs[0].until_ms, 15 * kMin);
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.ups[0].request.pool, "dear");
  EXPECT_EQ(plan.ups[0].request.nodes, (std::vector<std::string>{"dear-0", "dear-1"}));
  // The node that did come up belongs to the cancelled request: not scaled down separately.
  EXPECT_TRUE(plan.downs.empty());

  // Before the timeout nothing happens.
  in_.now_ms = 9 * kMin;
  plan = Decide(pools, {Job("ns/gang", 2, 8)});
  EXPECT_TRUE(plan.empty());
}

TEST_F(Fixture, AFailedRequestIsCancelledAtOnce) {
  in_.in_flight.push_back({.id = "r1",
                           .pool = "h100",
                           .nodes = {"h100-0"},
                           .jobs = {"ns/a"},
                           .created_ms = 0,
                           .failure = "script exited 3"});
  in_.now_ms = 1000;
  Plan plan = Decide({Pool("h100", "H100-80GB", 8, 0, 10)}, {Job("ns/a", 1, 8)});
  ASSERT_EQ(plan.cancels.size(), 1u);
  EXPECT_NE(plan.cancels[0].reason.find("script exited 3"), std::string::npos);
  EXPECT_TRUE(plan.ups.empty());  // the only pool backs off
  ASSERT_EQ(plan.unmet.size(), 1u);
  EXPECT_NE(plan.unmet[0].reason.find("backing off"), std::string::npos) << plan.unmet[0].reason;
}

TEST_F(Fixture, APoolBelowMinNodesIsBroughtUpToIt) {
  NodePool pool = Pool("h100", "H100-80GB", 8, 3, 10);
  Nodes(pool, 1);
  Plan plan = Decide({pool}, {});
  ASSERT_EQ(plan.ups.size(), 1u);
  EXPECT_EQ(plan.ups[0].request.nodes, (std::vector<std::string>{"h100-1", "h100-2"}));
  EXPECT_TRUE(plan.ups[0].request.jobs.empty());
  EXPECT_NE(plan.ups[0].reason.find("minNodes 3"), std::string::npos);
}

TEST_F(Fixture, StaticPoolsNeverChange) {
  NodePool pool = Pool("fixed", "H100-80GB", 8, 3, 10);
  pool.spec.provider = std::string(kStaticProvider);
  Nodes(pool, 1);
  in_.idle_since_ms["fixed-0"] = 0;
  in_.now_ms = 60 * kMin;
  Plan plan = Decide({pool}, {Job("ns/a", 1, 8)});
  EXPECT_TRUE(plan.empty());
  ASSERT_EQ(plan.unmet.size(), 1u);
}

TEST_F(Fixture, ScaleDownTakesOnlyNodesIdleLongEnoughAndFreeOfEveryClaim) {
  NodePool od = Pool("od", "H100-80GB", 8, 1, 10);
  NodePool reserved = Pool("res", "H100-80GB", 8, 0, 10, BillingClass::kReserved);
  Nodes(od, 6);              // od-0 .. od-5: indices 0..5
  Nodes(reserved, 1);        // res-0: index 6
  Running("ns/busy", 0, 1);  // od-0 runs a task
  in_.in_flight.push_back({.id = "r1",
                           .pool = "od",
                           .nodes = {"od-1"},
                           .jobs = {"ns/x"},
                           .created_ms = 55 * kMin,
                           .ready = 1});  // held
  in_.reserved_nodes = {"od-2"};          // a backfill reservation plans to use it
  in_.now_ms = 60 * kMin;
  for (const Node& n : nodes_) in_.idle_since_ms[n.name] = 0;
  in_.idle_since_ms["od-3"] = 55 * kMin;  // idle for only 5 minutes
  Plan plan = Decide({od, reserved}, {});
  std::vector<std::string> downs;
  for (const ScaleDown& d : plan.downs) downs.push_back(d.node);
  EXPECT_EQ(downs, (std::vector<std::string>{"od-4", "od-5"}));
  EXPECT_NE(plan.downs[0].reason.find("idle for 60 min"), std::string::npos)
      << plan.downs[0].reason;

  // minNodes: a pool of two idle nodes with minNodes 1 loses one.
  nodes_.clear();
  running_.clear();
  in_ = {};
  NodePool two = Pool("two", "H100-80GB", 8, 1, 10);
  Nodes(two, 2);
  in_.now_ms = 60 * kMin;
  in_.idle_since_ms = {{"two-0", 0}, {"two-1", 0}};
  plan = Decide({two}, {});
  ASSERT_EQ(plan.downs.size(), 1u);
}

// Nodes on their way out count for nothing, so the pool does not shrink past minNodes while
// they go; their names stay taken.
TEST_F(Fixture, LeavingNodesNeitherCountNorGiveUpTheirNames) {
  NodePool pool = Pool("h100", "H100-80GB", 8, 1, 10);
  Nodes(pool, 3);  // h100-0 .. h100-2, all idle
  in_.now_ms = 60 * kMin;
  in_.idle_since_ms = {{"h100-0", 0}, {"h100-1", 0}, {"h100-2", 0}};
  in_.leaving = {"h100-0", "h100-1"};  // last round's scale-downs, being carried out
  Plan plan = Decide({pool}, {});
  EXPECT_TRUE(plan.downs.empty());  // h100-2 is the pool's minNodes now
  // A job that needs a new machine gets a fresh name, not a leaving one's.
  plan = Decide({pool}, {Job("ns/a", 1, 8), Job("ns/b", 1, 8)});
  ASSERT_EQ(plan.ups.size(), 2u);
  EXPECT_EQ(plan.ups[0].request.nodes, std::vector<std::string>{"h100-3"});
}

// A registered node that is not Ready counts for its pool's maxNodes and keeps its name, and
// goes once it has been so for scaleDownAfter.
TEST_F(Fixture, NodesThatAreNotReadyCountAndGoWhenLongGone) {
  NodePool pool = Pool("h100", "H100-80GB", 8, 0, 2);
  in_.now_ms = 5 * kMin;
  in_.not_ready["h100-0"] = {"h100", 8, 0};
  Plan plan = Decide({pool}, {Job("ns/a", 1, 8), Job("ns/b", 1, 8)});
  ASSERT_EQ(plan.ups.size(), 1u);  // maxNodes 2, one of them the node that is not Ready
  EXPECT_EQ(plan.ups[0].request.nodes, std::vector<std::string>{"h100-1"});
  EXPECT_TRUE(plan.downs.empty());  // not Ready for 5 minutes only
  in_.now_ms = 10 * kMin;
  plan = Decide({pool}, {});
  ASSERT_EQ(plan.downs.size(), 1u);
  EXPECT_EQ(plan.downs[0].node, "h100-0");
  EXPECT_NE(plan.downs[0].reason.find("not Ready for 10 min"), std::string::npos)
      << plan.downs[0].reason;
}

TEST_F(Fixture, ThePoolTheRoundScalesUpIsNotScaledDown) {
  NodePool pool = Pool("h100", "H100-80GB", 8, 0, 10);
  Nodes(pool, 1);
  Running("ns/small", 0, 1);  // h100-0 has 7 free GPUs: not enough for the 8-GPU job
  nodes_.push_back(PoolNode(pool, 1, {"z", "s", "l"}, GpuCatalog::Default()));
  in_.now_ms = 60 * kMin;
  in_.idle_since_ms["h100-1"] = 0;  // idle, but the 16-GPU gang is being scaled for
  Plan plan = Decide({pool}, {Job("ns/gang", 2, 8)});
  EXPECT_EQ(plan.ups.size(), 1u);
  EXPECT_TRUE(plan.downs.empty());
}

// Random clusters, pools and waiting jobs: the plan never touches a node with a task or a
// hold, never requests more than the maxima, never names a node twice or one that exists, and
// puts every node a job was placed on into that job's one request.
TEST_F(Fixture, PropertiesHoldOnRandomClusters) {
  std::mt19937_64 rng(20261206);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* types[] = {"H100-80GB", "A100-80GB", "V100-16GB"};
  int ups = 0, downs = 0, unmet = 0;  // so that the properties are not vacuously true
  for (int round = 0; round < 200; ++round) {
    nodes_.clear();
    running_.clear();
    in_ = {};
    std::vector<NodePool> pools;
    for (int p = 0, n = uniform(1, 4); p < n; ++p) {
      NodePool pool =
          Pool("p" + std::to_string(p), types[uniform(0, 2)], uniform(1, 4) * 2, uniform(0, 2),
               uniform(2, 8), static_cast<BillingClass>(uniform(0, 2)), uniform(50, 400));
      int existing = uniform(0, pool.spec.max_nodes);
      for (int i = 0; i < existing; ++i) {
        nodes_.push_back(PoolNode(pool, i, {"z", "s", "l"}, GpuCatalog::Default()));
        in_.idle_since_ms[nodes_.back().name] = uniform(0, 30) * kMin;
        if (uniform(0, 2) == 0) {
          Running("run" + std::to_string(nodes_.size()), static_cast<int>(nodes_.size()) - 1, 1);
        }
      }
      pools.push_back(pool);
    }
    std::set<std::string> held;
    for (const Node& n : nodes_) {
      if (uniform(0, 5) == 0) {
        in_.in_flight.push_back({.id = "r" + n.name,
                                 .pool = n.pool,
                                 .nodes = {n.name},
                                 .jobs = {"held/" + n.name},
                                 .created_ms = 30 * kMin,
                                 .ready = 1});
        held.insert(n.name);
      }
    }
    std::vector<PendingJob> waiting;
    for (int j = 0, n = uniform(0, 12); j < n; ++j) {
      waiting.push_back(
          Job("ns/j" + std::to_string(j), uniform(1, 3), 1 << uniform(0, 3), uniform(0, 1) == 1));
    }
    AutoscalerOptions o;
    o.max_gpus = uniform(0, 1) ? 0 : uniform(8, 128);
    in_.now_ms = 40 * kMin;
    Plan plan = Decide(pools, waiting, o);
    ups += static_cast<int>(plan.ups.size());
    downs += static_cast<int>(plan.downs.size());
    for (const Unmet& u : plan.unmet) unmet += static_cast<int>(u.jobs.size());

    std::set<std::string> busy;
    for (const sched::Allocation& a : running_) busy.insert(nodes_[a.replicas[0].node].name);
    for (const ScaleDown& d : plan.downs) {
      EXPECT_FALSE(busy.contains(d.node)) << d.node;
      EXPECT_FALSE(held.contains(d.node)) << d.node;
    }
    std::set<std::string> names;
    for (const Node& n : nodes_) names.insert(n.name);
    std::map<std::string, int> per_pool;
    for (const Node& n : nodes_) ++per_pool[n.pool];
    int64_t gpus = 0;
    for (const Node& n : nodes_) gpus += static_cast<int64_t>(n.gpus.size());
    std::set<std::string> jobs_seen;
    for (const ScaleUp& up : plan.ups) {
      const NodePool* pool = nullptr;
      for (const NodePool& p : pools) {
        if (p.metadata.name == up.request.pool) pool = &p;
      }
      ASSERT_NE(pool, nullptr);
      for (const std::string& n : up.request.nodes) {
        EXPECT_TRUE(names.insert(n).second) << "node named twice: " << n;
      }
      per_pool[up.request.pool] += static_cast<int>(up.request.nodes.size());
      EXPECT_LE(per_pool[up.request.pool], pool->spec.max_nodes) << up.request.pool;
      gpus += pool->spec.gpus_per_node * static_cast<int64_t>(up.request.nodes.size());
      for (const std::string& j : up.request.jobs) {
        EXPECT_TRUE(jobs_seen.insert(j).second) << "job in two requests: " << j;
        // A job's request must hold all of its replicas.
        const PendingJob* p = nullptr;
        for (const PendingJob& w : waiting) {
          if (w.request.key == j) p = &w;
        }
        ASSERT_NE(p, nullptr);
        if (pool->spec.billing == BillingClass::kSpot) {
          EXPECT_TRUE(p->preemptible) << j;
        }
        int64_t need = p->request.tasks[0].replicas * p->request.tasks[0].per_replica.gpu.count;
        EXPECT_GE(pool->spec.gpus_per_node * static_cast<int64_t>(up.request.nodes.size()), need);
      }
    }
    if (o.max_gpus > 0 && !plan.ups.empty()) {
      EXPECT_LE(gpus, o.max_gpus);
    }
  }
  EXPECT_GT(ups, 50);
  EXPECT_GT(downs, 50);
  EXPECT_GT(unmet, 10);
}

TEST(PoolNodes, PoolNodesCarryThePoolsShapeLabelsAndTaints) {
  NodePool pool = Pool("a100", "A100-80GB", 4, 0, 2);
  pool.spec.labels["team"] = "vision";
  pool.spec.taints.push_back({"gpucloud.io/spot", "true", "NoSchedule"});
  Node n = PoolNode(pool, 7, {"z", "s", "l"}, GpuCatalog::Default());
  EXPECT_EQ(n.name, "a100-7");
  EXPECT_EQ(n.pool, "a100");
  ASSERT_EQ(n.gpus.size(), 4u);
  EXPECT_EQ(n.gpus[3].type, "A100-80GB");
  EXPECT_EQ(n.gpus[3].memory, GpuCatalog::Default().Find("A100-80GB")->memory);
  EXPECT_EQ(n.labels.at("team"), "vision");
  EXPECT_EQ(n.taints.size(), 1u);
  EXPECT_EQ(NodesPerLeaf(pool.spec), kDefaultNodesPerLeaf);
  pool.spec.labels[std::string(kNodesPerLeafLabel)] = "4x";
  EXPECT_EQ(NodesPerLeaf(pool.spec), kDefaultNodesPerLeaf);
  pool.spec.labels[std::string(kNodesPerLeafLabel)] = "4";
  EXPECT_EQ(NodesPerLeaf(pool.spec), 4);
}

}  // namespace
}  // namespace gpucloud::autoscale
