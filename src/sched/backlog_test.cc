#include "sched/backlog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "sched/registry.h"
#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

using testing_util::MakeTestNode;
using testing_util::PendingWholeGpuJob;

TEST(NamespaceOfKeyTest, IsThePartBeforeTheFirstSlash) {
  EXPECT_EQ(NamespaceOfKey("team-a/train"), "team-a");
  EXPECT_EQ(NamespaceOfKey("a/b/c"), "a");
  EXPECT_EQ(NamespaceOfKey("plain"), "");
  EXPECT_EQ(NamespaceOfKey(""), "");
}

TEST(NamespaceBudgetTest, CountsWaitsAndSearchesPerNamespaceButNotBinds) {
  NamespaceBudget budget({.max_waiting = 3, .max_searches = 2});
  for (int i = 0; i < 10; ++i) budget.Record("a", JobOutcome::kBound);
  EXPECT_TRUE(budget.Admits("a"));
  budget.Record("a", JobOutcome::kSearched);
  budget.Record("a", JobOutcome::kSearched);
  EXPECT_FALSE(budget.Admits("a")) << "two searches are the limit";
  EXPECT_TRUE(budget.Admits("b")) << "another namespace has its own budget";
  budget.Record("b", JobOutcome::kRemembered);
  budget.Record("b", JobOutcome::kRemembered);
  EXPECT_TRUE(budget.Admits("b"));
  budget.Record("b", JobOutcome::kRemembered);
  EXPECT_FALSE(budget.Admits("b")) << "three waits are the limit, remembered or not";
}

