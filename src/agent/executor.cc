#include "agent/executor.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "agent/task_shim.h"
#include "core/text.h"

namespace gpucloud::agent {

std::optional<TaskExit> ReadExitStatus(const std::string& status_path) {
  int fd = open(status_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[32] = {};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return std::nullopt;
  std::string text(buf, static_cast<size_t>(n));
  TaskExit e;
  int value = 0;
  if (std::sscanf(text.c_str(), "exit %d", &value) == 1) {
    e.exit_code = value;
  } else if (std::sscanf(text.c_str(), "signal %d", &value) == 1) {
    e.signal = value;
  } else {
    return std::nullopt;
  }
  return e;
}

std::string TaskExit::Describe() const {
  if (oom_killed) return "killed by the OOM killer (memory limit)";
  if (signal != 0) {
    return Cat(stopped ? "stopped by " : "killed by ", "signal ", signal, " (", strsignal(signal),
               ")");
  }
  return Cat("exit code ", exit_code);
}

void RotateLog(const std::string& path, int64_t max_bytes, int keep) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || max_bytes <= 0 || static_cast<int64_t>(size) <= max_bytes || keep < 1) return;
  for (int i = keep; i > 1; --i) {
    std::filesystem::rename(Cat(path, ".", i - 1), Cat(path, ".", i), ec);
  }
  std::filesystem::copy_file(path, path + ".1", std::filesystem::copy_options::overwrite_existing,
                             ec);
  if (truncate(path.c_str(), 0) != 0) return;
}

Executor::~Executor() {
  for (auto& [id, t] : tasks_) {
    if (!t.exit) {
      kill(-t.pid, SIGKILL);
      Reap(t, absl::InfiniteDuration());
    }
    if (t.pidfd >= 0) close(t.pidfd);
  }
}

absl::Status NoCommandError() {
  return absl::InvalidArgumentError(
      "NoCommand: the task has no command and no image (give it a command to run on the node, "
      "or an image)");
}

