#include "core/inference_service.h"

namespace gpucloud {

std::string_view ServiceMetricName(ServiceMetric m) {
  switch (m) {
    case ServiceMetric::kRps:
      return "rps";
    case ServiceMetric::kP95Latency:
      return "p95Latency";
    case ServiceMetric::kConcurrency:
      break;
  }
  return "concurrency";
}

std::optional<ServiceMetric> ParseServiceMetric(std::string_view text) {
  if (text == "concurrency") return ServiceMetric::kConcurrency;
  if (text == "rps") return ServiceMetric::kRps;
  if (text == "p95Latency") return ServiceMetric::kP95Latency;
  return std::nullopt;
}

}  // namespace gpucloud