TEST(NamespaceBudgetTest, ZeroIsUnbounded) {
  NamespaceBudget budget({.max_waiting = 0, .max_searches = 0});
  for (int i = 0; i < 100'000; ++i) budget.Record("a", JobOutcome::kSearched);
  EXPECT_TRUE(budget.Admits("a"));
}

// The lane yields exactly the order of a full sort by QueueSortLess, whatever the namespaces.
TEST(LaneTest, YieldsTheQueueOrderAcrossNamespaces) {
  Rng rng(11);
  // dlas with bands at 0.3 and 0.6 GPU-seconds and a starvation guard, at a time that promotes
  // some of the jobs.
  const LasConfig las{.thresholds_gpu_s = {300, 600}, .starvation_factor = 2};
  for (QueueOrdering ordering :
       {QueueOrdering::kFifo, QueueOrdering::kSjf, QueueOrdering::kLas, QueueOrdering::kDlas}) {
    const OrderContext order{ordering, &las, 900'000};
    std::vector<PendingJob> jobs;
    for (int i = 0; i < 300; ++i) {
      PendingJob p = PendingWholeGpuJob(Cat("ns", rng.Uniform(7), "/j", i), 1,
                                        static_cast<int>(rng.Range(1, 8)), "",
                                        static_cast<int32_t>(rng.Uniform(3)), rng.Range(0, 50));
      if (rng.Uniform(2) == 0) p.runtime_estimate_s = rng.Range(60, 6000);
      p.attained_gpu_ms = rng.Range(0, 1000) * 1000;
      p.waiting_since_ms = rng.Range(0, 900) * 1000;
      jobs.push_back(std::move(p));
    }
    std::vector<const PendingJob*> pointers;
    for (const PendingJob& p : jobs) pointers.push_back(&p);
    std::vector<const PendingJob*> sorted = pointers;
    std::sort(sorted.begin(), sorted.end(), [&](const PendingJob* a, const PendingJob* b) {
      return QueueSortLess(order, *a, *b);
    });
    Lane lane(order, pointers);
    std::vector<const PendingJob*> got;
    while (!lane.empty()) {
      got.push_back(&lane.Next());
      lane.Pop();
    }
    EXPECT_EQ(got, sorted);
  }
}

TEST(LaneTest, DropsANamespaceAtOnce) {
  std::vector<PendingJob> jobs = {
      PendingWholeGpuJob("a/1", 1, 1, "", 0, 1), PendingWholeGpuJob("b/1", 1, 1, "", 0, 2),
      PendingWholeGpuJob("a/2", 1, 1, "", 0, 3), PendingWholeGpuJob("a/3", 1, 1, "", 0, 4),
      PendingWholeGpuJob("b/2", 1, 1, "", 0, 5)};
  std::vector<const PendingJob*> pointers;
  for (const PendingJob& p : jobs) pointers.push_back(&p);
  Lane lane(OrderContext{QueueOrdering::kFifo}, pointers);
  EXPECT_EQ(lane.Next().request.key, "a/1");
  lane.Pop();
  EXPECT_EQ(lane.Next().request.key, "b/1");
  lane.Pop();
  EXPECT_EQ(lane.Next().request.key, "a/2");
  EXPECT_EQ(lane.DropNamespaceOfNext(), 2u);
  EXPECT_EQ(lane.Next().request.key, "b/2");
  lane.Pop();
  EXPECT_TRUE(lane.empty());
}

// The issue's case: namespace "flood" has 100,000 pending jobs, each of its own shape (so no
// answer can be reused), submitted before namespace "other"'s one small job, in the same queue,
// on a full cluster with one free GPU. One cycle places "other"'s job and looks at no more than
// the budget of "flood"'s jobs.
TEST(SchedulerBudgetTest, AFloodedNamespaceCannotHoldUpAnother) {
  std::vector<Node> nodes;
  for (int i = 0; i < 16; ++i) nodes.push_back(MakeTestNode(Cat("n", i), 8));
  ClusterState state(nodes, GpuCatalog::Default());
  for (NodeIndex n = 0; n < state.node_count(); ++n) {
    ReplicaPlacement p{.task = "w", .node = n};
    for (int g = n == 0 ? 1 : 0; g < 8; ++g) p.gpus.push_back({.gpu = g});
    ASSERT_TRUE(state.Commit(Allocation{Cat("running/fill-", n), {p}}).ok());
  }
  constexpr int kFlood = 100'000;
  std::vector<PendingJob> pending;
  pending.reserve(kFlood + 1);
  for (int i = 0; i < kFlood; ++i) {
    PendingJob p = PendingWholeGpuJob(Cat("flood/j", i), 1, 8, "", 0, i);
    p.request.tasks[0].per_replica.memory = MiB(1024 + i);  // every job its own shape
    pending.push_back(std::move(p));
  }
  pending.push_back(PendingWholeGpuJob("other/j", 1, 1, "", 0, kFlood));
  SchedulerOptions options;  // the default budget
  Scheduler scheduler(DefaultFilters(), GpuCatalog::Default(), options);
  CycleStats stats;
  std::vector<Decision> decisions = scheduler.Schedule(state, pending, 0, &stats);

  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(decisions.back().job, "other/j");
  EXPECT_EQ(decisions.back().kind, DecisionKind::kBind) << decisions.back().reason;
  const int64_t bound = options.namespace_budget.max_searches;
  EXPECT_EQ(stats.searched, bound);  // flood's; other's job bound
  EXPECT_EQ(stats.decided, static_cast<int64_t>(decisions.size()));
  EXPECT_EQ(stats.decided, bound + 1);
  EXPECT_EQ(stats.deferred, kFlood - bound);
  for (const Decision& d : decisions) {
    if (d.job == "other/j") continue;
    EXPECT_EQ(d.kind, DecisionKind::kWait) << d.job;
  }
}

// Alike flood jobs reuse one answer, but still no more than max_waiting of them are decided.
TEST(SchedulerBudgetTest, AlikeJobsAreBoundedByTheWaitingBudget) {
  std::vector<Node> nodes = {MakeTestNode("n0", 8)};
  ClusterState state(nodes, GpuCatalog::Default());
  std::vector<PendingJob> pending;
  for (int i = 0; i < 5000; ++i)
    pending.push_back(PendingWholeGpuJob(Cat("flood/j", i), 1, 8, "", 0, i));
  pending.push_back(PendingWholeGpuJob("other/j", 1, 1, "", 0, 5000));
  SchedulerOptions options;
  options.namespace_budget = {.max_waiting = 50, .max_searches = 10};
  options.fair_share = false;  // the one global order is bounded the same way
  Scheduler scheduler(DefaultFilters(), GpuCatalog::Default(), options);
  CycleStats stats;
  std::vector<Decision> decisions = scheduler.Schedule(state, pending, 0, &stats);
  // flood/j0 binds the whole node; then 50 of flood wait (one search, 49 reused answers); other's
  // job is looked at (and waits: the node is full).
  ASSERT_EQ(decisions.size(), 52u);
  EXPECT_EQ(decisions[0].kind, DecisionKind::kBind);
  EXPECT_EQ(decisions.back().job, "other/j");
  EXPECT_EQ(stats.deferred, 5000 - 51);
  EXPECT_EQ(stats.searched, 2);
}

// Under the budget nothing changes: every job gets its decision, in the same order as without one.
TEST(SchedulerBudgetTest, UnderTheBudgetEveryJobIsDecidedAsWithout) {
  std::vector<Node> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(MakeTestNode(Cat("n", i), 8));
  Rng rng(3);
  std::vector<PendingJob> pending;
  for (int i = 0; i < 60; ++i) {
    pending.push_back(PendingWholeGpuJob(Cat("ns", i % 3, "/j", i), 1,
                                         static_cast<int>(rng.Range(1, 8)), Cat("q", i % 2),
                                         static_cast<int32_t>(rng.Uniform(2)), i));
  }
  SchedulerOptions bounded;
  SchedulerOptions unbounded;
  unbounded.namespace_budget = {.max_waiting = 0, .max_searches = 0};
  Scheduler a(DefaultFilters(), GpuCatalog::Default(), bounded);
  Scheduler b(DefaultFilters(), GpuCatalog::Default(), unbounded);
  ClusterState sa(nodes, GpuCatalog::Default()), sb(nodes, GpuCatalog::Default());
  CycleStats stats;
  std::vector<Decision> da = a.Schedule(sa, pending, 0, &stats);
  EXPECT_EQ(da, b.Schedule(sb, pending, 0));
  EXPECT_EQ(da.size(), pending.size());
  EXPECT_EQ(stats.deferred, 0);
}

// spec.namespaceBudget in a SchedulerConfiguration file reaches the cycle (the server and the
// simulator build their scheduler with FromConfig).
TEST(SchedulerBudgetTest, FromConfigTakesTheBudgetOfTheConfigurationFile) {
  manifest::ParseResult r = manifest::ParseManifests(R"(apiVersion: gpucloud/v1
kind: SchedulerConfiguration
metadata: {name: p}
spec:
  fairShare: {enabled: false}
  namespaceBudget: {maxWaiting: 50, maxSearches: 10}
)",
                                                     "p.yaml");
  ASSERT_TRUE(r.ok());
  const SchedulerConfig& config = std::get<SchedulerConfiguration>(r.manifests.at(0).object).spec;
  absl::StatusOr<std::unique_ptr<Scheduler>> s =
      Scheduler::FromConfig(config, {}, GpuCatalog::Default());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().namespace_budget.max_waiting, 50);
  EXPECT_EQ((*s)->options().namespace_budget.max_searches, 10);

  std::vector<Node> nodes = {MakeTestNode("n0", 8)};
  ClusterState state(nodes, GpuCatalog::Default());
  std::vector<PendingJob> pending;
  for (int i = 0; i < 500; ++i)
    pending.push_back(PendingWholeGpuJob(Cat("flood/j", i), 1, 8, "", 0, i));
  CycleStats stats;
  std::vector<Decision> decisions = (*s)->Schedule(state, pending, 0, &stats);
  EXPECT_EQ(decisions.size(), 51u);  // one bind, then 50 waits
  EXPECT_EQ(stats.deferred, 500 - 51);

  // Omitted: the built-in limits; 0: no limit.
  SchedulerConfig defaults;
  s = Scheduler::FromConfig(defaults, {}, GpuCatalog::Default());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().namespace_budget.max_waiting, NamespaceBudgetLimits{}.max_waiting);
  EXPECT_EQ((*s)->options().namespace_budget.max_searches, NamespaceBudgetLimits{}.max_searches);
  defaults.namespace_budget = {.max_waiting = 0, .max_searches = 0};
  s = Scheduler::FromConfig(defaults, {}, GpuCatalog::Default());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().namespace_budget.max_waiting, 0);
  EXPECT_EQ((*s)->options().namespace_budget.max_searches, 0);
}

}  // namespace
}  // namespace gpucloud::sched
