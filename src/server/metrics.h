// ApiMetrics: the control plane's own Prometheus metrics — API requests by method, resource and
// status code, and request latency as a histogram by method — rendered in the text exposition
// format (0.0.4). Thread-safe.
#ifndef GPUCLOUD_SERVER_METRICS_H_
#define GPUCLOUD_SERVER_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/synchronization/mutex.h"

namespace gpucloud::server {

class ApiMetrics {
 public:
  // Upper bounds of the latency buckets, in seconds (plus +Inf).
  static constexpr std::array<double, 10> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                      0.025,  0.05,  0.1,    0.25,  1.0};
  // Counts one request; `method` is labelled as MethodLabel says.
  void Observe(const std::string& method, const std::string& resource, int code, double seconds);
  // Every metric, plus gpucloud_store_revision = `store_revision`.
  std::string Render(int64_t store_revision) const;

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable absl::Mutex mu_;
  // Counts by method, resource and code.
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;  // by method
};

// "jobs", "queues", "nodepools", "metrics", ... from a request path (for labels: bounded).
std::string ResourceOfPath(const std::string& path);
// The method label of a request: the method when it is one of HTTP's (RFC 9110 and PATCH),
// else "OTHER", so that made-up methods, which anyone may send before authenticating, add no
// series (labels stay bounded, as in Envoy and the Prometheus client libraries).
std::string_view MethodLabel(std::string_view method);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_METRICS_H_
