// Starting one task: its secrets, its directories, its image, then the executor.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "agent/cdi.h"
#include "agent/node_agent_impl.h"
#include "agent/task_env.h"
#include "agent/task_secrets.h"
#include "core/private_file.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

}  // namespace

std::string NodeAgent::Impl::MigUuid(const api::AssignedGpu& g) {
  std::lock_guard lock(metrics_mu);
  if (g.index >= 0 && g.index < static_cast<int>(discovered.gpus.size())) {
    const auto& by_start = discovered.gpus[g.index].mig_uuid_by_start;
    if (auto it = by_start.find(g.mig_start); it != by_start.end()) return it->second;
  }
  Log(Cat("GPU ", g.index, " has no MIG instance ", g.mig_profile, " at slice ", g.mig_start,
          ": the task gets the whole GPU's UUID"));
  return g.uuid;
}

LaunchInput NodeAgent::Impl::Launch(const Local& t) {
  LaunchInput in;
  in.a = t.a;
  in.env = EnvInputOf(t.a, [this](const api::AssignedGpu& g) { return MigUuid(g); });
  in.exec_id = t.exec_id;
  in.log_path = t.log_path;
  in.status_path = StatusPath(t);
  if (t.a.idle_timeout_seconds > 0) in.stdin_path = StdinPath(t);  // interactive: attachable
  in.sandbox = SandboxPath(t);
  in.checkpoint_dir = t.checkpoint_dir;
  if (!t.a.task_hosts.empty()) {
    in.volcano_dir = t.a.image.empty() ? SandboxPath(t) + "/volcano" : VolcanoDir(t);
  }
  for (const char* k : {"PATH", "LANG", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME"}) {
    if (const char* v = getenv(k); v != nullptr) in.host_env[k] = v;
  }
  if (backend.Name() == "nvml") {
    for (const std::string& uuid : in.env.gpu_uuids) in.cdi_devices.push_back(CdiDeviceName(uuid));
  }
  in.node_name = o.node_name;
  if (t.secrets) {
    in.secret_env = t.secrets->env;
    if (!t.a.secret_volumes.empty()) in.secrets_dir = Cat(in.sandbox, "/", kSandboxSecretsDir);
  }
  return in;
}

void NodeAgent::Impl::StartTask(const api::Assignment& a) {
  Local t;
  t.a = a;
  t.exec_id = Cat(a.name, ".", a.attempt);
  t.report = {a.name, a.job_uid, a.attempt, api::TaskState::kStarting, -1, 0, false, ""};
  t.log_path = Cat(o.state_dir, "/logs/", a.namespace_, "/", a.job, "/attempt-", a.attempt,
                   "/rank-", a.rank, ".log");
  exec.Forget(t.exec_id);
  SetCheckpointDir(t);
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Launch(t), launch_policy);
  if (!plan.ok()) {
    Fail(t, std::string(plan.status().message()));
  } else {
    t.plan = *std::move(plan);
    t.container_name = t.plan.container_name;
    if (a.UsesSecrets()) {
      t.waiting_secrets = true;
      StartWhenSecretsFetched(t);
    } else {
      Prepare(t);
    }
  }
  tasks[a.name] = std::move(t);
  SaveRecord(tasks[a.name]);
}

void NodeAgent::Impl::Prepare(Local& t) {
  if (absl::Status s = PrepareDirs(t); !s.ok()) {
    Fail(t, Cat("TaskSetupFailed: ", s.message()));
  } else if (!t.a.image.empty()) {
    t.waiting_image = true;
    StartWhenPulled(t);
  } else {
    Exec(t);
  }
}

bool NodeAgent::Impl::StartWhenSecretsFetched(Local& t) {
  if (Now() < t.secrets_retry_at) return false;
  absl::StatusOr<api::TaskSecrets> s = FetchTaskSecrets(client, o.node_name, t.a);
  if (!s.ok()) {
    const absl::Duration wait = PullBackoff(++t.secret_failures);
    t.secrets_retry_at = Now() + wait;
    std::string message = Cat(s.status().message(), "; next try in ", absl::FormatDuration(wait));
    if (message == t.report.message) return false;
    Log(Cat("task ", t.a.name, ": ", s.status().message()));
    t.report.message = std::move(message);
    return true;
  }
  t.waiting_secrets = false;
  t.secrets = *std::move(s);
  t.report.message.clear();
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Launch(t), launch_policy);
  if (!plan.ok()) {
    Fail(t, std::string(plan.status().message()));
    return true;
  }
  t.plan = *std::move(plan);
  Prepare(t);
  return true;
}

