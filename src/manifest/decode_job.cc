// Decoder of the gpucloud/v1 Job kind (see docs/manifests.md for the schema).
#include "core/parse.h"
#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/decode_task.h"
#include "manifest/image_ref.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest::internal {

namespace {

constexpr int64_t kMaxGpuCount = 1 << 20;

// The value of a Kubernetes quantity written without a binary or decimal multiplier ("4", "4.0",
// "4000m"), as a count of whole units; nullopt when it is not such a number. `*fractional` is
// set when it is a number but not a whole one ("1.5", "500m"), `*negative` when it is below 0.
std::optional<int64_t> WholeQuantity(std::string_view text, bool* fractional, bool* negative) {
  *fractional = *negative = false;
  bool milli = text.ends_with('m');
  if (milli) text.remove_suffix(1);
  if (text.starts_with('+') || text.starts_with('-')) {
    *negative = text[0] == '-';
    text.remove_prefix(1);
  }
  size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  auto digits = [](std::string_view s) {
    return s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (whole.empty() && frac.empty()) return std::nullopt;
  if (!digits(whole) || !digits(frac)) return std::nullopt;
  while (whole.size() > 1 && whole[0] == '0') whole.remove_prefix(1);
  if (frac.find_first_not_of('0') != std::string_view::npos) *fractional = true;
  if (whole.size() > 15) return kMaxGpuCount + 1;  // too large either way
  int64_t v = 0;
  for (char c : whole) v = v * 10 + (c - '0');
  if (milli) {
    if (v % 1000 != 0) *fractional = true;
    v /= 1000;
  }
  if (*negative && (v != 0 || *fractional)) return -v;
  *negative = false;
  return v;
}

}  // namespace

std::optional<int32_t> ReadGpuCount(Context& ctx, const Field& f) {
  std::optional<std::string> text = ReadQuantityText(ctx.sink, f);
  if (!text) return std::nullopt;
  bool fractional = false, negative = false;
  std::optional<int64_t> v = WholeQuantity(*text, &fractional, &negative);
  if (!v) {
    ctx.sink.Error(
        f.mark, f.path,
        Cat("must be a whole number of GPUs such as 1 or \"2\", got \"", Excerpt(*text), "\""));
    return std::nullopt;
  }
  if (negative) {
    ctx.sink.Error(f.mark, f.path, Cat("must be >= 0, got ", *text));
    return std::nullopt;
  }
  if (fractional) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must be a whole number of GPUs, got ", Excerpt(*text),
                       " (for part of one GPU ask for a fraction)"));
    return std::nullopt;
  }
  if (*v > kMaxGpuCount) {
    ctx.sink.Error(f.mark, f.path, Cat("must be <= ", kMaxGpuCount, ", got ", Excerpt(*text)));
    return std::nullopt;
  }
  return static_cast<int32_t>(*v);
}

