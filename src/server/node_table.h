// NodeTable: what the agents' heartbeats said, kept in memory (a heartbeat a second from
// thousands of nodes is not worth a disk write each). Heartbeats are level-triggered: every one
// carries the whole truth of its node (its tasks' states, its GPUs' health), so a server that
// restarts with an empty table learns it again within a second, and nothing is lost by not
// storing it. The controller reads it to mark nodes Ready or NotReady and to move jobs along.
// An agent stops reporting an ended task whose assignment is gone once the server
// acknowledges its report (agent/heartbeat_reports.h): the acknowledgement is that the
// controller's pass has read it and stored all it decided (MarkRead; a pass whose status write
// lost a conflict marks nothing), not just that it arrived, so no end goes unseen.
// Each heartbeat also carries its GPUs' usage (utilization, memory used and in all). The table
// keeps the latest of it per GPU apart from the heartbeat, with the time it came: memory only,
// never written to the store, replaced by every heartbeat, and not "something new" (usage
// changes every second; waking the controller for it would be a pass a second per node). The
// API shows it while it is fresh (kGpuUsageFreshMs), and as unknown after.
// Thread-safe.
#ifndef GPUCLOUD_SERVER_NODE_TABLE_H_
#define GPUCLOUD_SERVER_NODE_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "api/wire.h"

namespace gpucloud::server {

// One GPU's usage as its node's latest heartbeat told it; unset fields are unknown.
struct GpuUsage {
  int index = 0;
  std::optional<int> utilization_percent;
  std::optional<int64_t> memory_used_mib;
  std::optional<int64_t> memory_total_mib;
  int64_t sampled_ms = 0;  // when the heartbeat carrying it arrived (the server's clock)
  bool operator==(const GpuUsage&) const = default;
};

// A usage sample older than this is stale (five heartbeat periods: the agent is gone, or its
// heartbeats are lost), and shown as unknown, not as its last value.
inline constexpr int64_t kGpuUsageFreshMs = 5'000;
inline bool Fresh(const GpuUsage& u, int64_t now_ms) {
  return now_ms - u.sampled_ms <= kGpuUsageFreshMs;
}

struct NodeReport {
  int64_t last_heartbeat_ms = 0;
  // Immutable once recorded: snapshots share it. Replaced with a new generation when the
  // heartbeat said something new; replaced without one when only its tasks' energy counts moved
  // (readers see the newest counts; nothing is woken for them).
  std::shared_ptr<const api::Heartbeat> heartbeat;
  uint64_t generation = 0;
};

class NodeTable {
 public:
  // Records a heartbeat; returns true when it says something new (a task changed state, a GPU
  // changed health), so the caller can wake the controller at once rather than on its tick.
  // Its GPUs' usage replaces the node's (kept apart: the heartbeat Get and Snapshot give has
  // its usage fields unset); a heartbeat without GPUs (a registration's) leaves none.
  bool Record(const std::string& node, api::Heartbeat heartbeat, int64_t now_ms);
  // The node's GPUs' latest usage that is fresh at `now_ms`, by GPU index; empty for a node
  // never heard from or forgotten.
  std::vector<GpuUsage> Usage(const std::string& node, int64_t now_ms) const;
  std::optional<NodeReport> Get(const std::string& node) const;
  std::map<std::string, NodeReport> Snapshot() const;
  // The controller's pass has read `snapshot` (taken with Snapshot) and acted on it.
  void MarkRead(const std::map<std::string, NodeReport>& snapshot);
  // The ended tasks' reports in the newest heartbeat of `node` the controller has read, for the
  // heartbeat's answer ("acknowledged").
  std::vector<api::TaskReport> Acknowledged(const std::string& node) const;
  void Forget(const std::string& node);
  // The node's health-reset generation (spec.healthReset: the operator's uncordon bumps it),
  // told to its agent with every heartbeat answer.
  void SetHealthReset(const std::string& node, int64_t generation);
  int64_t HealthReset(const std::string& node) const;
  // The images the operator asked the node to pull ahead of its tasks (spec.prePull), told to
  // its agent with every heartbeat answer.
  void SetPrePull(const std::string& node, std::vector<std::string> images);
  std::vector<std::string> PrePull(const std::string& node) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, NodeReport> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, NodeReport> read_ ABSL_GUARDED_BY(mu_);  // what MarkRead was given
  std::map<std::string, std::vector<GpuUsage>> usage_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> health_reset_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::string>> pre_pull_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_NODE_TABLE_H_
