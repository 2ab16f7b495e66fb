#include "sched/queue_quota.h"

#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::sched {

QueueQuota::QueueQuota(const std::map<std::string, QueueSpec>& queues, const ClusterState& state,
                       const GpuCatalog& catalog)
    : queues_(queues), state_(state), catalog_(catalog) {
  if (queues_.empty()) return;  // nothing to enforce: do not walk every running job each cycle
  for (const auto& [key, a] : state.allocations()) Add(a.queue, a);
}

std::map<std::string, MilliGpu> QueueQuota::Usage(const Allocation& a) const {
  std::map<std::string, MilliGpu> out;
  for (const ReplicaPlacement& r : a.replicas) {
    for (const GpuAssignment& g : r.gpus) {
      const Gpu& gpu = state_.node(r.node).gpus[g.gpu];
      MilliGpu amount = WholeGpus(1);
      if (g.mode == GpuMode::kShared) amount = g.fraction;
      if (g.mode == GpuMode::kMig) {
        const GpuType* type = catalog_.Find(gpu.type);
        const MigProfile* p = type ? type->FindMigProfile(g.mig.profile) : nullptr;
        int64_t slices = p ? p->compute_slices : kMigComputeSlices;
        amount = MilliGpu((slices * kMilliPerUnit + kMigComputeSlices - 1) / kMigComputeSlices);
      }
      out[gpu.type] += amount;
      out[std::string(kAnyGpuType)] += amount;
    }
  }
  return out;
}

std::optional<std::string> QueueQuota::CheckMax(const std::string& queue,
                                                const Allocation& a) const {
  auto spec = queues_.find(queue);
  if (spec == queues_.end()) return std::nullopt;
  std::map<std::string, MilliGpu> need = Usage(a);
  auto used_it = used_.find(queue);
  for (const GpuQuota& q : spec->second.quota) {
    if (!q.max) continue;
    auto n = need.find(q.gpu_type);
    if (n == need.end()) continue;
    MilliGpu used;
    if (used_it != used_.end()) {
      if (auto u = used_it->second.find(q.gpu_type); u != used_it->second.end()) used = u->second;
    }
    if (used + n->second > *q.max) {
      std::string what = q.gpu_type == kAnyGpuType ? "GPUs" : Cat(q.gpu_type, " GPUs");
      return Cat("queue ", queue, " is at its maximum of ", FormatMilli(q.max->raw()), " ", what,
                 " (", FormatMilli(used.raw()), " in use, the job needs ",
                 FormatMilli(n->second.raw()), ")");
    }
  }
  return std::nullopt;
}

void QueueQuota::Add(const std::string& queue, const Allocation& a) {
  if (!queues_.contains(queue)) return;  // only queues with a spec are ever checked
  for (const auto& [type, amount] : Usage(a)) used_[queue][type] += amount;
}

}  // namespace gpucloud::sched
