#include "agent/log_shipping.h"

#include <algorithm>

#include "core/text.h"

namespace gpucloud::agent {

ShipPlan PlanLogShipping(int64_t size, int64_t read_pos, const LogLimits& limits) {
  ShipPlan p;
  read_pos = std::clamp<int64_t>(read_pos, 0, size);
  int64_t backlog = size - read_pos;
  if (backlog > limits.max_backlog) {
    // Keep the node's disk bounded and the output current: what the server could not take is
    // left in the rotated file, and the marker says how much.
    p.drop = backlog;
    p.rotate = true;
    return p;
  }
  p.ship = std::min(backlog, limits.bytes_per_pass);
  p.rotate = read_pos + p.ship == size && size > limits.rotate_bytes;
  return p;
}

std::string DroppedLogMarker(int64_t dropped, const std::string& kept_in, const std::string& node) {
  return Cat("\n[gpucloud: ", dropped,
             " bytes of this task's output were not shipped (it wrote faster than the server took "
             "them); they are in ",
             kept_in, " on node ", node, "]\n");
}

}  // namespace gpucloud::agent
