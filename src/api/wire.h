// Wire types between the agent and the control plane, with their JSON codecs:
//   NodeInfo    — what an agent registers (PUT /apis/gpucloud/v1/nodes/{name}): machine, GPUs;
//   Assignment  — one task replica the server wants run on a node, fenced by (job uid, attempt);
//                 agents list and watch them at /apis/gpucloud/v1/nodes/{name}/assignments;
//   TaskReport  — a task's state as the agent sees it, sent with every heartbeat;
//   Heartbeat   — POST /apis/gpucloud/v1/nodes/{name}/heartbeat, once a second.
// Decoders check every field they read and name the bad one (InvalidArgument). Value types;
// thread-compatible.
#ifndef GPUCLOUD_API_WIRE_H_
#define GPUCLOUD_API_WIRE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/paths.h"
#include "core/job.h"
#include "core/node.h"

namespace gpucloud::api {

// --- node registration ---------------------------------------------------------------------

struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string pool;
  std::string address;  // where other nodes reach this one (MASTER_ADDR of its rank-0 tasks)
  std::string hostname;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t max_tasks = kDefaultMaxTasksPerNode;  // tasks the node runs at most (maxPods)
  std::string backend;                          // "nvml" or "simulated"
  std::string driver_version;
  int cuda_version = 0;
  std::vector<Gpu> gpus;  // Gpu::healthy is the agent's view at registration
  // nvidia-smi topo -m: [i][j] how GPU i reaches GPU j ("X", "NV18", "PIX", ... "SYS"); empty
  // when unknown, else gpus.size() rows of gpus.size().
  std::vector<std::vector<std::string>> gpu_topology;
};

// The Node object the server stores: {apiVersion, kind: Node, metadata, spec{pool,
// unschedulable}, status{...}}. `unschedulable` is the operator's cordon.
std::string NodeToJson(const NodeInfo& info, bool unschedulable);
// Reads a registration body or a stored Node. InvalidArgument naming the field.
absl::StatusOr<NodeInfo> NodeFromJson(const std::string& json);
// The scheduler's view of a NodeInfo (cpu, memory, GPUs, labels, pool).
Node ToSchedulerNode(const NodeInfo& info);

// --- assignments ---------------------------------------------------------------------------

struct AssignedGpu {
  int index = 0;     // NVML index on the node
  std::string uuid;  // GPU-... (or MIG-... once MIG instances are created)
  std::string mode;  // "whole", "mig", "shared"
  std::string mig_profile;
  int mig_start = 0;
  int64_t fraction_milli = 0;  // shared only
  bool mps = false;            // shared only
};

struct Assignment {
  std::string name;  // "{namespace}.{job}.{rank}": unique per node and job
  std::string namespace_;
  std::string job;
  std::string job_uid;
  int attempt = 0;  // fencing: a task of an older attempt is killed
  std::string task;
  int replica = 0;
  int rank = 0;
  int world_size = 1;
  int node_rank = 0;
  int nodes = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;
  int master_port = 29500;
  std::vector<std::pair<std::string, int>> hosts;  // hostfile: address, slots (rank order)
  // Every task of the job: its replicas' node addresses in replica order (an address twice when
  // two replicas share a node), for Volcano's /etc/volcano/<task>.host and VC_<TASK>_HOSTS.
  // JSON "taskHosts": {"worker": ["10.0.0.1", ...]}, absent when empty (an older server's
  // assignment decodes with it empty). The addresses are those of `hosts`, as nodes registered
  // them; the decoder checks only that it is a map of string lists.
  std::map<std::string, std::vector<std::string>> task_hosts;
  std::vector<AssignedGpu> gpus;
  // The task's OCI image reference; empty = a host process. Without a command, the image's
  // entrypoint runs (with `command` then holding only the spec's args, as Kubernetes does).
  std::string image;
  // When to pull `image`: the spec's imagePullPolicy with Kubernetes' default applied
  // (ResolvePullPolicy), never kDefault once decoded with a non-empty image. JSON
  // "imagePullPolicy": "Always" | "IfNotPresent" | "Never", absent when there is no image.
  PullPolicy image_pull_policy = PullPolicy::kDefault;
  // The spec's securityContext (the container's over the pod's). nullopt: the manifest named
  // none, and the agent picks its unprivileged default; else in [0, 2^31-1]. JSON "runAsUser",
  // "runAsGroup" (absent when unset), "runAsNonRoot" (absent when false).
  std::optional<int64_t> run_as_user;
  std::optional<int64_t> run_as_group;
  bool run_as_non_root = false;  // the agent refuses to start the task as uid 0
  // An interactive job's idle timeout (spec.interactive): the agent measures the task's
  // idleness and reports it (TaskReport::idle_ms). 0: a batch job. JSON "idleTimeoutSeconds",
  // absent when 0.
  int64_t idle_timeout_seconds = 0;
  // The spec's command then its args. With an image and no command in the spec,
  // `image_entrypoint` is true: the image's ENTRYPOINT runs with `command` (then the spec's
  // args alone) as its arguments, or with its own CMD when that is empty, as Kubernetes does.
  // JSON "imageEntrypoint": true, absent when false.
  std::vector<std::string> command;
  bool image_entrypoint = false;
  std::map<std::string, std::string> env;
  // The task's secret references (core/job.h), never their values: the node asks for those at
  // start (TaskSecretsPath). JSON "secretEnv": [{name, secret, key, optional}],
  // "envFromSecrets": [{secret, prefix, optional}], "secretVolumes": [{name, secret, mountPath,
  // items: [{key, path}], optional}], "imagePullSecrets": [name]; each absent when empty.
  std::vector<SecretEnvVar> secret_env;
  std::vector<SecretEnvFrom> env_from;
  std::vector<SecretVolume> secret_volumes;
  std::vector<std::string> image_pull_secrets;
  bool UsesSecrets() const {
    return !secret_env.empty() || !env_from.empty() || !secret_volumes.empty() ||
           !image_pull_secrets.empty();
  }
  std::string working_dir;
  std::string checkpoint_dir;
  // spec.checkpoint.nodeLocal / replicate: checkpoints on the node's disk, copied to
  // `checkpoint_dir` when replicated.
  bool checkpoint_node_local = false;
  bool checkpoint_replicate = false;
  int restart_count = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t grace_seconds = 30;
  int64_t resource_version = 0;  // filled by the decoder from metadata
};

