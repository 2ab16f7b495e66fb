// Decoders of Kubeflow's kubeflow.org/v1 PyTorchJob and kubeflow.org/v2beta1 MPIJob, converted to
// gpucloud Jobs as Volcano Jobs are (docs/manifests.md, "Kubeflow PyTorchJob and MPIJob").
//
// A replica spec ({replicas, restartPolicy, template}) becomes a task: PyTorchJob's Master then
// Worker ("master", "worker": rank 0, so MASTER_ADDR, is the master), MPIJob's Launcher then
// Worker ("launcher", "worker"). What the training operator puts in a pod's environment and
// gpucloud's agent does not derive itself is added to the tasks' env: PET_NPROC_PER_NODE and
// PET_MAX_RESTARTS for torchrun, and for MPI the launcher's hostfile (/etc/volcano/worker.hostfile,
// which the agent writes for a task whose env names GPUCLOUD_MPI_IMPLEMENTATION: one line per
// distinct worker host, its slots the workers there x GPUCLOUD_MPI_SLOTS_PER_WORKER) and the
// slots per worker. An MPIJob has ssh keys (JobSpec::ssh) at sshAuthMountPath, as the
// mpi-operator gives it.
#include <algorithm>

#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/decode_task.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest::internal {
namespace {

// Where the agent puts the worker task's MPI hostfile for the launcher (agent/task_env.h,
// MpiHostFiles), beside Volcano's worker.host.
constexpr std::string_view kWorkerHostFile = "/etc/volcano/worker.hostfile";

// Sets `name` in the task's env, replacing what the template said.
void SetEnv(TaskSpec* t, const std::string& name, const std::string& value) {
  for (EnvVar& e : t->env) {
    if (e.name == name) {
      e.value = value;
      return;
    }
  }
  t->env.push_back(EnvVar{name, value});
}

// One entry of pytorchReplicaSpecs or mpiReplicaSpecs, appended to the job as task `name`.
// restartPolicy Never makes a failure of the task end the job (TerminateJob); ExitCode is read
// as OnFailure (with a warning); OnFailure and Always restart the job while backoffLimit allows.
bool DecodeReplicaSpec(Context& ctx, const Field& f, const std::string& name, int32_t min_replicas,
                       int32_t max_replicas, Job* job) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  int32_t replicas = 1;
  bool ok = m.Int32("replicas", &replicas, min_replicas, max_replicas);
  std::optional<std::string> restart;
  if (std::optional<Field> r = m.Take("restartPolicy")) {
    restart = ReadOneOf(ctx, *r, {"Always", "OnFailure", "Never", "ExitCode"});
    ok = restart.has_value() && ok;
    if (restart == "ExitCode") {
      ctx.sink.Warn(r->mark, r->path,
                    "read as OnFailure: gpucloud restarts the job after any failure while "
                    "runPolicy.backoffLimit allows (exit codes 1-127 too)");
    }
  }
  std::optional<Field> tmpl = m.Require("template");
  m.Finish();
  if (!tmpl || !ok) return false;
  std::optional<PodParts> parts = DecodePodTemplate(ctx, *tmpl, job->metadata);
  if (!parts) return false;
  if (parts->restart_policy) {
    ctx.sink.Warn(parts->restart_policy->mark, parts->restart_policy->path,
                  "ignored: the replica spec's restartPolicy applies");
  }
  if (replicas == 0) return true;  // an MPIJob without workers
  Field name_at(f.value, f.mark, f.path);
  if (!AddPodTask(ctx, *tmpl, name_at, name, replicas, std::move(*parts), job)) return false;
  if (restart == "Never") {
    job->spec.policies.push_back(
        LifecyclePolicy{{LifecycleEvent::kPodFailed}, {}, LifecycleAction::kTerminateJob, name});
  }
  return true;
}