std::optional<GpuRequest> DecodeGpu(Context& ctx, const Field& f) {
  GpuRequest gpu;
  if (f.value.IsScalar()) {  // shorthand: `gpu: 4`
    std::optional<int32_t> n = ReadGpuCount(ctx, f);
    if (!n) return std::nullopt;
    gpu.count = *n;
    gpu.mode = *n > 0 ? GpuMode::kWhole : GpuMode::kNone;
    return gpu;
  }
  MapReader m(ctx.sink, f);
  if (!m.valid()) return std::nullopt;
  bool ok = true;
  std::optional<Field> count = m.Take("count");
  std::optional<Field> mig = m.Take("mig");
  std::optional<Field> fraction = m.Take("fraction");
  std::optional<Field> memory = m.Take("memory");
  std::optional<Field> sharing = m.Take("sharing");
  std::optional<Field> type = m.Take("type");
  std::optional<Field> types = m.Take("types");
  m.Finish();

  std::optional<int32_t> n;
  if (count) {
    n = ReadGpuCount(ctx, *count);
    ok = n.has_value() && ok;
  }
  if (mig && fraction) {
    ctx.sink.Error(
        fraction->mark, fraction->path,
        "cannot be combined with mig: a task asks for MIG instances or a share of a GPU");
    return std::nullopt;
  }
  if (mig) {
    std::optional<std::string> p = ReadString(ctx.sink, *mig);
    if (!p) return std::nullopt;
    gpu.mode = GpuMode::kMig;
    gpu.mig_profile = *p;
    gpu.count = n.value_or(1);
    if (gpu.count == 0) {
      ctx.sink.Error(count->mark, count->path, "must be >= 1 with mig, got 0");
      ok = false;
    }
  } else if (fraction) {
    std::optional<MilliGpu> fr = DecodeGpuFraction(ctx, *fraction);
    if (!fr) return std::nullopt;
    gpu.mode = GpuMode::kShared;
    gpu.fraction = *fr;
    if (n && *n != 1) {
      ctx.sink.Error(count->mark, count->path,
                     Cat("must be 1 with fraction (one shared GPU per replica), got ", *n));
      ok = false;
    }
  } else {
    gpu.count = n.value_or(0);
    gpu.mode = gpu.count > 0 ? GpuMode::kWhole : GpuMode::kNone;
  }
  for (const std::optional<Field>* shared_only : {&memory, &sharing}) {
    if (*shared_only && gpu.mode != GpuMode::kShared) {
      ctx.sink.Error((*shared_only)->mark, (*shared_only)->path,
                     "is only allowed with fraction (a shared GPU)");
      ok = false;
    }
  }
  if (memory && gpu.mode == GpuMode::kShared) {
    std::optional<MiB> mem = DecodeMemory(ctx, *memory);
    ok = mem.has_value() && ok;
    if (mem) gpu.memory = *mem;
  }
  if (sharing && gpu.mode == GpuMode::kShared) {
    std::optional<std::string> s = ReadOneOf(ctx, *sharing, {"time-slicing", "mps"});
    ok = s.has_value() && ok;
    if (s) gpu.sharing = *ParseGpuSharing(*s);
  }
  if (type && types) {
    ctx.sink.Error(types->mark, types->path, "give either type or types, not both");
    return std::nullopt;
  }
  if (type || types) {
    const Field& tf = type ? *type : *types;
    std::optional<std::vector<std::string>> written;
    if (type) {
      std::optional<std::string> s = ReadString(ctx.sink, tf);
      if (s) written = std::vector<std::string>{*s};
    } else {
      written = ReadStringList(ctx.sink, tf);
    }
    if (!written) return std::nullopt;
    if (gpu.mode == GpuMode::kNone) {
      ctx.sink.Error(tf.mark, tf.path, "names GPU types, but the task asks for no GPU");
      return std::nullopt;
    }
    if (!ResolveGpuTypes(ctx, tf, *written, &gpu.types)) return std::nullopt;
  }
  if (!ok) return std::nullopt;
  if (!CheckGpuRequest(ctx, mig ? *mig : f, &gpu)) return std::nullopt;
  return gpu;
}

namespace {

// `command` or `args`: a list of strings, each at most kMaxExecStringBytes.
bool DecodeExecList(Context& ctx, MapReader& m, std::string_view key,
                    std::vector<std::string>* out) {
  std::optional<Field> f = m.Take(key);
  if (!f) return true;
  std::optional<std::vector<Field>> items = ReadList(ctx.sink, *f);
  if (!items) return false;
  bool ok = true;
  for (const Field& item : *items) {
    std::optional<std::string> s = ReadString(ctx.sink, item);
    if (s && s->size() > kMaxExecStringBytes) {
      ctx.sink.Error(item.mark, item.path,
                     Cat("must be at most ", kMaxExecStringBytes, " bytes, got ", s->size()));
      s.reset();
    }
    ok = s.has_value() && ok;
    if (s) out->push_back(std::move(*s));
  }
  return ok;
}

// What exec is handed for one task: command + args entries and their bytes with env, bounded.
bool CheckExecSize(Context& ctx, const MapReader& m, const TaskSpec& t) {
  bool ok = true;
  size_t args = t.command.size() + t.args.size();
  if (args > kMaxExecArgs) {
    ctx.sink.Error(
        m.mark(), m.path(),
        Cat("command and args must have at most ", kMaxExecArgs, " entries together, got ", args));
    ok = false;
  }
  size_t bytes = 0;
  for (const std::vector<std::string>* list : {&t.command, &t.args}) {
    for (const std::string& a : *list) bytes += a.size() + 1;
  }
  for (const EnvVar& e : t.env) bytes += e.name.size() + e.value.size() + 2;
  if (bytes > kMaxExecBytes) {
    ctx.sink.Error(m.mark(), m.path(),
                   Cat("command, args and env must be at most ", kMaxExecBytes,
                       " bytes together, got ", bytes));
    ok = false;
  }
  return ok;
}

}  // namespace

