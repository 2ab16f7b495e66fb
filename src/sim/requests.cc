#include "sim/requests.h"

#include <algorithm>
#include <map>

#include "core/text.h"
#include "sim/simulator.h"

namespace gpucloud::sim {

// The largest replica size <= max_per_node that divides `gpus`.
int32_t ReplicaSize(int64_t gpus, int32_t max_per_node) {
  for (int32_t d = std::min<int64_t>(gpus, max_per_node); d > 1; --d) {
    if (gpus % d == 0) return d;
  }
  return 1;
}

sched::PendingJob MakeRequest(const TraceJob& job, int32_t index, int32_t max_per_node,
                              bool oracle_estimates) {
  sched::PendingJob p;
  p.request.key = Cat("j/", index);
  int32_t replicas = 0;
  for (const TraceTask& t : job.tasks) {
    sched::TaskRequest task;
    task.name = t.name;
    task.replicas = t.replicas;
    GpuRequest& gpu = task.per_replica.gpu;
    gpu.types = job.gpu_types;
    if (t.gpus_per_replica.raw() < kMilliPerUnit) {
      gpu.mode = GpuMode::kShared;
      gpu.fraction = t.gpus_per_replica;
    } else {
      int64_t whole = t.gpus_per_replica.raw() / kMilliPerUnit;
      int32_t per = ReplicaSize(whole, max_per_node);
      gpu.mode = GpuMode::kWhole;
      gpu.count = per;
      task.replicas = static_cast<int32_t>(t.replicas * (whole / per));
    }
    replicas += task.replicas;
    p.request.tasks.push_back(std::move(task));
  }
  p.request.gang_size = replicas;
  p.queue = job.queue;
  p.priority = job.priority;
  p.submit_ms = job.submit_s * 1000;
  p.runtime_estimate_s = job.estimate_s;
  if (!p.runtime_estimate_s && oracle_estimates) p.runtime_estimate_s = job.duration_s;
  return p;
}

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kFinished:
      return "finished";
    case JobState::kRejected:
      return "rejected";
    case JobState::kRunning:
      return "running";
    case JobState::kNotSubmitted:
      return "not-submitted";
    case JobState::kPending:
      break;
  }
  return "pending";
}

std::vector<WorkloadShare> WorkloadOfTrace(const Trace& trace, int32_t max_gpus_per_node) {
  std::map<int64_t, int64_t> tasks_by_size;  // milli-GPUs per replica -> tasks
  for (const TraceJob& job : trace.jobs) {
    for (const TraceTask& t : job.tasks) {
      int64_t milli = t.gpus_per_replica.raw();
      if (milli >= kMilliPerUnit) {
        milli = int64_t{ReplicaSize(milli / kMilliPerUnit, max_gpus_per_node)} * kMilliPerUnit;
      }
      if (milli > 0) ++tasks_by_size[milli];
    }
  }
  std::vector<WorkloadShare> out;
  for (const auto& [milli, n] : tasks_by_size) {
    out.push_back({MilliGpu(milli), static_cast<double>(n)});
  }
  return out;
}

}  // namespace gpucloud::sim
