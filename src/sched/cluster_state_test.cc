#include "sched/cluster_state.h"

#include <gtest/gtest.h>

#include "core/clock.h"
#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

const GpuCatalog& Cat() { return GpuCatalog::Default(); }

Node MakeNode(std::string name, const std::string& type, int gpus, bool mig = false,
              int gpus_per_island = 0) {
  return testing_util::MakeTestNode(std::move(name), gpus,
                                    {.type = type,
                                     .mig = mig,
                                     .gpus_per_island = gpus_per_island,
                                     .cpu = Cores(64),
                                     .memory = GiB(512)});
}

ReplicaRequest Whole(int count) { return {.gpu = {.mode = GpuMode::kWhole, .count = count}}; }
ReplicaRequest Mig(const std::string& profile) {
  return {.gpu = {.mode = GpuMode::kMig, .count = 1, .mig_profile = profile}};
}
ReplicaRequest Shared(int64_t milli, int64_t memory_mib = 0) {
  return {
      .gpu = {.mode = GpuMode::kShared, .fraction = MilliGpu(milli), .memory = MiB(memory_mib)}};
}

// Fits one replica on node `n` and commits it as job `job`.
bool Place(ClusterState& s, const std::string& job, NodeIndex n, const ReplicaRequest& req) {
  std::optional<std::vector<GpuAssignment>> fit = s.FitReplica(n, req);
  if (!fit) return false;
  Allocation a{
      job,
      {{.task = "t", .replica = 0, .node = n, .gpus = *fit, .cpu = req.cpu, .memory = req.memory}}};
  EXPECT_TRUE(s.Commit(a).ok());
  return true;
}

// The allocations' stamp changes with every successful commit and release, never with a failed
// one; a copy shares it; no two states ever stamp alike. The free whole GPUs are summed as they
// change.
TEST(ClusterState, VersionStampsTheAllocationsAndFreeGpusAreSummed) {
  ClusterState s({MakeNode("a", "H100-80GB", 8), MakeNode("b", "H100-80GB", 4)}, Cat());
  ClusterState other({MakeNode("a", "H100-80GB", 8)}, Cat());
  EXPECT_NE(s.version(), other.version());
  EXPECT_EQ(s.TotalFreeWholeGpus(), 12);
  const uint64_t empty = s.version();
  ASSERT_TRUE(Place(s, "ns/x", 0, Whole(3)));
  const uint64_t one = s.version();
  EXPECT_NE(one, empty);
  EXPECT_EQ(s.TotalFreeWholeGpus(), 9);
  ClusterState copy = s;
  EXPECT_EQ(copy.version(), one);
  EXPECT_FALSE(s.Commit(s.allocations().at("ns/x")).ok());  // already there: no change
  EXPECT_EQ(s.version(), one);
  ASSERT_TRUE(s.Release("ns/x").ok());
  EXPECT_NE(s.version(), one);
  EXPECT_NE(s.version(), empty);  // the same allocations as before, but a new stamp
  EXPECT_EQ(s.TotalFreeWholeGpus(), 12);
  ASSERT_TRUE(Place(copy, "ns/y", 1, Whole(4)));
  EXPECT_NE(copy.version(), s.version());
  EXPECT_EQ(copy.TotalFreeWholeGpus(), 5);
  EXPECT_TRUE(copy.CheckInvariants().ok());
}

// A node going down takes its GPUs out of the capacity and the free ones, in place, with a new
// nodes_id; not while replicas are on it; coming back restores them.
TEST(ClusterState, ANodeGoesDownAndComesBackInPlace) {
  ClusterState s({MakeNode("a", "H100-80GB", 8), MakeNode("b", "H100-80GB", 4)}, Cat());
  const uint64_t id = s.nodes_id();
  ASSERT_TRUE(Place(s, "ns/x", 1, Whole(1)));
  absl::Status busy = s.SetNodeGpusHealthy(1, false);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition) << busy;
  EXPECT_EQ(s.nodes_id(), id);
  ASSERT_TRUE(s.SetNodeGpusHealthy(0, false).ok());
  EXPECT_NE(s.nodes_id(), id);
  EXPECT_EQ(s.HealthyGpusByType().at("H100-80GB"), WholeGpus(4));
  EXPECT_EQ(s.FreeWholeGpus(0), 0);
  EXPECT_EQ(s.TotalFreeWholeGpus(), 3);
  EXPECT_FALSE(s.FitReplica(0, Whole(1)).has_value());
  EXPECT_TRUE(s.CheckInvariants().ok());
  ASSERT_TRUE(s.SetNodeGpusHealthy(0, true).ok());
  EXPECT_EQ(s.HealthyGpusByType().at("H100-80GB"), WholeGpus(12));
  EXPECT_EQ(s.TotalFreeWholeGpus(), 11);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