// A map of replica types (`Master`, `Worker`, ...) whose keys must be among `known`; returns
// each known type's field, in the order of `known`.
std::optional<std::vector<std::optional<Field>>> ReplicaTypes(
    Context& ctx, const Field& f, std::initializer_list<std::string_view> known) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return std::nullopt;
  std::vector<std::optional<Field>> out;
  for (std::string_view k : known) out.push_back(m.Take(k));
  bool ok = true;
  std::string names = Join(std::vector<std::string>(known.begin(), known.end()), ", ");
  for (const std::string& k : m.Keys()) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    ctx.sink.Error(m.mark(), ChildPath(f.path, k),
                   Cat("unknown replica type \"", Excerpt(k), "\" (known: ", names, ")"));
    ok = false;
    m.Ignore(k);
  }
  m.Finish();
  if (!ok) return std::nullopt;
  return out;
}

// Kubeflow's runPolicy: backoffLimit is the job's restarts; schedulingPolicy's minAvailable and
// queue are the gang and the queue. cleanPodPolicy is accepted: gpucloud stops every replica of
// a job that has finished, which is All and Running; None (leave them running) is read so too.
bool DecodeRunPolicy(Context& ctx, const Field& f, Job* job, std::optional<Field>* min_available) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = m.Int32("backoffLimit", &job->spec.restart.max_restarts, 0, 1000);
  if (std::optional<Field> c = m.Take("cleanPodPolicy")) {
    std::optional<std::string> p = ReadOneOf(ctx, *c, {"None", "Running", "All"});
    ok = p.has_value() && ok;
    if (p == "None") {
      ctx.sink.Warn(c->mark, c->path,
                    "read as Running: gpucloud stops every replica of a job that has finished");
    }
  }
  if (std::optional<Field> s = m.Take("schedulingPolicy")) {
    MapReader sp(ctx.sink, *s);
    ok = sp.valid() && ok;
    if (sp.valid()) {
      *min_available = sp.Take("minAvailable");
      if (std::optional<Field> q = sp.Take("queue")) {
        std::optional<std::string> name = ReadDnsLabel(ctx, *q);
        ok = name.has_value() && ok;
        if (name) job->spec.queue = *name;
      }
      for (const char* k : {"minResources", "priorityClass", "scheduleTimeoutSeconds"}) {
        sp.IgnoreWithWarning(k, "not supported by gpucloud yet");
      }
      sp.Finish();
    }
  }
  m.IgnoreWithWarning("suspend", "gpucloud queues the job at once");
  m.IgnoreWithWarning("ttlSecondsAfterFinished", "gpucloud keeps finished jobs until deleted");
  m.IgnoreWithWarning("activeDeadlineSeconds", "not supported by gpucloud yet");
  m.Ignore("managedBy");
  m.Finish();
  return ok;
}

// What PyTorchJob and MPIJob share: the job, its spec, and runPolicy's gang size.
struct KubeflowDoc {
  Job job;
  std::optional<Field> spec_field;
  std::optional<Field> min_available;  // runPolicy.schedulingPolicy.minAvailable
};

// nprocPerNode: "auto", "cpu", "gpu" or a whole number of processes, as a string or a number.
std::optional<std::string> ReadNprocPerNode(Context& ctx, const Field& f) {
  std::optional<std::string> s = ReadQuantityText(ctx.sink, f);
  if (!s) return std::nullopt;
  if (*s == "auto" || *s == "cpu" || *s == "gpu") return s;
  bool digits = !s->empty() && s->size() <= 4 &&
                s->find_first_not_of("0123456789") == std::string::npos && (*s)[0] != '0';
  if (!digits) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must be auto, cpu, gpu or a number of processes in [1, 9999], got \"",
                       Excerpt(*s), "\""));
    return std::nullopt;
  }
  return s;
}

