#include <algorithm>

#include "core/parse.h"
#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest::internal {
namespace {

std::string ProfileNames(const GpuType& t) {
  std::vector<std::string> names;
  for (const MigProfile& p : t.mig_profiles) names.push_back(p.name);
  return Join(names, ", ");
}

}  // namespace

std::optional<std::string> ReadDnsLabel(Context& ctx, const Field& f) {
  std::optional<std::string> s = ReadString(ctx.sink, f);
  if (!s) return std::nullopt;
  if (absl::Status st = ValidateDnsLabel(*s); !st.ok()) {
    ctx.sink.Error(f.mark, f.path, std::string(st.message()));
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> ReadOneOf(Context& ctx, const Field& f,
                                     std::initializer_list<std::string_view> allowed) {
  std::optional<std::string> s = ReadString(ctx.sink, f);
  if (!s) return std::nullopt;
  std::string list;
  size_t i = 0;
  for (std::string_view a : allowed) {
    if (*s == a) return s;
    list += Cat(i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ", a);
    ++i;
  }
  ctx.sink.Error(f.mark, f.path, Cat("must be ", list, ", got \"", *s, "\""));
  return std::nullopt;
}

std::optional<std::string> ReadTaintEffect(Context& ctx, const Field& f) {
  return ReadOneOf(ctx, f, {"NoSchedule", "PreferNoSchedule", "NoExecute"});
}

std::optional<BillingClass> ReadBillingClass(Context& ctx, const Field& f) {
  std::optional<std::string> s = ReadOneOf(ctx, f, {"on-demand", "reserved", "spot"});
  if (!s) return std::nullopt;
  return ParseBillingClass(*s);
}

bool DecodeMetadata(Context& ctx, MapReader& doc, ObjectMeta* meta, bool namespaced) {
  std::optional<Field> f = doc.Require("metadata");
  if (!f) return false;
  MapReader m(ctx.sink, *f);
  if (!m.valid()) return false;
  bool ok = true;
  if (std::optional<Field> name = m.Require("name")) {
    std::optional<std::string> s = ReadDnsLabel(ctx, *name);
    ok = s.has_value();
    if (s) meta->name = *s;
  } else {
    ok = false;
  }
  if (!namespaced) {
    meta->namespace_.clear();
  } else if (std::optional<Field> ns = m.Take("namespace")) {
    std::optional<std::string> s = ReadDnsLabel(ctx, *ns);
    ok = s.has_value() && ok;
    if (s) meta->namespace_ = *s;
  }
  ok = m.StringMap("labels", &meta->labels, /*labels=*/true) && ok;
  ok = m.StringMap("annotations", &meta->annotations, /*labels=*/false) && ok;
  // Fields the store owns are accepted (a `get -o yaml` output can be applied again) but ignored,
  // except resourceVersion: applying an object with it is a compare-and-swap.
  if (std::optional<Field> rv = m.Take("resourceVersion")) {
    std::optional<std::string> text = ReadQuantityText(ctx.sink, *rv);
    std::optional<int64_t> v;
    if (text && !text->empty() && text->size() <= 18 &&
        text->find_first_not_of("0123456789") == std::string::npos) {
      v = std::stoll(*text);
    }
    if (text && !v) {
      ctx.sink.Error(rv->mark, rv->path, Cat("must be a revision number, got \"", *text, "\""));
    }
    ok = v.has_value() && ok;
    if (v) meta->resource_version = *v;
  }
  for (const char* k : {"uid", "creationTimestamp", "generation"}) m.Ignore(k);
  m.Finish();
  return ok;
}

bool DecodeTolerations(Context& ctx, const Field& f, std::vector<Toleration>* out) {
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    Toleration t;
    bool ok = m.String("key", &t.key);
    if (std::optional<Field> opf = m.Take("operator")) {
      std::optional<std::string> op = ReadOneOf(ctx, *opf, {"Equal", "Exists"});
      ok = op.has_value() && ok;
      t.exists = op == "Exists";
    }
    ok = m.String("value", &t.value) && ok;
    if (std::optional<Field> ef = m.Take("effect")) {
      std::optional<std::string> effect = ReadTaintEffect(ctx, *ef);
      ok = effect.has_value() && ok;
      if (effect) t.effect = *effect;
    }
    m.Ignore("tolerationSeconds");
    if (t.exists && !t.value.empty()) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "value"),
                     "must be empty when operator is Exists");
      ok = false;
    }
    if (!t.exists && t.key.empty()) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "key"), "is required when operator is Equal");
      ok = false;
    }
    out->push_back(std::move(t));
    return ok;
  });
}

