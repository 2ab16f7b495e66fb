// The decoder of gpucloud/v1 InferenceService (core/inference_service.h).
#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/decode_task.h"

namespace gpucloud::manifest::internal {
namespace {

constexpr int64_t kMaxWindowSeconds = 3600;
constexpr int32_t kMaxRequestBytes = 64 << 20;

// A duration in [min, max] seconds into *out.
bool Seconds(Context& ctx, MapReader& m, std::string_view key, int64_t min, int64_t max,
             int64_t* out) {
  std::optional<Field> f = m.Take(key);
  if (!f) return true;
  std::optional<int64_t> s = DecodeDuration(ctx, *f);
  if (!s) return false;
  if (*s < min || *s > max) {
    ctx.sink.Error(f->mark, f->path,
                   Cat("must be between ", min, "s and ", max, "s, got ", *s, "s"));
    return false;
  }
  *out = *s;
  return true;
}

bool DecodeReplicas(Context& ctx, const Field& f, InferenceServiceSpec* spec) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = m.Int32("min", &spec->min_replicas, 0, kMaxServiceReplicas);
  ok = m.Int32("max", &spec->max_replicas, 1, kMaxServiceReplicas) && ok;
  m.Finish();
  if (ok && spec->min_replicas > spec->max_replicas) {
    ctx.sink.Error(f.mark, ChildPath(f.path, "min"),
                   Cat("is ", spec->min_replicas, ", more than max (", spec->max_replicas, ")"));
    return false;
  }
  return ok;
}

bool DecodeAutoscaling(Context& ctx, const Field& f, ServiceAutoscaling* a) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = true;
  if (std::optional<Field> metric = m.Take("metric")) {
    std::optional<std::string> s = ReadOneOf(ctx, *metric, {"concurrency", "rps", "p95Latency"});
    ok = s.has_value();
    if (s) a->metric = *ParseServiceMetric(*s);
  }
  ok = m.Int32("target", &a->target, 1, 1'000'000) && ok;
  ok = Seconds(ctx, m, "stableWindow", 6, kMaxWindowSeconds, &a->stable_window_seconds) && ok;
  ok = Seconds(ctx, m, "panicWindow", 1, kMaxWindowSeconds, &a->panic_window_seconds) && ok;
  ok = Seconds(ctx, m, "scaleToZeroAfter", 1, kMaxWindowSeconds, &a->scale_to_zero_after_seconds) &&
       ok;
  m.Finish();
  if (ok && a->panic_window_seconds > a->stable_window_seconds) {
    ctx.sink.Error(f.mark, ChildPath(f.path, "panicWindow"),
                   Cat("is ", a->panic_window_seconds, "s, longer than stableWindow (",
                       a->stable_window_seconds, "s)"));
    return false;
  }
  return ok;
}

bool DecodeBatching(Context& ctx, const Field& f, std::optional<ServiceBatching>* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  ServiceBatching b;
  bool ok = m.RequiredString("path", &b.path);
  if (ok && (b.path.empty() || b.path[0] != '/')) {
    ctx.sink.Error(f.mark, ChildPath(f.path, "path"),
                   Cat("must start with '/', got \"", b.path, "\""));
    ok = false;
  }
  ok = m.Int32("maxBatchSize", &b.max_batch_size, 1, 1024) && ok;
  int32_t delay_ms = static_cast<int32_t>(b.max_queue_delay_ms);
  ok = m.Int32("maxQueueDelayMs", &delay_ms, 0, 10'000) && ok;
  b.max_queue_delay_ms = delay_ms;
  m.Finish();
  if (ok) *out = std::move(b);
  return ok;
}

bool DecodeRollout(Context& ctx, const Field& f, InferenceServiceSpec* spec) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = m.Int32("maxSurge", &spec->max_surge, 0, kMaxServiceReplicas);
  ok = m.Int32("maxUnavailable", &spec->max_unavailable, 0, kMaxServiceReplicas) && ok;
  m.Finish();
  if (ok && spec->max_surge == 0 && spec->max_unavailable == 0) {
    ctx.sink.Error(f.mark, ChildPath(f.path, "maxSurge"),
                   "maxSurge and maxUnavailable are both 0: a rollout could never proceed");
    return false;
  }
  return ok;
}

bool DecodeTemplate(Context& ctx, const Field& f, TaskSpec* out) {
  std::optional<TaskSpec> t = DecodeTask(ctx, f, {});
  if (!t) return false;
  if (t->replicas != 1) {
    ctx.sink.Error(f.mark, ChildPath(f.path, "replicas"),
                   "a service's replica count is spec.replicas (min and max), not its template's");
    return false;
  }
  *out = std::move(*t);
  return true;
}

}  // namespace

std::optional<InferenceService> DecodeInferenceService(Context& ctx, MapReader& doc) {
  InferenceService svc;
  bool ok = DecodeMetadata(ctx, doc, &svc.metadata, /*namespaced=*/true);
  std::optional<Field> spec_field = doc.Require("spec");
  if (!spec_field) return std::nullopt;
  if (ok && svc.metadata.name.size() > kMaxServiceNameLength) {
    ctx.sink.Error(
        spec_field->mark, "metadata.name",
        Cat("is ", svc.metadata.name.size(), " characters; a service's name has at most ",
            kMaxServiceNameLength, " (its replicas' jobs add 6)"));
    ok = false;
  }
  MapReader s(ctx.sink, *spec_field);
  if (!s.valid()) return std::nullopt;
  InferenceServiceSpec& spec = svc.spec;
  if (std::optional<Field> t = s.Require("template")) {
    ok = DecodeTemplate(ctx, *t, &spec.task) && ok;
  } else {
    ok = false;
  }
  if (s.Has("readinessPath")) {
    ok = s.String("readinessPath", &spec.readiness_path) && ok;
    if (spec.readiness_path.empty() || spec.readiness_path[0] != '/') {
      ctx.sink.Error(spec_field->mark, ChildPath(spec_field->path, "readinessPath"),
                     Cat("must start with '/', got \"", spec.readiness_path, "\""));
      ok = false;
    }
  }
  if (std::optional<Field> r = s.Take("replicas")) ok = DecodeReplicas(ctx, *r, &spec) && ok;
  if (std::optional<Field> a = s.Take("autoscaling")) {
    ok = DecodeAutoscaling(ctx, *a, &spec.autoscaling) && ok;
  }
  if (std::optional<Field> b = s.Take("batching"))
    ok = DecodeBatching(ctx, *b, &spec.batching) && ok;
  if (std::optional<Field> r = s.Take("rollout")) ok = DecodeRollout(ctx, *r, &spec) && ok;
  ok = Seconds(ctx, s, "requestTimeout", 1, kMaxWindowSeconds, &spec.request_timeout_seconds) && ok;
  ok = s.Int32("retries", &spec.retries, 0, 10) && ok;
  int32_t max_bytes = static_cast<int32_t>(spec.max_request_bytes);
  ok = s.Int32("maxRequestBytes", &max_bytes, 1, kMaxRequestBytes) && ok;
  spec.max_request_bytes = max_bytes;
  ok = DecodePlacement(
           ctx, s,
           {&spec.queue, &spec.priority, &spec.billing, &spec.node_selector, &spec.tolerations}) &&
       ok;
  s.Finish();
  if (!ok) return std::nullopt;
  return svc;
}

}  // namespace gpucloud::manifest::internal