void NodeAgent::Impl::Fail(Local& t, std::string why) {
  t.report.state = api::TaskState::kFailed;
  t.report.message = std::move(why);
  t.ended_at = Now();
  Log(Cat("task ", t.a.name, " could not start: ", t.report.message));
}

absl::Status NodeAgent::Impl::PrepareDirs(Local& t) {
  const TaskIdentity& id = t.plan.identity;
  std::error_code ec;
  janitor.RemoveTaskDir(SandboxPath(t));  // an earlier start's, if any: its path is free now
  absl::StatusOr<int> sandbox = OpenTaskDir(SandboxPath(t));
  if (!sandbox.ok()) return sandbox.status();
  absl::Status s = WriteTaskFile(*sandbox, "hostfile", Hostfile(t.a.hosts), id);
  if (s.ok() && t.a.image.empty()) s = WriteSandboxVolcanoFiles(*sandbox, t);
  if (s.ok() && t.secrets) s = WriteSecretFiles(*sandbox, t.a, *t.secrets, id);
  if (s.ok()) s = GiveTaskDir(*sandbox, SandboxPath(t), id);
  close(*sandbox);
  if (s.ok() && !t.checkpoint_dir.empty()) s = PrepareCheckpointDir(t);
  fs::create_directories(RunDir(t), ec);
  if (s.ok()) s = WriteVolcanoFiles(t);
  if (s.ok() && !t.plan.spec.stdin_path.empty()) {
    // Only the agent (root) opens it: the task's first process before it drops privileges, and
    // the attach sessions.
    unlink(t.plan.spec.stdin_path.c_str());
    if (mkfifo(t.plan.spec.stdin_path.c_str(), 0600) != 0) {
      s = absl::InternalError(Cat("cannot make the task's stdin: ", std::strerror(errno)));
    }
  }
  return s;
}

absl::Status NodeAgent::Impl::WriteTaskFile(int dirfd, const char* name, const std::string& content,
                                            const TaskIdentity& id) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok =
      fd >= 0 && write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ok = ok && fchown(fd, id.uid, id.gid) == 0;
  if (fd >= 0) close(fd);
  return ok ? absl::OkStatus()
            : absl::InternalError(
                  Cat("cannot write the task's ", name, ": ", std::strerror(errno)));
}

absl::Status NodeAgent::Impl::PrepareCheckpointDir(const Local& t) {
  const api::Assignment& a = t.a;
  absl::StatusOr<int> dir = OpenTaskDir(t.checkpoint_dir);
  if (!dir.ok()) return dir.status();
  absl::Status s = absl::OkStatus();
  if (a.checkpoint_node_local && a.checkpoint_replicate && !a.checkpoint_dir.empty()) {
    s = GiveTaskDir(*dir, t.checkpoint_dir, TaskIdentity{0, 0});
    absl::StatusOr<int> n =
        s.ok() ? CopyCheckpoints(a.checkpoint_dir, t.checkpoint_dir) : absl::StatusOr<int>(0);
    if (!n.ok()) {
      Log(Cat("task ", a.name, ": ", n.status().message()));
    } else if (*n > 0) {
      Log(Cat("task ", a.name, ": restored ", *n, " checkpoints from ", a.checkpoint_dir));
    }
  }
  if (s.ok()) s = GiveTaskDir(*dir, t.checkpoint_dir, t.plan.identity);
  close(*dir);
  return s;
}

