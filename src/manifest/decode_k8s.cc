// Decoders of Kubernetes v1 Pod and Volcano batch.volcano.sh/v1alpha1 Job, converted to
// gpucloud Jobs (a Volcano Job's and its tasks' `policies` into JobSpec::policies, task-level
// ones first). Known Kubernetes fields that gpucloud does not act on are accepted with a
// warning; unknown fields are errors.
#include "core/parse.h"
#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/decode_task.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest::internal {
namespace {

constexpr std::string_view kGpu = "nvidia.com/gpu";
constexpr std::string_view kGpuShared = "nvidia.com/gpu.shared";
constexpr std::string_view kMigPrefix = "nvidia.com/mig-";
constexpr std::string_view kFractionAnnotation = "gpucloud.io/gpu-fraction";
constexpr std::string_view kMemoryAnnotation = "gpucloud.io/gpu-memory";
constexpr std::string_view kSharingAnnotation = "gpucloud.io/gpu-sharing";
constexpr int64_t kDefaultSharedFractionMilli = 250;  // device plugin's common replicas: 4

// What one container asks for, from resources.limits and resources.requests.
struct ContainerResources {
  Resources resources;
  std::optional<Field> gpu_field;  // the nvidia.com/* entry, for locating later errors
  int32_t shared_replicas = 0;
};

bool ReadResourceList(Context& ctx, const Field& f, std::map<std::string, Field>* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = true;
  for (const std::string& key : m.Keys()) {
    std::optional<Field> v = m.Take(key);
    if (!v) {
      ctx.sink.Error(m.mark(), ChildPath(f.path, key), "must be a quantity, got null");
      ok = false;
      continue;
    }
    out->emplace(key, std::move(*v));
  }
  m.Finish();
  return ok;
}

bool DecodeContainerResources(Context& ctx, const Field& f, ContainerResources* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  std::map<std::string, Field> limits, requests;
  bool ok = true;
  if (std::optional<Field> l = m.Take("limits")) ok = ReadResourceList(ctx, *l, &limits) && ok;
  if (std::optional<Field> r = m.Take("requests")) ok = ReadResourceList(ctx, *r, &requests) && ok;
  m.Finish();
  if (!ok) return false;

  // Limits win; a GPU request without a limit is accepted, one that differs is an error.
  std::map<std::string, Field> merged = requests;
  for (const auto& [name, field] : limits) merged.insert_or_assign(name, field);
  GpuRequest& gpu = out->resources.gpu;
  for (const auto& [name, field] : merged) {
    bool is_gpu = name == kGpu || name == kGpuShared || name.starts_with(kMigPrefix);
    if (name == "cpu") {
      std::optional<MilliCpu> cpu = DecodeCpu(ctx, field);
      ok = cpu.has_value() && ok;
      if (cpu) out->resources.cpu = *cpu;
    } else if (name == "memory") {
      std::optional<MiB> mem = DecodeMemory(ctx, field);
      ok = mem.has_value() && ok;
      if (mem) out->resources.memory = *mem;
    } else if (is_gpu) {
      std::optional<int32_t> n = ReadGpuCount(ctx, field);
      if (!n) {
        ok = false;
        continue;
      }
      // Compared as quantities: `requests: {nvidia.com/gpu: "1"}` equals `limits: 1`.
      if (limits.contains(name) && requests.contains(name)) {
        const Field& req = requests.at(name);
        std::optional<int32_t> r = ReadGpuCount(ctx, req);
        if (r && *r != *n) {
          ctx.sink.Error(req.mark, req.path,
                         Cat("must equal the limit (", field.value.Scalar(), ") for ", name));
        }
        if (r != n) {
          ok = false;
          continue;
        }
      }
      if (*n == 0) continue;
      if (gpu.mode != GpuMode::kNone) {
        ctx.sink.Error(field.mark, field.path,
                       Cat("a container asks for one kind of GPU: whole (nvidia.com/gpu), MIG "
                           "(nvidia.com/mig-<profile>) or shared (nvidia.com/gpu.shared); ",
                           out->gpu_field->path, " is already set"));
        ok = false;
        continue;
      }
      out->gpu_field = field;
      if (name == kGpu) {
        gpu.mode = GpuMode::kWhole;
        gpu.count = *n;
      } else if (name == kGpuShared) {
        gpu.mode = GpuMode::kShared;
        out->shared_replicas = *n;
      } else {
        std::string profile = name.substr(kMigPrefix.size());
        // The device plugin writes "1g.10gb+me" as "1g.10gb.me".
        if (profile.ends_with(".me")) profile = profile.substr(0, profile.size() - 3) + "+me";
        gpu.mode = GpuMode::kMig;
        gpu.mig_profile = profile;
        gpu.count = *n;
      }
    } else if (name.starts_with("nvidia.com/")) {
      ctx.sink.Error(field.mark, field.path,
                     Cat("unknown NVIDIA resource \"", name,
                         "\" (known: nvidia.com/gpu, nvidia.com/gpu.shared, "
                         "nvidia.com/mig-<profile>)"));
      ok = false;
    } else {
      ctx.sink.Warn(field.mark, field.path, Cat("ignored: gpucloud does not schedule ", name));
    }
  }
  return ok;
}

// Turns `nvidia.com/gpu.shared: N` into a fraction using the job's annotations.
bool ApplySharedAnnotations(Context& ctx, const ObjectMeta& meta, ContainerResources* c) {
  GpuRequest& gpu = c->resources.gpu;
  const Field& at = *c->gpu_field;
  int64_t per_replica = kDefaultSharedFractionMilli;
  std::string annotation_path = "metadata.annotations.";
  if (auto it = meta.annotations.find(std::string(kFractionAnnotation));
      it != meta.annotations.end()) {
    absl::StatusOr<int64_t> v = ParseMilli(it->second);
    if (!v.ok() || *v == 0 || *v > kMilliPerUnit) {
      ctx.sink.Error(at.mark, Cat(annotation_path, kFractionAnnotation),
                     Cat("must be a fraction of one GPU in (0, 1], got \"", it->second, "\""));
      return false;
    }
    per_replica = *v;
  }
  int64_t total = per_replica * c->shared_replicas;
  if (total > kMilliPerUnit) {
    ctx.sink.Error(at.mark, at.path,
                   Cat(c->shared_replicas, " shared replicas of ", FormatMilli(per_replica),
                       " GPU each exceed one GPU"));
    return false;
  }
  gpu.fraction = MilliGpu(total);
  if (auto it = meta.annotations.find(std::string(kMemoryAnnotation));
      it != meta.annotations.end()) {
    absl::StatusOr<MiB> mem = ParseMemory(it->second);
    if (!mem.ok()) {
      ctx.sink.Error(at.mark, Cat(annotation_path, kMemoryAnnotation),
                     std::string(mem.status().message()));
      return false;
    }
    gpu.memory = *mem;
  }
  if (auto it = meta.annotations.find(std::string(kSharingAnnotation));
      it != meta.annotations.end()) {
    std::optional<GpuSharing> s = ParseGpuSharing(it->second);
    if (!s) {
      ctx.sink.Error(at.mark, Cat(annotation_path, kSharingAnnotation),
                     Cat("must be time-slicing or mps, got \"", it->second, "\""));
      return false;
    }
    gpu.sharing = *s;
  }
  return true;
}

std::optional<TaskSpec> DecodeContainer(Context& ctx, const Field& f, const ObjectMeta& meta,
                                        std::optional<Field>* gpu_field,
                                        std::optional<Field>* volume_mounts) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return std::nullopt;
  TaskSpec t;
  bool ok = DecodeProcess(ctx, m, {}, SecurityLevel::kContainer, &t);
  if (std::optional<Field> res = m.Take("resources")) {
    ContainerResources c;
    if (DecodeContainerResources(ctx, *res, &c)) {
      if (c.resources.gpu.mode == GpuMode::kShared)
        ok = ApplySharedAnnotations(ctx, meta, &c) && ok;
      t.resources = c.resources;
      *gpu_field = c.gpu_field;
    } else {
      ok = false;
    }
  }
  *volume_mounts = m.Take("volumeMounts");  // joined with the pod's volumes by DecodePodSpec
  for (const char* k : {"ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"}) {
    m.IgnoreWithWarning(k, "not supported by gpucloud yet");
  }
  for (const char* k : {"stdin", "tty", "terminationMessagePath", "terminationMessagePolicy"}) {
    m.Ignore(k);
  }
  m.Finish();
  if (!ok) return std::nullopt;
  return t;
}

