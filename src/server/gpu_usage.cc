#include "server/gpu_usage.h"

#include <algorithm>
#include <map>
#include <string>

#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

Json SummaryJson(const UsageSummary& s) {
  Json j{{"gpus", s.gpus}, {"measuredGpus", s.measured_gpus}};
  if (s.utilization_percent) j["utilization"] = *s.utilization_percent;
  if (s.memory_used_mib) j["memoryUsedMiB"] = *s.memory_used_mib;
  if (s.memory_total_mib) j["memoryTotalMiB"] = *s.memory_total_mib;
  if (s.sampled_ms) j["sampledAtMs"] = s.sampled_ms;
  return j;
}

const GpuUsage* Find(const std::vector<GpuUsage>& samples, int index) {
  for (const GpuUsage& u : samples) {
    if (u.index == index) return &u;
  }
  return nullptr;
}

}  // namespace

UsageSummary Summarize(int gpus, const std::vector<GpuUsage>& samples) {
  UsageSummary s;
  s.gpus = gpus;
  int64_t util_sum = 0;
  for (const GpuUsage& u : samples) {
    bool counted = false;
    if (u.utilization_percent) {
      util_sum += *u.utilization_percent;
      ++s.measured_gpus;
      counted = true;
    }
    if (u.memory_used_mib && u.memory_total_mib) {
      s.memory_used_mib = s.memory_used_mib.value_or(0) + *u.memory_used_mib;
      s.memory_total_mib = s.memory_total_mib.value_or(0) + *u.memory_total_mib;
      counted = true;
    }
    if (counted)
      s.sampled_ms = s.sampled_ms == 0 ? u.sampled_ms : std::min(s.sampled_ms, u.sampled_ms);
  }
  if (s.measured_gpus > 0) {
    s.utilization_percent =
        static_cast<int>((util_sum + s.measured_gpus / 2) / s.measured_gpus);  // rounded
  }
  return s;
}

void ApplyLiveNodeUsage(const NodeTable& nodes, int64_t now_ms, Json& doc) {
  if (!doc.is_object() || !doc.contains("metadata") || !doc["metadata"].is_object()) return;
  auto status = doc.find("status");
  if (status == doc.end() || !status->is_object()) return;
  auto gpus = status->find("gpus");
  if (gpus == status->end() || !gpus->is_array()) return;
  std::vector<GpuUsage> samples = nodes.Usage(doc["metadata"].value("name", ""), now_ms);
  if (samples.empty()) return;
  const int count = static_cast<int>(gpus->size());
  std::vector<GpuUsage> known;
  for (Json& g : *gpus) {
    if (!g.is_object() || !g.contains("index") || !g["index"].is_number_integer()) continue;
    const GpuUsage* u = Find(samples, g["index"].get<int>());
    if (u == nullptr) continue;
    if (u->utilization_percent) g["utilization"] = *u->utilization_percent;
    if (u->memory_used_mib) g["memoryUsedMiB"] = *u->memory_used_mib;
    if (u->memory_total_mib) g["memoryTotalMiB"] = *u->memory_total_mib;
    g["sampledAtMs"] = u->sampled_ms;
    known.push_back(*u);
  }
  (*status)["gpuUsage"] = SummaryJson(Summarize(count, known));
}

void ApplyLiveJobUsage(const NodeTable& nodes, int64_t now_ms, Json& doc) {
  if (!doc.is_object() || HoldsNothing(doc)) return;
  auto status = doc.find("status");
  if (status == doc.end() || !status->is_object()) return;
  auto placement = status->find("placement");
  if (placement == status->end() || !placement->is_array()) return;
  int held = 0;
  std::map<std::string, std::vector<GpuUsage>> by_node;  // each node looked up once
  std::vector<GpuUsage> whole;
  for (const Json& replica : *placement) {
    if (!replica.is_object() || !replica.contains("gpus") || !replica["gpus"].is_array()) continue;
    const std::string node = replica.value("node", "");
    auto [it, fresh_lookup] = by_node.try_emplace(node);
    if (fresh_lookup) it->second = nodes.Usage(node, now_ms);
    for (const Json& g : replica["gpus"]) {
      if (!g.is_object()) continue;
      ++held;
      if (g.value("mode", "whole") != "whole" || !g.contains("index") ||
          !g["index"].is_number_integer()) {
        continue;
      }
      if (const GpuUsage* u = Find(it->second, g["index"].get<int>())) whole.push_back(*u);
    }
  }
  if (held == 0) return;
  (*status)["gpuUsage"] = SummaryJson(Summarize(held, whole));
}

}  // namespace gpucloud::server
