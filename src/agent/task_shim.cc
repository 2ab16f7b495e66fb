#include "agent/task_shim.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace gpucloud::agent::shim {
namespace {

// Reports errno `e` to the parent on `fd` and ends the child.
[[noreturn]] void Fail(int fd, int e) {
  (void)!write(fd, &e, sizeof e);
  _exit(127);
}

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

// In a forked child (async-signal-safe calls only): joins the cgroups whose `tasks` files are
// given by writing "0" (the calling thread: the whole of a single-threaded child). 0, or errno.
int JoinCgroup(const char* const* tasks_files) {
  for (const char* const* p = tasks_files; p != nullptr && *p != nullptr; ++p) {
    const char* path = *p;
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
  Fail(exec_failed_fd, e);
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
    if (task < 0) Fail(exec_failed_fd, errno);
    // The task writes an exec failure's errno to `exec_failed_fd` itself.
    if (task == 0) ExecTask(creds, stop_signals, exec_failed_fd, argv, envp);
  } else {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &stop_signals);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawnp(&task, argv[0], nullptr, &attr, argv, envp);
    if (rc != 0) Fail(exec_failed_fd, rc);
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

// The soft RLIMIT_NOFILE, capped (getrlimit is not on the async-signal-safe list).
int DescriptorSweepLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 65536;
  return static_cast<int>(std::min<rlim_t>(r.rlim_cur, 65536));
}

void RunTaskChild(const TaskChild& c) {
  setpgid(0, 0);
  // The task starts with a clean signal state: the agent blocks SIGTERM and SIGINT (it waits
  // for them with sigwait) and ignores SIGPIPE, and both would otherwise be inherited through
  // exec — a task that cannot see SIGTERM cannot checkpoint before it is killed.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) signal(sig, SIG_DFL);
  if (int e = JoinCgroup(c.join_paths); e != 0) Fail(c.failed_fd, -e);
  char byte;
  if (read(c.go_fd, &byte, 1) != 1) _exit(126);
  dup2(c.log_fd, STDOUT_FILENO);
  dup2(c.log_fd, STDERR_FILENO);
  const bool fifo = c.stdin_path != nullptr && c.stdin_path[0] != 0;
  int in = fifo ? open(c.stdin_path, O_RDWR) : open("/dev/null", O_RDONLY);
  if (in < 0 && fifo) Fail(c.failed_fd, errno);
  if (in >= 0) dup2(in, STDIN_FILENO);
  if (in > STDERR_FILENO) close(in);
  CloseAboveStdioOnExec(c.sweep_limit);  // failed_fd is close-on-exec already
  if (!c.creds.set && chdir(c.creds.workdir) != 0) Fail(c.failed_fd, errno);
  if (c.status_path != nullptr && c.status_path[0] != 0) {
    RunShim(c.status_path, c.status_tmp, c.failed_fd, c.sweep_limit, c.creds, c.argv, c.envp);
  }
  int e = DropPrivileges(c.creds);
  if (e == 0) {
    execvpe(c.argv[0], c.argv, c.envp);
    e = errno;
  }
  Fail(c.failed_fd, e);
}

}  // namespace gpucloud::agent::shim
