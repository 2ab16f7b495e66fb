// Decoders of the cluster-level kinds: gpucloud/v1 Queue and NodePool, and RuntimeClass
// (gpucloud/v1 or Kubernetes node.k8s.io/v1).
#include "absl/time/time.h"
#include "core/parse.h"
#include "core/text.h"
#include "manifest/decode.h"

namespace gpucloud::manifest::internal {
namespace {

// A GPU type field that must name exactly one catalog type.
std::optional<std::string> ReadOneGpuType(Context& ctx, const Field& f, bool allow_any) {
  std::optional<std::string> text = ReadString(ctx.sink, f);
  if (!text) return std::nullopt;
  if (allow_any && *text == kAnyGpuType) return *text;
  std::vector<const GpuType*> types = ctx.catalog.Resolve(*text);
  if (types.size() == 1) return types[0]->name;
  if (types.empty()) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("unknown GPU type \"", *text, "\" (known: ", ctx.catalog.KnownNames(), ")"));
  } else {
    std::vector<std::string> names;
    for (const GpuType* t : types) names.push_back(t->name);
    ctx.sink.Error(f.mark, f.path,
                   Cat("\"", *text, "\" is ambiguous here: name one of ", Join(names, ", ")));
  }
  return std::nullopt;
}

std::optional<MilliGpu> ReadGpuQuantity(Context& ctx, const Field& f) {
  std::optional<int64_t> milli =
      DecodeParsed(ctx, f, ParseMilli, "must be a number of GPUs such as 8 or 2.5, got ");
  if (!milli) return std::nullopt;
  return MilliGpu(*milli);
}

std::optional<GpuQuota> DecodeQuota(Context& ctx, const Field& f) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return std::nullopt;
  GpuQuota q;
  bool ok = true;
  if (std::optional<Field> t = m.Require("gpuType")) {
    std::optional<std::string> name = ReadOneGpuType(ctx, *t, /*allow_any=*/true);
    ok = name.has_value() && ok;
    if (name) q.gpu_type = *name;
  } else {
    ok = false;
  }
  if (std::optional<Field> g = m.Take("guaranteed")) {
    std::optional<MilliGpu> v = ReadGpuQuantity(ctx, *g);
    ok = v.has_value() && ok;
    if (v) q.guaranteed = *v;
  }
  std::optional<Field> max_field = m.Take("max");
  if (max_field) {
    q.max = ReadGpuQuantity(ctx, *max_field);
    ok = q.max.has_value() && ok;
  }
  m.Finish();
  if (ok && q.max && *q.max < q.guaranteed) {
    ctx.sink.Error(max_field->mark, max_field->path,
                   Cat("must be >= guaranteed (", FormatMilli(q.guaranteed.raw()), "), got ",
                       FormatMilli(q.max->raw())));
    ok = false;
  }
  if (!ok) return std::nullopt;
  return q;
}

}  // namespace

std::optional<Queue> DecodeQueue(Context& ctx, MapReader& doc) {
  Queue queue;
  bool ok = DecodeMetadata(ctx, doc, &queue.metadata, /*namespaced=*/false);
  std::optional<Field> spec_field = doc.Require("spec");
  if (!spec_field) return std::nullopt;
  MapReader s(ctx.sink, *spec_field);
  if (!s.valid()) return std::nullopt;
  QueueSpec& spec = queue.spec;
  ok = s.Int32("weight", &spec.weight, 1, 1000) && ok;
  ok = s.Bool("mayBorrow", &spec.may_borrow) && ok;
  ok = s.Bool("mayLend", &spec.may_lend) && ok;
  if (std::optional<Field> o = s.Take("ordering")) {
    std::optional<std::string> text = ReadOneOf(ctx, *o, {"fifo", "sjf", "las", "dlas"});
    ok = text.has_value() && ok;
    if (text) spec.ordering = *ParseQueueOrdering(*text);
  }
  if (std::optional<Field> q = s.Take("quota")) {
    if (std::optional<std::vector<Field>> items = ReadList(ctx.sink, *q)) {
      for (const Field& item : *items) {
        std::optional<GpuQuota> quota = DecodeQuota(ctx, item);
        if (quota) {
          for (const GpuQuota& earlier : spec.quota) {
            if (earlier.gpu_type == quota->gpu_type) {
              ctx.sink.Error(item.mark, ChildPath(item.path, "gpuType"),
                             Cat("duplicate quota for ", quota->gpu_type));
              quota.reset();
              break;
            }
          }
        }
        ok = quota.has_value() && ok;
        if (quota) spec.quota.push_back(std::move(*quota));
      }
    } else {
      ok = false;
    }
  }
  s.Finish();
  if (!ok) return std::nullopt;
  return queue;
}