// A placeholder is known by its kind, not its key: it holds GPUs but counts in no queue's use.
TEST(ClusterState, PlaceholdersHoldCapacityButAreNoQueuesUse) {
  ClusterState s({MakeNode("a", "H100-80GB", 8)}, Cat());
  Allocation hold{"hold-a", {{.task = "hold", .node = 0, .gpus = {{.gpu = 0}, {.gpu = 1}}}}};
  hold.queue = "q";
  hold.placeholder = true;
  ASSERT_TRUE(s.Commit(hold).ok());
  Allocation job{"ns/j", {{.task = "w", .node = 0, .gpus = {{.gpu = 2}}}}};
  job.queue = "q";
  ASSERT_TRUE(s.Commit(job).ok());
  EXPECT_EQ(s.FreeWholeGpus(0), 5);
  EXPECT_EQ(s.QueueUsage().at("q").at("*"), WholeGpus(1));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterState, Mig3gAnd4gShareOneA100) {
  ClusterState s({MakeNode("a", "A100-80GB", 1, /*mig=*/true)}, Cat());
  ASSERT_TRUE(Place(s, "j1", 0, Mig("3g.40gb")));
  EXPECT_EQ(s.allocations().at("j1").replicas[0].gpus[0].mig, (MigPlacement{"3g.40gb", 4}));
  ASSERT_TRUE(Place(s, "j2", 0, Mig("4g.40gb")));
  EXPECT_EQ(s.allocations().at("j2").replicas[0].gpus[0].mig, (MigPlacement{"4g.40gb", 0}));
  EXPECT_FALSE(s.FitReplica(0, Mig("1g.10gb")).has_value());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterState, GpuShareOfIsTheOneDefinitionOfGpuEquivalents) {
  ClusterState s({MakeNode("mig", "A100-80GB", 1, true), MakeNode("plain", "A100-80GB", 2)}, Cat());
  ASSERT_TRUE(Place(s, "m", 0, Mig("3g.40gb")));
  ASSERT_TRUE(Place(s, "w", 1, Whole(1)));
  ASSERT_TRUE(Place(s, "f", 1, Shared(250)));
  const GpuAssignment& m = s.allocations().at("m").replicas[0].gpus[0];
  EXPECT_EQ(s.ShareOf(0, m), MilliGpu(429));         // 3/7, rounded up to a milli-GPU
  EXPECT_EQ(GpuShareOf(m, nullptr), MilliGpu(429));  // slices from the profile's name
  EXPECT_EQ(GpuShareOf(m, Cat().Find("A100-80GB")), MilliGpu(429));
  EXPECT_EQ(s.ShareOf(1, s.allocations().at("w").replicas[0].gpus[0]), WholeGpus(1));
  EXPECT_EQ(s.ShareOf(1, s.allocations().at("f").replicas[0].gpus[0]), MilliGpu(250));
  EXPECT_EQ(s.UsageByType(s.allocations().at("m")).at("A100-80GB"), MilliGpu(429));
  GpuAssignment odd{.gpu = 0, .mode = GpuMode::kMig, .mig = {"9g.99gb", 0}};
  EXPECT_EQ(GpuShareOf(odd, nullptr), WholeGpus(1));  // never more than the GPU
}

