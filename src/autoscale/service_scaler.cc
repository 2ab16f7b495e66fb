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
  if (metric == ServiceMetric::kP95Latency) return Cat(fmt::format("{:.0f}", load), " ms p95");
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

int32_t LatencyBucket(double ms) {
  if (!(ms >= 1)) return 0;
  return static_cast<int32_t>(std::min<double>(kLatencyBuckets - 1, std::floor(4 * std::log2(ms))));
}

double LatencyOfBucket(int32_t bucket) { return std::exp2((bucket + 0.5) / 4); }

void AddLatency(std::vector<LatencyCount>& counts, int32_t bucket, int64_t n) {
  auto it = std::lower_bound(counts.begin(), counts.end(), bucket,
                             [](const LatencyCount& c, int32_t b) { return c.bucket < b; });
  if (it != counts.end() && it->bucket == bucket) {
    it->count += n;
  } else {
    counts.insert(it, {bucket, n});
  }
}

double WindowP95(std::span<const LoadSample> samples, int64_t seconds, int64_t now_ms) {
  if (seconds <= 0) return 0;
  const int64_t from = now_ms - seconds * 1000;
  std::vector<int64_t> by_bucket(kLatencyBuckets, 0);
  int64_t total = 0;
  for (const LoadSample& s : samples) {
    if (s.start_ms < from || s.start_ms + 1000 > now_ms) continue;
    for (const LatencyCount& c : s.latency) {
      if (c.bucket < 0 || c.bucket >= kLatencyBuckets || c.count <= 0) continue;
      by_bucket[c.bucket] += c.count;
      total += c.count;
    }
  }
  if (total == 0) return 0;
  // The smallest latency that at least 95 % of the requests did not exceed.
  const int64_t rank = (total * 95 + 99) / 100;
  int64_t seen = 0;
  for (int32_t b = 0; b < kLatencyBuckets; ++b) {
    seen += by_bucket[b];
    if (seen >= rank) return LatencyOfBucket(b);
  }
  return LatencyOfBucket(kLatencyBuckets - 1);
}

namespace {

// The count the load asks for (kConcurrency, kRps): Knative's windows with hysteresis.
void ByLoad(const InferenceServiceSpec& spec, std::span<const LoadSample> samples,
            const ScalerInput& in, int32_t prev, int64_t now_ms, ScaleDecision& d) {
  const ServiceAutoscaling& a = spec.autoscaling;
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
  const int64_t stable_ms = a.stable_window_seconds * 1000;
  if (up_panic > prev && up_panic >= kPanicThreshold * std::max(1, in.ready)) {
    d.desired = up_panic;
    d.panic = true;
    d.memory.panic_until_ms = now_ms + stable_ms;
    d.reason =
        Cat("panic: ", LoadText(a.metric, d.panic_load), " over ", a.panic_window_seconds, "s");
  } else if (up_stable > prev) {
    d.desired = up_stable;
    d.reason =
        Cat("load ", LoadText(a.metric, d.stable_load), " over ", a.stable_window_seconds, "s");
  } else if (now_ms < d.memory.panic_until_ms) {
    d.desired = std::max(prev, up_panic);
    d.panic = true;
    d.reason = "panic: no scale-down";
  } else if (down_stable < prev && now_ms - d.memory.last_scale_up_ms >= stable_ms) {
    d.desired = down_stable;
    d.reason =
        Cat("load ", LoadText(a.metric, d.stable_load), " over ", a.stable_window_seconds, "s");
  }
}

// The count the latency asks for (kP95Latency): steps, each once its effect can be measured.
void ByLatency(const InferenceServiceSpec& spec, std::span<const LoadSample> samples,
               const ScalerInput& in, int32_t prev, int64_t now_ms, ScaleDecision& d) {
  const ServiceAutoscaling& a = spec.autoscaling;
  d.stable_load = WindowP95(samples, a.stable_window_seconds, now_ms);
  d.panic_load = WindowP95(samples, a.panic_window_seconds, now_ms);
  const double target = a.target;
  const int64_t changed_ms = std::max(d.memory.last_scale_up_ms, d.memory.last_scale_down_ms);
  const bool starting = in.live > in.ready;
  if (prev <= 0 || starting) return;
  if (d.panic_load > target && now_ms - changed_ms >= a.panic_window_seconds * 1000) {
    const int32_t base = std::max(1, in.ready);
    d.desired =
        std::clamp(CeilDiv(base * d.panic_load, target), prev + 1, 2 * std::max(base, prev));
    d.reason = Cat("p95 latency ", fmt::format("{:.0f}", d.panic_load), " ms over ",
                   a.panic_window_seconds, "s (target ", a.target, " ms)");
  } else if (d.stable_load > 0 && d.stable_load < target * kScaleDownFraction &&
             now_ms - changed_ms >= a.stable_window_seconds * 1000) {
    d.desired = std::max(1, prev - std::max(1, prev / 10));
    d.reason = Cat("p95 latency ", fmt::format("{:.0f}", d.stable_load), " ms over ",
                   a.stable_window_seconds, "s (target ", a.target, " ms)");
  }
}

}  // namespace

ScaleDecision DecideReplicas(const InferenceServiceSpec& spec, std::span<const LoadSample> samples,
                             const ScalerInput& in, const ScalerMemory& memory, int64_t now_ms) {
  const ServiceAutoscaling& a = spec.autoscaling;
  ScaleDecision d;
  d.memory = memory;
  const int32_t prev = memory.desired >= 0 ? memory.desired : std::max(spec.min_replicas, in.live);
  d.desired = prev;
  d.reason = memory.desired >= 0 ? "steady" : "started";
  if (a.metric == ServiceMetric::kP95Latency) {
    ByLatency(spec, samples, in, prev, now_ms, d);
  } else {
    ByLoad(spec, samples, in, prev, now_ms, d);
  }
  int32_t desired = d.desired;
  // Zero only when idle for the whole grace period, and never with a request waiting.
  const int64_t idle_since = std::max(in.last_request_ms, in.created_ms);
  const bool idle = in.queued == 0 && now_ms - idle_since >= a.scale_to_zero_after_seconds * 1000;
  if (desired <= 0 && !idle) {
    desired = prev > 0 || in.queued > 0 || in.last_request_ms > 0 ? 1 : 0;
    if (prev == 0 && desired == 1) d.reason = "a request arrived";
  } else if (prev > 0 && idle && a.metric == ServiceMetric::kP95Latency) {
    desired = 0;  // latency says nothing of no traffic
  }
  if (desired <= 0 && prev > 0 && idle) {
    d.reason = Cat("no request for ", a.scale_to_zero_after_seconds, "s: scaled to zero");
  }
  if (desired < spec.min_replicas) {
    desired = spec.min_replicas;
  } else if (desired > spec.max_replicas) {
    desired = spec.max_replicas;
    d.reason += Cat(" (at max ", spec.max_replicas, ")");
  }
  if (desired > prev) d.memory.last_scale_up_ms = now_ms;
  if (desired < prev) d.memory.last_scale_down_ms = now_ms;
  d.desired = desired;
  d.memory.desired = desired;
  return d;
}

}  // namespace gpucloud::autoscale