// PyTorchJob's elasticPolicy: minReplicas and maxReplicas bound the gang (the master, if any,
// is always in it); nProcPerNode and maxRestarts reach torchrun as PET_ variables. gpucloud
// rendezvous statically at MASTER_ADDR:MASTER_PORT, so the rdzv* fields are ignored.
bool DecodeElasticPolicy(Context& ctx, const Field& f, std::optional<int32_t>* min_workers,
                         std::optional<std::string>* nproc, std::optional<int32_t>* max_restarts,
                         int32_t workers) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  std::optional<Field> min_f = m.Take("minReplicas");
  std::optional<Field> max_f = m.Take("maxReplicas");
  std::optional<int64_t> min_v, max_v;
  bool ok = true;
  if (min_f) {
    min_v = ReadInt(ctx.sink, *min_f, 1, kMaxReplicasPerJob);
    ok = min_v.has_value();
  }
  if (max_f) {
    max_v = ReadInt(ctx.sink, *max_f, 1, kMaxReplicasPerJob);
    ok = max_v.has_value() && ok;
  }
  if (ok && min_v && max_v && *min_v > *max_v) {
    ctx.sink.Error(min_f->mark, min_f->path,
                   Cat("must be <= maxReplicas (", *max_v, "), got ", *min_v));
    ok = false;
  }
  if (ok && min_v && *min_v > workers) {
    ctx.sink.Error(min_f->mark, min_f->path,
                   Cat("must be <= the Worker replicas (", workers, "), got ", *min_v));
    ok = false;
  }
  if (ok && max_v && *max_v > workers) {
    ctx.sink.Warn(max_f->mark, max_f->path,
                  Cat("gpucloud runs at most the Worker replicas (", workers, ")"));
  }
  if (min_v) *min_workers = static_cast<int32_t>(*min_v);
  if (std::optional<Field> n = m.Take("nProcPerNode")) {
    std::optional<int64_t> v = ReadInt(ctx.sink, *n, 1, 9999);
    ok = v.has_value() && ok;
    if (v) *nproc = std::to_string(*v);
  }
  if (std::optional<Field> r = m.Take("maxRestarts")) {
    std::optional<int64_t> v = ReadInt(ctx.sink, *r, 0, 1000);
    ok = v.has_value() && ok;
    if (v) *max_restarts = static_cast<int32_t>(*v);
  }
  for (const char* k :
       {"rdzvBackend", "rdzvPort", "rdzvHost", "rdzvId", "rdzvConf", "standalone"}) {
    m.IgnoreWithWarning(k, "gpucloud's torchrun rendezvous is static, at MASTER_ADDR:MASTER_PORT");
  }
  m.IgnoreWithWarning("metrics", "gpucloud does not autoscale jobs");
  m.Finish();
  return ok;
}

// Reads metadata (status is ignored) and finds the spec; false when there is none.
bool OpenKubeflowDoc(Context& ctx, MapReader& doc, KubeflowDoc* d) {
  bool ok = DecodeMetadata(ctx, doc, &d->job.metadata, /*namespaced=*/true);
  d->spec_field = doc.Require("spec");
  doc.Ignore("status");
  return ok && d->spec_field.has_value();
}

// The spec's runPolicy, when it has one (true when it has none).
bool TakeRunPolicy(Context& ctx, MapReader& spec, KubeflowDoc* d) {
  std::optional<Field> rp = spec.Take("runPolicy");
  return !rp || DecodeRunPolicy(ctx, *rp, &d->job, &d->min_available);
}

// Checks the gang (CheckGang) and, when `min_available` is given by count rather than by a
// field, applies it.
bool FinishGang(Context& ctx, KubeflowDoc& d, const Field& specs_field,
                std::optional<int32_t> min_available) {
  if (!CheckGang(ctx, specs_field, d.min_available, &d.job.spec)) return false;
  if (min_available && !d.min_available) d.job.spec.min_available = *min_available;
  return true;
}

}  // namespace

