// How many replicas an inference service should run, from the load its gateway measured: the
// Knative Pod Autoscaler's algorithm as a pure function, with the fixes its peers' users asked
// for. Time comes in as an argument; no I/O; thread-compatible.
//
//   - Two windows over per-second samples: the stable window (default 60 s) averages the metric
//     (requests in flight, queued ones included, or requests per second); the panic window
//     (6 s) reacts to a burst. desired = ceil(average / target).
//   - Panic: when the panic window asks for at least twice the ready replicas, its count is
//     taken at once, and for a stable window after the last such moment the count never goes
//     down (Knative's panic mode).
//   - Hysteresis, so the count does not oscillate at a boundary (ray#18925, #33416): going up
//     takes ceil(load / target); going down only to ceil(load / (target x kScaleDownFraction)),
//     so that after removing replicas the rest run at most at 80 % of the target; and never
//     down within `stable_window` of the last scale-up.
//   - Scale to zero (min 0): only after `scale_to_zero_after` without a request arriving,
//     queued or served, and never while one waits: a replica that is still starting (its node
//     booting, its image pulling) keeps the count (kserve#1247). From zero, one request is
//     enough to ask for a replica.
//   - Never below `min_replicas` nor above `max_replicas`.
//
// On p95 latency (kP95Latency; latency does not grow in proportion to load, so it is held by
// steps): when the panic window's p95 is over the target, the count grows in proportion
// (ceil(ready x p95 / target)), at least by one and at most doubling; when the stable window's
// p95 is under 80 % of the target, it shrinks by a tenth (at least one). Each step waits until
// no replica is starting (the latency does not show them yet) and until the window it reads
// was measured after the last change (a panic window after it for going up, a stable window
// for going down). Scale to zero and from zero are as above.
#ifndef GPUCLOUD_AUTOSCALE_SERVICE_SCALER_H_
#define GPUCLOUD_AUTOSCALE_SERVICE_SCALER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/inference_service.h"

namespace gpucloud::autoscale {

inline constexpr double kScaleDownFraction = 0.8;
inline constexpr double kPanicThreshold = 2.0;

// Requests that finished with a latency in one bucket: bucket b holds latencies in
// [2^(b/4), 2^((b+1)/4)) ms (bucket 0 also those under 1 ms), so a p95 is known within 19 %.
struct LatencyCount {
  int32_t bucket = 0;
  int64_t count = 0;
  bool operator==(const LatencyCount&) const = default;
};
inline constexpr int32_t kLatencyBuckets = 96;  // up to 2^24 ms (4.6 h); longer ones: the last
int32_t LatencyBucket(double ms);
double LatencyOfBucket(int32_t bucket);  // its geometric middle, ms
// Counts one more request of `bucket` in `counts` (sorted by bucket).
void AddLatency(std::vector<LatencyCount>& counts, int32_t bucket, int64_t n = 1);

// One second of a service's traffic at the gateway, the second starting at `start_ms`.
struct LoadSample {
  int64_t start_ms = 0;
  double concurrency = 0;  // requests in flight (queued included), averaged over the second
  int64_t requests = 0;    // requests that arrived in it
  std::vector<LatencyCount> latency;  // requests that finished in it, by latency bucket
};

// What the scaler remembers between decisions (kept by the caller, given back each time).
struct ScalerMemory {
  int32_t desired = -1;  // the last decision; -1: none yet
  int64_t panic_until_ms = 0;
  int64_t last_scale_up_ms = 0;
  int64_t last_scale_down_ms = 0;
  bool operator==(const ScalerMemory&) const = default;
};

struct ScalerInput {
  int32_t ready = 0;            // replicas that serve now
  int32_t live = 0;             // replicas that exist (ready, starting or pending)
  int64_t queued = 0;           // requests waiting for a replica at the gateway now
  int64_t last_request_ms = 0;  // when the last request arrived; 0: never
  int64_t created_ms = 0;       // when the service was created (an idle window starts there)
};

struct ScaleDecision {
  int32_t desired = 0;
  std::string reason;  // what decided, for the service's status and events
  bool panic = false;
  ScalerMemory memory;
  double stable_load = 0;  // the windows' averages (kP95Latency: their p95s), in the metric's unit
  double panic_load = 0;
};

// The decision at `now_ms` from `samples` (oldest first; seconds missing from them carried no
// traffic) and `memory` (the previous decision's).
ScaleDecision DecideReplicas(const InferenceServiceSpec& spec, std::span<const LoadSample> samples,
                             const ScalerInput& in, const ScalerMemory& memory, int64_t now_ms);

// The average of the metric over the `seconds` before `now_ms` (whole seconds of samples).
double WindowAverage(ServiceMetric metric, std::span<const LoadSample> samples, int64_t seconds,
                     int64_t now_ms);

// The 95th percentile of the latencies of the requests that finished in the `seconds` before
// `now_ms`, in ms; 0 when none did.
double WindowP95(std::span<const LoadSample> samples, int64_t seconds, int64_t now_ms);

}  // namespace gpucloud::autoscale

#endif  // GPUCLOUD_AUTOSCALE_SERVICE_SCALER_H_