// The pod's securityContext under the container's: each field the container sets wins. The
// result is checked again (runAsNonRoot from one level, runAsUser 0 from the other), the error
// located at the container's securityContext when it set either, else at the pod's.
bool MergeSecurityContext(Context& ctx, const Field& pod_field, const Field& container_field,
                          const SecurityContext& pod, SecurityContext* container) {
  bool container_sets_one = container->run_as_user.has_value() || container->run_as_non_root;
  if (!container->run_as_user) container->run_as_user = pod.run_as_user;
  if (!container->run_as_group) container->run_as_group = pod.run_as_group;
  container->run_as_non_root = container->run_as_non_root || pod.run_as_non_root;
  Field at = container_sets_one ? Field(container_field.value, container_field.mark,
                                        ChildPath(container_field.path, "securityContext"))
                                : pod_field;
  return CheckSecurityContext(ctx, at, *container);
}

}  // namespace

// The pod's volumes joined with its container's volumeMounts, and its imagePullSecrets.
static bool DecodePodSecrets(Context& ctx, MapReader& pod,
                             const std::optional<Field>& volume_mounts, TaskSpec* task) {
  std::map<std::string, PodVolume> volumes;
  std::optional<Field> vf = pod.Take("volumes");
  bool ok = !vf || DecodePodVolumes(ctx, *vf, &volumes);
  if (ok && volume_mounts) {
    ok = JoinVolumeMounts(ctx, *volume_mounts, std::move(volumes), &task->secret_volumes) &&
         CheckSecretVolumes(ctx, *volume_mounts, *task);
  }
  if (std::optional<Field> p = pod.Take("imagePullSecrets")) {
    ok = DecodeImagePullSecrets(ctx, *p, &task->image_pull_secrets) && ok;
  }
  return ok;
}

