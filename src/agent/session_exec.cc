// SessionManager's exec (session_manager.h): a command started inside a running task, its
// terminal or pipes carried over the session's WebSocket, its exit status as the last message.
// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

// GCC 12 takes Asio's coroutine frames' own operator delete for a mismatch once it inlines
// them (a false positive: the frame's operator new is Asio's too).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <fstream>
#include <sstream>

#include "agent/session_impl.h"
#include "core/text.h"

extern char** environ;

namespace gpucloud::agent {
namespace {

namespace beast = boost::beast;
using api::ws::Into;
using Descriptor = asio::posix::stream_descriptor;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// A started command: its process (leader of its own session and group), a pidfd when the
// kernel has them, and its standard streams' other ends (a terminal's master as all three).
struct Child {
  pid_t pid = -1;
  int pidfd = -1;
  int in = -1, out = -1, err = -1;  // tty: `out` only (the master)
};

// NUL-terminated pointers into `strings` (which must outlive them), for exec.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the forked child (async-signal-safe calls only): says what failed on `report` and exits.
[[noreturn]] void Fail(int report, char stage) {
  int e = errno;
  char msg[2] = {stage, static_cast<char>(e > 127 ? 127 : e)};
  (void)!write(report, msg, sizeof msg);
  _exit(127);
}

// Starts `argv` as `target` asks (a host process: its environment, directory, user, cgroups; a
// container: Podman, with the agent's environment). Its standard streams: the slave of a new
// terminal of `size` (tty), or three pipes.
absl::StatusOr<Child> Spawn(std::vector<std::string> argv, const SessionTarget& target, bool tty,
                            const api::TerminalSize& size) {
  const bool host = target.container.empty();
  std::vector<std::string> env_strings;
  if (host) {
    for (const auto& [k, v] : target.env) env_strings.push_back(Cat(k, "=", v));
  } else {
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  }
  if (tty && host && !target.env.contains("TERM")) env_strings.push_back("TERM=xterm-256color");
  std::vector<char*> c_argv = CStrings(argv), c_env = CStrings(env_strings);
  std::vector<std::string> joins = host ? target.cgroup_join : std::vector<std::string>{};
  std::vector<char*> c_joins = CStrings(joins);
  const std::string workdir = host ? target.workdir : "";
  int master = -1, slave = -1, in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  int report[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd :
         {master, slave, in[0], in[1], out[0], out[1], err[0], err[1], report[0], report[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  if (tty) {
    winsize ws{};
    ws.ws_col = static_cast<unsigned short>(size.width);
    ws.ws_row = static_cast<unsigned short>(size.height);
    if (openpty(&master, &slave, nullptr, nullptr, &ws) != 0) {
      return absl::InternalError(Cat("openpty: ", strerror(errno)));
    }
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(slave, F_SETFD, FD_CLOEXEC);
  } else if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
             pipe2(err, O_CLOEXEC) != 0) {
    close_all();
    return absl::InternalError(Cat("pipe: ", strerror(errno)));
  }
  if (pipe2(report, O_CLOEXEC) != 0) {
    close_all();
    return absl::InternalError(Cat("pipe: ", strerror(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close_all();
    return absl::InternalError(Cat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT}) signal(sig, SIG_DFL);
    if (setsid() < 0) Fail(report[1], 's');
    if (tty) {
      if (ioctl(slave, TIOCSCTTY, 0) != 0) Fail(report[1], 't');
      for (int fd = 0; fd < 3; ++fd) dup2(slave, fd);
    } else {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
    }
    for (char** f = c_joins.data(); *f != nullptr; ++f) {
      int fd = open(*f, O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) Fail(report[1], 'c');
      close(fd);
    }
    if (!workdir.empty() && chdir(workdir.c_str()) != 0) Fail(report[1], 'd');
    if (host && target.uid) {
      if (setgroups(0, nullptr) != 0 || setgid(target.gid) != 0 || setuid(*target.uid) != 0) {
        Fail(report[1], 'u');
      }
    }
    syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    execve(c_argv[0], c_argv.data(), c_env.data());
    Fail(report[1], 'e');
  }
  close(report[1]);
  report[1] = -1;
  char msg[2];
  ssize_t n;
  while ((n = read(report[0], msg, sizeof msg)) < 0 && errno == EINTR) {
  }
  if (n == 2) {  // the child said why it could not start
    waitpid(pid, nullptr, 0);
    close_all();
    const char* stage = msg[0] == 'e'   ? "cannot run"
                        : msg[0] == 'd' ? "cannot enter the working directory of"
                        : msg[0] == 'u' ? "cannot become the task's user for"
                        : msg[0] == 'c' ? "cannot join the task's cgroups for"
                                        : "cannot set up a terminal for";
    const int e = msg[1];
    return e == ENOENT && msg[0] == 'e'
               ? absl::NotFoundError(Cat("command not found: ", argv[0]))
               : absl::PermissionDeniedError(Cat(stage, " ", argv[0], ": ", strerror(e)));
  }
  Child c;
  c.pid = pid;
  c.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (tty) {
    c.out = master;
    master = -1;
  } else {
    c.in = in[1];
    c.out = out[0];
    c.err = err[0];
    in[1] = out[0] = err[0] = -1;
  }
  close_all();
  return c;
}

// SIGKILLs every process of session `sid` but the leader itself when it is gone; returns them.
// (An exec'd command leads its own session, so this is the command and what it started.)
std::vector<pid_t> KillSession(pid_t sid) {
  std::vector<pid_t> out;
  kill(-sid, SIGKILL);  // its own group at once
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != 0 || pid <= 0) continue;
    std::ifstream f(Cat("/proc/", pid, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(f)), {});
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 1));
    std::string state;
    long ppid = 0, pgrp = 0, session = 0;
    rest >> state >> ppid >> pgrp >> session;
    if (session == sid && pid != sid) {
      kill(static_cast<pid_t>(pid), SIGKILL);
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return out;
}

api::ExecStatus StatusOf(int wstatus) {
  api::ExecStatus s;
  if (WIFEXITED(wstatus)) {
    s.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
    s.exit_code = 128 + s.signal;
  }
  return s;
}

}  // namespace

asio::awaitable<void> FinishWithStatus(api::ws::Sender<api::ws::Stream>& sender,
                                       const api::ExecStatus& s) {
  const std::string status = api::ExecMessage(api::ExecChannel::kStatus, api::ExecStatusJson(s));
  co_await sender.Send(status);
  co_await sender.Close();
}

asio::awaitable<void> SessionManager::Impl::Attach(api::ws::Stream& ws,
                                                   const api::SessionRequest& r,
                                                   const SessionTarget& target) {
  api::ws::Sender<api::ws::Stream> sender(ws);
  if (target.stdin_path.empty()) {
    const api::ExecStatus none{-1, 0,
                               Cat("the task ", r.assignment,
                                   " has no stdin to attach to (an interactive job's tasks have "
                                   "one; a batch job's read /dev/null)")};
    co_await FinishWithStatus(sender, none);
    co_return;
  }
  // Non-blocking, so that a task that does not read cannot stall the manager's thread; the
  // task holds the FIFO open for reading, so this open does not fail with ENXIO.
  const int fd = open(target.stdin_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const api::ExecStatus failed{-1, 0,
                                 Cat("the task's stdin cannot be opened: ", strerror(errno))};
    co_await FinishWithStatus(sender, failed);
    co_return;
  }
  Descriptor in(co_await asio::this_coro::executor, fd);
  Log(Cat("attach to ", r.assignment, " by ", r.user));
  boost::system::error_code ec;
  std::string message;
  while (co_await api::ws::Read(ws, message, ec)) {
    if (message.empty()) continue;
    Touch(r.assignment);
    const auto channel = static_cast<api::ExecChannel>(message[0]);
    const std::string_view data = std::string_view(message).substr(1);
    // The client's end of input leaves the task's stdin open (kubectl attach without
    // --stdin-once): another attach may write more.
    if (channel != api::ExecChannel::kStdin || data.empty()) continue;
    boost::system::error_code write_ec;
    co_await asio::async_write(in, asio::buffer(data), Into(write_ec));
    if (write_ec) break;  // the task ended
  }
  in.close(ec);
}

asio::awaitable<void> SessionManager::Impl::Exec(api::ws::Stream& ws, const api::SessionRequest& r,
                                                 const SessionTarget& target, uint64_t entry) {
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  api::ws::Sender<api::ws::Stream> sender(ws);
  const char* path = getenv("PATH");
  absl::StatusOr<std::vector<std::string>> argv =
      ExecArgv(target, r, path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  absl::StatusOr<Child> child = argv.ok() ? Spawn(*argv, target, r.tty, api::TerminalSize{})
                                          : absl::StatusOr<Child>(argv.status());
  if (!child.ok()) {
    const api::ExecStatus failed{absl::IsNotFound(child.status()) ? 127 : 126, 0,
                                 std::string(child.status().message())};
    co_await FinishWithStatus(sender, failed);
    co_return;
  }
  {
    std::lock_guard lock(mu);
    children.insert(child->pid);
  }
  Log(Cat("exec into ", r.assignment, " by ", r.user, ": ", (*argv)[0], r.tty ? " (terminal)" : "",
          ", pid ", child->pid));
  // Everything the coroutines below share; the last one out frees it.
  struct State {
    State(asio::any_io_executor e, const Child& c) : out(e, c.out), done(e), grace(e) {
      if (c.err >= 0) err.emplace(e, c.err);
      if (c.in >= 0) in.emplace(e, c.in);
      if (c.pidfd >= 0) pidfd.emplace(e, c.pidfd);
    }
    Descriptor out;
    std::optional<Descriptor> err, in, pidfd;
    api::ws::Event done;
    asio::steady_timer grace;
    int outputs = 0, announcing = 0;
    bool exited = false, reading = true;
    int wstatus = 0;
  };
  auto st = std::make_shared<State>(ex, *child);
  const bool tty = r.tty;
  const pid_t pid = child->pid;
  const std::string assignment = r.assignment;
  auto output = [this, st, &sender, assignment](Descriptor& fd,
                                                api::ExecChannel channel) -> asio::awaitable<void> {
    std::vector<char> buffer(32 << 10);
    boost::system::error_code ec;
    for (;;) {
      size_t n = co_await fd.async_read_some(asio::buffer(buffer), Into(ec));
      if (ec) break;  // EOF; a terminal's EIO once its last holder is gone
      Touch(assignment);
      const std::string message = api::ExecMessage(channel, std::string_view(buffer.data(), n));
      if (!co_await sender.Send(message)) break;
    }
    --st->outputs;
    st->done.Notify();
  };
  auto input = [this, st, &ws, tty, pid, assignment]() -> asio::awaitable<void> {
    boost::system::error_code ec;
    std::string message;
    while (co_await api::ws::Read(ws, message, ec)) {
      if (message.empty()) continue;
      Touch(assignment);
      const auto channel = static_cast<api::ExecChannel>(message[0]);
      const std::string_view data = std::string_view(message).substr(1);
      Descriptor* to = tty ? &st->out : (st->in ? &*st->in : nullptr);
      if (channel == api::ExecChannel::kStdin && to != nullptr && to->is_open()) {
        if (data.empty() && !tty) {  // the client's stdin ended
          st->in->close(ec);
          continue;
        }
        boost::system::error_code write_ec;
        co_await asio::async_write(*to, asio::buffer(data), Into(write_ec));
      } else if (channel == api::ExecChannel::kResize && tty) {
        if (absl::StatusOr<api::TerminalSize> size = api::ParseTerminalSize(data); size.ok()) {
          winsize w{};
          w.ws_col = static_cast<unsigned short>(size->width);
          w.ws_row = static_cast<unsigned short>(size->height);
          ioctl(st->out.native_handle(), TIOCSWINSZ, &w);
        }
      }
    }
    // The client left (or closed): the command goes with it.
    if (!st->exited) KillSession(pid);
    st->reading = false;
    st->done.Notify();
  };
  auto reap = [st, pid]() -> asio::awaitable<void> {
    boost::system::error_code ec;
    for (;;) {
      if (st->pidfd) {
        co_await st->pidfd->async_wait(Descriptor::wait_read, Into(ec));
      } else {
        st->grace.expires_after(std::chrono::milliseconds(50));
        co_await st->grace.async_wait(Into(ec));
      }
      int status = 0;
      pid_t got = waitpid(pid, &status, WNOHANG);
      if (got == pid || (got < 0 && errno == ECHILD)) {
        st->wstatus = status;
        break;
      }
    }
    st->exited = true;
    st->done.Notify();
  };
  asio::co_spawn(ex, output(st->out, api::ExecChannel::kStdout), asio::detached);
  st->outputs = 1;
  if (st->err) {
    asio::co_spawn(ex, output(*st->err, api::ExecChannel::kStderr), asio::detached);
    st->outputs = 2;
  }
  const uint64_t session = entry;
  entries[session].announce = [this, st, &sender, tty](const std::string& text) {
    if (!st->reading) return;
    ++st->announcing;  // waited for before `sender` goes
    asio::co_spawn(
        io,
        [st, &sender,
         m = api::ExecMessage(api::ExecChannel::kStderr,
                              tty ? Cat("\r\n[gpucloud] ", text, "\r\n")
                                  : Cat("[gpucloud] ", text, "\n"))]() -> asio::awaitable<void> {
          co_await sender.Send(m);
          --st->announcing;
          st->done.Notify();
        },
        asio::detached);
  };
  asio::co_spawn(ex, input(), asio::detached);
  asio::co_spawn(ex, reap(), asio::detached);
  while (!st->exited) co_await st->done.Wait();
  {
    std::lock_guard lock(mu);
    children.erase(pid);
  }
  // What the command left behind in its session goes with it (a shell's job-controlled
  // groups too); those the agent inherited as their subreaper are reaped.
  std::vector<pid_t> left = KillSession(pid);
  // What it wrote before it ended, for at most a second (a background process may hold its
  // output open for good).
  st->grace.expires_after(std::chrono::seconds(1));
  st->grace.async_wait([st](boost::system::error_code) { st->done.Notify(); });
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (st->outputs > 0 && std::chrono::steady_clock::now() < drain_until) {
    co_await st->done.Wait();
  }
  boost::system::error_code ec;
  st->out.close(ec);
  if (st->err) st->err->close(ec);
  while (st->outputs > 0) co_await st->done.Wait();
  entries[session].announce = nullptr;
  api::ExecStatus status = StatusOf(st->wstatus);
  if (st->reading) co_await FinishWithStatus(sender, status);
  if (st->in) st->in->close(ec);
  // The client answers the close; one that does not is cut off after 5 s.
  st->grace.expires_after(std::chrono::seconds(5));
  st->grace.async_wait([st, &ws](boost::system::error_code e) {
    if (!e && st->reading) {
      boost::system::error_code ignored;
      beast::get_lowest_layer(ws).socket().close(ignored);
    }
  });
  while (st->reading || st->announcing > 0) co_await st->done.Wait();
  st->grace.cancel();
  for (int tries = 0; !left.empty() && tries < 20; ++tries) {
    std::erase_if(left, [](pid_t p) {
      pid_t r = waitpid(p, nullptr, WNOHANG);
      return r == p || (r < 0 && errno == ECHILD);  // reaped, or not the agent's to reap
    });
    if (left.empty()) break;
    st->grace.expires_after(std::chrono::milliseconds(50));
    co_await st->grace.async_wait(Into(ec));
  }
  Log(Cat("exec into ", r.assignment, " ended: exit code ", status.exit_code));
}

}  // namespace gpucloud::agent
