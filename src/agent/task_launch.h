// How one assigned task is launched on this node: as a host process (where the node allows it)
// or in its container image, as which user, in which directories, with which environment and
// mounts. PlanLaunch is the decision, a pure function; the node agent carries it out (makes the
// directories, writes the hostfile, pulls the image, starts the executor). docs/agent.md,
// "Isolation" and "Containers". Thread-safe (pure).
#ifndef GPUCLOUD_AGENT_TASK_LAUNCH_H_
#define GPUCLOUD_AGENT_TASK_LAUNCH_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/container.h"
#include "agent/executor.h"
#include "agent/sandbox.h"
#include "agent/task_env.h"
#include "api/wire.h"

namespace gpucloud::agent {

// Where a container finds what the agent gives it.
inline constexpr char kContainerCheckpointDir[] = "/gpucloud/checkpoints";
// Where a task's secret volumes are in its sandbox: SANDBOX/secrets/VOLUME/FILE.
inline constexpr char kSandboxSecretsDir[] = "secrets";
inline constexpr char kContainerScratchDir[] = "/gpucloud/scratch";

// The node's rules, from the agent's flags.
struct LaunchPolicy {
  bool allow_host_processes = false;  // a task without an image may run on the host
  bool allow_root = false;            // runAsUser/runAsGroup 0
  // Whether the agent can give tasks other users (it is root). When not, every task runs as
  // the agent's own user and group.
  bool switch_users = true;
  uid_t agent_uid = 0;
  gid_t agent_gid = 0;
  std::string operator_workdir;  // --workdir: a host process's default working directory
  int64_t pids_max = 0;
  ContainerRuntimeOptions runtime;
};

struct LaunchInput {
  api::Assignment a;
  TaskEnvInput env;  // every field but hostfile_path and checkpoint_dir, which PlanLaunch sets
  std::string exec_id;
  std::string log_path;
  std::string status_path;
  std::string sandbox;         // the task's own directory (host path)
  std::string checkpoint_dir;  // host path; "" = none
  // Volcano's <task>.host files (VolcanoHostFiles): mounted read-only at /etc/volcano in a
  // container; for a host process, in its sandbox, and the job's environment values naming
  // /etc/volcano/... are moved there (TaskEnvInput::volcano_dir). "" = none.
  std::string volcano_dir;
  // Host variables a host process keeps (PATH, LANG, ...), under the job's own.
  std::map<std::string, std::string> host_env;
  std::vector<std::string> cdi_devices;  // the task's GPUs as CDI names; empty for simulated
  std::string node_name;
  // The values of the task's secret references (fetched from the server just before the
  // start): variables over the job's own env (the platform's still win), and where the files of
  // its secret volumes are (host path; one directory per volume, by its name), mounted
  // read-only at each volume's mountPath in a container, named by GPUCLOUD_SECRETS for a host
  // process. A container's secret variables reach Podman by name only (ContainerTask::
  // env_from_podman), never on its command line.
  std::map<std::string, std::string> secret_env;
  std::string secrets_dir;  // "" = none
  // An interactive task's stdin: a FIFO (host path) that `gpuctl attach -i` writes into; a
  // container gets it through `podman run -i`. "" = /dev/null.
  std::string stdin_path;
};

struct LaunchPlan {
  TaskSpecToRun spec;     // for the executor: the task itself, or `podman run` for a container
  TaskIdentity identity;  // who owns the sandbox and the checkpoint directory
  bool container = false;
  std::string container_name;  // "gpucloud-" + the exec id, when a container
  std::string hostfile;        // host path of the hostfile (in the sandbox)
};

// The environment's inputs that do not depend on where the task runs (but hostfile_path and
// checkpoint_dir): its identity, its GPUs (a MIG slice by the UUID `mig_uuid` gives), its rank
// in the gang.
TaskEnvInput EnvInputOf(const api::Assignment& a,
                        const std::function<std::string(const api::AssignedGpu&)>& mig_uuid);

// The plan, or the reason the task cannot start here (FailedPrecondition for a host process on
// a node that runs none, InvalidArgument naming the field for a bad identity or working
// directory, NoCommandError for a host process without a command). The message begins with a
// reason word ("HostProcessNotAllowed: ", "InvalidSecurityContext: ", ...).
absl::StatusOr<LaunchPlan> PlanLaunch(const LaunchInput& in, const LaunchPolicy& policy);

// A container's exit, from `podman run`'s exit status: 128+N is signal N; 125 is Podman's own
// failure, 126 a command the image cannot run, 127 one it lacks (Describe's message says so).
TaskExit ContainerExit(const TaskExit& podman_exit);

// Why a container ended, for the task's message: "exit code 3", or for Podman's own codes what
// they mean ("the image has no such command (exit code 127)").
std::string DescribeContainerExit(const TaskExit& e);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_TASK_LAUNCH_H_