absl::Status NodeAgent::Impl::WriteSandboxVolcanoFiles(int sandbox, const Local& t) {
  if (t.a.task_hosts.empty()) return absl::OkStatus();
  const TaskIdentity& id = t.plan.identity;
  if (mkdirat(sandbox, "volcano", 0755) != 0 ||
      fchownat(sandbox, "volcano", id.uid, id.gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::InternalError(
        Cat("cannot create the task's volcano directory: ", std::strerror(errno)));
  }
  int dir = openat(sandbox, "volcano", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    return absl::InternalError(
        Cat("cannot open the task's volcano directory: ", std::strerror(errno)));
  }
  absl::Status s = absl::OkStatus();
  for (const auto& [name, content] : TaskHostFiles(t.a.task_hosts, t.a.env)) {
    if (s.ok()) s = WriteTaskFile(dir, name.c_str(), content, id);
  }
  close(dir);
  return s;
}

absl::Status NodeAgent::Impl::WriteVolcanoFiles(const Local& t) {
  if (t.a.image.empty() || t.a.task_hosts.empty()) return absl::OkStatus();
  const std::string dir = VolcanoDir(t);
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace, ec);
  if (ec) return absl::InternalError(Cat("cannot create ", dir, ": ", ec.message()));
  for (const auto& [name, content] : TaskHostFiles(t.a.task_hosts, t.a.env)) {
    const std::string path = Cat(dir, "/", name);
    if (absl::Status s = WritePrivateFile(path, content); !s.ok()) return s;
    if (chmod(path.c_str(), 0644) != 0) {
      return absl::InternalError(Cat("cannot make ", path, " readable"));
    }
  }
  return absl::OkStatus();
}

bool NodeAgent::Impl::StartWhenPulled(Local& t) {
  const PullPolicy policy = t.a.image_pull_policy;  // resolved by AssignmentFromJson
  // Always: one pull per attempt of the job, whatever number of its ranks run here.
  ImagePuller::State st = puller.Ensure(t.a.image, policy, Cat(t.a.job_uid, ".", t.a.attempt),
                                        t.secrets ? PullAuthOf(t.a, *t.secrets) : PullAuth{});
  if (st.ready) {
    t.waiting_image = false;
    // A new image in the store (pulled, or first seen by this agent): the store may be over
    // its limit now.
    pulled_since_gc = pulled_since_gc || !image_last_used.contains(t.a.image);
    image_last_used[t.a.image] = absl::ToUnixSeconds(Now());
    if (int& logged = pulls_logged[t.a.image]; st.pulls > logged) {
      logged = st.pulls;
      pulled_since_gc = true;
      Log(Cat("task ", t.a.name, ": image ", t.a.image, " pulled in ",
              absl::FormatDuration(st.pull_time)));
    }
    Exec(t);
    return true;
  }
  // Fixed for one failure (no countdown), so that it changes, and is reported, once a try.
  std::string message = st.pulling || st.error.empty() ? Cat("Pulling: image ", t.a.image)
                        : st.failures == 0             ? st.error
                                                       : Cat(st.error, "; next try in ",
                                                             absl::FormatDuration(PullBackoff(st.failures)));
  if (message == t.report.message) return false;
  if (!st.error.empty() && !st.pulling) Log(Cat("task ", t.a.name, ": ", st.error));
  t.report.message = std::move(message);
  return true;
}

void NodeAgent::Impl::Exec(Local& t) {
  std::string warning;
  absl::Status s = exec.Start(t.plan.spec, &warning);
  if (!warning.empty()) Log(warning, log::Level::kWarn);
  if (!s.ok()) {
    Fail(t, std::string(s.message()));
    return;
  }
  t.in_executor = true;
  t.shim = exec.shim();  // after Start, which may have fallen back to a fork
  t.report.state = api::TaskState::kRunning;
  t.report.started_ms = absl::ToUnixMillis(Now());  // Start returns once it exec'd
  t.report.message.clear();
  std::string after;
  {
    std::lock_guard lock(mu);
    auto it = arrived.find(Cat(t.a.name, "/", t.a.attempt));
    if (it != arrived.end()) {
      after = Cat(", ", absl::ToDoubleMilliseconds(Now() - it->second),
                  " ms after its assignment arrived");
      arrived.erase(it);
    }
  }
  Log(Cat("started ", t.a.name, " (attempt ", t.a.attempt, ", rank ", t.a.rank, "/", t.a.world_size,
          t.plan.container ? ", container " + t.container_name : "", ", pid ", exec.Pid(t.exec_id),
          after, ")"));
}

}  // namespace gpucloud::agent
