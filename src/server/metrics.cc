#include "server/metrics.h"

#include "core/prom_text.h"
#include "core/text.h"

namespace gpucloud::server {

void ApiMetrics::Observe(const std::string& method, const std::string& resource, int code,
                         double seconds) {
  const std::string label(MethodLabel(method));
  absl::MutexLock lock(&mu_);
  ++requests_[{label, resource, code}];
  Histogram& h = latency_[label];
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++h.buckets[b];
  ++h.count;
  h.sum += seconds;
}

std::string ApiMetrics::Render(int64_t store_revision) const {
  absl::MutexLock lock(&mu_);
  PromText p;
  p.Family("gpucloud_api_requests_total", "counter",
           "API requests by method, resource and status code.");
  for (const auto& [key, n] : requests_) {
    const auto& [method, resource, code] = key;
    p.Sample({{"method", method}, {"resource", resource}, {"code", std::to_string(code)}}, n);
  }
  p.Family("gpucloud_api_request_duration_seconds", "histogram", "API request latency.");
  std::vector<double> bounds(kBuckets.begin(), kBuckets.end());
  for (const auto& [method, h] : latency_) {
    std::vector<double> cumulative;
    uint64_t sum = 0;
    for (size_t b = 0; b < kBuckets.size(); ++b) cumulative.push_back(sum += h.buckets[b]);
    p.Histogram({{"method", method}}, bounds, cumulative, h.sum, h.count);
  }
  p.Family("gpucloud_store_revision", "gauge",
           "The store's revision (changes committed since creation).")
      .Sample(store_revision);
  return p.Take();
}

std::string ResourceOfPath(const std::string& path) {
  for (const char* r : {"jobs", "queues", "nodepools", "nodes"}) {
    std::string seg = Cat("/", r);
    size_t at = path.find(seg);
    if (at != std::string::npos && (at + seg.size() == path.size() ||
                                    path[at + seg.size()] == '/' || path[at + seg.size()] == '?')) {
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

std::string_view MethodLabel(std::string_view method) {
  for (std::string_view known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    if (method == known) return known;
  }
  return "OTHER";
}

}  // namespace gpucloud::server
