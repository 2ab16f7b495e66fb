#include "server/node_table.h"

#include <utility>

namespace gpucloud::server {

namespace {

// Moves the usage fields out of `gpus` (which then say health alone).
std::vector<GpuUsage> TakeUsage(std::vector<api::GpuHealth>& gpus, int64_t now_ms) {
  std::vector<GpuUsage> usage;
  for (api::GpuHealth& g : gpus) {
    usage.push_back({g.index, std::exchange(g.utilization_percent, std::nullopt),
                     std::exchange(g.memory_used_mib, std::nullopt),
                     std::exchange(g.memory_total_mib, std::nullopt), now_ms});
  }
  return usage;
}

// Whether two task lists differ in nothing but their energy counts.
bool SameButEnergy(const std::vector<api::TaskReport>& a, const std::vector<api::TaskReport>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // the common case: no copy
    api::TaskReport x = a[i];
    x.energy_j = b[i].energy_j;
    if (x != b[i]) return false;
  }
  return true;
}

}  // namespace

bool NodeTable::Record(const std::string& node, api::Heartbeat heartbeat, int64_t now_ms) {
  std::vector<GpuUsage> usage = TakeUsage(heartbeat.gpus, now_ms);
  absl::MutexLock lock(&mu_);
  usage_[node] = std::move(usage);
  auto [it, inserted] = nodes_.try_emplace(node);
  NodeReport& r = it->second;
  // The task lists are compared once; only lists that differ are looked at again for whether
  // the difference is energy alone.
  const bool same_tasks = r.heartbeat != nullptr && r.heartbeat->tasks == heartbeat.tasks;
  bool changed = inserted || r.heartbeat == nullptr ||
                 (!same_tasks && !SameButEnergy(r.heartbeat->tasks, heartbeat.tasks)) ||
                 r.heartbeat->gpus != heartbeat.gpus;
  r.last_heartbeat_ms = now_ms;
  if (changed) {
    r.heartbeat = std::make_shared<const api::Heartbeat>(std::move(heartbeat));
    r.generation = ++generation_;
  } else if (!same_tasks) {
    // Only the energy counts moved (every heartbeat of a running task): kept for whoever reads
    // the reports next, but no news: the controller is not woken for it.
    r.heartbeat = std::make_shared<const api::Heartbeat>(std::move(heartbeat));
  }
  return changed;
}

std::vector<GpuUsage> NodeTable::Usage(const std::string& node, int64_t now_ms) const {
  absl::MutexLock lock(&mu_);
  std::vector<GpuUsage> fresh;
  auto it = usage_.find(node);
  if (it == usage_.end()) return fresh;
  for (const GpuUsage& u : it->second) {
    if (Fresh(u, now_ms)) fresh.push_back(u);
  }
  return fresh;
}

std::optional<NodeReport> NodeTable::Get(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, NodeReport> NodeTable::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return nodes_;
}

void NodeTable::MarkRead(const std::map<std::string, NodeReport>& snapshot) {
  absl::MutexLock lock(&mu_);
  for (const auto& [node, report] : snapshot) {
    if (!nodes_.contains(node) || report.heartbeat == nullptr) continue;  // forgotten since
    NodeReport& read = read_[node];
    if (report.generation > read.generation) read = report;
  }
}

std::vector<api::TaskReport> NodeTable::Acknowledged(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  std::vector<api::TaskReport> ended;
  auto it = read_.find(node);
  if (it == read_.end() || it->second.heartbeat == nullptr) return ended;
  for (const api::TaskReport& t : it->second.heartbeat->tasks) {
    if (api::IsTerminal(t.state)) ended.push_back(t);
  }
  return ended;
}

void NodeTable::SetHealthReset(const std::string& node, int64_t generation) {
  absl::MutexLock lock(&mu_);
  health_reset_[node] = generation;
}

int64_t NodeTable::HealthReset(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = health_reset_.find(node);
  return it == health_reset_.end() ? 0 : it->second;
}

void NodeTable::Forget(const std::string& node) {
  absl::MutexLock lock(&mu_);
  nodes_.erase(node);
  read_.erase(node);
  usage_.erase(node);
}

void NodeTable::SetPrePull(const std::string& node, std::vector<std::string> images) {
  absl::MutexLock lock(&mu_);
  pre_pull_[node] = std::move(images);
}

std::vector<std::string> NodeTable::PrePull(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = pre_pull_.find(node);
  return it == pre_pull_.end() ? std::vector<std::string>{} : it->second;
}

}  // namespace gpucloud::server
