// Builders shared by the scheduler's tests (test-only; not part of the library).
#ifndef GPUCLOUD_SCHED_TEST_UTIL_H_
#define GPUCLOUD_SCHED_TEST_UTIL_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/node.h"
#include "sched/job_request.h"
#include "sched/scheduler.h"

namespace gpucloud::sched::testing_util {

struct NodeOptions {
  std::string type = "H100-80GB";
  TopologyPath path = {"z", "s", "l"};
  bool mig = false;
  int gpus_per_island = 0;  // 0: no NVLink islands
  MilliCpu cpu = Cores(128);
  MiB memory = GiB(1024);
};

// A node with `gpus` GPUs of one catalog type, CUDA 12.4.
inline Node MakeTestNode(std::string name, int gpus, const NodeOptions& o = {}) {
  Node n;
  n.name = std::move(name);
  n.cpu = o.cpu;
  n.memory = o.memory;
  n.topology = o.path;
  n.cuda_version = 12040;
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back(Gpu{.uuid = n.name + "-gpu" + std::to_string(i),
                         .index = i,
                         .type = o.type,
                         .memory = GpuCatalog::Default().Find(o.type)->memory,
                         .mig_enabled = o.mig,
                         .nvlink_island = o.gpus_per_island > 0 ? i / o.gpus_per_island : -1});
  }
  return n;
}

// A job of `replicas` replicas of `gpus_each` whole GPUs in one task "w"; gang 0 = all.
inline JobRequest WholeGpuJob(std::string key, int replicas, int gpus_each, int gang = 0) {
  JobRequest j;
  j.key = std::move(key);
  j.tasks.push_back(
      {"w", replicas, ReplicaRequest{.gpu = {.mode = GpuMode::kWhole, .count = gpus_each}}});
  j.gang_size = gang > 0 ? gang : replicas;
  return j;
}

// A pending WholeGpuJob in `queue`.
inline PendingJob PendingWholeGpuJob(std::string key, int replicas, int gpus_each,
                                     std::string queue = "", int32_t priority = 0,
                                     int64_t submit_ms = 0) {
  PendingJob p;
  p.request = WholeGpuJob(std::move(key), replicas, gpus_each);
  p.queue = std::move(queue);
  p.priority = priority;
  p.submit_ms = submit_ms;
  return p;
}

// The jobs a cycle's decisions preempt, sorted.
inline std::vector<std::string> Preempted(const std::vector<Decision>& decisions) {
  std::vector<std::string> out;
  for (const Decision& d : decisions) {
    if (d.kind == DecisionKind::kPreempt) out.push_back(d.job);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpucloud::sched::testing_util

#endif  // GPUCLOUD_SCHED_TEST_UTIL_H_
