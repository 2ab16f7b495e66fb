// Which replica of a service gets the next request: least outstanding requests among the ready
// ones not yet tried for this request, ties broken in turn so that an idle service spreads its
// requests (Envoy's LEAST_REQUEST with all weights equal, without its random sampling: a service
// has tens of replicas, not thousands). Pure; thread-compatible.
#ifndef GPUCLOUD_GATEWAY_BALANCER_H_
#define GPUCLOUD_GATEWAY_BALANCER_H_

#include <cstdint>
#include <optional>
#include <span>

namespace gpucloud::gateway {

struct ReplicaLoad {
  bool ready = false;     // its readiness check passes and it is not being stopped
  int64_t in_flight = 0;  // requests the gateway has sent it that have not answered
  bool tried = false;     // this request already failed on it
};

// The index of the replica to send to, or nullopt when none is ready and untried. `turn` is a
// counter the caller advances per request.
std::optional<size_t> PickReplica(std::span<const ReplicaLoad> replicas, uint64_t turn);

}  // namespace gpucloud::gateway

#endif  // GPUCLOUD_GATEWAY_BALANCER_H_