TEST(ClusterState, SevenSmallMigInstancesLeaveNoRoomFor3g) {
  ClusterState s({MakeNode("a", "A100-80GB", 1, /*mig=*/true)}, Cat());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(Place(s, "j" + std::to_string(i), 0, Mig("1g.10gb")));
  EXPECT_FALSE(Place(s, "x", 0, Mig("1g.10gb")));
  EXPECT_FALSE(s.FitReplica(0, Mig("3g.40gb")).has_value());
  ASSERT_TRUE(s.Release("j0").ok());
  EXPECT_TRUE(s.FitReplica(0, Mig("1g.10gb")).has_value());
  EXPECT_FALSE(s.FitReplica(0, Mig("3g.40gb")).has_value());  // one free slice is not four
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterState, MigOnlyOnMigGpusAndWholeNeverOnShared) {
  ClusterState s({MakeNode("mig", "H100-80GB", 1, true), MakeNode("plain", "H100-80GB", 1)}, Cat());
  EXPECT_FALSE(s.FitReplica(0, Whole(1)).has_value());
  EXPECT_FALSE(s.FitReplica(0, Shared(500)).has_value());
  EXPECT_FALSE(s.FitReplica(1, Mig("1g.10gb")).has_value());
  ASSERT_TRUE(Place(s, "share", 1, Shared(250)));
  EXPECT_FALSE(s.FitReplica(1, Whole(1)).has_value());
  ASSERT_TRUE(Place(s, "share2", 1, Shared(750)));
  EXPECT_FALSE(s.FitReplica(1, Shared(1)).has_value());  // fractions sum to one GPU
}

// Shares whose fractions add up to at most one GPU all fit on it, whatever the GPU's memory:
// each share's memory bound is its exact proportion rounded down (rounded up, 0.3 + 0.7 of a
// T4 overflowed its memory by a MiB and ran one after the other). Seeded random share sets.
TEST(ClusterState, SharesThatSumToAtMostOneGpuAllFitOnIt) {
  for (const std::string type : {"T4", "A10", "H200-141GB", "H100-80GB"}) {
    for (int pair : {300, 200, 400, 100, 330}) {
      ClusterState s({MakeNode("a", type, 1)}, Cat());
      ASSERT_TRUE(Place(s, "x", 0, Shared(pair))) << type << " " << pair;
      EXPECT_TRUE(Place(s, "y", 0, Shared(1000 - pair))) << type << " " << pair << "+rest";
      EXPECT_TRUE(s.CheckInvariants().ok());
    }
  }
  Rng rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    ClusterState s({MakeNode("a", trial % 2 ? "T4" : "A10", 1)}, Cat());
    int64_t left = 1000;
    for (int i = 0; left > 0; ++i) {
      int64_t f = rng.Range(1, left);
      ASSERT_TRUE(Place(s, "j" + std::to_string(i), 0, Shared(f)))
          << "trial " << trial << ": a share of " << f << "m with " << left << "m left";
      left -= f;
    }
    EXPECT_FALSE(s.FitReplica(0, Shared(1)).has_value());  // the fractions are spent
    EXPECT_TRUE(s.CheckInvariants().ok());
  }
}

TEST(ClusterState, SharedGpusAreBoundedByMemoryAndSharingMode) {
  ClusterState s({MakeNode("a", "T4", 1)}, Cat());  // 16 GiB
  ASSERT_TRUE(Place(s, "a", 0, Shared(250, 12 * 1024)));
  EXPECT_FALSE(s.FitReplica(0, Shared(250, 8 * 1024)).has_value());  // 12 + 8 > 16 GiB
  EXPECT_TRUE(s.FitReplica(0, Shared(250, 4 * 1024)).has_value());
  ReplicaRequest mps = Shared(250, 1024);
  mps.gpu.sharing = GpuSharing::kMps;
  EXPECT_FALSE(s.FitReplica(0, mps).has_value());  // a GPU is time-sliced or MPS, not both
}

