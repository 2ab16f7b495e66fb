// Decoder of gpucloud/v1 SchedulerConfiguration: the scheduler's profile (plugins, weights,
// ordering, backfill, fair share, preemption, namespace budget). Plugin names are checked by the
// scheduler (sched::Scheduler::FromConfig), which owns the registry; here only the shape is
// checked.
#include "core/parse.h"
#include "core/text.h"
#include "manifest/decode.h"

namespace gpucloud::manifest::internal {
namespace {

// A plugin name: letters and digits, starting with a capital, as in kube-scheduler profiles.
std::optional<std::string> ReadPluginName(Context& ctx, const Field& f) {
  std::optional<std::string> name = ReadString(ctx.sink, f);
  if (!name) return std::nullopt;
  bool ok = !name->empty() && name->size() <= 63 && (*name)[0] >= 'A' && (*name)[0] <= 'Z';
  for (char c : *name) {
    ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
  }
  if (!ok) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must be a plugin name such as BinPack (letters and digits, starting "
                       "with a capital), got \"",
                       *name, "\""));
    return std::nullopt;
  }
  return name;
}

std::optional<WorkloadShare> DecodeWorkloadShare(Context& ctx, MapReader& m) {
  WorkloadShare w;
  bool ok = true;
  if (std::optional<Field> g = m.Require("gpus")) {
    std::optional<int64_t> milli =
        DecodeParsed(ctx, *g, ParseMilli, "must be GPUs per replica such as 1, 8 or 0.5, got ");
    if (milli && *milli <= 0) {
      ctx.sink.Error(g->mark, g->path, "must be more than 0");
      milli.reset();
    }
    ok = milli.has_value() && ok;
    if (milli) w.gpus = MilliGpu(*milli);
  } else {
    ok = false;
  }
  if (std::optional<Field> f = m.Require("weight")) {
    std::optional<int64_t> milli =
        DecodeParsed(ctx, *f, ParseMilli, "must be a relative frequency such as 93.2, got ");
    if (milli && *milli <= 0) {
      ctx.sink.Error(f->mark, f->path, "must be more than 0");
      milli.reset();
    }
    ok = milli.has_value() && ok;
    if (milli) w.weight = static_cast<double>(*milli) / kMilliPerUnit;
  } else {
    ok = false;
  }
  if (!ok) return std::nullopt;
  return w;
}

