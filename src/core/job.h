// The job model: what a user asks the platform to run. A Job is a gang of tasks; each task has
// replicas with identical per-replica resources. A GPU request is whole GPUs, MIG instances of
// one profile, or a fraction of a shared GPU bounded by memory. Plain value types compared
// field by field; thread-compatible.
#ifndef GPUCLOUD_CORE_JOB_H_
#define GPUCLOUD_CORE_JOB_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_array.h"
#include "core/object_meta.h"
#include "core/quantity.h"

namespace gpucloud {

enum class BillingClass { kOnDemand, kReserved, kSpot };
std::string_view BillingClassName(BillingClass c);  // "on-demand", "reserved", "spot"
std::optional<BillingClass> ParseBillingClass(std::string_view text);

enum class GpuMode {
  kNone,    // CPU-only task
  kWhole,   // `count` whole, exclusive GPUs
  kMig,     // `count` MIG instances of `mig_profile`
  kShared,  // `fraction` of one GPU, time-sliced or MPS, with at most `memory` of its memory
};
// "none", "whole", "mig", "shared": how a placement's GPU is written in a job's status and in a
// scheduler recording.
std::string_view GpuModeName(GpuMode m);
std::optional<GpuMode> ParseGpuMode(std::string_view text);

enum class GpuSharing { kTimeSlicing, kMps };
std::string_view GpuSharingName(GpuSharing s);  // "time-slicing", "mps"
std::optional<GpuSharing> ParseGpuSharing(std::string_view text);

struct GpuRequest {
  GpuMode mode = GpuMode::kNone;
  int32_t count = 0;        // kWhole: GPUs; kMig: instances; otherwise 0
  std::string mig_profile;  // kMig only, e.g. "1g.10gb"
  MilliGpu fraction;        // kShared only, in (0, 1000]
  MiB memory;               // kShared only; zero = proportional to the fraction
  GpuSharing sharing = GpuSharing::kTimeSlicing;  // kShared only
  std::vector<std::string> types;                 // acceptable catalog types; empty = any