TEST(ClusterState, WholeGpusPreferOneNvlinkIslandBestFit) {
  // Islands: {0,1,2,3} and {4,5,6,7}. Take 2 from island 1 first, then a 4-GPU request must
  // still find a whole island (island 0), and a later 2-GPU request lands beside the first.
  ClusterState s({MakeNode("a", "H100-80GB", 8, false, 4)}, Cat());
  ASSERT_TRUE(Place(s, "two", 0, Whole(2)));
  const std::vector<GpuAssignment>& g = s.allocations().at("two").replicas[0].gpus;
  EXPECT_EQ(g[0].gpu / 4, g[1].gpu / 4);
  std::optional<std::vector<GpuAssignment>> four = s.FitReplica(0, Whole(4));
  ASSERT_TRUE(four.has_value());
  for (const GpuAssignment& a : *four) EXPECT_NE(a.gpu / 4, g[0].gpu / 4);
  ASSERT_TRUE(Place(s, "four", 0, Whole(4)));
  ASSERT_TRUE(Place(s, "two-more", 0, Whole(2)));
  EXPECT_EQ(s.FreeWholeGpus(0), 0);
}

TEST(ClusterState, GpuTypesAndHealthAreHonoured) {
  Node n = MakeNode("a", "A100-80GB", 2);
  n.gpus[0].healthy = false;
  ClusterState s({n}, Cat());
  ReplicaRequest h100 = Whole(1);
  h100.gpu.types = {"H100-80GB"};
  EXPECT_FALSE(s.FitReplica(0, h100).has_value());
  std::optional<std::vector<GpuAssignment>> fit = s.FitReplica(0, Whole(1));
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ((*fit)[0].gpu, 1);
  EXPECT_FALSE(s.FitReplica(0, Whole(2)).has_value());
}

TEST(ClusterState, CpuAndMemoryAreAccounted) {
  ClusterState s({MakeNode("a", "T4", 4)}, Cat());
  ReplicaRequest r = Whole(1);
  r.cpu = Cores(40);
  r.memory = GiB(100);
  ASSERT_TRUE(Place(s, "a", 0, r));
  EXPECT_FALSE(s.FitReplica(0, r).has_value());  // 80 cores > 64
  EXPECT_EQ(s.FreeCpu(0), Cores(24));
  EXPECT_EQ(s.FreeMemory(0), GiB(412));
}

TEST(ClusterState, EveryReplicaTakesATaskSlot) {
  Node n = MakeNode("a", "H100-80GB", 8);
  n.max_tasks = 3;
  ClusterState s({n}, Cat());
  EXPECT_EQ(s.FreeTaskSlots(0), 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Place(s, "cpu" + std::to_string(i), 0, {}));
  EXPECT_EQ(s.FreeTaskSlots(0), 0);
  EXPECT_FALSE(s.FitReplica(0, {}).has_value());
  EXPECT_FALSE(s.FitReplica(0, Whole(1)).has_value());  // 8 free GPUs, no slot
  Allocation more{"more", {{.task = "w", .node = 0}}};
  absl::Status st = s.Commit(more);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "replica w[0] on a: no task slot left (the node runs at most 3 tasks)");
  ASSERT_TRUE(s.Release("cpu1").ok());
  EXPECT_EQ(s.FreeTaskSlots(0), 1);
  EXPECT_TRUE(Place(s, "gpu", 0, Whole(1)));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(ClusterState, ReplicasAskingForNoCpuOrMemoryAreCountedAtTheDefaults) {
  Node n = MakeNode("a", "H100-80GB", 0);
  n.cpu = Cores(1);
  n.memory = GiB(64);
  ClusterState s({n}, Cat());
  int placed = 0;
  while (Place(s, "j" + std::to_string(placed), 0, {})) ++placed;
  EXPECT_EQ(placed, 10);  // 1 core / 100m
  EXPECT_EQ(s.FreeCpu(0), MilliCpu(0));
  EXPECT_EQ(s.FreeMemory(0), GiB(64) - kDefaultMemoryRequest * 10);
  // The placement records what was asked (nothing: no limit at the agent).
  EXPECT_EQ(s.allocations().at("j0").replicas[0].cpu, MilliCpu(0));
  EXPECT_TRUE(s.CheckInvariants().ok());

  n.cpu = Cores(64);
  n.memory = GiB(1);
  ClusterState m({n}, Cat());
  placed = 0;
  while (Place(m, "j" + std::to_string(placed), 0, {})) ++placed;
  EXPECT_EQ(placed, 8);                    // 1 GiB / 128 MiB
  ReplicaRequest small{.memory = MiB(1)};  // what is asked, when asked, counts
  EXPECT_FALSE(m.FitReplica(0, small).has_value());
  ASSERT_TRUE(m.Release("j0").ok());
  EXPECT_EQ(m.FreeMemory(0), kDefaultMemoryRequest);
}