std::optional<Job> DecodePyTorchJob(Context& ctx, MapReader& doc) {
  KubeflowDoc d;
  if (!OpenKubeflowDoc(ctx, doc, &d)) return std::nullopt;
  MapReader spec(ctx.sink, *d.spec_field);
  if (!spec.valid()) return std::nullopt;
  bool ok = TakeRunPolicy(ctx, spec, &d);
  Job& job = d.job;
  std::optional<std::string> nproc;
  if (std::optional<Field> n = spec.Take("nprocPerNode")) {
    nproc = ReadNprocPerNode(ctx, *n);
    ok = nproc.has_value() && ok;
  }
  std::optional<Field> specs = spec.Require("pytorchReplicaSpecs");
  std::optional<Field> elastic = spec.Take("elasticPolicy");
  spec.Finish();
  if (!specs) return std::nullopt;
  std::optional<std::vector<std::optional<Field>>> types =
      ReplicaTypes(ctx, *specs, {"Master", "Worker"});
  if (!types) return std::nullopt;
  const std::optional<Field>& master = (*types)[0];
  const std::optional<Field>& worker = (*types)[1];
  if (!master && !worker) {
    ctx.sink.Error(specs->mark, specs->path, "must have a Master or a Worker replica spec");
    return std::nullopt;
  }
  if (master) ok = DecodeReplicaSpec(ctx, *master, "master", 1, 1, &job) && ok;
  if (worker) ok = DecodeReplicaSpec(ctx, *worker, "worker", 1, kMaxReplicasPerJob, &job) && ok;
  if (!ok) return std::nullopt;
  int32_t masters = master ? 1 : 0;
  int32_t workers = job.spec.TotalReplicas() - masters;
  std::optional<int32_t> min_workers, max_restarts;
  if (elastic) {
    std::optional<std::string> elastic_nproc;
    if (!DecodeElasticPolicy(ctx, *elastic, &min_workers, &elastic_nproc, &max_restarts, workers)) {
      return std::nullopt;
    }
    if (elastic_nproc && nproc) {
      ctx.sink.Error(elastic->mark, ChildPath(elastic->path, "nProcPerNode"),
                     "give nprocPerNode or elasticPolicy.nProcPerNode, not both");
      return std::nullopt;
    }
    if (elastic_nproc) nproc = elastic_nproc;
  }
  for (TaskSpec& t : job.spec.tasks) {
    if (nproc) SetEnv(&t, "PET_NPROC_PER_NODE", *nproc);
    if (max_restarts) SetEnv(&t, "PET_MAX_RESTARTS", std::to_string(*max_restarts));
  }
  // The training operator's PyTorchJob succeeds when its master does.
  if (master) {
    job.spec.policies.push_back(LifecyclePolicy{
        {LifecycleEvent::kTaskCompleted}, {}, LifecycleAction::kCompleteJob, "master"});
  }
  OrderLifecyclePolicies(&job.spec);
  std::optional<int32_t> gang;
  if (min_workers) gang = *min_workers + masters;
  if (!FinishGang(ctx, d, *specs, gang)) return std::nullopt;
  return std::move(job);
}

