#include "agent/heartbeat_reports.h"

#include <nlohmann/json.hpp>

namespace gpucloud::agent {

bool InHeartbeat(const ReportedTask& t) {
  if (!t.ended || t.assigned) return true;
  return !t.acknowledged && t.since_end <= kEndedReportRetention;
}

bool Forgettable(const ReportedTask& t) {
  if (!t.ended || t.assigned) return false;
  return t.since_end > kEndedReportRetention || (t.acknowledged && t.log_shipped);
}

void AddGpuUsage(const std::vector<GpuSample>& samples, std::vector<api::GpuHealth>& gpus) {
  for (api::GpuHealth& g : gpus) {
    for (const GpuSample& s : samples) {
      if (s.index != g.index) continue;
      g.utilization_percent = s.gpu_util_percent;
      if (s.fb_used) g.memory_used_mib = s.fb_used->raw();
      if (s.fb_used && s.fb_free) g.memory_total_mib = s.fb_used->raw() + s.fb_free->raw();
    }
  }
}

std::vector<api::TaskReport> AcknowledgedReports(const std::string& answer_body) {
  nlohmann::json j = nlohmann::json::parse(answer_body, nullptr, false);
  if (!j.is_object() || !j.contains("acknowledged") || !j["acknowledged"].is_array()) return {};
  absl::StatusOr<api::Heartbeat> h =
      api::HeartbeatFromJson(nlohmann::json{{"tasks", j["acknowledged"]}}.dump());
  return h.ok() ? std::move(h->tasks) : std::vector<api::TaskReport>{};
}

}  // namespace gpucloud::agent