TEST(ClusterState, CommitIsAllOrNothing) {
  ClusterState s({MakeNode("a", "H100-80GB", 2)}, Cat());
  Allocation bad{"job",
                 {{.task = "w", .replica = 0, .node = 0, .gpus = {{.gpu = 0}}},
                  {.task = "w", .replica = 1, .node = 0, .gpus = {{.gpu = 0}}}}};
  absl::Status st = s.Commit(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "replica w[1] on a: GPU 0 is in use");
  EXPECT_TRUE(s.allocations().empty());
  EXPECT_EQ(s.FreeWholeGpus(0), 2);
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_EQ(s.Release("job").code(), absl::StatusCode::kNotFound);
}

// An over-commit check independent of ClusterState's own bookkeeping: sums every allocation's
// claims per node and GPU and compares them with capacity and the MIG rules of core/mig.h.
void ExpectNoOverCommit(const ClusterState& s) {
  struct GpuClaims {
    int whole = 0;
    int shared = 0;
    int mig = 0;
    int64_t fraction = 0;
    int64_t memory = 0;
    std::vector<MigPlacement> layout;
  };
  std::vector<std::vector<GpuClaims>> claims(s.node_count());
  std::vector<int64_t> cpu(s.node_count()), memory(s.node_count()), tasks(s.node_count());
  for (NodeIndex n = 0; n < s.node_count(); ++n) claims[n].resize(s.node(n).gpus.size());
  for (const auto& [job, a] : s.allocations()) {
    for (const ReplicaPlacement& r : a.replicas) {
      // A replica asking for nothing counts as the defaults (100m, 128 MiB), and as one task.
      cpu[r.node] += r.cpu.is_zero() ? 100 : r.cpu.raw();
      memory[r.node] += r.memory.is_zero() ? 128 : r.memory.raw();
      ++tasks[r.node];
      for (const GpuAssignment& g : r.gpus) {
        GpuClaims& c = claims[r.node][g.gpu];
        if (g.mode == GpuMode::kWhole) ++c.whole;
        if (g.mode == GpuMode::kShared) {
          ++c.shared;
          c.fraction += g.fraction.raw();
          c.memory += g.memory.raw();
        }
        if (g.mode == GpuMode::kMig) {
          ++c.mig;
          c.layout.push_back(g.mig);
        }
      }
    }
  }
  for (NodeIndex n = 0; n < s.node_count(); ++n) {
    const Node& node = s.node(n);
    EXPECT_LE(cpu[n], node.cpu.raw()) << node.name;
    EXPECT_LE(memory[n], node.memory.raw()) << node.name;
    EXPECT_LE(tasks[n], node.max_tasks) << node.name;
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      const GpuClaims& c = claims[n][g];
      const Gpu& gpu = node.gpus[g];
      int kinds = (c.whole > 0) + (c.shared > 0) + (c.mig > 0);
      EXPECT_LE(kinds, 1) << node.name << " GPU " << g;
      EXPECT_LE(c.whole, 1) << node.name << " GPU " << g;
      EXPECT_LE(c.fraction, 1000) << node.name << " GPU " << g;
      EXPECT_LE(c.memory, gpu.memory.raw()) << node.name << " GPU " << g;
      if (c.whole + c.shared + c.mig > 0) {
        EXPECT_TRUE(gpu.healthy) << node.name << " GPU " << g;
      }
      if (c.whole + c.shared > 0) {
        EXPECT_FALSE(gpu.mig_enabled) << node.name << " GPU " << g;
      }
      if (c.mig > 0) {
        EXPECT_TRUE(gpu.mig_enabled);
        EXPECT_TRUE(ValidateMigLayout(*Cat().Find(gpu.type), c.layout).ok())
            << node.name << " GPU " << g;
      }
    }
  }
}