bool DecodePlugins(Context& ctx, const Field& f, SchedulerConfig* spec) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = true;
  if (std::optional<Field> filters = m.Take("filter")) {
    if (std::optional<std::vector<Field>> items = ReadList(ctx.sink, *filters)) {
      for (const Field& item : *items) {
        std::optional<std::string> name = ReadPluginName(ctx, item);
        ok = name.has_value() && ok;
        if (name) spec->filters.push_back(*name);
      }
      if (items->empty()) {
        ctx.sink.Error(filters->mark, filters->path,
                       "must name at least one filter (omit it for the defaults)");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (std::optional<Field> scores = m.Take("score")) {
    spec->scores.clear();  // given: exactly these (an empty list turns scoring off)
    ok = ReadListOfMaps(ctx.sink, *scores,
                        [&](MapReader& item, const Field&) {
                          ScorePluginConfig c;
                          bool item_ok = true;
                          if (std::optional<Field> n = item.Require("name")) {
                            std::optional<std::string> name = ReadPluginName(ctx, *n);
                            item_ok = name.has_value() && item_ok;
                            if (name) c.name = *name;
                          } else {
                            item_ok = false;
                          }
                          item_ok = item.Int32("weight", &c.weight, 0, 100) && item_ok;
                          if (std::optional<Field> w = item.Take("workload")) {
                            item_ok = ReadListOfMaps(ctx.sink, *w,
                                                     [&](MapReader& share, const Field&) {
                                                       std::optional<WorkloadShare> s =
                                                           DecodeWorkloadShare(ctx, share);
                                                       if (s) c.workload.push_back(*s);
                                                       return s.has_value();
                                                     }) &&
                                      item_ok;
                          }
                          if (item_ok) spec->scores.push_back(std::move(c));
                          return item_ok;
                        }) &&
         ok;
  }
  m.Finish();
  return ok;
}

// spec.namespaceBudget: {maxWaiting, maxSearches}, each 0 (no limit) up to kMaxNamespaceBudget.
bool DecodeNamespaceBudget(Context& ctx, const Field& f, NamespaceBudgetConfig* out) {
  // Far above any useful budget (a cycle deciding a million jobs of one namespace is no longer
  // bounded); larger values are more likely typos than intent. 0 means no limit.
  constexpr int64_t kMaxNamespaceBudget = 1'000'000;
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = m.Int32("maxWaiting", &out->max_waiting, 0, kMaxNamespaceBudget);
  ok = m.Int32("maxSearches", &out->max_searches, 0, kMaxNamespaceBudget) && ok;
  m.Finish();
  return ok;
}

// spec.las: {thresholds: [durations of GPU-time, ascending, > 0, at most 8], starvationFactor:
// a number >= 0}.
bool DecodeLas(Context& ctx, const Field& f, LasConfig* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = true;
  if (std::optional<Field> t = m.Take("thresholds")) {
    std::optional<std::vector<Field>> items = ReadList(ctx.sink, *t);
    ok = items.has_value();
    if (items && (items->empty() || items->size() > 8)) {
      ctx.sink.Error(t->mark, t->path, "must list 1 to 8 thresholds of GPU-time such as 16h");
      ok = false;
    }
    std::vector<int64_t> thresholds;
    for (const Field& item : items.value_or(std::vector<Field>{})) {
      std::optional<int64_t> secs = DecodeDuration(ctx, item);
      if (secs && (*secs <= 0 || (!thresholds.empty() && *secs <= thresholds.back()))) {
        ctx.sink.Error(item.mark, item.path,
                       "must be longer than 0s and than the threshold before it");
        secs.reset();
      }
      ok = secs.has_value() && ok;
      if (secs) thresholds.push_back(*secs);
    }
    if (ok) out->thresholds_gpu_s = std::move(thresholds);
  }
  if (std::optional<Field> s = m.Take("starvationFactor")) {
    // ParseMilli takes no sign: a negative factor is refused with the rest.
    std::optional<int64_t> milli =
        DecodeParsed(ctx, *s, ParseMilli, "must be a number such as 2 or 0.5 (0: off), got ");
    ok = milli.has_value() && ok;
    if (milli) out->starvation_factor = static_cast<double>(*milli) / kMilliPerUnit;
  }
  m.Finish();
  return ok;
}

}  // namespace

std::optional<SchedulerConfiguration> DecodeSchedulerConfiguration(Context& ctx, MapReader& doc) {
  SchedulerConfiguration out;
  bool ok = DecodeMetadata(ctx, doc, &out.metadata, /*namespaced=*/false);
  std::optional<Field> spec_field = doc.Require("spec");
  if (!spec_field) return std::nullopt;
  MapReader s(ctx.sink, *spec_field);
  if (!s.valid()) return std::nullopt;
  SchedulerConfig& spec = out.spec;
  if (std::optional<Field> o = s.Take("ordering")) {
    std::optional<std::string> text = ReadOneOf(ctx, *o, {"fifo", "sjf", "las", "dlas"});
    ok = text.has_value() && ok;
    if (text) spec.ordering = *ParseQueueOrdering(*text);
  }
  ok = s.Bool("backfill", &spec.backfill) && ok;
  ok = s.Bool("estimateStartTimes", &spec.estimate_start_times) && ok;
  if (std::optional<Field> f = s.Take("fairShare")) {
    MapReader m(ctx.sink, *f);
    if (m.valid()) {
      ok = m.Bool("enabled", &spec.fair_share) && ok;
      if (std::optional<Field> w = m.Take("window")) {
        std::optional<int64_t> secs = DecodeDuration(ctx, *w);
        if (secs && *secs <= 0) {
          ctx.sink.Error(w->mark, w->path, "must be longer than 0s");
          secs.reset();
        }
        ok = secs.has_value() && ok;
        if (secs) spec.fair_share_window_s = *secs;
      }
      m.Finish();
    } else {
      ok = false;
    }
  }
  if (std::optional<Field> f = s.Take("preemption")) {
    MapReader m(ctx.sink, *f);
    if (m.valid()) {
      ok = m.Bool("enabled", &spec.preemption) && ok;
      if (std::optional<Field> g = m.Take("gracePeriod")) {
        std::optional<int64_t> secs = DecodeDuration(ctx, *g);
        ok = secs.has_value() && ok;
        if (secs) spec.preemption_grace_s = *secs;
      }
      m.Finish();
    } else {
      ok = false;
    }
  }
  if (std::optional<Field> p = s.Take("plugins")) ok = DecodePlugins(ctx, *p, &spec) && ok;
  if (std::optional<Field> b = s.Take("namespaceBudget")) {
    ok = DecodeNamespaceBudget(ctx, *b, &spec.namespace_budget) && ok;
  }
  if (std::optional<Field> l = s.Take("las")) ok = DecodeLas(ctx, *l, &spec.las) && ok;
  s.Finish();
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace gpucloud::manifest::internal