bool DecodeTaints(Context& ctx, const Field& f, std::vector<Taint>* out) {
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field&) {
    Taint t;
    bool ok = m.RequiredString("key", &t.key);
    ok = m.String("value", &t.value) && ok;
    std::optional<Field> ef = m.Require("effect");
    std::optional<std::string> effect = ef ? ReadTaintEffect(ctx, *ef) : std::nullopt;
    ok = effect.has_value() && ok;
    if (effect) t.effect = *effect;
    out->push_back(std::move(t));
    return ok;
  });
}

bool ResolveGpuTypes(Context& ctx, const Field& f, const std::vector<std::string>& written,
                     std::vector<std::string>* out) {
  bool ok = true;
  for (const std::string& w : written) {
    std::vector<const GpuType*> types = ctx.catalog.Resolve(w);
    if (types.empty()) {
      ctx.sink.Error(f.mark, f.path,
                     Cat("unknown GPU type \"", w, "\" (known: ", ctx.catalog.KnownNames(), ")"));
      ok = false;
    }
    for (const GpuType* t : types) {
      if (std::find(out->begin(), out->end(), t->name) == out->end()) out->push_back(t->name);
    }
  }
  return ok;
}

bool CheckGpuRequest(Context& ctx, const Field& at, GpuRequest* gpu) {
  if (gpu->mode == GpuMode::kMig) {
    if (gpu->types.empty()) {
      for (const GpuType* t : ctx.catalog.TypesWithMigProfile(gpu->mig_profile)) {
        gpu->types.push_back(t->name);
      }
      if (gpu->types.empty()) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("no GPU type has MIG profile \"", gpu->mig_profile, "\""));
        return false;
      }
      return true;
    }
    for (const std::string& name : gpu->types) {
      const GpuType* t = ctx.catalog.Find(name);
      if (!t->mig_capable()) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("MIG profile ", gpu->mig_profile, " requested, but ", name,
                           " does not support MIG"));
        return false;
      }
      if (t->FindMigProfile(gpu->mig_profile) == nullptr) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("MIG profile ", gpu->mig_profile, " does not exist on ", name,
                           " (its profiles: ", ProfileNames(*t), ")"));
        return false;
      }
    }
  }
  if (gpu->mode == GpuMode::kShared && gpu->memory.raw() > 0) {
    for (const std::string& name : gpu->types) {
      const GpuType* t = ctx.catalog.Find(name);
      if (gpu->memory > t->memory) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("shared GPU memory ", FormatMemory(gpu->memory), " exceeds the ",
                           FormatMemory(t->memory), " of ", name));
        return false;
      }
    }
  }
  return true;
}

void InferGpuTypesFromSelector(const GpuCatalog& catalog,
                               const std::map<std::string, std::string>& node_selector,
                               GpuRequest* gpu) {
  static constexpr std::string_view kAcceleratorLabels[] = {"accelerator", "nvidia.com/gpu.product",
                                                            "cloud.google.com/gke-accelerator"};
  if (gpu->mode == GpuMode::kNone || !gpu->types.empty()) return;
  for (std::string_view label : kAcceleratorLabels) {
    auto it = node_selector.find(std::string(label));
    if (it == node_selector.end()) continue;
    for (const GpuType* t : catalog.Resolve(it->second)) gpu->types.push_back(t->name);
    if (!gpu->types.empty()) return;
  }
}

