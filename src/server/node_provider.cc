#include "server/node_provider.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/log.h"
#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kBootDelayLabel = "gpucloud.io/boot-delay";
constexpr std::string_view kBootFailFirstLabel = "gpucloud.io/boot-fail-first";

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (std::string& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

// SIGTERM, then SIGKILL after `grace`; reaps the process.
void StopProcess(pid_t pid, std::chrono::milliseconds grace) {
  kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

std::string Describe(const NodePool& pool, const std::vector<std::string>& nodes,
                     const JoinInfo& join, const std::string& action) {
  nlohmann::json j{{"action", action},
                   {"pool", pool.metadata.name},
                   {"gpuType", pool.spec.gpu_type},
                   {"gpusPerNode", pool.spec.gpus_per_node},
                   {"billing", BillingClassName(pool.spec.billing)},
                   {"nodes", nodes},
                   {"labels", pool.spec.labels},
                   {"server", join.server_url},
                   {"caFile", join.ca_file},
                   {"bootstrapTokenFile", join.bootstrap_token_file}};
  return j.dump() + "\n";
}

}  // namespace

// --- local -----------------------------------------------------------------------------------

LocalProvider::~LocalProvider() {
  std::lock_guard lock(mu_);
  for (const auto& [node, pid] : pids_) StopProcess(pid, std::chrono::seconds(5));
  pids_.clear();
}

absl::Status LocalProvider::Create(const NodePool& pool, const std::vector<std::string>& nodes) {
  int64_t delay_s = 0;
  int fail_first = 0;
  if (auto it = pool.spec.labels.find(std::string(kBootDelayLabel)); it != pool.spec.labels.end()) {
    absl::StatusOr<int64_t> d = ParseDurationSeconds(it->second);
    if (!d.ok()) {
      return absl::InvalidArgumentError(Cat("pool ", pool.metadata.name, ": label ",
                                            kBootDelayLabel, ": ", d.status().message()));
    }
    delay_s = *d;
  }
  if (auto it = pool.spec.labels.find(std::string(kBootFailFirstLabel));
      it != pool.spec.labels.end()) {
    fail_first = std::atoi(it->second.c_str());
  }
  std::lock_guard lock(mu_);
  for (const std::string& node : nodes) {
    if (created_[pool.metadata.name]++ < fail_first) {
      log::Info("autoscaler", "local provider: this machine will never come up (boot-fail-first)",
                {{"pool", pool.metadata.name}, {"node", node}});
      continue;
    }
    // The agent makes its state directory; the root must let tasks (other users) pass.
    const std::string dir = Cat(options_.state_root, "/", node);
    std::error_code ec;
    std::filesystem::create_directories(options_.state_root, ec);
    if (ec || chmod(options_.state_root.c_str(), 0711) != 0) {
      return absl::InternalError(Cat(options_.state_root, ": cannot create it with mode 0711"));
    }
    std::vector<std::string> args = {"/bin/sh",
                                     "-c",
                                     "sleep \"$1\"; shift; exec \"$@\"",
                                     "sh",
                                     std::to_string(delay_s),
                                     options_.agent_binary,
                                     "agent",
                                     "run",
                                     "--server",
                                     options_.join.server_url,
                                     "--ca",
                                     options_.join.ca_file,
                                     "--token-file",
                                     options_.join.bootstrap_token_file,
                                     "--node-name",
                                     node,
                                     "--address",
                                     "127.0.0.1",
                                     "--pool",
                                     pool.metadata.name,
                                     "--simulate",
                                     Cat(pool.spec.gpus_per_node, "x", pool.spec.gpu_type),
                                     "--state-dir",
                                     dir};
    for (const auto& [k, v] : pool.spec.labels) {
      args.push_back("--label");
      args.push_back(Cat(k, "=", v));
    }
    args.insert(args.end(), options_.agent_args.begin(), options_.agent_args.end());
    const std::string log_path = dir + ".log";
    std::vector<char*> argv = Argv(args);
    pid_t pid = fork();
    if (pid < 0) return absl::InternalError(Cat("fork: ", strerror(errno)));
    if (pid == 0) {
      // A machine of its own: its own session (a terminal's Ctrl-C is the server's to handle),
      // and it goes with the server (or its autoscaler's worker thread).
      setsid();
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      if (null >= 0) dup2(null, STDIN_FILENO);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGPIPE, SIG_DFL);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (auto old = pids_.find(node); old != pids_.end()) {  // a machine of that name before
      StopProcess(old->second, std::chrono::seconds(5));
    }
    pids_[node] = pid;
    log::Info("autoscaler", "local provider started an agent",
              {{"pool", pool.metadata.name}, {"node", node}, {"pid", pid}, {"delay_s", delay_s}});
  }
  return absl::OkStatus();
}

absl::Status LocalProvider::Delete(const NodePool& pool, const std::vector<std::string>& nodes) {
  std::lock_guard lock(mu_);
  for (const std::string& node : nodes) {
    auto it = pids_.find(node);
    if (it == pids_.end()) continue;
    StopProcess(it->second, std::chrono::seconds(10));
    pids_.erase(it);
    // A deleted machine's disk goes with it: a new one of the same name joins afresh.
    std::error_code ec;
    std::filesystem::remove_all(Cat(options_.state_root, "/", node), ec);
    log::Info("autoscaler", "local provider stopped an agent",
              {{"pool", pool.metadata.name}, {"node", node}});
  }
  return absl::OkStatus();
}

// --- exec ------------------------------------------------------------------------------------

absl::StatusOr<std::string> ExecProvider::Run(const std::string& action,
                                              const std::string& input) const {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err}) {
      for (int i : {0, 1}) {
        if (p[i] >= 0) close(p[i]);
      }
    }
  };
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return absl::InternalError(Cat("pipe: ", strerror(e)));
  }
  std::vector<std::string> args = {script_, action};
  std::vector<char*> argv = Argv(args);
  pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close_all();
    return absl::InternalError(Cat("fork: ", strerror(e)));
  }
  if (pid == 0) {
    setpgid(0, 0);             // its own group: a timeout kills what it started too
    signal(SIGPIPE, SIG_DFL);  // the server ignores it; a script should not inherit that
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  signal(SIGPIPE, SIG_IGN);
  (void)!write(in[1], input.data(), input.size());  // small: fits the pipe
  close(in[1]);
  std::string stdout_text, stderr_text;
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout_);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  bool timed_out = false;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 &&
        errno != EINTR) {
      break;
    }
    for (pollfd& p : fds) {
      if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(p.fd, buf, sizeof buf);
      if (n <= 0) {
        close(p.fd);
        p.fd = -1;
        --open_fds;
      } else {
        (p.fd == fds[0].fd ? stdout_text : stderr_text).append(buf, n);
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  // The script may have closed its output and still run: it gets what is left of the deadline.
  int status = 0;
  while (!timed_out && waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (timed_out) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  std::string tail =
      stderr_text.size() > 500 ? stderr_text.substr(stderr_text.size() - 500) : stderr_text;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  if (timed_out) {
    return absl::DeadlineExceededError(Cat("provider script ", script_, " ", action, " ran past ",
                                           absl::FormatDuration(timeout_), " and was killed"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFEXITED(status) ? Cat("exited ", WEXITSTATUS(status))
                                        : Cat("was killed by signal ", WTERMSIG(status));
    return absl::UnavailableError(
        Cat("provider script ", script_, " ", action, " ", how, tail.empty() ? "" : ": ", tail));
  }
  return stdout_text;
}

absl::Status ExecProvider::Create(const NodePool& pool, const std::vector<std::string>& nodes) {
  absl::StatusOr<std::string> out = Run("create", Describe(pool, nodes, join_, "create"));
  if (!out.ok()) return out.status();
  if (out->find_first_not_of(" \t\r\n") == std::string::npos) return absl::OkStatus();
  nlohmann::json j = nlohmann::json::parse(*out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
    return absl::InvalidArgumentError(
        Cat("provider script ", script_,
            " create: its output is not {\"nodes\": [...]}: ", out->substr(0, 200)));
  }
  size_t created = 0;
  for (const auto& n : j["nodes"]) {
    if (n.is_string() &&
        std::find(nodes.begin(), nodes.end(), n.get<std::string>()) != nodes.end()) {
      ++created;
    }
  }
  if (created < nodes.size()) {
    return absl::UnavailableError(
        Cat("provider script ", script_, " created ", created, " of ", nodes.size(), " nodes"));
  }
  return absl::OkStatus();
}

absl::Status ExecProvider::Delete(const NodePool& pool, const std::vector<std::string>& nodes) {
  return Run("delete", Describe(pool, nodes, join_, "delete")).status();
}

absl::StatusOr<std::unique_ptr<NodeProvider>> MakeNodeProvider(const NodePool& pool,
                                                               const LocalProviderOptions* local,
                                                               const JoinInfo& join) {
  const std::string& p = pool.spec.provider;
  if (p == "local") {
    if (local == nullptr) {
      return absl::InvalidArgumentError(
          Cat("pool ", pool.metadata.name, ": spec.provider local is not enabled on this server"));
    }
    return std::make_unique<LocalProvider>(*local);
  }
  if (p.starts_with("exec:")) {
    std::string script = p.substr(5);
    struct stat st {};
    if (script.empty() || stat(script.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        access(script.c_str(), X_OK) != 0) {
      return absl::InvalidArgumentError(Cat("pool ", pool.metadata.name, ": spec.provider: \"",
                                            script, "\" is not an executable file"));
    }
    return std::make_unique<ExecProvider>(std::move(script), join);
  }
  return absl::InvalidArgumentError(Cat("pool ", pool.metadata.name, ": spec.provider: \"", p,
                                        "\" is not static, local or exec:SCRIPT"));
}

}  // namespace gpucloud::server