std::optional<Job> DecodeMpiJob(Context& ctx, MapReader& doc) {
  KubeflowDoc d;
  if (!OpenKubeflowDoc(ctx, doc, &d)) return std::nullopt;
  MapReader spec(ctx.sink, *d.spec_field);
  if (!spec.valid()) return std::nullopt;
  bool ok = TakeRunPolicy(ctx, spec, &d);
  Job& job = d.job;
  int32_t slots = 1;
  ok = spec.Int32("slotsPerWorker", &slots, 1, 9999) && ok;
  std::string impl = "OpenMPI";
  if (std::optional<Field> i = spec.Take("mpiImplementation")) {
    std::optional<std::string> v = ReadOneOf(ctx, *i, {"OpenMPI", "Intel", "MPICH"});
    ok = v.has_value() && ok;
    if (v) impl = *v;
  }
  if (std::optional<Field> p = spec.Take("launcherCreationPolicy")) {
    ok = ReadOneOf(ctx, *p, {"AtStartup", "WaitForWorkersReady"}).has_value() && ok;
  }
  spec.IgnoreWithWarning("runLauncherAsWorker",
                         "the launcher's host is not in the workers' hostfile");
  // The mpi-operator's ssh Secret: gpucloud's own (JobSpec::ssh), mounted there in every task.
  job.spec.ssh = SshKeysSpec{};
  std::optional<Field> ssh_path = spec.Take("sshAuthMountPath");
  if (ssh_path) {
    std::optional<std::string> p = ReadString(ctx.sink, *ssh_path);
    std::string problem = p ? MountPathProblem(*p) : "";
    if (!problem.empty()) {
      ctx.sink.Error(ssh_path->mark, ssh_path->path, Cat(problem, ", got \"", Excerpt(*p), "\""));
    }
    ok = p && problem.empty() && ok;
    if (p) job.spec.ssh->mount_path = *p;
  }
  std::optional<Field> specs = spec.Require("mpiReplicaSpecs");
  spec.Finish();
  if (!specs) return std::nullopt;
  std::optional<std::vector<std::optional<Field>>> types =
      ReplicaTypes(ctx, *specs, {"Launcher", "Worker"});
  if (!types) return std::nullopt;
  const std::optional<Field>& launcher = (*types)[0];
  const std::optional<Field>& worker = (*types)[1];
  if (!launcher) {
    ctx.sink.Error(specs->mark, ChildPath(specs->path, "Launcher"), "is required");
    return std::nullopt;
  }
  ok = DecodeReplicaSpec(ctx, *launcher, "launcher", 1, 1, &job) && ok;
  if (worker) ok = DecodeReplicaSpec(ctx, *worker, "worker", 0, kMaxReplicasPerJob, &job) && ok;
  if (!ok) return std::nullopt;
  for (TaskSpec& t : job.spec.tasks) {
    SetEnv(&t, "K_MPI_JOB_ROLE", t.name == "launcher" ? "launcher" : "worker");
  }
  TaskSpec& l = job.spec.tasks[0];
  bool has_workers = job.spec.tasks.size() > 1;
  const std::string hostfile(kWorkerHostFile);
  // The agent writes the hostfile in this format with these slots (agent/task_env.h).
  SetEnv(&l, "GPUCLOUD_MPI_IMPLEMENTATION", impl);
  SetEnv(&l, "GPUCLOUD_MPI_SLOTS_PER_WORKER", std::to_string(slots));
  if (impl == "OpenMPI") {
    if (has_workers) SetEnv(&l, "OMPI_MCA_orte_default_hostfile", hostfile);
    SetEnv(&l, "OMPI_MCA_orte_keep_fqdn_hostnames", "true");
    SetEnv(&l, "OMPI_MCA_orte_set_default_slots", std::to_string(slots));
  } else if (impl == "Intel") {
    if (has_workers) SetEnv(&l, "I_MPI_HYDRA_HOST_FILE", hostfile);
    SetEnv(&l, "I_MPI_PERHOST", std::to_string(slots));
  } else if (has_workers) {
    SetEnv(&l, "HYDRA_HOST_FILE", hostfile);
  }
  // The MPIJob succeeds when its launcher does (its workers serve it until then).
  job.spec.policies.push_back(LifecyclePolicy{
      {LifecycleEvent::kTaskCompleted}, {}, LifecycleAction::kCompleteJob, "launcher"});
  OrderLifecyclePolicies(&job.spec);
  if (!FinishGang(ctx, d, *specs, std::nullopt)) return std::nullopt;
  if (!CheckSshKeys(ctx, ssh_path.value_or(*d.spec_field), job)) return std::nullopt;
  return std::move(job);
}

}  // namespace gpucloud::manifest::internal
