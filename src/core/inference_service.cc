#include "core/inference_service.h"

namespace gpucloud {

std::string_view ServiceMetricName(ServiceMetric m) {
  return m == ServiceMetric::kRps ? "rps" : "concurrency";
}

std::optional<ServiceMetric> ParseServiceMetric(std::string_view text) {
  if (text == "concurrency") return ServiceMetric::kConcurrency;
  if (text == "rps") return ServiceMetric::kRps;
  return std::nullopt;
}

}  // namespace gpucloud
