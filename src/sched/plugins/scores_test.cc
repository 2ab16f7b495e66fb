#include "sched/plugins/scores.h"

#include <gtest/gtest.h>

#include "sched/gang_placer.h"
#include "sched/registry.h"
#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

using testing_util::MakeTestNode;
using testing_util::WholeGpuJob;

NodeView View(std::vector<int64_t> free_milli) {
  NodeView v;
  for (int64_t f : free_milli) v.free.push_back(MilliGpu(f));
  v.usable = static_cast<int32_t>(free_milli.size());
  return v;
}

TEST(Fragmentation, ExpectedFragmentationByHand) {
  // Free: two whole GPUs, 0.3 of a shared one, one taken.
  NodeView v = View({1000, 1000, 300, 0});
  std::vector<WorkloadShare> w = {
      {MilliGpu(500), 1}, {WholeGpus(1), 1}, {WholeGpus(4), 1}, {WholeGpus(8), 1}};
  // 0.5 GPU: the 0.3 is too small (0.3). 1 GPU: fits, the partial 0.3 is lost (0.3).
  // 4 GPUs: does not fit, all 2.3 lost. 8 GPUs (multi-node, needs a whole node): 2.3 lost.
  EXPECT_NEAR(ExpectedFragmentation(v, w), (0.3 + 0.3 + 2.3 + 2.3) / 4, 1e-9);
  EXPECT_NEAR(ExpectedFragmentation(View({1000, 1000, 1000, 1000}), w), 0.0, 1e-9);
  EXPECT_NEAR(ExpectedFragmentation(View({0, 0, 0, 0}), w), 0.0, 1e-9);
}

TEST(Fragmentation, ScoreRewardsPlacementsThatFragmentLess) {
  std::vector<WeightedScore> unused;
  auto frag = NewFragmentationScore({{WholeGpus(1), 1}, {WholeGpus(2), 1}});
  JobRequest job = WholeGpuJob("ns/j", 1, 1);
  // 2 free -> 1 free: a 2-GPU request no longer fits: +0.5 GPU expected fragmentation.
  double on_two = frag->Score(job, View({1000, 1000, 0, 0}), View({1000, 0, 0, 0}));
  // 3 free -> 2 free: both requests still fit: no growth.
  double on_three = frag->Score(job, View({1000, 1000, 1000, 0}), View({1000, 1000, 0, 0}));
  EXPECT_NEAR(on_three, 50.0, 1e-9);
  EXPECT_NEAR(on_two, 50.0 * (1 - 0.5 / 4), 1e-9);
  auto pack = NewBinPackScore();
  EXPECT_NEAR(pack->Score(job, View({1000, 1000, 0, 0}), View({1000, 0, 0, 0})), 75.0, 1e-9);
  EXPECT_NEAR(pack->Score(job, View({1000, 1000, 1000, 0}), View({1000, 1000, 0, 0})), 50.0, 1e-9);
}

// Node a has 2 of 4 GPUs free, node b 3 of 4. Best fit puts a 1-GPU job on a; that leaves a
// with one free GPU, useless to the 2-GPU jobs that are half the workload, so FGD picks b.
class ScoredPlacement : public ::testing::Test {
 protected:
  ScoredPlacement() : state_({MakeTestNode("a", 4), MakeTestNode("b", 4)}, GpuCatalog::Default()) {
    EXPECT_TRUE(
        state_.Commit({"ns/a-busy", {{.task = "w", .node = 0, .gpus = {{.gpu = 0}, {.gpu = 1}}}}})
            .ok());
    EXPECT_TRUE(
        state_.Commit({"ns/b-busy", {{.task = "w", .node = 1, .gpus = {{.gpu = 0}}}}}).ok());
  }
  std::string NodeFor(const std::vector<ScorePluginConfig>& config) {
    absl::StatusOr<std::vector<WeightedScore>> scores = MakeScorePlugins(config);
    EXPECT_TRUE(scores.ok()) << scores.status();
    GangPlacer placer(filters_, &*scores);
    PlacementResult r = placer.PlaceNow(state_, WholeGpuJob("ns/j", 1, 1));
    EXPECT_TRUE(r.allocation.has_value()) << r.reason;
    return state_.node(r.allocation->replicas[0].node).name;
  }
  std::vector<std::unique_ptr<FilterPlugin>> filters_ = DefaultFilters();
  ClusterState state_;
  std::vector<WorkloadShare> half_pairs_ = {{WholeGpus(1), 1}, {WholeGpus(2), 1}};
};

TEST_F(ScoredPlacement, BestFitWithoutScores) { EXPECT_EQ(NodeFor({}), "a"); }

TEST_F(ScoredPlacement, BinPackAloneIsBestFit) { EXPECT_EQ(NodeFor({{"BinPack", 1, {}}}), "a"); }

TEST_F(ScoredPlacement, FragmentationAvoidsStrandingAGpu) {
  EXPECT_EQ(NodeFor({{"Fragmentation", 1, half_pairs_}}), "b");
}

