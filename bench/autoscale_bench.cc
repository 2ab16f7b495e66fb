// Autoscaler speed: one decision round (autoscale/autoscaler.h) over many waiting jobs and
// pools. The cluster has 20 busy nodes per pool (so every waiting job needs new nodes), pools
// of 5 GPU types and 3 billing classes with room for 20 more nodes each, and jobs drawn from the
// Philly trace's size distribution (as in sched_bench), each accepting one GPU type (a fifth
// accept any), one in ten accepting spot. Results are recorded in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <algorithm>

#include "autoscale/autoscaler.h"
#include "autoscale/pool_nodes.h"
#include "core/clock.h"
#include "philly_sizes.h"
#include "sched/registry.h"

namespace gpucloud::autoscale {
namespace {

const char* const kTypes[] = {"H100-80GB", "A100-80GB", "A100-40GB", "L40S", "V100-16GB"};

void BM_Decide(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const int pool_count = static_cast<int>(state.range(1));
  const GpuCatalog& catalog = GpuCatalog::Default();
  sched::Scheduler scheduler(sched::DefaultFilters(), catalog);
  AutoscalerInput in;
  std::vector<Node> nodes;
  std::vector<sched::Allocation> busy;
  for (int p = 0; p < pool_count; ++p) {
    NodePool pool;
    pool.metadata.name = "pool-" + std::to_string(p);
    pool.spec.gpu_type = kTypes[p % 5];
    pool.spec.gpus_per_node = 8;
    pool.spec.min_nodes = 0;
    pool.spec.max_nodes = 40;
    pool.spec.billing = static_cast<BillingClass>((p / 5) % 3);
    pool.spec.provider = "local";
    for (int i = 0; i < 20; ++i) {
      nodes.push_back(PoolNode(pool, i, {"z", "s-" + std::to_string(p), "l"}, catalog));
      sched::Allocation a;
      a.job = "busy/" + nodes.back().name;
      sched::ReplicaPlacement r{.task = "w",
                                .node = static_cast<sched::NodeIndex>(nodes.size() - 1)};
      for (int g = 0; g < 8; ++g) r.gpus.push_back({.gpu = g});
      a.replicas.push_back(r);
      busy.push_back(a);
    }
    in.pools.push_back({std::move(pool)});
  }
  sched::ClusterState cluster(nodes, catalog);
  for (const sched::Allocation& a : busy) {
    if (!cluster.Commit(a).ok()) state.SkipWithError("commit failed");
  }
  Rng rng(7);
  std::vector<sched::PendingJob> waiting;
  for (int j = 0; j < jobs; ++j) {
    sched::PendingJob p;
    p.request.key = "ns/job-" + std::to_string(j);
    int gpus = bench::PhillyGpus(rng);
    int per = std::min(gpus, 8);
    sched::ReplicaRequest r{.gpu = {.mode = GpuMode::kWhole, .count = per}};
    if (rng.Uniform(5) != 0) r.gpu.types = {kTypes[rng.Uniform(5)]};
    p.request.tasks.push_back({"w", gpus / per, r});
    p.request.gang_size = gpus / per;
    p.preemptible = rng.Uniform(10) == 0;
    waiting.push_back(std::move(p));
  }
  for (const sched::PendingJob& p : waiting) in.waiting.push_back(&p);
  in.state = &cluster;
  Autoscaler autoscaler(scheduler, catalog);
  size_t ups = 0, unmet = 0;
  for (auto _ : state) {
    Plan plan = autoscaler.Decide(in);
    ups = plan.ups.size();
    unmet = 0;
    for (const Unmet& u : plan.unmet) unmet += u.jobs.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["requests"] = static_cast<double>(ups);
  state.counters["unmet"] = static_cast<double>(unmet);
}
BENCHMARK(BM_Decide)->Args({1000, 50})->Args({10000, 50})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpucloud::autoscale

BENCHMARK_MAIN();
