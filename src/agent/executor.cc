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
#include <cstring>
#include <filesystem>

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

Executor::Executor(ExitWatcher* exits) : exits_(exits) { prctl(PR_SET_CHILD_SUBREAPER, 1); }

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

absl::Status Executor::Start(const TaskSpecToRun& spec, std::string* warning) {
  if (spec.argv.empty()) return NoCommandError();
  if (tasks_.contains(spec.id)) {
    return absl::InvalidArgumentError(Cat("task ", spec.id, " is already known"));
  }
  Task t;
  t.spec = spec;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(spec.log_path).parent_path(), ec);
  int log = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) {
    return absl::InternalError(Cat("cannot open log ", spec.log_path, ": ", std::strerror(errno)));
  }
  TaskLimits limits{spec.cpu, spec.memory, spec.pids_max};
  if (limits.any()) {
    // Named by the task and this process: ids are unique within one agent only, and two agents
    // on one host (tests, or nodes in network namespaces) must not share or remove each
    // other's groups.
    absl::StatusOr<std::unique_ptr<TaskCgroup>> g =
        TaskCgroup::Create(Cat(spec.id, ".", getpid()), limits);
    if (g.ok()) {
      t.cgroup = std::move(*g);
    } else if (warning != nullptr) {
      *warning = Cat("task ", spec.id, " runs without its cgroup limits: ", g.status().message());
    }
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings;
  bool has_path = false;
  for (const auto& [k, v] : spec.env) {
    env_strings.push_back(k + "=" + v);
    has_path = has_path || k == "PATH";
  }
  if (!has_path) env_strings.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string workdir = spec.workdir.empty()
                            ? std::filesystem::path(spec.log_path).parent_path().string()
                            : spec.workdir;
  const std::string status_tmp = spec.status_path + ".tmp";
  if (!spec.status_path.empty()) unlink(spec.status_path.c_str());
  shim::TaskChild child;
  child.log_fd = log;
  child.sweep_limit = shim::DescriptorSweepLimit();
  child.creds.workdir = workdir.c_str();
  if (spec.uid) child.creds = {true, *spec.uid, spec.gid, workdir.c_str()};
  child.status_path = spec.status_path.c_str();
  child.status_tmp = status_tmp.c_str();
  // v1: the child joins its groups itself (cheaper: cgroup.h); v2: the parent moves it.
  std::vector<std::string> join =
      t.cgroup ? t.cgroup->SelfAttachFiles() : std::vector<std::string>{};
  std::vector<const char*> join_paths;
  for (const std::string& f : join) join_paths.push_back(f.c_str());
  join_paths.push_back(nullptr);
  child.join_paths = join_paths.data();
  child.argv = argv.data();
  child.envp = envp.data();
  // parent -> child: attached, go; child -> parent: exec's errno, or minus the errno of joining
  // its cgroup
  int go[2], failed[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(failed, O_CLOEXEC) != 0) {
    close(log);
    return absl::InternalError(Cat("pipe: ", std::strerror(errno)));
  }
  child.go_fd = go[0];
  child.failed_fd = failed[1];
  pid_t pid = fork();
  if (pid < 0) {
    close(log);
    return absl::InternalError(Cat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) shim::RunTaskChild(child);
  setpgid(pid, pid);  // also here, so the group exists before either side goes on
  close(log);
  close(go[0]);
  close(failed[1]);
  if (t.cgroup) {
    absl::Status s = join.empty() ? t.cgroup->Attach(pid) : absl::OkStatus();
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
