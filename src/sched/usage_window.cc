#include "sched/usage_window.h"

namespace gpucloud::sched {

void UsageWindow::Add(int64_t end_ms, const std::string& queue, const std::string& gpu_type,
                      double gpu_hours) {
  if (gpu_hours <= 0) return;
  if (now_ms_ != INT64_MIN && end_ms <= now_ms_ - window_ms_) return;
  by_end_.emplace(end_ms, Entry{queue, gpu_type, gpu_hours});
  sums_[queue][gpu_type] += gpu_hours;
  ++counts_[{queue, gpu_type}];
}

void UsageWindow::Advance(int64_t now_ms) {
  if (now_ms <= now_ms_) return;
  now_ms_ = now_ms;
  const int64_t cutoff = now_ms - window_ms_;
  while (!by_end_.empty() && by_end_.begin()->first <= cutoff) {
    Remove(by_end_.begin()->second);
    by_end_.erase(by_end_.begin());
  }
}

void UsageWindow::Remove(const Entry& e) {
  auto count = counts_.find({e.queue, e.type});
  auto queue = sums_.find(e.queue);
  if (--count->second > 0) {
    queue->second[e.type] -= e.hours;
    return;
  }
  // The last entry of its queue and type: exactly zero, not what subtraction leaves.
  counts_.erase(count);
  queue->second.erase(e.type);
  if (queue->second.empty()) sums_.erase(queue);
}

std::map<std::string, double> GpusByType(const ClusterState& state, const Allocation& a) {
  std::map<std::string, double> out;
  for (const ReplicaPlacement& r : a.replicas) {
    const Node& node = state.node(r.node);
    for (const GpuAssignment& g : r.gpus) {
      out[node.gpus[g.gpu].type] += state.ShareOf(r.node, g).raw() / 1000.0;
    }
  }
  return out;
}

}  // namespace gpucloud::sched