namespace {

// `image`: a reference by the Docker grammar, at most kMaxImageReferenceBytes.
bool DecodeImage(Context& ctx, const Field& f, std::string* out) {
  std::optional<std::string> s = ReadString(ctx.sink, f);
  if (!s) return false;
  if (s->size() > kMaxImageReferenceBytes) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must be at most ", kMaxImageReferenceBytes, " bytes, got ", s->size()));
    return false;
  }
  absl::StatusOr<ImageReference> ref = ParseImageReference(*s);
  if (!ref.ok()) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must be an image reference such as registry.local:5000/team/trainer:1, "
                       "got \"",
                       Excerpt(*s), "\" (", ref.status().message(), ")"));
    return false;
  }
  *out = std::move(*s);
  return true;
}

bool ReadId(Context& ctx, MapReader& m, std::string_view key, std::optional<int64_t>* out) {
  std::optional<Field> f = m.Take(key);
  if (!f) return true;
  std::optional<int64_t> v = ReadInt(ctx.sink, *f, 0, kMaxPosixId);
  if (v) *out = *v;
  return v.has_value();
}

}  // namespace

bool DecodeSecurityContext(Context& ctx, const Field& f, SecurityLevel level,
                           SecurityContext* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = ReadId(ctx, m, "runAsUser", &out->run_as_user);
  ok = ReadId(ctx, m, "runAsGroup", &out->run_as_group) && ok;
  if (std::optional<Field> nr = m.Take("runAsNonRoot")) {
    std::optional<bool> v = ReadBool(ctx.sink, *nr);
    ok = v.has_value() && ok;
    if (v) out->run_as_non_root = *v;
  }
  if (level == SecurityLevel::kContainer) {
    if (std::optional<Field> p = m.Take("privileged")) {
      std::optional<bool> v = ReadBool(ctx.sink, *p);
      if (v && *v) ctx.sink.Error(p->mark, p->path, "privileged tasks are not allowed");
      ok = v == false && ok;
    }
    for (const char* k :
         {"allowPrivilegeEscalation", "capabilities", "readOnlyRootFilesystem", "procMount",
          "seccompProfile", "seLinuxOptions", "appArmorProfile", "windowsOptions"}) {
      m.IgnoreWithWarning(k, "not supported by gpucloud yet");
    }
  } else if (level == SecurityLevel::kPod) {
    for (const char* k :
         {"fsGroup", "fsGroupChangePolicy", "supplementalGroups", "supplementalGroupsPolicy",
          "sysctls", "seccompProfile", "seLinuxOptions", "appArmorProfile", "windowsOptions"}) {
      m.IgnoreWithWarning(k, "not supported by gpucloud yet");
    }
  }
  m.Finish();
  return ok;
}

bool CheckSecurityContext(Context& ctx, const Field& at, const SecurityContext& sc) {
  if (sc.run_as_non_root && sc.run_as_user == 0) {
    ctx.sink.Error(at.mark, ChildPath(at.path, "runAsUser"),
                   "must not be 0 (root) with runAsNonRoot: true");
    return false;
  }
  return true;
}

