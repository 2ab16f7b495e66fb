// Preemption (the scheduler's post-filter): who may be preempted, the minimal victim set, whole
// gangs, grace periods, and jobs already stopping.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/clock.h"
#include "core/text.h"
#include "sched/registry.h"
#include "sched/scheduler.h"
#include "sched/test_util.h"

namespace gpucloud::sched {
namespace {

using testing_util::MakeTestNode;
using testing_util::PendingWholeGpuJob;
using testing_util::Preempted;

constexpr int64_t kMin = 60'000;

// A running job of `gpus` whole GPUs on node `node`, from GPU `first` on.
Allocation Running(std::string key, NodeIndex node, int first, int gpus, std::string queue = "q",
                   int32_t priority = 0) {
  Allocation a{std::move(key), {{.task = "w", .node = node}}};
  for (int g = first; g < first + gpus; ++g) a.replicas[0].gpus.push_back({.gpu = g});
  a.queue = std::move(queue);
  a.priority = priority;
  return a;
}

const Decision& For(const std::vector<Decision>& d, const std::string& job) {
  for (const Decision& x : d) {
    if (x.job == job && x.kind != DecisionKind::kPreempt) return x;
  }
  static const Decision kNone;
  ADD_FAILURE() << "no decision for " << job;
  return kNone;
}

// Capacity held by a placeholder (whatever its key) is never preempted, even by a job of higher
// priority in the placeholder's queue.
// A victim's periodic checkpoints count like reported ones: at 21 min, "periodic" (started at
// 0, a checkpoint every 10 min) has lost 1 min since its last, "plain" (started at 5 min, none
// reported) 16; the cheaper one goes, though the older job would be kept by the tie-breakers.
TEST(Preemption, PeriodicCheckpointsCountAsTheLastCheckpoint) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  Allocation periodic = Running("ns/periodic", 0, 0, 4);
  periodic.start_ms = 0;
  periodic.checkpoint_interval_ms = 10 * kMin;
  Allocation plain = Running("ns/plain", 0, 4, 4);
  plain.start_ms = 5 * kMin;
  ASSERT_TRUE(s.Commit(periodic).ok());
  ASSERT_TRUE(s.Commit(plain).ok());
  EXPECT_EQ(LastCheckpointMs(periodic, 21 * kMin), 20 * kMin);
  EXPECT_EQ(LastCheckpointMs(plain, 21 * kMin), 5 * kMin);
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  std::vector<Decision> d =
      sched.Schedule(s, {PendingWholeGpuJob("ns/high", 1, 4, "q", /*priority=*/10)}, 21 * kMin);
  EXPECT_EQ(Preempted(d), std::vector<std::string>{"ns/periodic"});
}

TEST(Preemption, APlaceholderIsNeverAVictim) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  Allocation hold = Running("held", 0, 0, 8);
  hold.placeholder = true;
  ASSERT_TRUE(s.Commit(hold).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  std::vector<Decision> d =
      sched.Schedule(s, {PendingWholeGpuJob("ns/high", 1, 4, "q", /*priority=*/10)}, 10 * kMin);
  EXPECT_TRUE(Preempted(d).empty());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, DecisionKind::kWait);
}

