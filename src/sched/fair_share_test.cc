// Fair share between queues (weighted DRF over GPU types, with GPU-hours history) and the
// guarantee / borrowing / lending rules of QueueQuota, through the scheduler.
#include <gtest/gtest.h>

#include "sched/queue_quota.h"
#include "sched/registry.h"
#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

using testing_util::MakeTestNode;
using testing_util::PendingWholeGpuJob;

Allocation Running(std::string key, NodeIndex node, int first, int gpus, std::string queue) {
  Allocation a{std::move(key), {{.task = "w", .node = node}}};
  for (int g = first; g < first + gpus; ++g) a.replicas[0].gpus.push_back({.gpu = g});
  a.queue = std::move(queue);
  return a;
}

// Which of the two 4-GPU jobs (one per queue, a's submitted first) gets the last 4 free GPUs.
std::string Winner(SchedulerOptions o, int a_running, int b_running) {
  ClusterState s({MakeTestNode("n0", 8), MakeTestNode("n1", 8), MakeTestNode("n2", 8)},
                 GpuCatalog::Default());
  EXPECT_TRUE(s.Commit(Running("ns/fill", 2, 0, 8, "other")).ok());
  if (a_running > 0) {
    EXPECT_TRUE(s.Commit(Running("ns/a-run", 0, 0, a_running, "a")).ok());
  }
  if (b_running > 0) {
    EXPECT_TRUE(s.Commit(Running("ns/b-run", 1, 0, b_running, "b")).ok());
  }
  int free_left = 16 - a_running - b_running;
  // Fill all but 4 of the free GPUs with a job of queue "other" (which holds the most).
  if (free_left > 4) {
    Allocation more{"ns/more", {}};
    more.queue = "other";
    int need = free_left - 4;
    for (NodeIndex n = 0; n < 2 && need > 0; ++n) {
      int start = n == 0 ? a_running : b_running;
      int take = std::min(need, 8 - start);
      if (take <= 0) continue;
      ReplicaPlacement r{.task = "w", .replica = n, .node = n};
      for (int g = start; g < start + take; ++g) r.gpus.push_back({.gpu = g});
      more.replicas.push_back(r);
      need -= take;
    }
    EXPECT_TRUE(s.Commit(more).ok());
  }
  o.preemption = false;
  Scheduler sched(DefaultFilters(), GpuCatalog::Default(), o);
  std::vector<Decision> d = sched.Schedule(
      s, {PendingWholeGpuJob("ns/a", 1, 4, "a", 0, 1), PendingWholeGpuJob("ns/b", 1, 4, "b", 0, 2)},
      0);
  for (const Decision& x : d) {
    if (x.kind == DecisionKind::kBind) return x.job;
  }
  return "none";
}

TEST(FairShare, TheQueueWithTheSmallerDominantShareGoesFirst) {
  EXPECT_EQ(Winner({}, 4, 0), "ns/b");                     // a holds 4, b nothing
  EXPECT_EQ(Winner({.fair_share = false}, 4, 0), "ns/a");  // one global FIFO order
  EXPECT_EQ(Winner({}, 0, 4), "ns/a");
}

TEST(FairShare, WeightsDivideShares) {
  SchedulerOptions o;
  QueueSpec heavy;
  heavy.weight = 3;
  o.queues = {{"b", heavy}};
  // b holds 4 of 24 GPUs at weight 3 (0.056); a holds 2 at weight 1 (0.083): b goes first.
  EXPECT_EQ(Winner(o, 2, 4), "ns/b");
  o.queues.clear();
  EXPECT_EQ(Winner(o, 2, 4), "ns/a");
}

TEST(FairShare, GpuHoursInTheWindowCount) {
  SchedulerOptions o;
  // Neither holds anything now, but a used 168 GPU-hours in the last week (1 GPU on average).
  o.history = {{"a", {{"H100-80GB", 168.0}}}};
  EXPECT_EQ(Winner(o, 0, 0), "ns/b");
  o.history.clear();
  EXPECT_EQ(Winner(o, 0, 0), "ns/a");  // equal shares: queue name order, then FIFO
}