// Property: whatever sequence of fits, commits (including arbitrary, possibly invalid
// allocations) and releases happens, nothing is ever over-committed, a refused commit changes
// nothing, and the same seed gives the same allocations.
std::map<std::string, Allocation> RandomWorkload(uint64_t seed, int steps) {
  Rng rng(seed);
  const char* kTypes[] = {"H100-80GB", "A100-80GB", "A100-40GB", "T4", "L40S"};
  std::vector<Node> nodes;
  for (int i = 0; i < 6; ++i) {
    const char* type = kTypes[rng.Uniform(5)];
    bool mig = Cat().Find(type)->mig_capable() && rng.OneIn(2);
    Node n = MakeNode("n" + std::to_string(i), type, static_cast<int>(rng.Range(1, 8)), mig,
                      static_cast<int>(rng.Range(0, 4)));
    n.cpu = Cores(rng.Range(8, 64));
    n.memory = GiB(rng.Range(32, 256));
    if (rng.OneIn(2)) n.max_tasks = static_cast<int32_t>(rng.Range(0, 4));
    if (rng.OneIn(4)) n.gpus[0].healthy = false;
    nodes.push_back(n);
  }
  ClusterState s(nodes, Cat());
  for (int step = 0; step < steps; ++step) {
    std::string job = "j" + std::to_string(step);
    uint64_t op = rng.Uniform(10);
    if (op < 2 && !s.allocations().empty()) {
      auto it = s.allocations().begin();
      std::advance(it, rng.Uniform(s.allocations().size()));
      std::string victim = it->first;
      EXPECT_TRUE(s.Release(victim).ok());
    } else if (op < 4) {
      // An arbitrary allocation: it must be refused without a trace, or be valid.
      Allocation a{job, {}};
      for (int r = static_cast<int>(rng.Range(1, 3)); r > 0; --r) {
        ReplicaPlacement p{
            .task = "t", .replica = r, .node = static_cast<NodeIndex>(rng.Uniform(6))};
        int32_t ngpus = static_cast<int32_t>(s.node(p.node).gpus.size());
        GpuAssignment g{.gpu = static_cast<int32_t>(rng.Uniform(ngpus))};
        g.mode = static_cast<GpuMode>(rng.Range(1, 3));
        g.mig = {"1g.10gb", static_cast<int>(rng.Uniform(7))};
        g.fraction = MilliGpu(rng.Range(1, 1000));
        g.memory = MiB(rng.Range(0, 20000));
        p.gpus.push_back(g);
        p.cpu = Cores(rng.Range(0, 8));
        if (rng.OneIn(3)) p.gpus.clear();  // CPU-only: limited by task slots, CPU and memory
        a.replicas.push_back(p);
      }
      std::map<std::string, Allocation> before = s.allocations();
      if (!s.Commit(a).ok()) {
        EXPECT_EQ(s.allocations(), before);
      }
    } else {
      ReplicaRequest req;
      switch (rng.Uniform(4)) {
        case 0:
          req = Whole(static_cast<int>(rng.Range(1, 4)));
          break;
        case 1:
          req = Mig(rng.OneIn(2) ? "1g.10gb" : "3g.40gb");
          break;
        case 2:
          req = Shared(rng.Range(1, 1000), rng.OneIn(2) ? rng.Range(1, 40000) : 0);
          break;
        default:
          req = {};
          break;
      }
      req.cpu = MilliCpu(rng.Range(0, 8000));
      req.memory = MiB(rng.Range(0, 16384));
      Place(s, job, static_cast<NodeIndex>(rng.Uniform(6)), req);
    }
    absl::Status inv = s.CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv.message();
    ExpectNoOverCommit(s);
    if (::testing::Test::HasFailure()) break;
  }
  return s.allocations();
}

TEST(ClusterStateProperty, NeverOverCommitsAndIsDeterministic) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::map<std::string, Allocation> a = RandomWorkload(seed, 60);
    if (seed % 50 == 0) {
      EXPECT_EQ(a, RandomWorkload(seed, 60)) << seed;
    }
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace gpucloud::sched
