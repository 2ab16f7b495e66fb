// QueueQuota: the queues' ledger for one scheduling cycle — GPUs each queue holds per GPU type,
// against its guarantee and maximum (QueueSpec::quota; "*" counts all types together), and the
// queues' dominant shares for fair share.
//
//   maximum     a job whose placement would take its queue past a max waits;
//   guarantee   always available to the queue: when lent out, it is reclaimed by preemption;
//   borrowing   a queue may hold more than its guarantee (if mayBorrow) out of idle capacity,
//               but never the unused guarantee of a queue that does not lend (mayLend: false);
//   fair share  weighted dominant resource fairness over GPU types: a queue's share of a type is
//               what it holds now plus what it used in the fair-share window (GPU-hours, from
//               the caller), over that type's capacity; its dominant share is the largest of
//               these over its weight. The queue with the smallest goes first.
// MIG instances count as their share of the GPU's compute (3g = 3/7), shares as their fraction.
// Built from a ClusterState at the start of a cycle and told of each bind and preemption.
// Borrows everything it is given. Not thread-safe.
#ifndef GPUCLOUD_SCHED_QUEUE_QUOTA_H_
#define GPUCLOUD_SCHED_QUEUE_QUOTA_H_

#include <map>
#include <optional>
#include <string>

#include "core/gpu_catalog.h"
#include "core/queue.h"
#include "sched/cluster_state.h"

namespace gpucloud::sched {

// GPU-hours each queue used per GPU type in the fair-share window (queue -> type -> hours).
using QueueHistory = std::map<std::string, std::map<std::string, double>>;

class QueueQuota {
 public:
  QueueQuota(const std::map<std::string, QueueSpec>& queues, const ClusterState& state,
             const QueueHistory* history = nullptr, double window_hours = 168);

  // nullopt when `a` keeps `queue` within its maxima; otherwise why not, e.g. "queue team-a is
  // at its maximum of 16 H100-80GB GPUs (12 in use, the job needs 8)". Queues without a spec
  // have no maximum.
  std::optional<std::string> CheckMax(const std::string& queue, const Allocation& a) const;
  // nullopt when `queue` may take `a`: within its guarantee, or borrowing idle capacity that no
  // non-lending queue's unused guarantee needs; otherwise why not.
  std::optional<std::string> CheckBorrow(const std::string& queue, const Allocation& a) const;
  // Counts `a` against `queue`; Remove takes it off again.
  void Add(const std::string& queue, const Allocation& a);
  void Remove(const std::string& queue, const Allocation& a);

  // GPUs `a` takes, per GPU type, plus the total under "*".
  std::map<std::string, MilliGpu> Usage(const Allocation& a) const;
  MilliGpu Used(const std::string& queue, const std::string& type) const;
  MilliGpu Guaranteed(const std::string& queue, const std::string& type) const;
  // Whether `queue` holds more of `type` than its guarantee (every queue without a guarantee
  // for a type it uses is borrowing it).
  bool Borrowing(const std::string& queue, const std::string& type) const;
  // Whether `queue` holds less than its guarantee of some type (so it may reclaim).
  bool BelowGuarantee(const std::string& queue) const;
  // The weighted dominant share (see above); 0 for a queue holding nothing with no history.
  double DominantShare(const std::string& queue) const;

 private:
  const QueueSpec* Spec(const std::string& queue) const;

  const std::map<std::string, QueueSpec>& queues_;
  const ClusterState& state_;
  const QueueHistory* history_;
  double window_hours_;
  std::map<std::string, MilliGpu> capacity_;                     // type -> healthy GPUs
  std::map<std::string, MilliGpu> total_used_;                   // type -> by every job
  std::map<std::string, std::map<std::string, MilliGpu>> used_;  // queue -> type -> GPUs
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_QUEUE_QUOTA_H_