bool DecodeProcess(Context& ctx, MapReader& m, const std::vector<TaskSpec>& earlier,
                   SecurityLevel level, TaskSpec* t) {
  bool ok = true;
  if (std::optional<Field> name = m.Require("name")) {
    std::optional<std::string> s = ReadString(ctx.sink, *name);
    ok = s && CheckTaskName(ctx, *name, *s, earlier);
    if (s) t->name = *s;
  } else {
    ok = false;
  }
  // Without a command, a task with an image runs the image's entrypoint (args replace its CMD).
  if (std::optional<Field> image = m.Take("image")) ok = DecodeImage(ctx, *image, &t->image) && ok;
  if (std::optional<Field> p = m.Take("imagePullPolicy")) {
    std::optional<std::string> s = ReadOneOf(ctx, *p, {"Always", "IfNotPresent", "Never"});
    ok = s.has_value() && ok;
    if (s) t->image_pull_policy = *ParsePullPolicy(*s);
  }
  if (std::optional<Field> sc = m.Take("securityContext")) {
    ok = DecodeSecurityContext(ctx, *sc, level, &t->security_context) &&
         CheckSecurityContext(ctx, *sc, t->security_context) && ok;
  }
  ok = DecodeExecList(ctx, m, "command", &t->command) && ok;
  ok = DecodeExecList(ctx, m, "args", &t->args) && ok;
  if (std::optional<Field> env = m.Take("env")) {
    ok = DecodeEnv(ctx, *env, &t->env, &t->secret_env) && ok;
  }
  if (std::optional<Field> env_from = m.Take("envFrom")) {
    ok = DecodeEnvFrom(ctx, *env_from, &t->env_from) && ok;
  }
  if (std::optional<Field> wd = m.Take("workingDir")) {
    std::optional<std::string> s = ReadString(ctx.sink, *wd);
    if (s && s->size() > kMaxWorkingDirBytes) {
      ctx.sink.Error(wd->mark, wd->path,
                     Cat("must be at most ", kMaxWorkingDirBytes, " bytes, got ", s->size()));
      s.reset();
    }
    ok = s.has_value() && ok;
    if (s) t->working_dir = std::move(*s);
  }
  return CheckExecSize(ctx, m, *t) && ok;
}

std::optional<TaskSpec> DecodeTask(Context& ctx, const Field& f,
                                   const std::vector<TaskSpec>& earlier) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return std::nullopt;
  TaskSpec t;
  bool ok = DecodeProcess(ctx, m, earlier, SecurityLevel::kTask, &t);
  ok = m.Int32("replicas", &t.replicas, 1, kMaxReplicasPerJob) && ok;
  if (std::optional<Field> v = m.Take("volumes")) {
    ok = DecodeTaskVolumes(ctx, *v, &t.secret_volumes) && CheckSecretVolumes(ctx, *v, t) && ok;
  }
  if (std::optional<Field> p = m.Take("imagePullSecrets")) {
    ok = DecodeImagePullSecrets(ctx, *p, &t.image_pull_secrets) && ok;
    if (ok && t.image.empty() && !t.image_pull_secrets.empty()) {
      ctx.sink.Error(p->mark, p->path, "the task names no image to pull");
      ok = false;
    }
  }
  if (std::optional<Field> res = m.Take("resources")) {
    MapReader r(ctx.sink, *res);
    if (r.valid()) {
      if (std::optional<Field> g = r.Take("gpu")) {
        std::optional<GpuRequest> gpu = DecodeGpu(ctx, *g);
        ok = gpu.has_value() && ok;
        if (gpu) t.resources.gpu = std::move(*gpu);
      }
      if (std::optional<Field> c = r.Take("cpu")) {
        std::optional<MilliCpu> cpu = DecodeCpu(ctx, *c);
        ok = cpu.has_value() && ok;
        if (cpu) t.resources.cpu = *cpu;
      }
      if (std::optional<Field> mf = r.Take("memory")) {
        std::optional<MiB> mem = DecodeMemory(ctx, *mf);
        ok = mem.has_value() && ok;
        if (mem) t.resources.memory = *mem;
      }
      r.Finish();
    } else {
      ok = false;
    }
  }
  m.Finish();
  if (!ok) return std::nullopt;
  return t;
}

namespace {

bool DecodeCheckpoint(Context& ctx, const Field& f, CheckpointSpec* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = m.String("dir", &out->dir);
  if (std::optional<Field> i = m.Take("interval")) {
    std::optional<int64_t> s = DecodeDuration(ctx, *i);
    ok = s.has_value() && ok;
    if (s) out->interval_seconds = *s;
  }
  ok = m.Bool("nodeLocal", &out->node_local) && ok;
  ok = m.Bool("replicate", &out->replicate) && ok;
  m.Finish();
  if (ok && out->replicate && !out->node_local) {
    ctx.sink.Error(f.mark, ChildPath(f.path, "replicate"),
                   "replicate copies node-local checkpoints: set nodeLocal: true as well");
    return false;
  }
  return ok;
}

bool DecodeRestartPolicy(Context& ctx, const Field& f, RestartPolicy* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = m.Int32("maxRestarts", &out->max_restarts, 0, 1000);
  if (std::optional<Field> b = m.Take("backoff")) {
    std::optional<int64_t> s = DecodeDuration(ctx, *b);
    ok = s.has_value() && ok;
    if (s) out->backoff_seconds = *s;
  }
  m.Finish();
  return ok;
}

}  // namespace

