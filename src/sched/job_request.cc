#include "sched/job_request.h"

#include <algorithm>

#include "core/text.h"

namespace gpucloud::sched {

int32_t JobRequest::TotalReplicas() const {
  int32_t total = 0;
  for (const TaskRequest& t : tasks) total += t.replicas;
  return total;
}

std::optional<int64_t> JobRequest::WholeGpusNeeded() const {
  int64_t needed = 0;
  for (const TaskRequest& t : tasks) {
    const GpuRequest& g = t.per_replica.gpu;
    if (g.mode == GpuMode::kMig || g.mode == GpuMode::kShared) return std::nullopt;
    if (g.mode == GpuMode::kWhole) needed += int64_t{g.count} * t.replicas;
  }
  return needed;
}

std::vector<std::string> JobRequest::AcceptedGpuTypes() const {
  std::vector<std::string> out;
  for (const TaskRequest& t : tasks) {
    const GpuRequest& g = t.per_replica.gpu;
    if (g.mode == GpuMode::kNone) continue;
    if (g.types.empty()) return {};
    for (const std::string& type : g.types) {
      if (std::find(out.begin(), out.end(), type) == out.end()) out.push_back(type);
    }
  }
  return out;
}

JobRequest MakeJobRequest(const Job& job) {
  JobRequest r;
  r.key = job.metadata.namespace_ + "/" + job.metadata.name;
  for (const TaskSpec& t : job.spec.tasks) {
    r.tasks.push_back(
        {t.name, t.replicas, ReplicaRequest{t.resources.gpu, t.resources.cpu, t.resources.memory}});
  }
  r.gang_size = job.spec.GangSize();
  r.node_selector = job.spec.node_selector;
  r.tolerations = job.spec.tolerations;
  r.min_cuda_version = job.spec.min_cuda_version;
  return r;
}

std::string FilterSignature(const JobRequest& job) {
  bool needs_gpu = false;
  for (const TaskRequest& t : job.tasks) needs_gpu |= t.per_replica.gpu.mode != GpuMode::kNone;
  std::string out = Cat(needs_gpu ? "gpu" : "cpu", "|c", job.min_cuda_version,
                        "|types:", Join(job.AcceptedGpuTypes(), "+"));
  for (const auto& [k, v] : job.node_selector) out += Cat("|s", k, "=", v);
  for (const Toleration& t : job.tolerations) {
    out += Cat("|t", t.key, t.exists ? "?" : "=", t.value, ":", t.effect);
  }
  return out;
}

std::string ShapeKey(const JobRequest& job) {
  std::string out = Cat("g", job.gang_size, "c", job.min_cuda_version);
  for (const TaskRequest& t : job.tasks) {
    const GpuRequest& g = t.per_replica.gpu;
    out += Cat("|", t.replicas, "x", static_cast<int>(g.mode), ",", g.count, ",", g.mig_profile,
               ",", g.fraction.raw(), ",", g.memory.raw(), ",", static_cast<int>(g.sharing), ",",
               Join(g.types, "+"), ",", t.per_replica.cpu.raw(), ",", t.per_replica.memory.raw());
  }
  for (const auto& [k, v] : job.node_selector) out += Cat("|s", k, "=", v);
  for (const Toleration& t : job.tolerations) {
    out += Cat("|t", t.key, t.exists ? "?" : "=", t.value, ":", t.effect);
  }
  return out;
}

}  // namespace gpucloud::sched
