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

#include "core/text.h"

namespace gpucloud::agent {
namespace {

// Writes "exit N\n" or "signal N\n" (async-signal-safe: no allocation, no stdio).
void WriteStatus(const char* path, const char* tmp, int status) {
  char buf[32];
  const char* word = WIFSIGNALED(status) ? "signal " : "exit ";
  int value = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
  size_t n = 0;
  for (const char* w = word; *w != 0; ++w) buf[n++] = *w;
  char digits[12];
  size_t d = 0;
  do {
    digits[d++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && d < sizeof digits);
  while (d > 0) buf[n++] = digits[--d];
  buf[n++] = '\n';
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool ok = write(fd, buf, n) == static_cast<ssize_t>(n);
  ok = fsync(fd) == 0 && ok;
  close(fd);
  if (ok) rename(tmp, path);
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// The highest descriptor number worth sweeping when close_range is missing (Linux < 5.11):
// the soft RLIMIT_NOFILE, capped. Read before fork (getrlimit is not on the async-signal-safe
// list).
int DescriptorSweepLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 65536;
  return static_cast<int>(std::min<rlim_t>(r.rlim_cur, 65536));
}

// Marks every descriptor above 2 close-on-exec (async-signal-safe): exec leaves the task
// only its standard three, whatever the agent (or a library in it) opened without O_CLOEXEC.
void CloseAboveStdioOnExec(int sweep_limit) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
  for (int fd = 3; fd < sweep_limit; ++fd) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// Closes every descriptor above 2 now (async-signal-safe).
void CloseAboveStdio(int sweep_limit) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
#endif
  for (int fd = 3; fd < sweep_limit; ++fd) (void)close(fd);
}

// Who a task runs as (TaskSpecToRun::uid), for the child: after fork, so no allocation. Its
// working directory is entered as that user (a path the user could not reach stays closed).
struct Creds {
  bool set = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const char* workdir = nullptr;
};

// In a forked child (async-signal-safe calls only): joins the cgroups whose `tasks` files are
// given by writing "0" (the calling thread: the whole of a single-threaded child). 0, or errno.
int JoinCgroup(const std::vector<const char*>& tasks_files) {
  for (const char* path : tasks_files) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    int e = write(fd, "0", 1) == 1 ? 0 : errno;
    close(fd);
    if (e != 0) return e;
  }
  return 0;
}

// Becomes the task's user (async-signal-safe): no supplementary groups, the group, the user,
// and no way back up through a setuid program. Returns an errno, 0 on success.
int DropPrivileges(const Creds& c) {
  if (!c.set) return 0;
  if (setgroups(0, nullptr) != 0 || setgid(c.gid) != 0 || setuid(c.uid) != 0) return errno;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (chdir(c.workdir) != 0) return errno;
  return 0;
}

// In the shim, the task's side of a fork: signals back to their defaults, the task's user, exec.
[[noreturn]] void ExecTask(const Creds& creds, const sigset_t& stop_signals, int exec_failed_fd,
                           char* const* argv, char* const* envp) {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&stop_signals, sig) == 1) signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int e = DropPrivileges(creds);
  if (e == 0) {
    execvpe(argv[0], argv, envp);
    e = errno;
  }
  (void)!write(exec_failed_fd, &e, sizeof e);
  _exit(127);
}

// In the executor's child, after fork, instead of exec. Starts the task with posix_spawn (a
// vfork-style clone: no second copy of the agent's page tables, which a fork would cost) with the
// stop signals back to their defaults — or, for a task of another user, with fork, since the
// shim itself stays the agent's user; this process stays behind as the group's leader, immune
// to the stop signals (they are for the task): it waits for the task, writes the status file
// and ends the same way. An exec failure goes to `exec_failed_fd` as an errno. Once the task
// runs, the shim keeps only its standard descriptors: none of the agent's sockets stay open in a
// process that may outlive the agent.
[[noreturn]] void RunShim(const char* status_path, const char* status_tmp, int exec_failed_fd,
                          int sweep_limit, const Creds& creds, char* const* argv,
                          char* const* envp) {
  sigset_t stop_signals, none;
  sigemptyset(&stop_signals);
  sigemptyset(&none);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    signal(sig, SIG_IGN);  // before the task exists: no window where the shim could die of one
    sigaddset(&stop_signals, sig);
  }
  pid_t task = 0;
  if (creds.set) {
    task = fork();
    if (task < 0) {
      int e = errno;
      (void)!write(exec_failed_fd, &e, sizeof e);
      _exit(127);
    }
    // The task writes an exec failure's errno to `exec_failed_fd` itself.
    if (task == 0) ExecTask(creds, stop_signals, exec_failed_fd, argv, envp);
  } else {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &stop_signals);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawnp(&task, argv[0], nullptr, &attr, argv, envp);
    if (rc != 0) {
      (void)!write(exec_failed_fd, &rc, sizeof rc);
      _exit(127);
    }
  }
  CloseAboveStdio(sweep_limit);  // exec_failed_fd too: the parent reads its end-of-file
  int status = 0;
  while (waitpid(task, &status, 0) < 0) {
    if (errno != EINTR) _exit(125);
  }
  WriteStatus(status_path, status_tmp, status);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    rlimit none{0, 0};
    setrlimit(RLIMIT_CORE, &none);  // the task dumped its core, if any; not the shim
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    kill(getpid(), sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128);
}

}  // namespace

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
  const int sweep_limit = DescriptorSweepLimit();
  Creds creds;
  if (spec.uid) creds = {true, *spec.uid, spec.gid, workdir.c_str()};
  // v1: the child joins its groups itself (cheaper: cgroup.h); v2: the parent moves it.
  std::vector<std::string> join =
      t.cgroup ? t.cgroup->SelfAttachFiles() : std::vector<std::string>{};
  std::vector<const char*> join_paths;
  for (const std::string& f : join) join_paths.push_back(f.c_str());
  // parent -> child: attached, go; child -> parent: exec's errno, or minus the errno of joining
  // its cgroup
  int go[2], failed[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(failed, O_CLOEXEC) != 0) {
    close(log);
    return absl::InternalError(Cat("pipe: ", std::strerror(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(log);
    return absl::InternalError(Cat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    // The task starts with a clean signal state: the agent blocks SIGTERM and SIGINT (it waits
    // for them with sigwait) and ignores SIGPIPE, and both would otherwise be inherited through
    // exec — a task that cannot see SIGTERM cannot checkpoint before it is killed.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) signal(sig, SIG_DFL);
    if (int e = JoinCgroup(join_paths); e != 0) {
      e = -e;
      (void)!write(failed[1], &e, sizeof e);
      _exit(127);
    }
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(126);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (devnull > STDERR_FILENO) close(devnull);
    CloseAboveStdioOnExec(sweep_limit);  // failed[1] is close-on-exec already
    if (!creds.set && chdir(workdir.c_str()) != 0) {
      int e = errno;
      (void)!write(failed[1], &e, sizeof e);
      _exit(127);
    }
    if (!spec.status_path.empty()) {
      RunShim(spec.status_path.c_str(), status_tmp.c_str(), failed[1], sweep_limit, creds,
              argv.data(), envp.data());
    }
    int e = DropPrivileges(creds);
    if (e == 0) {
      execvpe(argv[0], argv.data(), envp.data());
      e = errno;
    }
    (void)!write(failed[1], &e, sizeof e);
    _exit(127);
  }
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
