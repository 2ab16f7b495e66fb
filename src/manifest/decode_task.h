// Internal: pieces of the Job decoder that the Kubernetes and Volcano decoders reuse.
#ifndef GPUCLOUD_MANIFEST_DECODE_TASK_H_
#define GPUCLOUD_MANIFEST_DECODE_TASK_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "manifest/decode.h"

namespace gpucloud::manifest::internal {

// A whole-GPU count: a non-negative integer; a decimal gets a hint to ask for a fraction.
std::optional<int32_t> ReadGpuCount(Context& ctx, const Field& f);
// Where a securityContext is written: a gpucloud/v1 task (runAsUser, runAsGroup, runAsNonRoot
// only), a Kubernetes container or a pod spec (their other fields accepted with a warning;
// `privileged: true` refused).
enum class SecurityLevel { kTask, kContainer, kPod };
// A securityContext mapping into *out (fields it does not name are left as they were). User and
// group ids are in [0, kMaxPosixId].
bool DecodeSecurityContext(Context& ctx, const Field& f, SecurityLevel level, SecurityContext* out);
// runAsNonRoot with runAsUser 0 is an error at `at`.runAsUser.
bool CheckSecurityContext(Context& ctx, const Field& at, const SecurityContext& sc);
// The fields a task and a Kubernetes container share: name (a DNS label unique among
// `earlier`), image, imagePullPolicy, securityContext, command, args, env, workingDir.
bool DecodeProcess(Context& ctx, MapReader& m, const std::vector<TaskSpec>& earlier,
                   SecurityLevel level, TaskSpec* t);
// decode_secrets.cc. A list of environment variables: {name, value} into *out, {name,
// valueFrom: {secretKeyRef: {name, key, optional}}} into *secret_out (a name may not be in both).
bool DecodeEnv(Context& ctx, const Field& f, std::vector<EnvVar>* out,
               std::vector<SecretEnvVar>* secret_out);
// envFrom: [{secretRef: {name, optional}, prefix}] (a configMapRef is an error).
bool DecodeEnvFrom(Context& ctx, const Field& f, std::vector<SecretEnvFrom>* out);
// imagePullSecrets: [{name}].
bool DecodeImagePullSecrets(Context& ctx, const Field& f, std::vector<std::string>* out);
// A gpucloud/v1 task's volumes: [{name, mountPath, secret: {secretName, items, optional}}].
bool DecodeTaskVolumes(Context& ctx, const Field& f, std::vector<SecretVolume>* out);
// A pod's volumes by name: secret ones decoded, the others (emptyDir, hostPath, ...) kept with
// a warning that they are not given to the task.
struct PodVolume {
  SecretVolume volume;  // mount_path unset
  bool secret = false;
  Field at;
};
bool DecodePodVolumes(Context& ctx, const Field& f, std::map<std::string, PodVolume>* out);
// A container's volumeMounts joined with the pod's volumes: each mount of a secret volume
// becomes a SecretVolume at its mountPath; a mount of another volume is a warning; a mount of
// no volume, a subPath or a bad path an error.
bool JoinVolumeMounts(Context& ctx, const Field& mounts, std::map<std::string, PodVolume> volumes,
                      std::vector<SecretVolume>* out);
// Volume names unique, no mount path in or on another's (errors at `at`).
bool CheckSecretVolumes(Context& ctx, const Field& at, const TaskSpec& t);
// Why `path` is no mount path for a secret volume (absolute, clean, not / nor under a reserved
// directory); "" when it is one.
std::string MountPathProblem(const std::string& path);
// decode_ssh.cc. gpucloud/v1's spec.ssh: {mountPath} (default kDefaultSshMountPath).
bool DecodeSshKeys(Context& ctx, const Field& f, std::optional<SshKeysSpec>* out);
// spec.interactive: {idleTimeout, maxDuration} (durations; idleTimeout 1 s or more, maxDuration
// 0 for none), each at most kMaxInteractiveSeconds; `{}` takes both defaults.
bool DecodeInteractive(Context& ctx, const Field& f, std::optional<InteractiveSpec>* out);
// A Volcano Job's spec.plugins: `ssh` (its --ssh-key-file-path) sets spec->ssh; env and svc
// are accepted (the agent always provides them); any other plugin is warned about.
bool DecodeVolcanoPlugins(Context& ctx, const Field& f, JobSpec* spec);
// A job with ssh keys: its name fits "<name>-ssh" in a DNS label, it is no array, and no task
// has a volume named kSshKeysVolume or mounted in or on the keys' mount path (errors at `at`).
bool CheckSshKeys(Context& ctx, const Field& at, const Job& job);
// One gpucloud/v1 task (a Job's spec.tasks[i], an InferenceService's spec.template): its name
// must differ from those of `earlier`.
std::optional<TaskSpec> DecodeTask(Context& ctx, const Field& f,
                                   const std::vector<TaskSpec>& earlier);
// Where a Job's (or a service's replicas') spec puts queue, priority, billing, nodeSelector and
// tolerations; DecodePlacement reads those five fields of `s` into them.
struct Placement {
  std::string* queue;
  int32_t* priority;
  BillingClass* billing;
  std::map<std::string, std::string>* node_selector;
  std::vector<Toleration>* tolerations;
};
bool DecodePlacement(Context& ctx, MapReader& s, Placement out);
// The job-wide options of a gpucloud/v1 Job spec (queue, priority, billing, nodeSelector,
// tolerations, minCudaVersion, runtimeClass, checkpoint, restartPolicy, runtimeEstimate).
bool DecodeJobOptions(Context& ctx, MapReader& spec, JobSpec* out);

// Where a list of lifecycle policies is written: a Volcano Job's spec or task (`event` or
// `events`, `exitCode`, `action`; `timeout` accepted with a warning) or a gpucloud/v1 Job's spec
// (the same, without `timeout`, with `task`).
enum class PolicySyntax { kVolcano, kGpucloud };
// Appends the policies of the list `f` to *out. Each gets `task` (a Volcano task's own list;
// "" at job level) unless a gpucloud/v1 entry names one, which must be one of `tasks` when
// `tasks` is not null. An event or exit code named twice in one scope (a task, or the job) is
// an error, as in Volcano.
bool DecodeLifecyclePolicies(Context& ctx, const Field& f, PolicySyntax syntax,
                             const std::string& task, const std::vector<TaskSpec>* tasks,
                             std::vector<LifecyclePolicy>* out);
// Puts task-level policies first, in task order, then job-level ones (JobSpec::policies'
// order); stable within each.
void OrderLifecyclePolicies(JobSpec* spec);

// The parts of a Kubernetes PodSpec that become (part of) a gpucloud Job.
struct PodParts {
  TaskSpec task;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  std::string runtime_class;
  std::optional<Field> restart_policy;
};
// A PodSpec with exactly one container; the job's annotations (`meta`) may ask for a GPU share.
std::optional<PodParts> DecodePodSpec(Context& ctx, const Field& f, const ObjectMeta& meta);
// A pod template ({metadata, spec}) as Volcano tasks and Kubeflow replica specs write it: its
// annotations join the job's for the GPU share; its labels and name are read and dropped.
std::optional<PodParts> DecodePodTemplate(Context& ctx, const Field& tmpl, const ObjectMeta& meta);
// Appends `parts.task` to the job as task `name` (checked at `name_at`) with `replicas`; the
// pod's node selector, tolerations and runtime class apply to the whole job (a node selector
// that conflicts with another task's is an error at `at`).
bool AddPodTask(Context& ctx, const Field& at, const Field& name_at, const std::string& name,
                int32_t replicas, PodParts parts, Job* job);

}  // namespace gpucloud::manifest::internal

#endif  // GPUCLOUD_MANIFEST_DECODE_TASK_H_