TEST_F(ScoredPlacement, WeightsDecide) {
  // Equal weights tie (each plugin's scores are normalized over the candidates): best fit wins.
  EXPECT_EQ(NodeFor({{"BinPack", 1, {}}, {"Fragmentation", 1, half_pairs_}}), "a");
  EXPECT_EQ(NodeFor({{"BinPack", 1, {}}, {"Fragmentation", 2, half_pairs_}}), "b");
  EXPECT_EQ(NodeFor({{"BinPack", 3, {}}, {"Fragmentation", 2, half_pairs_}}), "a");
}

// A scheduler's Fragmentation score without a workload of its own takes the caller's mix
// (Scheduler::SetWorkload): half 2-GPU jobs move the 1-GPU job to b, as above; an empty mix
// restores the Philly default; a configured workload is never replaced.
TEST_F(ScoredPlacement, SetWorkloadReplacesOnlyTheDefaultMix) {
  auto node_for = [&](Scheduler& sched) {
    ClusterState s = state_;
    std::vector<Decision> d =
        sched.Schedule(s, {testing_util::PendingWholeGpuJob("ns/j", 1, 1)}, 0);
    EXPECT_EQ(d.size(), 1u);
    return d.empty() || !d[0].allocation ? std::string()
                                         : s.node(d[0].allocation->replicas[0].node).name;
  };
  SchedulerConfig config;
  config.scores = {{"Fragmentation", 1, {}}};
  auto sched = Scheduler::FromConfig(config, {}, GpuCatalog::Default());
  ASSERT_TRUE(sched.ok()) << sched.status();
  const std::string philly = node_for(**sched);
  (*sched)->SetWorkload(half_pairs_);
  EXPECT_EQ(node_for(**sched), "b");
  (*sched)->SetWorkload({{WholeGpus(1), 1}});  // only 1-GPU jobs: nothing to strand; best fit
  EXPECT_EQ(node_for(**sched), "a");
  (*sched)->SetWorkload({});
  EXPECT_EQ(node_for(**sched), philly);

  config.scores = {{"Fragmentation", 1, half_pairs_}};
  auto configured = Scheduler::FromConfig(config, {}, GpuCatalog::Default());
  ASSERT_TRUE(configured.ok());
  (*configured)->SetWorkload({{WholeGpus(1), 1}});
  EXPECT_EQ(node_for(**configured), "b");
}

TEST(ScoredPlacement2, SharedRequestsAreScoredToo) {
  // g0 of node a is shared with 0.25 left; node b is empty. A 0.25 request: best fit and FGD
  // both fill a's GPU exactly (nothing left to fragment).
  ClusterState s({MakeTestNode("a", 2), MakeTestNode("b", 2)}, GpuCatalog::Default());
  ASSERT_TRUE(s.Commit({"ns/x",
                        {{.task = "w",
                          .node = 0,
                          .gpus = {{.gpu = 0,
                                    .mode = GpuMode::kShared,
                                    .fraction = MilliGpu(750),
                                    .memory = GiB(10)}}}}})
                  .ok());
  auto filters = DefaultFilters();
  auto scores = MakeScorePlugins({{"Fragmentation", 1, {{MilliGpu(500), 1}, {WholeGpus(1), 1}}}});
  ASSERT_TRUE(scores.ok());
  GangPlacer placer(filters, &*scores);
  JobRequest j;
  j.key = "ns/share";
  j.tasks.push_back(
      {"w", 1, {.gpu = {.mode = GpuMode::kShared, .fraction = MilliGpu(250), .memory = GiB(5)}}});
  PlacementResult r = placer.PlaceNow(s, j);
  ASSERT_TRUE(r.allocation.has_value()) << r.reason;
  EXPECT_EQ(r.allocation->replicas[0].node, 0);
  EXPECT_EQ(r.allocation->replicas[0].gpus[0].gpu, 0);
}

TEST(ScoreRegistry, BadConfigurationsAreRefusedByName) {
  EXPECT_EQ(MakeScorePlugins({{"Spread", 1, {}}}).status().message(),
            "unknown score plugin \"Spread\" (known: BinPack, Fragmentation)");
  EXPECT_EQ(MakeScorePlugins({{"BinPack", 1, {}}, {"BinPack", 2, {}}}).status().message(),
            "score plugin BinPack is listed twice");
  EXPECT_EQ(MakeScorePlugins({{"BinPack", 1, {{WholeGpus(1), 1}}}}).status().message(),
            "score plugin BinPack: only Fragmentation takes a workload");
  absl::StatusOr<std::vector<WeightedScore>> zero = MakeScorePlugins({{"BinPack", 0, {}}});
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->empty());  // weight 0 disables a plugin
  EXPECT_EQ(MakeFilters({"GpuType", "Nope"}).status().message(),
            "unknown filter plugin \"Nope\" (known: NodeHealth, GpuType, NodeSelector, "
            "TaintToleration, CudaVersion)");
  EXPECT_EQ(MakeFilters({"GpuType", "GpuType"}).status().message(),
            "filter plugin GpuType is listed twice");
}

}  // namespace
}  // namespace gpucloud::sched