TEST(Preemption, HigherPriorityPreemptsWithAGracePeriodThenBinds) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(s.Commit(Running("ns/low", 0, 0, 8)).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  PendingJob high = PendingWholeGpuJob("ns/high", 1, 4, "q", /*priority=*/10);
  std::vector<Decision> d = sched.Schedule(s, {high}, 10 * kMin);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, DecisionKind::kPreempt);
  EXPECT_EQ(d[0].job, "ns/low");
  EXPECT_EQ(d[0].preemptor, "ns/high");
  EXPECT_EQ(d[0].grace_ms, 30'000);
  EXPECT_EQ(d[0].reason, "preempted by ns/high (priority 0 < 10); checkpoint and stop within 30 s");
  EXPECT_EQ(d[1].kind, DecisionKind::kWait);
  EXPECT_EQ(d[1].reason, "waiting for 1 preempted job to stop: ns/low");
  EXPECT_EQ(d[1].expected_start_ms, 10 * kMin + 30'000);
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_TRUE(s.allocations().contains("ns/low"));  // it runs until it has checkpointed

  // Next cycle, during the grace period: nobody else is preempted.
  Allocation stopping = s.allocations().at("ns/low");
  ASSERT_TRUE(s.Release("ns/low").ok());
  stopping.terminating = true;
  ASSERT_TRUE(s.Commit(stopping).ok());
  d = sched.Schedule(s, {high}, 10 * kMin + 10'000);
  EXPECT_TRUE(Preempted(d).empty());
  EXPECT_EQ(For(d, "ns/high").reason, "waiting for 1 preempted job to stop: ns/low");

  // The victim has stopped: the job binds.
  ASSERT_TRUE(s.Release("ns/low").ok());
  d = sched.Schedule(s, {high}, 11 * kMin);
  EXPECT_EQ(For(d, "ns/high").kind, DecisionKind::kBind);
}

TEST(Preemption, NoRightNoPreemption) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(s.Commit(Running("ns/peer", 0, 0, 8, "q", 5)).ok());
  ASSERT_TRUE(s.Commit(Running("ns/other-queue-low", 0, 8, 0, "r", 0)).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  // Same priority, same queue, not spot: waits; a higher priority in another queue does not
  // preempt either (priorities order jobs inside a queue).
  std::vector<Decision> d = sched.Schedule(
      s, {PendingWholeGpuJob("ns/same", 1, 4, "q", 5), PendingWholeGpuJob("ns/r", 1, 4, "r", 9)},
      kMin);
  EXPECT_TRUE(Preempted(d).empty());
  EXPECT_EQ(For(d, "ns/same").kind, DecisionKind::kWait);
  EXPECT_EQ(For(d, "ns/r").kind, DecisionKind::kWait);
  // With preemption off, not even a higher priority preempts.
  Scheduler off(DefaultFilters(), GpuCatalog::Default(), {.preemption = false});
  d = off.Schedule(s, {PendingWholeGpuJob("ns/top", 1, 4, "q", 9)}, kMin);
  EXPECT_TRUE(Preempted(d).empty());
}

TEST(Preemption, VictimsLoseTheFewestGpuHoursSinceTheirCheckpoint) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  const int64_t now = 100 * kMin;
  Allocation a = Running("ns/a", 0, 0, 4);  // 4 GPUs, checkpointed 1 min ago: 4 GPU-min at risk
  a.start_ms = 0;
  a.last_checkpoint_ms = now - kMin;
  Allocation b = Running("ns/b", 0, 4, 2);  // 2 GPUs, 10 min without checkpoint: 20 GPU-min
  b.start_ms = now - 10 * kMin;
  Allocation c = Running("ns/c", 0, 6, 2);  // 2 GPUs, started 1 min ago: 2 GPU-min
  c.start_ms = now - kMin;
  for (const Allocation& x : {a, b, c}) ASSERT_TRUE(s.Commit(x).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  // 2 GPUs: c alone (2) beats a (4) and b (20).
  EXPECT_EQ(Preempted(sched.Schedule(s, {PendingWholeGpuJob("ns/two", 1, 2, "q", 1)}, now)),
            std::vector<std::string>{"ns/c"});
  // 4 GPUs: a (4) beats b+c (22), although c is the cheapest single victim.
  EXPECT_EQ(Preempted(sched.Schedule(s, {PendingWholeGpuJob("ns/four", 1, 4, "q", 1)}, now)),
            std::vector<std::string>{"ns/a"});
  // 6 GPUs: a and c (6), not b.
  EXPECT_EQ(Preempted(sched.Schedule(s, {PendingWholeGpuJob("ns/six", 1, 6, "q", 1)}, now)),
            (std::vector<std::string>{"ns/a", "ns/c"}));
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_EQ(s.allocations().size(), 3u);  // decisions only: nothing was released
}

TEST(Preemption, AGangIsPreemptedWhole) {
  ClusterState s({MakeTestNode("n0", 8), MakeTestNode("n1", 8)}, GpuCatalog::Default());
  Allocation gang{"ns/gang",
                  {{.task = "w", .replica = 0, .node = 0}, {.task = "w", .replica = 1, .node = 1}}};
  for (int g = 0; g < 4; ++g) {
    gang.replicas[0].gpus.push_back({.gpu = g});
    gang.replicas[1].gpus.push_back({.gpu = g});
  }
  gang.queue = "q";
  ASSERT_TRUE(s.Commit(gang).ok());
  ASSERT_TRUE(s.Commit(Running("ns/fill0", 0, 4, 4, "q", 5)).ok());
  ASSERT_TRUE(s.Commit(Running("ns/fill1", 1, 4, 4, "q", 5)).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  std::vector<Decision> d = sched.Schedule(s, {PendingWholeGpuJob("ns/high", 1, 4, "q", 3)}, kMin);
  // One decision stops both of the gang's replicas (its allocation is one unit).
  EXPECT_EQ(Preempted(d), std::vector<std::string>{"ns/gang"});
}

TEST(Preemption, SpotJobsMakeRoomForOnDemandOnes) {
  ClusterState s({MakeTestNode("n", 8)}, GpuCatalog::Default());
  Allocation spot = Running("ns/spot", 0, 0, 8, "batch");
  spot.preemptible = true;
  ASSERT_TRUE(s.Commit(spot).ok());
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  PendingJob other_spot = PendingWholeGpuJob("ns/spot2", 1, 8, "research");
  other_spot.preemptible = true;
  EXPECT_TRUE(Preempted(sched.Schedule(s, {other_spot}, kMin)).empty());
  std::vector<Decision> d =
      sched.Schedule(s, {PendingWholeGpuJob("ns/on-demand", 1, 8, "research")}, kMin);
  EXPECT_EQ(Preempted(d), std::vector<std::string>{"ns/spot"});
  EXPECT_EQ(d[0].reason, "preempted by ns/on-demand (a spot job); checkpoint and stop within 30 s");
}

// With preemption on, a spot job comes after the cycle's other jobs: bound first into the room
// a non-spot job needs, it would be preempted by it at once, and, taking the room again each time
// it is freed, keep that job waiting for ever (the replay test's scripted day found that).
TEST(Preemption, ASpotJobIsDecidedAfterTheJobsThatMayPreemptIt) {
  ClusterState s({MakeTestNode("a", 8), MakeTestNode("b", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(s.Commit(Running("ns/running", 0, 0, 8)).ok());  // node a, no known end
  Scheduler sched(DefaultFilters(), GpuCatalog::Default());
  PendingJob gang = PendingWholeGpuJob("ns/gang", 2, 8, "q", 0, 1);
  PendingJob spot = PendingWholeGpuJob("ns/spot", 1, 4, "q", 0, 2);  // came before `eight`
  spot.preemptible = true;
  PendingJob eight = PendingWholeGpuJob("ns/eight", 1, 8, "q", 0, 3);
  std::vector<Decision> d = sched.Schedule(s, {gang, spot, eight}, kMin);
  EXPECT_EQ(For(d, "ns/gang").kind, DecisionKind::kWait);
  EXPECT_EQ(For(d, "ns/eight").kind, DecisionKind::kBind);
  EXPECT_EQ(For(d, "ns/spot").kind, DecisionKind::kWait);
  EXPECT_TRUE(Preempted(d).empty());
  // Without preemption a spot job is an ordinary one: first come, first served.
  SchedulerOptions no_preemption;
  no_preemption.preemption = false;
  Scheduler plain(DefaultFilters(), GpuCatalog::Default(), no_preemption);
  ClusterState t({MakeTestNode("a", 8), MakeTestNode("b", 8)}, GpuCatalog::Default());
  ASSERT_TRUE(t.Commit(Running("ns/running", 0, 0, 8)).ok());
  d = plain.Schedule(t, {gang, spot, eight}, kMin);
  EXPECT_EQ(For(d, "ns/spot").kind, DecisionKind::kBind);
  EXPECT_EQ(For(d, "ns/eight").kind, DecisionKind::kWait);
}

class Reclaim : public ::testing::Test {
 protected:
  Reclaim() : state_({MakeTestNode("n0", 8), MakeTestNode("n1", 8)}, GpuCatalog::Default()) {
    QueueSpec a, b;
    a.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(8)}};
    b.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(4)}};
    options_.queues = {{"a", a}, {"b", b}};
    // Queue b borrows the whole cluster with 1-GPU jobs started at different times.
    for (int i = 0; i < 16; ++i) {
      Allocation x = Running(Cat("ns/b", i < 10 ? "0" : "", i), i / 8, i % 8, 1, "b");
      x.start_ms = i * kMin;  // later jobs lose less
      EXPECT_TRUE(state_.Commit(x).ok());
    }
  }
  ClusterState state_;
  SchedulerOptions options_;
};

TEST_F(Reclaim, AQueueTakesBackItsGuaranteeFromBorrowersOnly) {
  Scheduler sched(DefaultFilters(), GpuCatalog::Default(), options_);
  std::vector<PendingJob> pending;
  for (int i = 0; i < 5; ++i)
    pending.push_back(PendingWholeGpuJob(Cat("ns/a", i), 1, 2, "a", 0, i));
  std::vector<Decision> d = sched.Schedule(state_, pending, 20 * kMin);
  // Four 2-GPU jobs reach a's guarantee of 8: 8 of b's jobs go, the youngest (least work lost)
  // first; b keeps 8, above its own guarantee of 4. The fifth job would exceed the guarantee.
  std::vector<std::string> victims = Preempted(d);
  EXPECT_EQ(victims, (std::vector<std::string>{"ns/b08", "ns/b09", "ns/b10", "ns/b11", "ns/b12",
                                               "ns/b13", "ns/b14", "ns/b15"}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(For(d, Cat("ns/a", i)).kind, DecisionKind::kWait);
    EXPECT_TRUE(For(d, Cat("ns/a", i)).reason.starts_with("waiting for 2 preempted jobs to stop"))
        << For(d, Cat("ns/a", i)).reason;
  }
  EXPECT_FALSE(For(d, "ns/a4").reason.starts_with("waiting for 2 preempted"))
      << For(d, "ns/a4").reason;
  for (const Decision& x : d) {
    if (x.kind == DecisionKind::kPreempt) {
      EXPECT_TRUE(x.reason.find("queue a reclaims its guarantee of 8 H100-80GB GPUs lent to "
                                "queue b") != std::string::npos)
          << x.reason;
    }
  }
}

TEST_F(Reclaim, AQueueAtItsGuaranteeIsNotAVictim) {
  // b is down to its guarantee (4); a borrows the other 12. Now b wants more: a is the only
  // borrower, so only a's jobs are victims, and only as many as b's guarantee needs.
  ClusterState s({MakeTestNode("n0", 8), MakeTestNode("n1", 8)}, GpuCatalog::Default());
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(s.Commit(Running(Cat("ns/x", i), i / 8, i % 8, 1, i < 4 ? "b" : "a")).ok());
  }
  Scheduler sched(DefaultFilters(), GpuCatalog::Default(), options_);
  std::vector<Decision> d = sched.Schedule(s, {PendingWholeGpuJob("ns/b-more", 1, 1, "b")}, kMin);
  EXPECT_TRUE(Preempted(d).empty());  // b holds its guarantee already: no reclaim
  // Queue a is at 12 of its 8 guaranteed: borrowing. A new a job cannot reclaim from b.
  d = sched.Schedule(s, {PendingWholeGpuJob("ns/a-more", 1, 1, "a")}, kMin);
  EXPECT_TRUE(Preempted(d).empty());
}

// Random clusters, queues with guarantees and a stream of 1- and 2-GPU jobs and gangs; the
// caller honours decisions (preempted jobs stop at the next cycle, jobs end at random). Checks:
// nothing over-committed; binds hold whole gangs; a queue that has demand gets its guarantee
// within two cycles of asking (1-GPU jobs, so placement cannot be the obstacle); identical
// inputs give identical decisions.
TEST(PreemptionProperty, GuaranteesAreMetAndNothingIsOverCommitted) {
  int reclaims = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    int nodes = 1 + static_cast<int>(rng.Uniform(3));
    std::vector<Node> ns;
    for (int i = 0; i < nodes; ++i) ns.push_back(MakeTestNode(Cat("n", i), 8));
    ClusterState s(ns, GpuCatalog::Default());
    int capacity = 8 * nodes;
    int ga = static_cast<int>(rng.Uniform(capacity / 2 + 1));
    int gb = static_cast<int>(rng.Uniform(capacity - ga + 1));
    QueueSpec a, b;
    a.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(ga)}};
    b.quota = {{.gpu_type = "H100-80GB", .guaranteed = WholeGpus(gb)}};
    SchedulerOptions o;
    o.queues = {{"a", a}, {"b", b}};
    Scheduler sched(DefaultFilters(), GpuCatalog::Default(), o);
    std::vector<PendingJob> pending;
    int next_id = 0;
    std::map<std::string, int> first_unmet;  // queue -> cycle its demand was first unmet
    for (int cycle = 0; cycle < 12; ++cycle) {
      const int64_t now = cycle * kMin;
      // Preempted jobs have stopped; some running ones end.
      std::vector<std::string> done;
      for (const auto& [key, x] : s.allocations()) {
        if (x.terminating || rng.Uniform(10) == 0) done.push_back(key);
      }
      for (const std::string& k : done) ASSERT_TRUE(s.Release(k).ok());
      // b floods with work early; a arrives later with 1-GPU jobs.
      int new_jobs = static_cast<int>(rng.Uniform(6));
      for (int j = 0; j < new_jobs; ++j) {
        bool queue_a = cycle >= 3 && rng.Uniform(2) == 0;
        int gpus = queue_a ? 1 : 1 + static_cast<int>(rng.Uniform(2));
        int replicas = queue_a ? 1 : 1 + static_cast<int>(rng.Uniform(2));
        pending.push_back(PendingWholeGpuJob(Cat("ns/j", next_id++), replicas, gpus,
                                             queue_a ? "a" : "b", 0, now));
        // Only b's: a spot job is preempted by any other (whatever its queue's guarantee),
        // so a's guarantee is promised to its other jobs.
        pending.back().preemptible = !queue_a && rng.Uniform(4) == 0;
      }
      ClusterState copy = s;
      std::vector<Decision> d = sched.Schedule(s, pending, now);
      ASSERT_EQ(d, sched.Schedule(copy, pending, now)) << "seed " << seed;
      ASSERT_TRUE(s.CheckInvariants().ok()) << "seed " << seed;
      std::set<std::string> bound;
      for (const Decision& x : d) {
        if (x.kind == DecisionKind::kBind) {
          bound.insert(x.job);
          int32_t want = 0;
          for (const PendingJob& p : pending) {
            if (p.request.key == x.job) want = p.request.gang_size;
          }
          ASSERT_GE(static_cast<int32_t>(x.allocation->replicas.size()), want);
        }
        if (x.kind == DecisionKind::kPreempt) {
          ++reclaims;
          Allocation v = s.allocations().at(x.job);
          ASSERT_TRUE(s.Release(x.job).ok());
          v.terminating = true;
          ASSERT_TRUE(s.Commit(v).ok());
        }
        ASSERT_NE(x.kind, DecisionKind::kReject) << x.reason;
      }
      std::erase_if(pending, [&](const PendingJob& p) { return bound.contains(p.request.key); });
      // Guarantee check for queue a: with demand (pending + running) at least its guarantee,
      // it must hold its guarantee within two cycles.
      int running_a = 0, pending_a = 0;
      for (const auto& [key, x] : s.allocations()) {
        if (x.queue == "a" && !x.terminating) running_a += 1;
      }
      for (const PendingJob& p : pending) pending_a += p.queue == "a";
      if (pending_a > 0 && running_a < ga) {
        first_unmet.try_emplace("a", cycle);
        ASSERT_LE(cycle - first_unmet["a"], 2)
            << "seed " << seed << ": queue a holds " << running_a << " of its guarantee " << ga;
      } else {
        first_unmet.erase("a");
      }
    }
  }
  EXPECT_GT(reclaims, 100);  // the scenarios do exercise preemption
}

}  // namespace
}  // namespace gpucloud::sched