std::optional<MilliGpu> DecodeGpuFraction(Context& ctx, const Field& f) {
  std::optional<std::string> text = ReadQuantityText(ctx.sink, f);
  if (!text) return std::nullopt;
  absl::StatusOr<int64_t> milli = ParseMilli(*text);
  if (!milli.ok()) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must be a fraction of one GPU such as 0.25, got ", *text, " (",
                       milli.status().message(), ")"));
    return std::nullopt;
  }
  if (*milli == 0) {
    ctx.sink.Error(f.mark, f.path, Cat("must be > 0, got ", *text));
    return std::nullopt;
  }
  if (*milli > kMilliPerUnit) {
    ctx.sink.Error(f.mark, f.path, Cat("must be at most 1 (a fraction of one GPU), got ", *text));
    return std::nullopt;
  }
  return MilliGpu(*milli);
}

std::optional<MilliCpu> DecodeCpu(Context& ctx, const Field& f) {
  return DecodeParsed(ctx, f, ParseCpu, "must be a CPU quantity such as 4 or 500m, got ");
}

std::optional<MiB> DecodeMemory(Context& ctx, const Field& f) {
  return DecodeParsed(ctx, f, ParseMemory);
}

std::optional<int64_t> DecodeDuration(Context& ctx, const Field& f) {
  return DecodeParsed(ctx, f, ParseDurationSeconds);
}

std::optional<std::vector<Field>> RequireTasks(Context& ctx, MapReader& spec) {
  std::optional<Field> tasks = spec.Require("tasks");
  if (!tasks) return std::nullopt;
  std::optional<std::vector<Field>> items = ReadList(ctx.sink, *tasks);
  if (items && items->empty()) {
    ctx.sink.Error(tasks->mark, tasks->path, "must have at least one task");
    return std::nullopt;
  }
  if (items && items->size() > static_cast<size_t>(kMaxTasksPerJob)) {
    ctx.sink.Error(tasks->mark, tasks->path,
                   Cat("must have at most ", kMaxTasksPerJob, " tasks, got ", items->size()));
    return std::nullopt;
  }
  return items;
}

bool CheckGang(Context& ctx, const Field& tasks_field,
               const std::optional<Field>& min_available_field, JobSpec* spec) {
  int64_t replicas = 0;  // int64: summed before it is known to be small
  for (const TaskSpec& t : spec->tasks) replicas += t.replicas;
  if (replicas > kMaxReplicasPerJob) {
    ctx.sink.Error(
        tasks_field.mark, tasks_field.path,
        Cat("must have at most ", kMaxReplicasPerJob, " replicas in all, got ", replicas));
    return false;
  }
  int32_t total = spec->TotalReplicas();
  if (!min_available_field) {
    spec->min_available = total;
    return true;
  }
  std::optional<int64_t> v = ReadInt(ctx.sink, *min_available_field, 1, 1'000'000);
  if (!v) return false;
  if (*v > total) {
    ctx.sink.Error(min_available_field->mark, min_available_field->path,
                   Cat("must be <= the total replicas (", total, "), got ", *v));
    return false;
  }
  spec->min_available = static_cast<int32_t>(*v);
  return true;
}

bool CheckTaskName(Context& ctx, const Field& f, const std::string& name,
                   const std::vector<TaskSpec>& earlier) {
  if (absl::Status st = ValidateDnsLabel(name); !st.ok()) {
    ctx.sink.Error(f.mark, f.path, std::string(st.message()));
    return false;
  }
  for (const TaskSpec& t : earlier) {
    if (t.name == name) {
      ctx.sink.Error(f.mark, f.path, Cat("duplicate task name \"", name, "\""));
      return false;
    }
  }
  return true;
}

}  // namespace gpucloud::manifest::internal
