// Queue specs: a team's share of the cluster. Per GPU type a queue has a guaranteed quota (always
// available to it, reclaimed by preemption when lent out) and a maximum; idle guarantees may be
// lent to other queues and a queue may borrow beyond its guarantee. Weight sets the fair share
// between queues. Specs only: the scheduler enforces them. Value types; thread-compatible.
#ifndef GPUCLOUD_CORE_QUEUE_H_
#define GPUCLOUD_CORE_QUEUE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/object_meta.h"
#include "core/quantity.h"

namespace gpucloud {

// How jobs inside one queue are ordered (after priority).
enum class QueueOrdering {
  kFifo,  // submission order
  kSjf,   // shortest job first, on the user's runtime estimate
  kLas,   // least attained service (Tiresias): least GPU-time received so far first
  // Tiresias' discretized two-dimensional LAS: jobs in priority bands by the GPU-time they have
  // attained (SchedulerConfig::las), FIFO inside a band, and a waiting job may preempt running
  // jobs of a later band; a starvation guard promotes jobs that waited long.
  kDlas,
};
std::string_view QueueOrderingName(QueueOrdering o);  // "fifo", "sjf", "las", "dlas"
std::optional<QueueOrdering> ParseQueueOrdering(std::string_view text);

inline constexpr std::string_view kAnyGpuType = "*";

struct GpuQuota {
  std::string gpu_type;  // catalog name, or "*" for all types together
  MilliGpu guaranteed;
  std::optional<MilliGpu> max;  // unset = no cap beyond what the cluster has
  bool operator==(const GpuQuota&) const = default;
};

struct QueueSpec {
  int32_t weight = 1;
  bool may_borrow = true;
  bool may_lend = true;
  QueueOrdering ordering = QueueOrdering::kFifo;
  std::vector<GpuQuota> quota;
  bool operator==(const QueueSpec&) const = default;
};

struct Queue {
  ObjectMeta metadata;
  QueueSpec spec;
  bool operator==(const Queue&) const = default;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_QUEUE_H_
