// Log shipping decisions (pure): how much of a task's log file the agent ships in one pass,
// when it rotates the file, and what it gives up when a task writes faster than the server
// takes its output. The agent, not the executor, rotates a shipped log: only once what is in it
// has been shipped (so rotation never loses unshipped output), or, when the backlog is over
// `max_backlog` (the server is away or slower than the task), by dropping the backlog with a
// marker line that says how many bytes are missing and where they are kept. Thread-safe (pure).
#ifndef GPUCLOUD_AGENT_LOG_SHIPPING_H_
#define GPUCLOUD_AGENT_LOG_SHIPPING_H_

#include <cstdint>
#include <string>

namespace gpucloud::agent {

struct LogLimits {
  int64_t rotate_bytes = 64 << 20;   // rotate a fully shipped log over this size
  int64_t max_backlog = 256 << 20;   // unshipped bytes kept before they are dropped
  int64_t bytes_per_pass = 8 << 20;  // shipped per task per pass (then the agent heartbeats)
};

struct ShipPlan {
  int64_t ship = 0;     // bytes to ship from `read_pos` in this pass
  int64_t drop = 0;     // bytes given up (before shipping): the marker says so
  bool rotate = false;  // after shipping, rotate the file (and go on at 0)
};

// `size`: the log file's size now; `read_pos`: how far it was shipped (<= size).
ShipPlan PlanLogShipping(int64_t size, int64_t read_pos, const LogLimits& limits);

// The line shipped in place of `dropped` bytes that were kept in `kept_in` on `node`.
std::string DroppedLogMarker(int64_t dropped, const std::string& kept_in, const std::string& node);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_LOG_SHIPPING_H_