// An RFC 3339 time as unix ms, or an error at `f`.
std::optional<int64_t> ReadTime(Context& ctx, const Field& f) {
  std::optional<std::string> text = ReadString(ctx.sink, f);
  if (!text) return std::nullopt;
  absl::Time t;
  std::string why;
  if (!absl::ParseTime(absl::RFC3339_full, *text, &t, &why) || t < absl::UnixEpoch()) {
    ctx.sink.Error(
        f.mark, f.path,
        Cat("must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got \"", *text, "\""));
    return std::nullopt;
  }
  return absl::ToUnixMillis(t);
}

// spec.priceSchedule: [{from, until, pricePerGpuHour}], contiguous and ascending; only the last
// may leave `until` out.
bool DecodePriceSchedule(Context& ctx, const Field& f, std::vector<PricePeriod>* out) {
  std::vector<Field> at;
  bool ok = ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    PricePeriod p;
    bool ok = true;
    std::optional<Field> from = m.Require("from");
    int64_t from_ms = -1;  // -1: not read
    if (from) from_ms = ReadTime(ctx, *from).value_or(-1);
    ok = from_ms >= 0 && ok;
    if (std::optional<Field> until = m.Take("until")) {
      std::optional<int64_t> until_ms = ReadTime(ctx, *until);
      ok = until_ms.has_value() && ok;
      if (until_ms && from_ms >= 0 && *until_ms <= from_ms) {
        ctx.sink.Error(until->mark, until->path, "must be after from");
        ok = false;
      }
      p.until_ms = until_ms.value_or(0);
    }
    p.from_ms = std::max<int64_t>(0, from_ms);
    if (std::optional<Field> price = m.Require("pricePerGpuHour")) {
      std::optional<MicroUsd> v = DecodeParsed(
          ctx, *price, ParsePrice, "must be a price in US dollars such as 2.50, not below 0, got ");
      ok = v.has_value() && ok;
      if (v) p.price_per_gpu_hour = *v;
    } else {
      ok = false;
    }
    m.Finish();
    out->push_back(p);
    at.push_back(item);
    return ok;
  });
  for (size_t i = 1; ok && i < out->size(); ++i) {
    const PricePeriod &before = (*out)[i - 1], &p = (*out)[i];
    std::string why = before.until_ms == 0 ? "the period before it has no until (only the last may "
                                             "leave it out)"
                      : p.from_ms > before.until_ms ? "leaves a gap after the period before it"
                      : p.from_ms < before.until_ms ? "overlaps the period before it"
                                                    : "";
    if (!why.empty()) {
      ctx.sink.Error(at[i].mark, Cat(at[i].path, ".from"),
                     Cat(why, ": periods must follow each other (from = the until before)"));
      ok = false;
    }
  }
  return ok;
}