std::string AssignmentToJson(const Assignment& a);
absl::StatusOr<Assignment> AssignmentFromJson(const std::string& json);

// What a task's secret references resolve to, served to the node that runs it only
// (GET TaskSecretsPath): the environment variables, the files of its secret volumes, and the
// registry credentials of its imagePullSecrets merged into one containers-auth.json document
// ({"auths": {...}}; "" when it names none). JSON {apiVersion, kind: TaskSecrets, env: {NAME:
// value}, files: [{volume, path, data (standard base64)}], pullAuth: {...}}.
struct TaskSecrets {
  struct File {
    std::string volume;  // SecretVolume::name
    std::string path;    // a plain file name in that volume
    std::string data;    // the value's bytes
    bool operator==(const File&) const = default;
  };
  std::map<std::string, std::string> env;
  std::vector<File> files;
  std::string pull_auth;
  bool operator==(const TaskSecrets&) const = default;
};
std::string TaskSecretsToJson(const TaskSecrets& s);
absl::StatusOr<TaskSecrets> TaskSecretsFromJson(const std::string& json);

// --- heartbeats ----------------------------------------------------------------------------

enum class TaskState { kStarting, kRunning, kSucceeded, kFailed, kStopped, kLost };
std::string_view TaskStateName(TaskState s);
inline bool IsTerminal(TaskState s) {
  return s != TaskState::kStarting && s != TaskState::kRunning;
}

struct TaskReport {
  std::string name;  // the assignment's name
  std::string job_uid;
  int attempt = 0;
  TaskState state = TaskState::kStarting;
  int exit_code = -1;
  int signal = 0;
  bool oom_killed = false;
  std::string message;  // "exit code 3", "killed by the OOM killer", why it could not start
  // The newest complete checkpoint in the task's checkpoint directory, and the newest copied
  // to the replica location (unix ms; 0: none seen).
  int64_t checkpoint_ms = 0;
  int64_t replicated_ms = 0;
  // When the task's process (or container) started and when it ended (as its shim recorded,
  // else when the agent saw it), by the node's clock (unix ms; 0: not yet, or an older agent).
  // JSON "startedMs", "finishedMs", absent when 0.
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  // The GPU energy the task used so far (joules; its share of its GPUs' energy counters), as of
  // the agent's previous GPU sample; JSON "energyJ", absent when 0 (not measured).
  double energy_j = 0;
  // An interactive task (Assignment::idle_timeout_seconds > 0): how long it has been idle (no
  // session traffic, its GPUs under kInteractiveBusyPercent busy), by the agent's clock; JSON
  // "idleMs", absent when 0 (in use, or not interactive).
  int64_t idle_ms = 0;
  bool operator==(const TaskReport&) const = default;
};

struct GpuHealth {
  int index = 0;
  bool healthy = true;
  std::string reason;  // why not
  // Healthy but likely to fail soon (the agent's failure-risk model): jobs move off it and it
  // takes no new work.
  bool at_risk = false;
  std::string risk;  // why
  // The GPU's latest reading, taken with this heartbeat (unset: unknown — not measured, not
  // supported, or an older agent): utilization over NVML's last sample period (0 to 100),
  // framebuffer memory used and in all. JSON "utilization", "memoryUsedMiB", "memoryTotalMiB",
  // each absent when unset; the decoder takes 0 to 100 and memory >= 0. Usage, unlike health,
  // changes with every heartbeat: the server keeps it apart (server/node_table.h).
  std::optional<int> utilization_percent;
  std::optional<int64_t> memory_used_mib;
  std::optional<int64_t> memory_total_mib;
  bool operator==(const GpuHealth&) const = default;
};

struct Heartbeat {
  std::vector<TaskReport> tasks;
  std::vector<GpuHealth> gpus;
};

std::string HeartbeatToJson(const Heartbeat& h);
absl::StatusOr<Heartbeat> HeartbeatFromJson(const std::string& json);

// The paths of a node and its sub-resources (NodePath, AssignmentsPath, TaskSecretsPath) are
// in api/paths.h, with every other path of the API.

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_WIRE_H_
