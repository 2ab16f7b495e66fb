// The inference service model: a long-running model server that the platform keeps at a number
// of replicas between `min_replicas` and `max_replicas`, scaled on the load the gateway measures
// (requests in flight per replica, or requests per second), down to zero when idle. Each replica
// runs as a one-task Job (server/services.h makes them), so services and training share one
// scheduler, one set of quotas and one preemption order: `priority` decides which wins a GPU.
// Plain value types compared field by field; thread-compatible.
#ifndef GPUCLOUD_CORE_INFERENCE_SERVICE_H_
#define GPUCLOUD_CORE_INFERENCE_SERVICE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/object_meta.h"

namespace gpucloud {

// What the autoscaler holds per replica: requests in flight (Knative's concurrency, Ray Serve's
// ongoing requests), or requests per second; or what it holds for the whole service: the 95th
// percentile of its requests' latency at the gateway, in milliseconds (kP95Latency).
enum class ServiceMetric { kConcurrency, kRps, kP95Latency };
std::string_view ServiceMetricName(ServiceMetric m);  // "concurrency", "rps", "p95Latency"
std::optional<ServiceMetric> ParseServiceMetric(std::string_view text);

// Knative's defaults: a 60 s stable window, a 6 s panic window entered at twice the capacity,
// scale to zero after 30 s without requests.
struct ServiceAutoscaling {
  ServiceMetric metric = ServiceMetric::kConcurrency;
  int32_t target = 10;  // per replica, in `metric`'s unit (kP95Latency: milliseconds, overall)
  int64_t stable_window_seconds = 60;
  int64_t panic_window_seconds = 6;
  int64_t scale_to_zero_after_seconds = 30;  // with min 0: no request for this long
  bool operator==(const ServiceAutoscaling&) const = default;
};

// Dynamic batching of one JSON endpoint (Triton's model): POSTs to `path` whose bodies are
// {"instances": [...]} are gathered until `max_batch_size` instances or `max_queue_delay_ms`
// after the first, sent as one, and each caller gets its own slice of {"predictions": [...]}.
struct ServiceBatching {
  std::string path;
  int32_t max_batch_size = 8;
  int64_t max_queue_delay_ms = 5;
  bool operator==(const ServiceBatching&) const = default;
};

inline constexpr int32_t kMaxServiceReplicas = 1000;
// A replica's job is named "<service>-<5 characters>": a service name leaves room for them.
inline constexpr size_t kMaxServiceNameLength = 57;
inline constexpr int64_t kDefaultServiceMaxRequestBytes = 8 << 20;

struct InferenceServiceSpec {
  TaskSpec task;                     // one replica's task; task.replicas is 1
  std::string readiness_path = "/";  // a replica serves once GET of it answers 2xx
  int32_t min_replicas = 1;
  int32_t max_replicas = 1;
  ServiceAutoscaling autoscaling;
  std::optional<ServiceBatching> batching;
  // Rolling updates: replicas of a new template are started `max_surge` at a time beyond the
  // desired count, and old ones stopped as new ones are ready, never leaving fewer than the
  // desired count less `max_unavailable` ready.
  int32_t max_surge = 1;
  int32_t max_unavailable = 0;
  // The gateway's bounds for each request.
  int64_t request_timeout_seconds = 60;
  int32_t retries = 2;  // of an idempotent request on another replica
  int64_t max_request_bytes = kDefaultServiceMaxRequestBytes;
  // As a Job's: where replicas queue, their priority against training, what they cost.
  std::string queue = std::string(kDefaultQueue);
  int32_t priority = 0;
  BillingClass billing = BillingClass::kOnDemand;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  bool operator==(const InferenceServiceSpec&) const = default;
};

struct InferenceService {
  ObjectMeta metadata;
  InferenceServiceSpec spec;
  bool operator==(const InferenceService&) const = default;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_INFERENCE_SERVICE_H_