std::optional<NodePool> DecodeNodePool(Context& ctx, MapReader& doc) {
  NodePool pool;
  bool ok = DecodeMetadata(ctx, doc, &pool.metadata, /*namespaced=*/false);
  std::optional<Field> spec_field = doc.Require("spec");
  if (!spec_field) return std::nullopt;
  MapReader s(ctx.sink, *spec_field);
  if (!s.valid()) return std::nullopt;
  NodePoolSpec& spec = pool.spec;
  if (std::optional<Field> t = s.Require("gpuType")) {
    std::optional<std::string> name = ReadOneGpuType(ctx, *t, /*allow_any=*/false);
    ok = name.has_value() && ok;
    if (name) spec.gpu_type = *name;
  } else {
    ok = false;
  }
  ok = s.Int32("gpusPerNode", &spec.gpus_per_node, 1, 64) && ok;
  ok = s.Int32("minNodes", &spec.min_nodes, 0, 100'000) && ok;
  std::optional<Field> max_nodes = s.Take("maxNodes");
  if (max_nodes) {
    std::optional<int64_t> v = ReadInt(ctx.sink, *max_nodes, 1, 100'000);
    ok = v.has_value() && ok;
    if (v) spec.max_nodes = static_cast<int32_t>(*v);
  } else {
    spec.max_nodes = std::max(spec.min_nodes, 1);
  }
  if (std::optional<Field> b = s.Take("billing")) {
    std::optional<BillingClass> c = ReadBillingClass(ctx, *b);
    ok = c.has_value() && ok;
    if (c) spec.billing = *c;
  }
  if (std::optional<Field> p = s.Take("pricePerGpuHour")) {
    spec.price_per_gpu_hour =
        DecodeParsed(ctx, *p, ParsePrice, "must be a price in US dollars such as 2.50, got ");
    ok = spec.price_per_gpu_hour.has_value() && ok;
  }
  if (std::optional<Field> p = s.Take("provider")) {
    std::optional<std::string> v = ReadString(ctx.sink, *p);
    if (v && *v != "static" && *v != "local" && !(v->starts_with("exec:/") && v->size() > 6)) {
      ctx.sink.Error(p->mark, p->path,
                     Cat("must be static, local or exec:/path/to/script, got \"", *v, "\""));
      v.reset();
    }
    ok = v.has_value() && ok;
    if (v) spec.provider = *v;
  }
  ok = s.StringMap("labels", &spec.labels, /*labels=*/true) && ok;
  if (std::optional<Field> t = s.Take("taints")) ok = DecodeTaints(ctx, *t, &spec.taints) && ok;
  ok = s.Int32("carbonIntensity", &spec.carbon_intensity, 0, kMaxCarbonIntensity) && ok;
  if (std::optional<Field> ps = s.Take("priceSchedule")) {
    ok = DecodePriceSchedule(ctx, *ps, &spec.price_schedule) && ok;
  }
  s.Finish();
  if (ok && max_nodes && spec.max_nodes < spec.min_nodes) {
    ctx.sink.Error(max_nodes->mark, max_nodes->path,
                   Cat("must be >= minNodes (", spec.min_nodes, "), got ", spec.max_nodes));
    ok = false;
  }
  if (!ok) return std::nullopt;
  return pool;
}

std::optional<RuntimeClass> DecodeRuntimeClass(Context& ctx, MapReader& doc) {
  RuntimeClass rc;
  bool ok = DecodeMetadata(ctx, doc, &rc.metadata, /*namespaced=*/false);
  ok = doc.RequiredString("handler", &rc.spec.handler) && ok;
  if (std::optional<Field> sched = doc.Take("scheduling")) {
    MapReader s(ctx.sink, *sched);
    if (s.valid()) {
      ok = s.StringMap("nodeSelector", &rc.spec.node_selector, /*labels=*/true) && ok;
      if (std::optional<Field> t = s.Take("tolerations")) {
        ok = DecodeTolerations(ctx, *t, &rc.spec.tolerations) && ok;
      }
      s.Finish();
    } else {
      ok = false;
    }
  }
  doc.IgnoreWithWarning("overhead", "gpucloud does not account runtime overhead");
  if (!ok) return std::nullopt;
  return rc;
}

}  // namespace gpucloud::manifest::internal
