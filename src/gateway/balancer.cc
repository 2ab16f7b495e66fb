#include "gateway/balancer.h"

namespace gpucloud::gateway {

std::optional<size_t> PickReplica(std::span<const ReplicaLoad> replicas, uint64_t turn) {
  std::optional<size_t> best;
  const size_t n = replicas.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (turn + k) % n;  // start the scan at a different replica each turn
    const ReplicaLoad& r = replicas[i];
    if (!r.ready || r.tried) continue;
    if (!best || r.in_flight < replicas[*best].in_flight) best = i;
  }
  return best;
}

}  // namespace gpucloud::gateway
