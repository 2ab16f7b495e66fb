#include "server/metrics.h"

#include "core/text.h"

namespace gpucloud::server {

void ApiMetrics::Observe(const std::string& method, const std::string& resource, int code,
                         double seconds) {
  absl::MutexLock lock(&mu_);
  ++requests_[{method, resource, code}];
  Histogram& h = latency_[method];
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++h.buckets[b];
  ++h.count;
  h.sum += seconds;
}

std::string ApiMetrics::Render(int64_t store_revision) const {
  absl::MutexLock lock(&mu_);
  std::string out =
      "# HELP gpucloud_api_requests_total API requests by method, resource and status code.\n"
      "# TYPE gpucloud_api_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    const auto& [method, resource, code] = key;
    out += Cat("gpucloud_api_requests_total{method=\"", method, "\",resource=\"", resource,
               "\",code=\"", code, "\"} ", n, "\n");
  }
  out +=
      "# HELP gpucloud_api_request_duration_seconds API request latency.\n"
      "# TYPE gpucloud_api_request_duration_seconds histogram\n";
  for (const auto& [method, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t b = 0; b < kBuckets.size(); ++b) {
      cumulative += h.buckets[b];
      out += Cat("gpucloud_api_request_duration_seconds_bucket{method=\"", method, "\",le=\"",
                 kBuckets[b], "\"} ", cumulative, "\n");
    }
    out += Cat("gpucloud_api_request_duration_seconds_bucket{method=\"", method,
               "\",le=\"+Inf\"} ", h.count, "\n");
    out += Cat("gpucloud_api_request_duration_seconds_sum{method=\"", method, "\"} ", h.sum, "\n");
    out += Cat("gpucloud_api_request_duration_seconds_count{method=\"", method, "\"} ", h.count,
               "\n");
  }
  out += Cat(
      "# HELP gpucloud_store_revision The store's revision (changes committed since creation).\n"
      "# TYPE gpucloud_store_revision gauge\n"
      "gpucloud_store_revision ",
      store_revision, "\n");
  return out;
}

std::string ResourceOfPath(const std::string& path) {
  for (const char* r : {"jobs", "queues", "nodepools", "nodes"}) {
    std::string seg = Cat("/", r);
    size_t at = path.find(seg);
    if (at != std::string::npos &&
        (at + seg.size() == path.size() || path[at + seg.size()] == '/' ||
         path[at + seg.size()] == '?')) {
      // Sub-resources by name (bounded: no object names in labels).
      for (const char* sub : {"heartbeat", "assignments", "logs", "events", "cancel", "cordon",
                              "uncordon", "drain"}) {
        if (path.ends_with(Cat("/", sub))) return Cat(r, "/", sub);
      }
      return r;
    }
  }
  if (path == "/metrics" || path == "/healthz") return path.substr(1);
  return "other";
}

}  // namespace gpucloud::server
