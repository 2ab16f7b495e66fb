#include "agent/task_launch.h"

#include <signal.h>

#include <algorithm>
#include <cstring>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

absl::Status Refuse(absl::Status s, std::string_view reason) {
  return absl::Status(s.code(), Cat(reason, ": ", s.message()));
}

absl::StatusOr<TaskIdentity> Identity(const LaunchInput& in, const LaunchPolicy& p) {
  const api::Assignment& a = in.a;
  if (!p.switch_users) return TaskIdentity{p.agent_uid, p.agent_gid};
  if (a.run_as_non_root && a.run_as_user && *a.run_as_user == 0) {
    return absl::InvalidArgumentError(
        "securityContext.runAsUser: 0 (root), but runAsNonRoot is true");
  }
  return ResolveTaskIdentity(a.namespace_, !a.image.empty(), a.run_as_user, a.run_as_group,
                             p.allow_root && !a.run_as_non_root);
}

absl::StatusOr<LaunchPlan> PlanHost(const LaunchInput& in, const LaunchPolicy& p, LaunchPlan plan) {
  const api::Assignment& a = in.a;
  if (!p.allow_host_processes) {
    return absl::FailedPreconditionError(
        "HostProcessNotAllowed: the task names no image, and this node runs tasks only in "
        "containers (gpucloud agent run --allow-host-processes to allow host processes)");
  }
  if (a.command.empty()) return NoCommandError();
  absl::StatusOr<std::string> workdir =
      ResolveHostWorkdir(a.working_dir, in.sandbox, in.checkpoint_dir, p.operator_workdir);
  if (!workdir.ok()) return Refuse(workdir.status(), "InvalidWorkingDir");
  TaskEnvInput env = in.env;
  env.hostfile_path = plan.hostfile;
  env.checkpoint_dir = in.checkpoint_dir;
  env.volcano_dir = in.volcano_dir;  // the job's /etc/volcano/... paths point here
  env.user_env = in.host_env;
  // Its own home and temporary directory: the agent's are not its to see.
  env.user_env["HOME"] = in.sandbox;
  env.user_env["TMPDIR"] = in.sandbox;
  env.user_env.erase("USER");
  for (const auto& [k, v] : a.env) env.user_env[k] = v;
  for (const auto& [k, v] : in.secret_env) env.user_env[k] = v;
  if (!in.secrets_dir.empty()) env.user_env["GPUCLOUD_SECRETS"] = in.secrets_dir;
  // The job's ssh keys (JobSpec::ssh) are in the sandbox, not at their container mount path.
  if (auto ssh = env.user_env.find(std::string(kSshDirEnv));
      ssh != env.user_env.end() && !in.secrets_dir.empty()) {
    ssh->second = Cat(in.secrets_dir, "/", kSshKeysVolume);
  }
  plan.spec.argv = a.command;
  plan.spec.env = BuildTaskEnv(env);
  plan.spec.workdir = *workdir;
  if (a.cpu_milli > 0) plan.spec.cpu = MilliCpu(a.cpu_milli);
  if (a.memory_mib > 0) plan.spec.memory = MiB(a.memory_mib);
  plan.spec.pids_max = p.pids_max;
  if (p.switch_users) {
    plan.spec.uid = plan.identity.uid;
    plan.spec.gid = plan.identity.gid;
  }
  return plan;
}

// What Podman would read as something else than an image, or a mount source with its option
// separator: refused whatever the server let through (a job stored before it checked them).
absl::Status CheckContainerInput(const LaunchInput& in) {
  const std::string& image = in.a.image;
  bool bad_image = image.empty() || image[0] == '-' ||
                   std::any_of(image.begin(), image.end(),
                               [](unsigned char c) { return c <= ' ' || c == 0x7f; });
  if (bad_image) {
    return absl::InvalidArgumentError(
        Cat("InvalidImage: spec.tasks[].image: \"", image, "\" is not an image reference"));
  }
  std::vector<const std::string*> paths = {&in.sandbox, &in.checkpoint_dir, &in.volcano_dir,
                                           &in.secrets_dir};
  for (const SecretVolume& v : in.a.secret_volumes) paths.push_back(&v.mount_path);
  for (const std::string* dir : paths) {
    if (dir->find(',') != std::string::npos) {
      return absl::InvalidArgumentError(
          Cat("InvalidPath: ", *dir, " holds a ',', which Podman's --mount cannot take"));
    }
  }
  return absl::OkStatus();
}