bool DecodePlacement(Context& ctx, MapReader& s, Placement out) {
  bool ok = true;
  if (std::optional<Field> q = s.Take("queue")) {
    std::optional<std::string> name = ReadDnsLabel(ctx, *q);
    ok = name.has_value() && ok;
    if (name) *out.queue = *name;
  }
  ok = s.Int32("priority", out.priority, -kMaxPriority, kMaxPriority) && ok;
  if (std::optional<Field> b = s.Take("billing")) {
    std::optional<BillingClass> c = ReadBillingClass(ctx, *b);
    ok = c.has_value() && ok;
    if (c) *out.billing = *c;
  }
  ok = s.StringMap("nodeSelector", out.node_selector, /*labels=*/true) && ok;
  if (std::optional<Field> t = s.Take("tolerations")) {
    ok = DecodeTolerations(ctx, *t, out.tolerations) && ok;
  }
  return ok;
}

bool DecodeJobOptions(Context& ctx, MapReader& s, JobSpec* spec) {
  bool ok = DecodePlacement(
      ctx, s,
      {&spec->queue, &spec->priority, &spec->billing, &spec->node_selector, &spec->tolerations});
  if (std::optional<Field> c = s.Take("minCudaVersion")) {
    std::optional<int> v = DecodeParsed(ctx, *c, ParseCudaVersion);
    ok = v.has_value() && ok;
    if (v) spec->min_cuda_version = *v;
  }
  ok = s.String("runtimeClass", &spec->runtime_class) && ok;
  if (std::optional<Field> c = s.Take("checkpoint")) {
    ok = DecodeCheckpoint(ctx, *c, &spec->checkpoint) && ok;
  }
  if (std::optional<Field> r = s.Take("restartPolicy")) {
    ok = DecodeRestartPolicy(ctx, *r, &spec->restart) && ok;
  }
  if (std::optional<Field> e = s.Take("runtimeEstimate")) {
    std::optional<int64_t> secs = DecodeDuration(ctx, *e);
    ok = secs.has_value() && ok;
    spec->runtime_estimate_seconds = secs;
  }
  if (std::optional<Field> k = s.Take("ssh")) ok = DecodeSshKeys(ctx, *k, &spec->ssh) && ok;
  if (std::optional<Field> i = s.Take("interactive")) {
    ok = DecodeInteractive(ctx, *i, &spec->interactive) && ok;
  }
  return ok;
}

std::optional<Job> DecodeJob(Context& ctx, MapReader& doc) {
  Job job;
  bool ok = DecodeMetadata(ctx, doc, &job.metadata, /*namespaced=*/true);
  std::optional<Field> spec_field = doc.Require("spec");
  if (!spec_field) return std::nullopt;
  MapReader s(ctx.sink, *spec_field);
  if (!s.valid()) return std::nullopt;
  std::optional<std::vector<Field>> items = RequireTasks(ctx, s);
  ok = items.has_value() && ok;
  for (const Field& item : items.value_or(std::vector<Field>{})) {
    std::optional<TaskSpec> t = DecodeTask(ctx, item, job.spec.tasks);
    ok = t.has_value() && ok;
    if (t) job.spec.tasks.push_back(std::move(*t));
  }
  std::optional<Field> min_available = s.Take("minAvailable");
  ok = DecodeJobOptions(ctx, s, &job.spec) && ok;
  if (std::optional<Field> p = s.Take("policies")) {
    ok = DecodeLifecyclePolicies(ctx, *p, PolicySyntax::kGpucloud, "", &job.spec.tasks,
                                 &job.spec.policies) &&
         ok;
    OrderLifecyclePolicies(&job.spec);
  }
  if (std::optional<Field> a = s.Take("array")) {
    ok = DecodeJobArray(ctx, *a, job.metadata.name, &job.spec.array) && ok;
  }
  s.Finish();
  if (!ok) return std::nullopt;
  // Taking "tasks" again: RequireTasks found it (ok), and it locates the replica total.
  if (!CheckGang(ctx, *s.Take("tasks"), min_available, &job.spec)) return std::nullopt;
  if (!CheckSshKeys(ctx, s.Take("ssh").value_or(*spec_field), job)) return std::nullopt;
  return job;
}

}  // namespace gpucloud::manifest::internal
