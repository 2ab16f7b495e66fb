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

std::vector<api::TaskReport> AcknowledgedReports(const std::string& answer_body) {
  nlohmann::json j = nlohmann::json::parse(answer_body, nullptr, false);
  if (!j.is_object() || !j.contains("acknowledged") || !j["acknowledged"].is_array()) return {};
  absl::StatusOr<api::Heartbeat> h =
      api::HeartbeatFromJson(nlohmann::json{{"tasks", j["acknowledged"]}}.dump());
  return h.ok() ? std::move(h->tasks) : std::vector<api::TaskReport>{};
}

}  // namespace gpucloud::agent