LaunchPlan PlanContainer(const LaunchInput& in, const LaunchPolicy& p, LaunchPlan plan) {
  const api::Assignment& a = in.a;
  plan.container = true;
  plan.container_name = "gpucloud-" + in.exec_id;
  TaskEnvInput env = in.env;
  env.hostfile_path = Cat(kContainerScratchDir, "/hostfile");
  env.checkpoint_dir = in.checkpoint_dir.empty() ? "" : kContainerCheckpointDir;
  if (!in.volcano_dir.empty()) env.volcano_dir = "/etc/volcano";  // mounted there
  env.user_env.clear();  // the image's environment, then the job's: nothing of the host's
  for (const auto& [k, v] : a.env) env.user_env[k] = v;
  for (const auto& [k, v] : in.secret_env) env.user_env[k] = v;
  ContainerTask c;
  c.name = plan.container_name;
  c.image = a.image;
  c.command = a.command;
  c.args_only = a.image_entrypoint;
  c.env = BuildTaskEnv(env);
  // A secret's variable (the platform's own did not replace it) goes to Podman by name only.
  std::map<std::string, std::string> podman_env;
  for (const auto& [k, v] : in.secret_env) {
    auto it = c.env.find(k);
    if (k == "PATH" || it == c.env.end() || it->second != v) continue;
    podman_env[k] = v;
    c.env_from_podman.insert(k);
    c.env.erase(it);
  }
  // A relative working directory is the image's root's; "" leaves the image's.
  c.workdir =
      a.working_dir.empty() || a.working_dir[0] == '/' ? a.working_dir : "/" + a.working_dir;
  c.uid = plan.identity.uid;
  c.gid = plan.identity.gid;
  c.mounts.push_back({in.sandbox, kContainerScratchDir, false});
  if (!in.volcano_dir.empty()) c.mounts.push_back({in.volcano_dir, "/etc/volcano", true});
  if (!in.checkpoint_dir.empty()) {
    c.mounts.push_back({in.checkpoint_dir, kContainerCheckpointDir, false});
  }
  if (!in.secrets_dir.empty()) {
    for (const SecretVolume& v : a.secret_volumes) {
      c.mounts.push_back({Cat(in.secrets_dir, "/", v.name), v.mount_path, true});
    }
  }
  c.cdi_devices = in.cdi_devices;
  c.stdin = !in.stdin_path.empty();
  if (a.cpu_milli > 0) c.cpu_milli = a.cpu_milli;
  if (a.memory_mib > 0) c.memory_mib = a.memory_mib;
  c.pids_max = p.pids_max;
  c.labels = {{"gpucloud.node", in.node_name},
              {"gpucloud.namespace", a.namespace_},
              {"gpucloud.job", a.job},
              {"gpucloud.task", in.exec_id}};
  // `podman run` is the executor's task: its limits are the container's (Podman's cgroup).
  plan.spec.argv = PodmanRunArgv(p.runtime, c);
  plan.spec.env = std::move(podman_env);
  plan.spec.env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  if (const auto it = in.host_env.find("PATH"); it != in.host_env.end()) {
    plan.spec.env["PATH"] = it->second;  // where the node's podman and runtime are
  }
  plan.spec.workdir = in.sandbox;
  return plan;
}

}  // namespace

TaskEnvInput EnvInputOf(const api::Assignment& a,
                        const std::function<std::string(const api::AssignedGpu&)>& mig_uuid) {
  TaskEnvInput in;
  in.namespace_ = a.namespace_;
  in.job = a.job;
  in.job_uid = a.job_uid;
  in.task = a.task;
  in.attempt = a.attempt;
  for (const api::AssignedGpu& g : a.gpus) {
    in.gpu_uuids.push_back(g.mode == "mig" ? mig_uuid(g) : g.uuid);
    if (g.mode == "shared" && g.mps) {
      in.mps_thread_percentage = static_cast<int>(g.fraction_milli / 10);
    }
  }
  in.master_addr = a.master_addr;
  in.master_port = a.master_port;
  in.world_size = a.world_size;
  in.rank = a.rank;
  in.local_rank = a.local_rank;
  in.local_world_size = a.local_world_size;
  in.node_rank = a.node_rank;
  in.nodes = a.nodes;
  in.restart_count = a.restart_count;
  in.replica = a.replica;
  in.task_hosts = a.task_hosts;
  return in;
}

absl::StatusOr<LaunchPlan> PlanLaunch(const LaunchInput& in, const LaunchPolicy& policy) {
  absl::StatusOr<TaskIdentity> id = Identity(in, policy);
  if (!id.ok()) return Refuse(id.status(), "InvalidSecurityContext");
  LaunchPlan plan;
  plan.identity = *id;
  plan.hostfile = in.sandbox + "/hostfile";
  plan.spec.id = in.exec_id;
  plan.spec.log_path = in.log_path;
  plan.spec.log_max_bytes = 0;  // the node agent's shipper rotates it, once shipped
  plan.spec.status_path = in.status_path;
  plan.spec.stdin_path = in.stdin_path;
  if (in.a.image.empty()) return PlanHost(in, policy, std::move(plan));
  if (absl::Status s = CheckContainerInput(in); !s.ok()) return s;
  return PlanContainer(in, policy, std::move(plan));
}

TaskExit ContainerExit(const TaskExit& podman_exit) {
  TaskExit e = podman_exit;
  if (e.signal == 0 && e.exit_code > 128 && e.exit_code < 128 + NSIG) {
    e.signal = e.exit_code - 128;
    e.exit_code = -1;
  }
  return e;
}

std::string DescribeContainerExit(const TaskExit& e) {
  if (e.oom_killed || e.signal != 0) return e.Describe();
  switch (e.exit_code) {
    case 125:
      return "the container could not be started (exit code 125; Podman's reason is in the log)";
    case 126:
      return "the image's command cannot be run (exit code 126; see the log)";
    case 127:
      return "the image has no such command (exit code 127; see the log)";
    default:
      return e.Describe();
  }
}

}  // namespace gpucloud::agent
