// Scheduler speed on large synthetic clusters: nodes of 8 GPUs in 4 types under a three-level
// topology (zones, spines, leaf switches of 32 nodes), jobs drawn from the Philly trace's size
// distribution (../shared/traces/pollux_philly.csv: 93.2% 1 GPU, 2.2% 2, 2.3% 4, 2.0% 8,
// 0.4% 12-128). Results are recorded in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>

#include "core/clock.h"
#include "core/sched_config.h"
#include "philly_sizes.h"
#include "sched/registry.h"
#include "sched/scheduler.h"

namespace gpucloud::sched {
namespace {

std::vector<Node> MakeCluster(int nodes) {
  const char* kTypes[] = {"H100-80GB", "A100-80GB", "A100-40GB", "L40S"};
  std::vector<Node> out;
  out.reserve(nodes);
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "node-" + std::to_string(i);
    n.cpu = Cores(128);
    n.memory = GiB(2048);
    n.cuda_version = 12040;
    n.topology = {"zone-" + std::to_string(i / 2048), "spine-" + std::to_string(i / 256),
                  "leaf-" + std::to_string(i / 32)};
    const char* type = kTypes[(i / 32) % 4];
    for (int g = 0; g < 8; ++g) {
      n.gpus.push_back(Gpu{.uuid = n.name + "-" + std::to_string(g),
                           .index = g,
                           .type = type,
                           .memory = GpuCatalog::Default().Find(type)->memory,
                           .nvlink_island = 0});
    }
    out.push_back(std::move(n));
  }
  return out;
}

PendingJob MakeJob(int id, int gpus) {
  PendingJob p;
  p.request.key = "ns/job-" + std::to_string(id);
  int per_replica = std::min(gpus, 8);
  int replicas = gpus / per_replica;
  p.request.tasks.push_back(
      {"w", replicas, ReplicaRequest{.gpu = {.mode = GpuMode::kWhole, .count = per_replica}}});
  p.request.gang_size = replicas;
  p.submit_ms = id;
  return p;
}

// One placement (place, commit, release) of a job of state.range(1) GPUs on a cluster of
// state.range(0) nodes of which every other one is half used by 1-GPU jobs (so 1-GPU jobs find
// a best-fit hole at once and 8-GPU replicas need an empty node).
// With state.range(2) = 1 the default score plugins (BinPack and Fragmentation) rank a few
// candidates per free-GPU count instead of taking the first best fit.
void BM_PlaceJob(benchmark::State& state) {
  ClusterState cluster(MakeCluster(static_cast<int>(state.range(0))), GpuCatalog::Default());
  std::vector<std::unique_ptr<FilterPlugin>> filters = DefaultFilters();
  std::vector<WeightedScore> scores;
  if (state.range(2) == 1) scores = *MakeScorePlugins(SchedulerConfig{}.scores);
  GangPlacer placer(filters, &scores);
  Rng rng(1);
  for (NodeIndex n = 0; n < cluster.node_count(); n += 2) {
    for (int g = 0; g < 4; ++g) {
      (void)cluster.Commit(Allocation{"fill-" + std::to_string(n) + "-" + std::to_string(g),
                                      {{.task = "w", .node = n, .gpus = {{.gpu = 2 * g}}}}});
    }
  }
  JobRequest job = MakeJob(0, static_cast<int>(state.range(1))).request;
  for (auto _ : state) {
    PlacementResult r = placer.PlaceNow(cluster, job);
    if (!r.allocation) {
      state.SkipWithError(r.reason.c_str());
      break;
    }
    (void)cluster.Commit(*r.allocation);
    (void)cluster.Release(job.key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PlaceJob)
    ->ArgsProduct({{1000, 10000, 50000}, {1, 8, 64}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// One scheduling cycle over state.range(1) pending Philly-sized jobs on an empty cluster of
// state.range(0) nodes.
void BM_ScheduleCycle(benchmark::State& state) {
  std::vector<Node> nodes = MakeCluster(static_cast<int>(state.range(0)));
  Rng rng(7);
  std::vector<PendingJob> pending;
  for (int i = 0; i < state.range(1); ++i) pending.push_back(MakeJob(i, bench::PhillyGpus(rng)));
  std::unique_ptr<Scheduler> scheduler =
      *Scheduler::FromConfig(SchedulerConfig{}, {}, GpuCatalog::Default());  // the defaults
  for (auto _ : state) {
    state.PauseTiming();
    ClusterState cluster(nodes, GpuCatalog::Default());
    state.ResumeTiming();
    benchmark::DoNotOptimize(scheduler->Schedule(cluster, pending, 0));
  }
  state.SetItemsProcessed(state.iterations() * state.range(1));
}
// The same cycle on a full cluster: every job waits (and says why). With state.range(2) = 1 the
// running jobs have expected ends, so each queue's head gets a reservation (a binary search
// over 10,000 end times) and later jobs are checked against it.
void BM_ScheduleCycleCongested(benchmark::State& state) {
  std::vector<Node> nodes = MakeCluster(static_cast<int>(state.range(0)));
  ClusterState cluster(nodes, GpuCatalog::Default());
  Rng ends(3);
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    ReplicaPlacement p{.task = "w", .node = n};
    for (int g = 0; g < 8; ++g) p.gpus.push_back({.gpu = g});
    Allocation a{"fill-" + std::to_string(n), {p}};
    if (state.range(2) == 1) a.expected_end_ms = ends.Range(60'000, 86'400'000);
    (void)cluster.Commit(a);
  }
  Rng rng(7);
  std::vector<PendingJob> pending;
  for (int i = 0; i < state.range(1); ++i) pending.push_back(MakeJob(i, bench::PhillyGpus(rng)));
  Scheduler scheduler(DefaultFilters(), GpuCatalog::Default());
  for (auto _ : state) benchmark::DoNotOptimize(scheduler.Schedule(cluster, pending, 0));
  state.SetItemsProcessed(state.iterations() * state.range(1));
}
BENCHMARK(BM_ScheduleCycleCongested)
    ->Args({10000, 1000, 0})
    ->Args({10000, 1000, 1})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_ScheduleCycle)
    ->Args({1000, 1000})
    ->Args({10000, 1000})
    ->Args({50000, 1000})
    ->Args({10000, 10000})
    ->Args({10000, 100000})
    ->Args({10000, 1000000})
    ->Unit(benchmark::kMillisecond);

// Preemption: a full cluster of low-priority jobs (one per node, 8 GPUs, different ages and
// checkpoints) and one high-priority job of state.range(1) GPUs: one cycle chooses its victims.
void BM_PreemptionCycle(benchmark::State& state) {
  std::vector<Node> nodes = MakeCluster(static_cast<int>(state.range(0)));
  ClusterState cluster(nodes, GpuCatalog::Default());
  Rng rng(5);
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    ReplicaPlacement p{.task = "w", .node = n};
    for (int g = 0; g < 8; ++g) p.gpus.push_back({.gpu = g});
    Allocation a{"low-" + std::to_string(n), {p}};
    a.start_ms = rng.Range(0, 3'600'000);
    a.last_checkpoint_ms = a.start_ms + rng.Range(0, 600'000);
    (void)cluster.Commit(a);
  }
  PendingJob high = MakeJob(0, static_cast<int>(state.range(1)));
  high.priority = 10;
  std::unique_ptr<Scheduler> scheduler =
      *Scheduler::FromConfig(SchedulerConfig{}, {}, GpuCatalog::Default());
  for (auto _ : state) {
    std::vector<Decision> d = scheduler->Schedule(cluster, {high}, 4'000'000);
    if (d.size() < 2) state.SkipWithError("no preemption");
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_PreemptionCycle)->ArgsProduct({{1000, 10000}, {8, 64}})->Unit(benchmark::kMillisecond);

// A flood: namespace "flood" has state.range(1) pending 8-GPU jobs submitted before namespace
// "other"'s one 1-GPU job, all in the same queue, on a cluster of state.range(0) nodes of which
// every node is full except node 0 (1 GPU free: room for "other", never for a flood job).
// state.range(2): 0 = the flood jobs are alike (one shape), 1 = each has its own shape (memory
// requests differ by 1 MiB, as a hostile tenant may make them), 2 and 3 = the same with half
// the nodes empty, so that some of the flood binds. Reports whether "other"'s job is bound in
// the cycle (other_bound) and how many decisions the cycle returned.
void BM_FloodCycle(benchmark::State& state) {
  std::vector<Node> nodes = MakeCluster(static_cast<int>(state.range(0)));
  ClusterState cluster(nodes, GpuCatalog::Default());
  const bool distinct = state.range(2) % 2 == 1, half_free = state.range(2) >= 2;
  for (NodeIndex n = 0; n < cluster.node_count(); ++n) {
    if (half_free && n % 2 == 1) continue;
    ReplicaPlacement p{.task = "w", .node = n};
    for (int g = n == 0 ? 1 : 0; g < 8; ++g) p.gpus.push_back({.gpu = g});
    (void)cluster.Commit(Allocation{"running/fill-" + std::to_string(n), {p}});
  }
  std::vector<PendingJob> pending;
  for (int i = 0; i < state.range(1); ++i) {
    PendingJob p = MakeJob(i, 8);
    p.request.key = "flood/job-" + std::to_string(i);
    if (distinct) p.request.tasks[0].per_replica.memory = MiB(1024 + i);
    pending.push_back(std::move(p));
  }
  PendingJob other = MakeJob(static_cast<int>(state.range(1)), 1);
  other.request.key = "other/job";
  pending.push_back(other);
  std::unique_ptr<Scheduler> scheduler =
      *Scheduler::FromConfig(SchedulerConfig{}, {}, GpuCatalog::Default());  // the defaults
  bool other_bound = false;
  size_t decisions = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ClusterState cycle_state = cluster;
    state.ResumeTiming();
    std::vector<Decision> d = scheduler->Schedule(cycle_state, pending, 0);
    state.PauseTiming();
    other_bound = std::any_of(d.begin(), d.end(), [](const Decision& x) {
      return x.job == "other/job" && x.kind == DecisionKind::kBind;
    });
    decisions = d.size();
    state.ResumeTiming();
  }
  state.counters["other_bound"] = other_bound;
  state.counters["decisions"] = static_cast<double>(decisions);
}
BENCHMARK(BM_FloodCycle)
    ->ArgsProduct({{256}, {10'000, 100'000}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpucloud::sched

BENCHMARK_MAIN();
