// QueueQuota: how many GPUs each queue holds, per GPU type, and whether one more allocation
// stays within the queue's maximum (QueueSpec::quota[].max; "*" caps all types together).
// MIG instances count as their share of the GPU's compute (3g = 3/7), shares as their fraction.
// Built from a ClusterState at the start of a cycle and told of each bind. Not thread-safe.
#ifndef GPUCLOUD_SCHED_QUEUE_QUOTA_H_
#define GPUCLOUD_SCHED_QUEUE_QUOTA_H_

#include <map>
#include <optional>
#include <string>

#include "core/gpu_catalog.h"
#include "core/queue.h"
#include "sched/cluster_state.h"

namespace gpucloud::sched {

class QueueQuota {
 public:
  // Borrows `queues`, `state` and `catalog` for the object's lifetime.
  QueueQuota(const std::map<std::string, QueueSpec>& queues, const ClusterState& state,
             const GpuCatalog& catalog);

  // nullopt when `a` keeps `queue` within its maxima; otherwise why not, e.g. "queue team-a is
  // at its maximum of 16 H100-80GB GPUs (12 in use, the job needs 8)". Queues without a spec
  // have no maximum.
  std::optional<std::string> CheckMax(const std::string& queue, const Allocation& a) const;
  // Counts `a` against `queue` (a no-op for queues without a spec).
  void Add(const std::string& queue, const Allocation& a);

  // GPUs `a` takes, per GPU type, plus the total under "*".
  std::map<std::string, MilliGpu> Usage(const Allocation& a) const;

 private:
  const std::map<std::string, QueueSpec>& queues_;
  const ClusterState& state_;
  const GpuCatalog& catalog_;
  std::map<std::string, std::map<std::string, MilliGpu>> used_;  // queue -> type -> GPUs
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_QUEUE_QUOTA_H_
