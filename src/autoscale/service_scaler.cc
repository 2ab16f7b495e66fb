#include "autoscale/service_scaler.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"
#include "fmt/format.h"

namespace gpucloud::autoscale {
namespace {

int32_t CeilDiv(double load, double per_replica) {
  if (load <= 0 || per_replica <= 0) return 0;
  // A hair under a whole number is that number (0.1 + 0.2 is 0.30000000000000004).
  const double q = load / per_replica;
  return static_cast<int32_t>(std::min(std::ceil(q - 1e-9), 1e6));
}

std::string LoadText(ServiceMetric metric, double load) {
  return Cat(fmt::format("{:.2f}", load),
             metric == ServiceMetric::kRps ? " requests/s" : " in flight");
}

}  // namespace

double WindowAverage(ServiceMetric metric, std::span<const LoadSample> samples, int64_t seconds,
                     int64_t now_ms) {
  if (seconds <= 0) return 0;
  const int64_t from = now_ms - seconds * 1000;
  double sum = 0;
  for (const LoadSample& s : samples) {
    if (s.start_ms < from || s.start_ms + 1000 > now_ms) continue;
    sum += metric == ServiceMetric::kRps ? static_cast<double>(s.requests) : s.concurrency;
  }
  return sum / static_cast<double>(seconds);
}

ScaleDecision DecideReplicas(const InferenceServiceSpec& spec, std::span<const LoadSample> samples,
                             const ScalerInput& in, const ScalerMemory& memory, int64_t now_ms) {
  const ServiceAutoscaling& a = spec.autoscaling;
  ScaleDecision d;
  d.memory = memory;
  d.stable_load = WindowAverage(a.metric, samples, a.stable_window_seconds, now_ms);
  d.panic_load = WindowAverage(a.metric, samples, a.panic_window_seconds, now_ms);
  if (a.metric == ServiceMetric::kConcurrency) {
    // Requests waiting now are load now, before any window has seen them.
    d.panic_load = std::max(d.panic_load, static_cast<double>(in.queued));
  }
  const double target = a.target;
  const int32_t up_stable = CeilDiv(d.stable_load, target);
  const int32_t up_panic = CeilDiv(d.panic_load, target);
  const int32_t down_stable = CeilDiv(d.stable_load, target * kScaleDownFraction);
  const int32_t prev = memory.desired >= 0 ? memory.desired : std::max(spec.min_replicas, in.live);
  const int64_t stable_ms = a.stable_window_seconds * 1000;
  int32_t desired = prev;
  d.reason = memory.desired >= 0 ? "steady" : "started";
  if (up_panic > prev && up_panic >= kPanicThreshold * std::max(1, in.ready)) {
    desired = up_panic;
    d.panic = true;
    d.memory.panic_until_ms = now_ms + stable_ms;
    d.reason =
        Cat("panic: ", LoadText(a.metric, d.panic_load), " over ", a.panic_window_seconds, "s");
  } else if (up_stable > prev) {
    desired = up_stable;
    d.reason =
        Cat("load ", LoadText(a.metric, d.stable_load), " over ", a.stable_window_seconds, "s");
  } else if (now_ms < memory.panic_until_ms) {
    desired = std::max(prev, up_panic);
    d.panic = true;
    d.reason = "panic: no scale-down";
  } else if (down_stable < prev && now_ms - memory.last_scale_up_ms >= stable_ms) {
    desired = down_stable;
    d.reason =
        Cat("load ", LoadText(a.metric, d.stable_load), " over ", a.stable_window_seconds, "s");
  }
  // Zero only when idle for the whole grace period, and never with a request waiting.
  const int64_t idle_since = std::max(in.last_request_ms, in.created_ms);
  const bool idle = in.queued == 0 && now_ms - idle_since >= a.scale_to_zero_after_seconds * 1000;
  if (desired <= 0 && !idle) {
    desired = prev > 0 || in.queued > 0 || in.last_request_ms > 0 ? 1 : 0;
    if (prev == 0 && desired == 1) d.reason = "a request arrived";
  } else if (desired <= 0 && prev > 0) {
    d.reason = Cat("no request for ", a.scale_to_zero_after_seconds, "s: scaled to zero");
  }
  if (desired < spec.min_replicas) {
    desired = spec.min_replicas;
  } else if (desired > spec.max_replicas) {
    desired = spec.max_replicas;
    d.reason += Cat(" (at max ", spec.max_replicas, ")");
  }
  if (desired > prev) d.memory.last_scale_up_ms = now_ms;
  d.desired = desired;
  d.memory.desired = desired;
  return d;
}

}  // namespace gpucloud::autoscale
