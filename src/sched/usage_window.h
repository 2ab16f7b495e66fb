// The fair-share window's history (SchedulerOptions::history), kept the same way by the server
// and the simulator, so that `fairShare.window` means the same in both: an attempt's GPU-hours
// count for its queue and GPU types, in full, from its end until the window has passed over that
// end (at now - window, it is forgotten). What jobs hold now is counted by the scheduler itself.
//
// UsageWindow owns its entries; Add in any order, Advance to move the window's end forward.
// Value type; thread-compatible.
#ifndef GPUCLOUD_SCHED_USAGE_WINDOW_H_
#define GPUCLOUD_SCHED_USAGE_WINDOW_H_

#include <cstdint>
#include <map>
#include <string>

#include "sched/cluster_state.h"
#include "sched/queue_quota.h"

namespace gpucloud::sched {

class UsageWindow {
 public:
  explicit UsageWindow(int64_t window_ms) : window_ms_(window_ms) {}

  // An attempt of a job of `queue` that ended at `end_ms` and used `gpu_hours` of `gpu_type`
  // (GPU equivalents x hours). Ignored when it ended before the window (see Advance) or used
  // nothing.
  void Add(int64_t end_ms, const std::string& queue, const std::string& gpu_type, double gpu_hours);
  // Moves the window's end to `now_ms`: attempts that ended at or before now_ms - window are
  // forgotten. Never moves back.
  void Advance(int64_t now_ms);

  // GPU-hours per queue and type of the attempts in the window.
  const QueueHistory& history() const { return sums_; }

 private:
  struct Entry {
    std::string queue, type;
    double hours = 0;
  };
  void Remove(const Entry& e);

  int64_t window_ms_;
  int64_t now_ms_ = INT64_MIN;
  std::multimap<int64_t, Entry> by_end_;
  QueueHistory sums_;
  std::map<std::pair<std::string, std::string>, int64_t> counts_;  // entries per queue and type
};

// GPU equivalents (sched::GpuShareOf) that `a` holds, by the GPU type of each node it is on.
std::map<std::string, double> GpusByType(const ClusterState& state, const Allocation& a);

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_USAGE_WINDOW_H_