namespace {

// Everything a task's first process needs, owned here and built before it is forked or
// spawned (after a fork, only async-signal-safe calls). Filled in place: `child` and the
// pointer arrays point into the strings, so a ChildPlan is never copied or moved.
struct ChildPlan {
  std::vector<std::string> env_strings, args, join;
  std::vector<char*> envp, argv;
  std::vector<const char*> join_paths;
  std::string workdir, status_tmp;
  shim::TaskChild child;
};

void PlanChild(const TaskSpecToRun& spec, const TaskCgroup* cgroup, int log, ChildPlan& p) {
  bool has_path = false;
  for (const auto& [k, v] : spec.env) {
    p.env_strings.push_back(k + "=" + v);
    has_path = has_path || k == "PATH";
  }
  if (!has_path) p.env_strings.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  for (std::string& s : p.env_strings) p.envp.push_back(s.data());
  p.envp.push_back(nullptr);
  p.args = spec.argv;
  for (std::string& s : p.args) p.argv.push_back(s.data());
  p.argv.push_back(nullptr);
  p.workdir = spec.workdir.empty() ? std::filesystem::path(spec.log_path).parent_path().string()
                                   : spec.workdir;
  p.status_tmp = spec.status_path + ".tmp";
  // v1: the child joins its groups itself (cheaper: cgroup.h); v2: the parent moves it.
  if (cgroup != nullptr) p.join = cgroup->SelfAttachFiles();
  for (const std::string& f : p.join) p.join_paths.push_back(f.c_str());
  p.join_paths.push_back(nullptr);
  shim::TaskChild& c = p.child;
  c.log_fd = log;
  c.sweep_limit = shim::DescriptorSweepLimit();
  c.creds.workdir = p.workdir.c_str();
  if (spec.uid) c.creds = {true, *spec.uid, spec.gid, p.workdir.c_str()};
  c.status_path = spec.status_path.c_str();
  c.status_tmp = p.status_tmp.c_str();
  c.stdin_path = spec.stdin_path.c_str();
  c.join_paths = p.join_paths.data();
  c.argv = p.argv.data();
  c.envp = p.envp.data();
}

// The gpucloud-shim command line for `p` (shim_main.cc reads it).
std::vector<std::string> ShimArgs(const std::string& shim, const ChildPlan& p) {
  const shim::TaskChild& c = p.child;
  std::vector<std::string> a = {shim, "--workdir", p.workdir};
  if (c.creds.set) {
    a.insert(a.end(), {"--uid", Cat(c.creds.uid), "--gid", Cat(c.creds.gid)});
  }
  if (c.status_path[0] != 0) {
    a.insert(a.end(), {"--status", c.status_path, "--status-tmp", p.status_tmp});
  }
  if (c.stdin_path[0] != 0) a.insert(a.end(), {"--stdin", c.stdin_path});
  for (const std::string& f : p.join) a.insert(a.end(), {"--join", f});
  a.insert(a.end(), {"--sweep", Cat(c.sweep_limit), "--"});
  a.insert(a.end(), p.args.begin(), p.args.end());
  return a;
}

// Starts gpucloud-shim for `p` with posix_spawn: the log on 1, the go pipe on 3, the failed
// pipe on 4 (each source at 5 or above, so no dup2 overwrites another's source), nothing else
// open, its own process group, no signal blocked, the stop signals at their defaults. 0 and
// `pid`, or the errno.
int SpawnShim(const std::string& shim, const ChildPlan& p, pid_t* pid) {
  std::vector<std::string> args = ShimArgs(shim, p);
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p.child.log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, p.child.go_fd, 3);
  posix_spawn_file_actions_adddup2(&fa, p.child.failed_fd, 4);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
  posix_spawn_file_actions_addclosefrom_np(&fa, 5);
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int rc = posix_spawn(pid, shim.c_str(), &fa, &attr, argv.data(), p.child.envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

// `fd`, or a close-on-exec copy of it at 5 or above (the original closed); -1 on failure.
int AboveShimDescriptors(int fd) {
  if (fd >= 5 || fd < 0) return fd;
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 5);
  close(fd);
  return copy;
}

// Why tasks start by fork: the shim at `path` failed with errno `e`.
std::string ForkWarning(const std::string& path, int e) {
  return Cat("tasks start by fork, not through ", path, " (", std::strerror(e),
             "): slower, each start copies the agent's page tables");
}

// Starts `p`'s first process: through `shim` when there is one (cleared, with a warning
// for later, when it turns out to be missing), else by fork. A pending warning goes to
// `warning` (once).
absl::StatusOr<pid_t> Launch(ChildPlan& p, std::string& shim, std::string& shim_warning,
                             std::string* warning) {
  if (!shim.empty()) {
    pid_t pid = 0;
    int rc = SpawnShim(shim, p, &pid);
    if (rc == 0) return pid;
    if (rc != ENOENT && rc != EACCES && rc != ENOEXEC) {
      return absl::InternalError(Cat("posix_spawn ", shim, ": ", std::strerror(rc)));
    }
    shim_warning = ForkWarning(shim, rc);
    shim.clear();
  }
  if (!shim_warning.empty() && warning != nullptr) {
    if (!warning->empty()) *warning += "; ";
    *warning += std::exchange(shim_warning, "");
  }
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(Cat("fork: ", std::strerror(errno)));
  if (pid == 0) shim::RunTaskChild(p.child);
  return pid;
}

// The task's cgroup when it has limits; null (and a warning) when cgroups are unusable here.
std::unique_ptr<TaskCgroup> OpenCgroup(const TaskSpecToRun& spec, std::string* warning) {
  TaskLimits limits{spec.cpu, spec.memory, spec.pids_max};
  if (!limits.any()) return nullptr;
  // Named by the task and this process: ids are unique within one agent only, and two agents
  // on one host (tests, or nodes in network namespaces) must not share or remove each other's
  // groups.
  absl::StatusOr<std::unique_ptr<TaskCgroup>> g =
      TaskCgroup::Create(Cat(spec.id, ".", getpid()), limits);
  if (g.ok()) return std::move(*g);
  if (warning != nullptr) {
    *warning = Cat("task ", spec.id, " runs without its cgroup limits: ", g.status().message());
  }
  return nullptr;
}

}  // namespace

ShimChoice ChooseShim(const char* env, const std::string& self_exe) {
  if (env != nullptr && std::string_view(env) == "none") return {};
  std::string path =
      env != nullptr && env[0] != 0
          ? std::string(env)
          : (std::filesystem::path(self_exe).parent_path() / "gpucloud-shim").string();
  if (access(path.c_str(), X_OK) == 0) return {path, ""};
  return {"", ForkWarning(path, errno)};
}

Executor::Executor(ExitWatcher* exits) : exits_(exits) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::error_code ec;
  ShimChoice c =
      ChooseShim(std::getenv("GPUCLOUD_SHIM"), std::filesystem::read_symlink("/proc/self/exe", ec));
  shim_ = std::move(c.path);
  shim_warning_ = std::move(c.warning);
}