std::optional<PodParts> DecodePodSpec(Context& ctx, const Field& f, const ObjectMeta& meta) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return std::nullopt;
  PodParts parts;
  bool ok = true;
  std::optional<Field> gpu_field;
  std::optional<Field> volume_mounts;
  std::optional<Field> container;
  if (std::optional<Field> containers = m.Require("containers")) {
    if (std::optional<std::vector<Field>> items = ReadList(ctx.sink, *containers)) {
      if (items->size() != 1) {
        ctx.sink.Error(containers->mark, containers->path,
                       Cat("must have exactly one container (gpucloud runs one process per task), "
                           "got ",
                           items->size()));
        ok = false;
      } else {
        container = (*items)[0];
        std::optional<TaskSpec> t =
            DecodeContainer(ctx, *container, meta, &gpu_field, &volume_mounts);
        ok = t.has_value() && ok;
        if (t) parts.task = std::move(*t);
      }
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  std::optional<Field> selector = m.Take("nodeSelector");
  if (selector) {
    std::optional<std::map<std::string, std::string>> sel =
        ReadStringMap(ctx.sink, *selector, true);
    ok = sel.has_value() && ok;
    if (sel) parts.node_selector = std::move(*sel);
  }
  if (std::optional<Field> t = m.Take("tolerations")) {
    ok = DecodeTolerations(ctx, *t, &parts.tolerations) && ok;
  }
  ok = m.String("runtimeClassName", &parts.runtime_class) && ok;
  parts.restart_policy = m.Take("restartPolicy");
  if (std::optional<Field> sc = m.Take("securityContext")) {
    SecurityContext pod;
    if (DecodeSecurityContext(ctx, *sc, SecurityLevel::kPod, &pod) && container) {
      ok = MergeSecurityContext(ctx, *sc, *container, pod, &parts.task.security_context) && ok;
    } else {
      ok = false;
    }
  }
  ok = DecodePodSecrets(ctx, m, volume_mounts, &parts.task) && ok;
  m.Ignore("schedulerName");  // gpucloud is the scheduler
  for (const char* k :
       {"initContainers", "serviceAccountName", "affinity", "priorityClassName", "hostNetwork",
        "dnsPolicy", "terminationGracePeriodSeconds", "hostIPC", "shareProcessNamespace"}) {
    m.IgnoreWithWarning(k, "not supported by gpucloud yet");
  }
  m.Finish();
  if (!ok) return std::nullopt;

  // A GPU model named in the node selector narrows the acceptable GPU types.
  GpuRequest& gpu = parts.task.resources.gpu;
  InferGpuTypesFromSelector(ctx.catalog, parts.node_selector, &gpu);
  if (gpu.mode != GpuMode::kNone && !CheckGpuRequest(ctx, *gpu_field, &gpu)) return std::nullopt;
  return parts;
}

namespace {

bool MergeNodeSelector(Context& ctx, const Field& at, const std::map<std::string, std::string>& add,
                       std::map<std::string, std::string>* into) {
  for (const auto& [k, v] : add) {
    auto [it, inserted] = into->emplace(k, v);
    if (!inserted && it->second != v) {
      ctx.sink.Error(at.mark, at.path,
                     Cat("nodeSelector ", k, "=", v, " conflicts with ", k, "=", it->second,
                         " of another task (gpucloud applies one node selector to the whole job)"));
      return false;
    }
  }
  return true;
}

// One entry of a Volcano Job's spec.tasks, appended to `job` as a task; its pod template's node
// selector, tolerations and runtime class apply to the whole job. Its policies are appended to
// `policies` with the task's name.
bool DecodeVolcanoTask(Context& ctx, const Field& item, Job* job,
                       std::vector<LifecyclePolicy>* policies) {
  MapReader t(ctx.sink, item);
  if (!t.valid()) return false;
  std::optional<Field> name = t.Take("name");
  int32_t replicas = 1;
  bool ok = t.Int32("replicas", &replicas, 1, kMaxReplicasPerJob);
  std::optional<Field> task_policies = t.Take("policies");
  for (const char* k : {"minAvailable", "maxRetry", "dependsOn"}) {
    t.IgnoreWithWarning(k, "not supported by gpucloud yet");
  }
  std::optional<Field> tmpl = t.Require("template");
  t.Finish();
  if (!tmpl) return false;
  std::optional<PodParts> parts = DecodePodTemplate(ctx, *tmpl, job->metadata);
  if (!parts) return false;
  std::string task_name = parts->task.name;
  if (name) {
    std::optional<std::string> n = ReadString(ctx.sink, *name);
    if (!n) return false;
    task_name = *n;
  }
  if (!AddPodTask(ctx, *tmpl, name ? *name : item, task_name, replicas, std::move(*parts), job)) {
    return false;
  }
  if (task_policies) {
    ok = DecodeLifecyclePolicies(ctx, *task_policies, PolicySyntax::kVolcano, task_name, nullptr,
                                 policies) &&
         ok;
  }
  return ok;
}

}  // namespace

std::optional<PodParts> DecodePodTemplate(Context& ctx, const Field& tmpl, const ObjectMeta& meta) {
  MapReader tm(ctx.sink, tmpl);
  if (!tm.valid()) return std::nullopt;
  bool ok = true;
  ObjectMeta pod_meta = meta;
  if (std::optional<Field> md = tm.Take("metadata")) {
    MapReader mm(ctx.sink, *md);
    ok = mm.valid();
    if (mm.valid()) {
      std::map<std::string, std::string> labels, annotations;
      ok = mm.StringMap("labels", &labels, true) && ok;
      ok = mm.StringMap("annotations", &annotations, false) && ok;
      pod_meta.annotations.insert(annotations.begin(), annotations.end());
      mm.Ignore("name");
      mm.Finish();
    }
  }
  std::optional<Field> pod_spec = tm.Require("spec");
  tm.Finish();
  if (!pod_spec) return std::nullopt;
  std::optional<PodParts> parts = DecodePodSpec(ctx, *pod_spec, pod_meta);  // its errors too
  if (!ok) return std::nullopt;
  return parts;
}

bool AddPodTask(Context& ctx, const Field& at, const Field& name_at, const std::string& name,
                int32_t replicas, PodParts parts, Job* job) {
  if (!CheckTaskName(ctx, name_at, name, job->spec.tasks)) return false;
  TaskSpec task = std::move(parts.task);
  task.name = name;
  task.replicas = replicas;
  bool ok = MergeNodeSelector(ctx, at, parts.node_selector, &job->spec.node_selector);
  for (Toleration& tol : parts.tolerations) {
    if (std::find(job->spec.tolerations.begin(), job->spec.tolerations.end(), tol) ==
        job->spec.tolerations.end()) {
      job->spec.tolerations.push_back(std::move(tol));
    }
  }
  if (!parts.runtime_class.empty()) job->spec.runtime_class = parts.runtime_class;
  job->spec.tasks.push_back(std::move(task));
  return ok;
}

std::optional<Job> DecodePod(Context& ctx, MapReader& doc) {
  Job job;
  bool meta_ok = DecodeMetadata(ctx, doc, &job.metadata, /*namespaced=*/true);
  std::optional<Field> spec_field = doc.Require("spec");
  doc.Ignore("status");
  if (!meta_ok || !spec_field) return std::nullopt;
  std::optional<PodParts> parts = DecodePodSpec(ctx, *spec_field, job.metadata);
  if (!parts) return std::nullopt;
  job.spec.tasks.push_back(std::move(parts->task));
  job.spec.node_selector = std::move(parts->node_selector);
  job.spec.tolerations = std::move(parts->tolerations);
  job.spec.runtime_class = std::move(parts->runtime_class);
  if (parts->restart_policy) {
    std::optional<std::string> p =
        ReadOneOf(ctx, *parts->restart_policy, {"Always", "OnFailure", "Never"});
    if (!p) return std::nullopt;
    if (*p == "Never") job.spec.restart.max_restarts = 0;
  }
  job.spec.min_available = 1;
  return job;
}

std::optional<Job> DecodeVolcanoJob(Context& ctx, MapReader& doc) {
  Job job;
  bool ok = DecodeMetadata(ctx, doc, &job.metadata, /*namespaced=*/true);
  std::optional<Field> spec_field = doc.Require("spec");
  doc.Ignore("status");
  if (!spec_field) return std::nullopt;
  MapReader s(ctx.sink, *spec_field);
  if (!s.valid()) return std::nullopt;
  std::optional<Field> min_available = s.Take("minAvailable");
  if (std::optional<Field> q = s.Take("queue")) {
    std::optional<std::string> name = ReadDnsLabel(ctx, *q);
    ok = name.has_value() && ok;
    if (name) job.spec.queue = *name;
  }
  ok = s.Int32("maxRetry", &job.spec.restart.max_restarts, 0, 1000) && ok;
  s.Ignore("schedulerName");  // gpucloud is the scheduler
  std::optional<Field> plugins = s.Take("plugins");
  if (plugins) ok = DecodeVolcanoPlugins(ctx, *plugins, &job.spec) && ok;
  std::optional<Field> job_policies = s.Take("policies");
  for (const char* k : {"volumes", "ttlSecondsAfterFinished", "priorityClassName", "minSuccess",
                        "runningEstimate", "networkTopology"}) {
    s.IgnoreWithWarning(k, "not supported by gpucloud yet");
  }
  std::optional<std::vector<Field>> items = RequireTasks(ctx, s);
  ok = items.has_value() && ok;
  for (const Field& item : items.value_or(std::vector<Field>{})) {
    ok = DecodeVolcanoTask(ctx, item, &job, &job.spec.policies) && ok;
  }
  if (job_policies) {
    ok = DecodeLifecyclePolicies(ctx, *job_policies, PolicySyntax::kVolcano, "", nullptr,
                                 &job.spec.policies) &&
         ok;
  }
  s.Finish();
  if (!ok) return std::nullopt;
  // Taking "tasks" again: RequireTasks found it (ok), and it locates the replica total.
  if (!CheckGang(ctx, *s.Take("tasks"), min_available, &job.spec)) return std::nullopt;
  if (plugins && !CheckSshKeys(ctx, *plugins, job)) return std::nullopt;
  return job;
}

}  // namespace gpucloud::manifest::internal
