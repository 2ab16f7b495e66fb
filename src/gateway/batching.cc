#include "gateway/batching.h"

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gpucloud::gateway {

using Json = nlohmann::json;

absl::StatusOr<std::vector<std::string>> InstancesOf(std::string_view body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not JSON");
  if (!j.is_object() || !j.contains("instances") || !j["instances"].is_array()) {
    return absl::InvalidArgumentError("the body has no \"instances\" array");
  }
  if (j["instances"].empty()) return absl::InvalidArgumentError("\"instances\" is empty");
  std::vector<std::string> out;
  out.reserve(j["instances"].size());
  for (const Json& i : j["instances"]) out.push_back(i.dump());
  return out;
}

std::string BatchBody(const std::vector<std::vector<std::string>>& callers) {
  std::string out = "{\"instances\":[";
  bool first = true;
  for (const std::vector<std::string>& c : callers) {
    for (const std::string& i : c) {
      if (!first) out += ',';
      out += i;
      first = false;
    }
  }
  out += "]}";
  return out;
}

absl::StatusOr<std::vector<std::string>> SplitPredictions(std::string_view answer,
                                                          const std::vector<size_t>& counts) {
  Json j = Json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("predictions") ||
      !j["predictions"].is_array()) {
    return absl::InvalidArgumentError("the batch's answer has no \"predictions\" array");
  }
  const Json& p = j["predictions"];
  size_t total = 0;
  for (size_t c : counts) total += c;
  if (p.size() != total) {
    return absl::InvalidArgumentError(
        Cat("the batch's answer has ", p.size(), " predictions for ", total, " instances"));
  }
  std::vector<std::string> out;
  out.reserve(counts.size());
  size_t at = 0;
  for (size_t c : counts) {
    Json part = Json::array();
    for (size_t k = 0; k < c; ++k) part.push_back(p[at + k]);
    at += c;
    out.push_back(Json{{"predictions", std::move(part)}}.dump());
  }
  return out;
}

}  // namespace gpucloud::gateway