absl::Status Executor::Start(const TaskSpecToRun& spec, std::string* warning) {
  if (spec.argv.empty()) return NoCommandError();
  if (tasks_.contains(spec.id)) {
    return absl::InvalidArgumentError(Cat("task ", spec.id, " is already known"));
  }
  Task t;
  t.spec = spec;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(spec.log_path).parent_path(), ec);
  int log = AboveShimDescriptors(
      open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (log < 0) {
    return absl::InternalError(Cat("cannot open log ", spec.log_path, ": ", std::strerror(errno)));
  }
  t.cgroup = OpenCgroup(spec, warning);
  if (!spec.status_path.empty()) unlink(spec.status_path.c_str());
  ChildPlan plan;
  PlanChild(spec, t.cgroup.get(), log, plan);
  // parent -> child: attached, go; child -> parent: exec's errno, or minus the errno of joining
  // its cgroup
  int go[2], failed[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(failed, O_CLOEXEC) != 0) {
    close(log);
    return absl::InternalError(Cat("pipe: ", std::strerror(errno)));
  }
  go[0] = AboveShimDescriptors(go[0]);
  failed[1] = AboveShimDescriptors(failed[1]);
  plan.child.go_fd = go[0];
  plan.child.failed_fd = failed[1];
  absl::StatusOr<pid_t> launched = Launch(plan, shim_, shim_warning_, warning);
  close(log);
  close(go[0]);
  close(failed[1]);
  if (!launched.ok()) {
    close(go[1]);
    close(failed[0]);
    return launched.status();
  }
  pid_t pid = *launched;
  setpgid(pid, pid);  // also here, so the group exists before either side goes on
  if (t.cgroup) {
    absl::Status s = plan.join.empty() ? t.cgroup->Attach(pid) : absl::OkStatus();
    if (!s.ok() && warning != nullptr) {
      *warning = Cat("task ", spec.id, " runs without its cgroup limits: ", s.message());
    }
    t.oom_before = t.cgroup->OomKills();
  }
  (void)!write(go[1], "g", 1);
  close(go[1]);
  int e = 0;
  ssize_t n = read(failed[0], &e, sizeof e);
  close(failed[0]);
  if (n == sizeof e) {
    waitpid(pid, nullptr, 0);
    if (e < 0) {
      return absl::InternalError(
          Cat("task ", spec.id, " cannot join its cgroup: ", std::strerror(-e)));
    }
    return absl::NotFoundError(Cat("cannot run ", spec.argv[0], ": ", std::strerror(e)));
  }
  t.pid = pid;
  t.pidfd = OpenPidFd(pid);
  if (exits_ != nullptr) (void)exits_->Add(t.pidfd);  // else (no pidfds): found by Poll
  tasks_.emplace(spec.id, std::move(t));
  return absl::OkStatus();
}

std::vector<std::string> Executor::CgroupJoinFiles(const std::string& id) const {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.cgroup == nullptr) return {};
  return it->second.cgroup->JoinFiles();
}

pid_t Executor::Pid(const std::string& id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? 0 : it->second.pid;
}

void Executor::Reap(Task& t, absl::Duration timeout) {
  if (t.exit) return;
  if (timeout > absl::ZeroDuration() && t.pidfd >= 0) {
    pollfd p{t.pidfd, POLLIN, 0};
    int ms = timeout == absl::InfiniteDuration()
                 ? -1
                 : static_cast<int>(absl::ToInt64Milliseconds(timeout));
    (void)poll(&p, 1, ms);
  }
  int status = 0;
  int flags = timeout == absl::InfiniteDuration() ? 0 : WNOHANG;
  pid_t r = waitpid(t.pid, &status, flags);
  if (r != t.pid) return;
  TaskExit e;
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  e.stopped = t.stopping;
  if (t.cgroup && t.cgroup->OomKills() > t.oom_before) e.oom_killed = true;
  // The task is its group: leave no stray children. As child subreaper the agent inherits the
  // ones the leader left behind, so it can reap them too.
  kill(-t.pid, SIGKILL);
  while (waitpid(-t.pid, nullptr, 0) > 0) {
  }
  t.exit = e;
}

std::optional<TaskExit> Executor::Poll(const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return std::nullopt;
  Task& t = it->second;
  RotateLog(t.spec.log_path, t.spec.log_max_bytes, t.spec.log_keep);
  Reap(t, absl::ZeroDuration());
  return t.exit;
}

TaskExit Executor::Wait(const std::string& id) {
  Task& t = tasks_.at(id);
  Reap(t, absl::InfiniteDuration());
  return *t.exit;
}

absl::StatusOr<TaskExit> Executor::Stop(const std::string& id, absl::Duration grace) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return absl::NotFoundError(Cat("no task ", id));
  Task& t = it->second;
  if (t.exit) return *t.exit;
  t.stopping = true;
  kill(-t.pid, SIGTERM);
  Reap(t, grace);
  if (!t.exit) {
    kill(-t.pid, SIGKILL);
    Reap(t, absl::InfiniteDuration());
  }
  return *t.exit;
}

absl::Status Executor::Terminate(const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return absl::NotFoundError(Cat("no task ", id));
  Task& t = it->second;
  if (t.exit) return absl::OkStatus();
  t.stopping = true;
  kill(-t.pid, SIGTERM);
  return absl::OkStatus();
}

absl::Status Executor::Kill(const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return absl::NotFoundError(Cat("no task ", id));
  Task& t = it->second;
  if (t.exit) return absl::OkStatus();
  t.stopping = true;
  kill(-t.pid, SIGKILL);
  return absl::OkStatus();
}

void Executor::Detach() {
  for (auto& [id, t] : tasks_) {
    if (t.pidfd >= 0) close(t.pidfd);
  }
  tasks_.clear();
}

void Executor::Forget(const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || !it->second.exit) return;
  if (it->second.pidfd >= 0) close(it->second.pidfd);
  tasks_.erase(it);
}

}  // namespace gpucloud::agent