  // GPU capacity one replica takes, in milli-GPUs (MIG instances count as 0 whole GPUs here).
  MilliGpu PerReplicaGpus() const;
  bool operator==(const GpuRequest&) const = default;
};

struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

// Secrets a task reads (Kubernetes' secretKeyRef, envFrom.secretRef, secret volumes and
// imagePullSecrets), always from Secrets of the job's own namespace. The job holds references
// only: the node that runs the task asks the server for the values just before it starts it
// (docs/secrets.md, "Secrets in tasks"), so no value is ever in a job, an assignment or a log.
struct SecretKeyRef {
  std::string secret;     // the Secret's name (a DNS label)
  std::string key;        // one of its keys ([-._a-zA-Z0-9]{1,253})
  bool optional = false;  // a missing secret or key leaves the variable unset instead of waiting
  bool operator==(const SecretKeyRef&) const = default;
};

// env[].valueFrom.secretKeyRef: the variable `name` holds the value of `ref`.
struct SecretEnvVar {
  std::string name;
  SecretKeyRef ref;
  bool operator==(const SecretEnvVar&) const = default;
};

// envFrom[].secretRef: every key of the secret becomes a variable, `prefix` + key.
struct SecretEnvFrom {
  std::string secret;
  std::string prefix;
  bool optional = false;
  bool operator==(const SecretEnvFrom&) const = default;
};

// A secret's values as read-only files in a directory of the task (`mount_path` in its
// container). Without items, every key is a file of its name; with items, only those keys,
// each under its `path` (a plain file name).
struct SecretVolume {
  struct Item {
    std::string key;
    std::string path;
    bool operator==(const Item&) const = default;
  };
  std::string name;        // the volume's name (a DNS label, unique in the task)
  std::string secret;      // the Secret's name
  std::string mount_path;  // absolute, inside the container
  std::vector<Item> items;
  bool optional = false;
  bool operator==(const SecretVolume&) const = default;
};

struct Resources {
  GpuRequest gpu;
  MilliCpu cpu;
  MiB memory;
  bool operator==(const Resources&) const = default;
};

// When the node pulls a task's image (Kubernetes' imagePullPolicy). kDefault is what a manifest
// that names none decodes to: Always when the image's tag is `latest` or absent and it has no
// digest, else IfNotPresent (ResolvePullPolicy applies the rule).
enum class PullPolicy { kDefault, kAlways, kIfNotPresent, kNever };
std::string_view PullPolicyName(PullPolicy p);  // "Always", "IfNotPresent", "Never"; "" default
std::optional<PullPolicy> ParsePullPolicy(std::string_view text);  // the three names only
// The policy that applies to `image`: `p` itself unless it is kDefault.
PullPolicy ResolvePullPolicy(PullPolicy p, std::string_view image);

// Who a task runs as (Kubernetes' securityContext names). Unset fields are the image's or the
// node's default (the agent decides; it never runs a task as root unless allowed).
struct SecurityContext {
  std::optional<int64_t> run_as_user;   // [0, 2^31-1]
  std::optional<int64_t> run_as_group;  // [0, 2^31-1]
  bool run_as_non_root = false;         // refuse to start as uid 0
  bool empty() const { return !run_as_user && !run_as_group && !run_as_non_root; }
  bool operator==(const SecurityContext&) const = default;
};

struct TaskSpec {
  std::string name;
  int32_t replicas = 1;
  std::string image;  // an OCI image reference; empty = a host process (where allowed)
  PullPolicy image_pull_policy = PullPolicy::kDefault;
  SecurityContext security_context;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
  // Secret-backed environment (applied over env_from, then over `env`: a name may not be both
  // in `env` and here) and files, and the registry credentials to pull `image` with.
  std::vector<SecretEnvVar> secret_env;
  std::vector<SecretEnvFrom> env_from;
  std::vector<SecretVolume> secret_volumes;
  std::vector<std::string> image_pull_secrets;  // Secrets of type kubernetes.io/dockerconfigjson
  std::string working_dir;
  Resources resources;  // per replica
  bool UsesSecrets() const {
    return !secret_env.empty() || !env_from.empty() || !secret_volumes.empty() ||
           !image_pull_secrets.empty();
  }
  bool operator==(const TaskSpec&) const = default;
};

// A node taint the job accepts. Operator kExists ignores `value`; empty `effect` matches all.
struct Toleration {
  std::string key;
  bool exists = false;  // operator: Exists (true) or Equal (false)
  std::string value;
  std::string effect;  // "", "NoSchedule", "PreferNoSchedule", "NoExecute"
  bool operator==(const Toleration&) const = default;
};

struct CheckpointSpec {
  std::string dir;               // where the job writes checkpoints; empty = platform default
  int64_t interval_seconds = 0;  // the job's own hint of its checkpoint cadence; 0 = unknown
  // Checkpoints go to each node's local disk (the agent's state dir) instead of `dir`; with
  // `replicate`, the agent copies each complete one to `dir` in the background, and a restart
  // on another node starts from the newest copy there (without it: from scratch).
  bool node_local = false;
  bool replicate = false;
  bool operator==(const CheckpointSpec&) const = default;
};

struct RestartPolicy {
  int32_t max_restarts = 3;
  int64_t backoff_seconds = 10;  // first back-off; doubles per restart
  bool operator==(const RestartPolicy&) const = default;
};

// What a job does when something happens to it (Volcano's `policies`: event or exit code ->
// action). Without a matching policy, the platform's default applies: a failed task restarts the
// job while restarts are left, and the job succeeds when every replica has.
enum class LifecycleEvent {
  kAny,            // Volcano "*": any of the events below
  kPodFailed,      // a replica exited non-zero (or was lost or stopped)
  kPodEvicted,     // a replica was moved off its node (drain, spot reclaim, preemption)
  kTaskCompleted,  // every replica of one task (the policy's, or any) exited with code 0
  kTaskFailed,     // a replica of one task failed: Volcano raises it with PodFailed
  kJobUnknown,     // a replica's node stopped heartbeating
};
std::string_view LifecycleEventName(LifecycleEvent e);  // Volcano's spelling: "PodFailed", "*"
std::optional<LifecycleEvent> ParseLifecycleEvent(std::string_view text);

enum class LifecycleAction {
  kRestartJob,    // stop every task and start the job again (uses one of its restarts)
  kCompleteJob,   // stop the other tasks; the job Succeeded
  kAbortJob,      // stop every task; the job Failed with reason Aborted
  kTerminateJob,  // stop every task; the job Failed with reason Terminated
};
std::string_view LifecycleActionName(LifecycleAction a);  // "RestartJob", ...
// Also reads Volcano's "RestartTask" and "RestartPod" as kRestartJob (a gang restarts whole).
std::optional<LifecycleAction> ParseLifecycleAction(std::string_view text);

struct LifecyclePolicy {
  std::vector<LifecycleEvent> events;  // empty when `exit_code` is set
  std::optional<int32_t> exit_code;    // a replica failed with this code (never 0)
  LifecycleAction action = LifecycleAction::kRestartJob;
  std::string task;  // the task whose replicas raise the event; empty = any task (job level)
  bool operator==(const LifecyclePolicy&) const = default;
};

// Volcano's ssh plugin (and every Kubeflow MPIJob): the server makes the job a fresh key pair
// when it creates the job, stored as the Secret SshKeysSecretName(job) of its namespace (keys
// id_rsa, id_rsa.pub, authorized_keys, config) and deleted with the job; every task gets it as
// the secret volume kSshKeysVolume at `mount_path` (docs/manifests.md, "SSH keys").
inline constexpr std::string_view kDefaultSshMountPath = "/root/.ssh";
inline constexpr std::string_view kSshKeysVolume = "gpucloud-ssh";
// Where a task finds the keys: the mount path in a container, the sandbox's copy for a host
// process.
inline constexpr std::string_view kSshDirEnv = "GPUCLOUD_SSH_DIR";
// A job's name may be at most this long when it has ssh keys: "<job>-ssh" is a DNS label.
inline constexpr size_t kMaxSshJobNameBytes = 59;
struct SshKeysSpec {
  std::string mount_path = std::string(kDefaultSshMountPath);  // absolute, clean
  bool operator==(const SshKeysSpec&) const = default;
};
inline std::string SshKeysSecretName(std::string_view job) { return std::string(job) + "-ssh"; }
// The volume every task of job `job` gets for its keys: the whole Secret at ssh.mount_path.
inline SecretVolume SshKeysVolume(std::string_view job, const SshKeysSpec& ssh) {
  return SecretVolume{
      std::string(kSshKeysVolume), SshKeysSecretName(job), ssh.mount_path, {}, false};
}

// An interactive job (docs/interactive.md): a shell or a notebook a person works in through
// `gpuctl exec`, `port-forward` and `notebook`. Stopped, its GPUs freed, once idle for
// `idle_timeout_seconds` (no session traffic and its GPUs under kInteractiveBusyPercent busy),
// or after `max_duration_seconds` of running (0: no limit); never restarted elsewhere behind the
// user's back (a lost node, a failed GPU or a preemption ends it).
inline constexpr int kInteractiveBusyPercent = 5;
// When an idle interactive job is warned (its terminals, an IdleWarning event): this far into
// its idle timeout, or a minute before its end when that is later.
inline constexpr double kIdleWarningFraction = 0.8;
inline constexpr int64_t kDefaultIdleTimeoutSeconds = 3600;
inline constexpr int64_t kDefaultMaxDurationSeconds = 12 * 3600;
inline constexpr int64_t kMaxInteractiveSeconds = 366 * 24 * 3600;
struct InteractiveSpec {
  int64_t idle_timeout_seconds = kDefaultIdleTimeoutSeconds;
  int64_t max_duration_seconds = kDefaultMaxDurationSeconds;
  bool operator==(const InteractiveSpec&) const = default;
};

inline constexpr std::string_view kDefaultQueue = "default";
inline constexpr int32_t kMaxPriority = 1'000'000;

struct JobSpec {
  std::vector<TaskSpec> tasks;
  int32_t min_available = 0;  // gang size: replicas that must run together; 0 = all of them
  std::string queue = std::string(kDefaultQueue);
  int32_t priority = 0;  // higher runs first inside a queue; [-kMaxPriority, kMaxPriority]
  BillingClass billing = BillingClass::kOnDemand;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  int min_cuda_version = 0;   // NVML encoding (12040 = 12.4); 0 = any
  std::string runtime_class;  // a RuntimeClass whose node selector applies; empty = none
  CheckpointSpec checkpoint;
  RestartPolicy restart;
  std::optional<int64_t> runtime_estimate_seconds;  // the user's estimate, for SJF and backfill
  // Task-level policies first (in task order), then job-level ones; the first match decides.
  std::vector<LifecyclePolicy> policies;
  // A job array asked for, or an element of one (core/job_array.h); nullopt: a plain job.
  std::optional<JobArraySpec> array;
  // The job's own ssh key pair (SshKeysSpec); nullopt: none.
  std::optional<SshKeysSpec> ssh;
  // An interactive job (InteractiveSpec); nullopt: a batch job.
  std::optional<InteractiveSpec> interactive;

  int32_t TotalReplicas() const;
  // Gang size with the default applied: min_available, or all replicas when it is 0.
  int32_t GangSize() const;
  MilliGpu TotalGpus() const;
  bool operator==(const JobSpec&) const = default;
};

struct Job {
  ObjectMeta metadata;
  JobSpec spec;
  bool operator==(const Job&) const = default;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_JOB_H_