TEST(FairShare, AQueueBelowItsGuaranteeGoesFirst) {
  SchedulerOptions o;
  QueueSpec a;
  a.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(8)}};
  o.queues = {{"a", a}};
  // a holds more than b, but less than its guarantee.
  EXPECT_EQ(Winner(o, 4, 2), "ns/a");
}

TEST(QueueQuota, BorrowingStopsAtUnusedGuaranteesThatAreNotLent) {
  ClusterState s({MakeTestNode("n0", 8), MakeTestNode("n1", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(s.Commit(Running("ns/b", 0, 0, 8, "b")).ok());
  QueueSpec a, b;
  a.may_lend = false;
  a.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(6)}};
  b.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(4)}};
  std::map<std::string, QueueSpec> queues = {{"a", a}, {"b", b}};
  QueueQuota q(queues, s);
  EXPECT_TRUE(q.Borrowing("b", "H100-80GB"));
  EXPECT_FALSE(q.Borrowing("a", "H100-80GB"));
  EXPECT_TRUE(q.BelowGuarantee("a"));
  EXPECT_FALSE(q.BelowGuarantee("b"));
  // 8 free; a keeps 6 of them: b may borrow 2 more, not 3.
  EXPECT_EQ(q.CheckBorrow("b", Running("ns/b2", 1, 0, 2, "b")), std::nullopt);
  EXPECT_EQ(q.CheckBorrow("b", Running("ns/b3", 1, 0, 3, "b")),
            "borrowing 3 H100-80GB GPUs would take guaranteed capacity of queue a, which does "
            "not lend it");
  // a itself may always use its guarantee.
  EXPECT_EQ(q.CheckBorrow("a", Running("ns/a6", 1, 0, 6, "a")), std::nullopt);
  // A queue that may not borrow stops at its guarantee.
  queues["b"].may_borrow = false;
  QueueQuota strict(queues, s);
  EXPECT_EQ(strict.CheckBorrow("b", Running("ns/b1", 1, 0, 1, "b")),
            "queue b may not borrow beyond its guarantee of 4 H100-80GB GPUs (8 in use, the job "
            "needs 1)");
}

TEST(QueueQuota, DominantShareIsTheLargestShareOverWeight) {
  ClusterState s({MakeTestNode("h", 8), MakeTestNode("a", 4, {.type = "A100-80GB"})},
                 GpuCatalog::Default());
  ASSERT_TRUE(s.Commit(Running("ns/h", 0, 0, 2, "q")).ok());  // 2 of 8 H100
  ASSERT_TRUE(s.Commit(Running("ns/a", 1, 0, 2, "q")).ok());  // 2 of 4 A100: dominant
  std::map<std::string, QueueSpec> queues;
  QueueQuota q(queues, s);
  EXPECT_DOUBLE_EQ(q.DominantShare("q"), 0.5);
  queues["q"].weight = 2;
  QueueQuota weighted(queues, s);
  EXPECT_DOUBLE_EQ(weighted.DominantShare("q"), 0.25);
  EXPECT_DOUBLE_EQ(weighted.DominantShare("empty"), 0.0);
}

TEST(Scheduler, FromConfigBuildsTheConfiguredScheduler) {
  SchedulerConfig c;
  c.preemption = false;
  c.preemption_grace_s = 90;
  c.fair_share_window_s = 24 * 3600;
  c.scores = {{"BinPack", 2, {}}};
  absl::StatusOr<std::unique_ptr<Scheduler>> s =
      Scheduler::FromConfig(c, {}, GpuCatalog::Default());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)->options().preemption);
  EXPECT_EQ((*s)->options().preemption_grace_ms, 90'000);
  EXPECT_DOUBLE_EQ((*s)->options().fair_share_window_hours, 24.0);
  c.filters = {"NoSuchFilter"};
  EXPECT_FALSE(Scheduler::FromConfig(c, {}, GpuCatalog::Default()).ok());
}

}  // namespace
}  // namespace gpucloud::sched
