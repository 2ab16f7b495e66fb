#include "cli/interactive_commands.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <streambuf>
#include <thread>

#include "api/paths.h"
#include "api/session_wire.h"
#include "cli/cluster_commands.h"
#include "cli/exec_client.h"
#include "cli/gpuctl.h"
#include "cli/remote.h"
#include "core/text.h"
#include "manifest/json_yaml.h"
#include "manifest/manifest.h"

namespace gpucloud::cli {
namespace {

constexpr std::string_view kDefaultNs = "default";

// The exit code for a session that could not run the command: the remote one when it ran.
int ReportExec(const absl::StatusOr<api::ExecStatus>& s, const std::string& what,
               std::ostream& err) {
  if (!s.ok()) {
    err << "gpuctl " << what << ": " << s.status().message() << "\n";
    return kExitInvalid;
  }
  if (!s->error.empty()) err << "gpuctl " << what << ": " << s->error << "\n";
  return s->exit_code;
}

std::string RandomHex(std::random_device& rd, int bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < bytes; ++i) {
    unsigned b = rd() & 0xff;
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

// Whether nothing listens on 127.0.0.1:`port` (so that it can be taken).
bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// GET `path` on 127.0.0.1:`port` answers 200 within 5 s.
bool HttpOk(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = Cat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[64];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) answer.assign(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return answer.starts_with("HTTP/1.") && answer.find(" 200 ") != std::string::npos;
}

// Passes what is written to `to` once `open` is set, and drops what comes before: the refused
// connections of a notebook that does not listen yet are no news.
class GatedBuf : public std::streambuf {
 public:
  GatedBuf(std::ostream& to, const std::atomic<bool>& open) : to_(to), open_(open) {}

 protected:
  int overflow(int c) override {
    if (c != traits_type::eof() && open_) to_.put(static_cast<char>(c));
    return c == traits_type::eof() ? 0 : c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (open_) to_.write(s, n);
    return n;
  }
  int sync() override {
    if (open_) to_.flush();
    return 0;
  }

 private:
  std::ostream& to_;
  const std::atomic<bool>& open_;
};

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::optional<RemotePath> ParseRemotePath(const std::string& arg) {
  size_t colon = arg.find(':');
  size_t slash = arg.find('/');
  if (colon == std::string::npos || colon == 0 || (slash != std::string::npos && slash < colon)) {
    return std::nullopt;
  }
  return RemotePath{arg.substr(0, colon), arg.substr(colon + 1)};
}

namespace {

// Job `ns`/`name`'s status (api/job_status.h); NotFound with the server's message, the
// transport's error, or InvalidArgument naming a field the server wrote wrong.
absl::StatusOr<api::JobStatus> StatusOfJob(const api::Client& client, const std::string& ns,
                                           const std::string& name) {
  absl::StatusOr<api::HttpResponse> r = client.Call("GET", api::JobPath(ns, name));
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::NotFoundError(StatusMessage(*r));
  nlohmann::json job = nlohmann::json::parse(r->body, nullptr, false);
  if (!job.is_object()) return absl::InvalidArgumentError("the job's answer is not a JSON object");
  return api::JobStatusFromJson(job.value("status", nlohmann::json()));
}

}  // namespace

absl::StatusOr<api::JobPhase> PhaseOf(const api::Client& client, const std::string& ns,
                                      const std::string& name) {
  absl::StatusOr<api::JobStatus> status = StatusOfJob(client, ns, name);
  if (!status.ok()) return status.status();
  return status->phase;
}

absl::Status AwaitRunning(const api::Client& client, const std::string& ns, const std::string& name,
                          int timeout_s, std::ostream& err) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::string said;
  while (std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<api::JobStatus> status = StatusOfJob(client, ns, name);
    if (status.ok()) {
      const std::string_view phase = api::PhaseName(status->phase);
      if (status->phase == api::JobPhase::kRunning) return absl::OkStatus();
      if (api::IsTerminal(status->phase)) {
        return absl::FailedPreconditionError(
            Cat("job ", ns, "/", name, " is ", phase, ": ", status->message));
      }
      std::string why = Cat(phase, status->message.empty() ? "" : Cat(": ", status->message));
      if (why != said) {
        err << "waiting for job " << ns << "/" << name << " to start (" << why << ")\n";
        err.flush();
        said = why;
      }
    } else if (absl::IsNotFound(status.status()) || absl::IsInvalidArgument(status.status())) {
      return status.status();  // gone, or a status this gpuctl cannot read: waiting won't help
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return absl::DeadlineExceededError(
      Cat("job ", ns, "/", name, " did not start within ", timeout_s, " s"));
}

int ExecInteractive(const api::Client& client, const std::string& ns, const std::string& name,
                    const std::vector<std::string>& command, std::ostream& err) {
  ExecIo io;
  io.tty = true;
  io.stdin_fd = 0;
  io.on_stdout = [](std::string_view d) { WriteAll(1, d); };
  io.on_stderr = [](std::string_view d) { WriteAll(2, d); };
  return ReportExec(RunExec(client.config(), api::ExecPath(ns, name, 0, command, true, true), io),
                    "exec", err);
}

struct InteractiveCommands::Flags {
  CLI::App* exec = nullptr;
  CLI::App* forward = nullptr;
  CLI::App* cp = nullptr;
  CLI::App* notebook = nullptr;
  CLI::App* attach = nullptr;
  int gpus = 1, local_port = 0, start_timeout = 600;
  std::string type, image, name, idle_timeout = "1h", max_duration = "12h";
  bool remove = false;
  std::string ns = std::string(kDefaultNs), job, address = "127.0.0.1";
  int rank = 0;
  bool stdin = false, tty = false;
  std::vector<std::string> command, ports, cp_args;
};

InteractiveCommands::InteractiveCommands(CLI::App& app) : flags_(std::make_unique<Flags>()) {
  Flags& f = *flags_;
  f.exec = app.add_subcommand(
      "exec", "Run a command in a running task: exec JOB [-it] [--rank R] -- COMMAND ARGS");
  f.exec->add_option("job", f.job, "JOB")->required();
  f.exec->add_option("-n,--namespace", f.ns, "Namespace");
  f.exec->add_option("--rank", f.rank, "which task replica (default 0)")
      ->check(CLI::NonNegativeNumber);
  f.exec->add_flag("-i,--stdin", f.stdin, "pass stdin to the command");
  f.exec->add_flag("-t,--tty", f.tty, "a terminal (with -i: an interactive shell)");
  f.exec->add_option("command", f.command, "the command, after --")->required();
  f.forward = app.add_subcommand(
      "port-forward", "Forward local ports to a task's: port-forward JOB [LOCAL:]REMOTE...");
  f.forward->add_option("job", f.job, "JOB")->required();
  f.forward->add_option("ports", f.ports, "[LOCAL:]REMOTE, e.g. 8888 or 9000:6006")->required();
  f.forward->add_option("-n,--namespace", f.ns, "Namespace");
  f.forward->add_option("--rank", f.rank, "which task replica (default 0)")
      ->check(CLI::NonNegativeNumber);
  f.forward->add_option("--address", f.address, "local address to listen on (default 127.0.0.1)");
  f.cp = app.add_subcommand("cp", "Copy a file to or from a running task: cp JOB:/path ./local");
  f.cp->add_option("args", f.cp_args, "SRC DST (JOB:/path on one side)")->required()->expected(2);
  f.cp->add_option("-n,--namespace", f.ns, "Namespace");
  f.cp->add_option("--rank", f.rank, "which task replica (default 0)")
      ->check(CLI::NonNegativeNumber);
  // gpuctl's IAM commands have `attach policy ...`: `attach JOB` shares their verb.
  try {
    f.attach = app.get_subcommand("attach");
    f.attach->description(f.attach->get_description() + " | attach JOB [-i] [--rank R]");
  } catch (const CLI::OptionNotFound&) {
    f.attach = app.add_subcommand("attach", "attach JOB [-i] [--rank R]");
  }
  f.attach->add_option("job", f.job,
                       "JOB: follow its task's output and, with -i, send it this stdin");
  f.attach->add_option("-n,--namespace", f.ns, "Namespace");
  f.attach->add_option("--rank", f.rank, "which task replica (default 0)")
      ->check(CLI::NonNegativeNumber);
  f.attach->add_flag("-i,--stdin", f.stdin,
                     "send stdin to the task (an interactive job's tasks read one)");
  f.notebook = app.add_subcommand(
      "notebook", "Start Jupyter on GPUs and open it here: notebook [--gpus 1] [--image I]");
  f.notebook->add_option("--gpus", f.gpus, "GPUs (default 1)")->check(CLI::Range(0, 64));
  f.notebook->add_option("--type", f.type, "GPU type, e.g. v100 or H100-80GB");
  f.notebook->add_option("--image", f.image, "container image with Jupyter (default: the node's)");
  f.notebook->add_option("--name", f.name, "job name (default: nb-XXXXXX)");
  f.notebook->add_option("-n,--namespace", f.ns, "Namespace");
  f.notebook->add_option("--port", f.local_port, "local port (default 8888, or any free one)")
      ->check(CLI::Range(0, 65535));
  f.notebook->add_option("--idle-timeout", f.idle_timeout,
                         "stop the job after this long unused (default 1h)");
  f.notebook->add_option("--max-duration", f.max_duration, "stop it after this long (12h)");
  f.notebook->add_option("--start-timeout", f.start_timeout, "seconds to wait for a start")
      ->check(CLI::PositiveNumber);
  f.notebook->add_flag("--rm", f.remove, "delete the job when gpuctl ends");
}

InteractiveCommands::~InteractiveCommands() = default;

bool InteractiveCommands::parsed() const {
  return flags_->exec->parsed() || flags_->forward->parsed() || flags_->cp->parsed() ||
         flags_->notebook->parsed() || (flags_->attach->parsed() && !flags_->job.empty());
}

int InteractiveCommands::Attach(const api::Client& client, std::ostream& err) {
  Flags& f = *flags_;
  absl::StatusOr<api::JobPhase> phase = PhaseOf(client, f.ns, f.job);
  if (!phase.ok() || *phase != api::JobPhase::kRunning) {
    err << "gpuctl attach: "
        << (phase.ok() ? Cat("job ", f.ns, "/", f.job, " is ", api::PhaseName(*phase),
                             ": attach needs a running task")
                       : std::string(phase.status().message()))
        << "\n";
    return kExitInvalid;
  }
  // The output: the task's log from now on, followed through the server on a thread of its own
  // (a client of its own: api::Client is not shared between threads). It ends with the job.
  struct Follow {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto follow = std::make_shared<Follow>();
  LogsOptions logs{.job = f.job, .ns = f.ns, .rank = f.rank, .follow = true, .tail = 0};
  const absl::StatusOr<std::string> logs_path = LogsTarget(logs);
  std::thread([config = client.config(), path = logs_path.value_or(""), follow] {
    api::Client mine(config);
    if (!path.empty()) {
      (void)mine.Stream(path, [](const std::string& line) { WriteAll(1, line + "\n"); });
    }
    std::lock_guard lock(follow->mu);
    follow->done = true;
    follow->cv.notify_all();
  }).detach();
  int code = kExitOk;
  if (f.stdin) {
    ExecIo io;
    io.stdin_fd = 0;
    io.on_stderr = [](std::string_view d) { WriteAll(2, d); };
    absl::StatusOr<api::ExecStatus> s =
        RunExec(client.config(), api::AttachPath(f.ns, f.job, f.rank), io);
    if (s.ok() && !s->error.empty()) {  // the agent could not attach
      err << "gpuctl attach: " << s->error << "\n";
      return kExitInvalid;
    }
    if (!s.ok() && !absl::IsUnavailable(s.status())) {
      err << "gpuctl attach: " << s.status().message() << "\n";
      return kExitInvalid;
    }
    // The session closes when the task ends (the job follows within moments); otherwise it was
    // lost.
    api::JobPhase now = api::JobPhase::kRunning;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         now == api::JobPhase::kRunning && std::chrono::steady_clock::now() < until;) {
      absl::StatusOr<api::JobPhase> p = PhaseOf(client, f.ns, f.job);
      if (!p.ok()) break;
      now = *p;
      if (now == api::JobPhase::kRunning)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (now == api::JobPhase::kRunning) {
      err << "gpuctl attach: the session was lost; the task still runs\n";
      code = kExitInvalid;
    }
  }
  // The last of the output: the log stream ends once the job has (a few seconds at most).
  std::unique_lock lock(follow->mu);
  if (f.stdin) {
    follow->cv.wait_for(lock, std::chrono::seconds(5), [&] { return follow->done; });
  } else {
    follow->cv.wait(lock, [&] { return follow->done; });
  }
  return code;
}

int InteractiveCommands::Notebook(const std::string& config_flag, std::ostream& out,
                                  std::ostream& err) {
  Flags& f = *flags_;
  std::random_device rd;
  const std::string name = f.name.empty() ? Cat("nb-", RandomHex(rd, 3)) : f.name;
  if (!NamesAreLabels({{"namespace", f.ns}, {"--name", name}}, err)) return kExitUsage;
  const std::string token = RandomHex(rd, 24);
  // The task's port, on its node's network: below the master ports (20000-39999) and Linux's
  // ephemeral ports (32768-60999 by default), where outgoing connections take theirs, and above
  // inference services' replicas (10000-17999).
  const int remote = 18000 + static_cast<int>(rd() % 2000);
  nlohmann::ordered_json task = {{"name", "notebook"},
                                 {"command",
                                  {"jupyter", "notebook", "--no-browser", "--ip=127.0.0.1",
                                   Cat("--port=", remote), "--port-retries=0", "--allow-root"}},
                                 // Jupyter reads its token from here (notebook 6 and 7 alike).
                                 {"env", {{{"name", "JUPYTER_TOKEN"}, {"value", token}}}}};
  if (!f.image.empty()) task["image"] = f.image;
  nlohmann::ordered_json gpu = {{"count", f.gpus}};
  if (!f.type.empty()) gpu["type"] = f.type;
  if (f.gpus > 0) task["resources"] = {{"gpu", gpu}};
  nlohmann::ordered_json job = {
      {"apiVersion", "gpucloud/v1"},
      {"kind", "Job"},
      {"metadata",
       {{"name", name}, {"namespace", f.ns}, {"labels", {{"gpucloud/notebook", "true"}}}}},
      {"spec",
       {{"interactive", {{"idleTimeout", f.idle_timeout}, {"maxDuration", f.max_duration}}},
        {"tasks", nlohmann::ordered_json::array({task})}}}};
  manifest::ParseResult parsed = manifest::ParseManifests(job.dump(), "gpuctl notebook");
  if (!parsed.ok()) {
    for (const manifest::Diagnostic& d : parsed.errors)
      err << "gpuctl notebook: " << d.message << "\n";
    return kExitUsage;
  }
  std::optional<api::Client> client = Connect(config_flag, err);
  if (!client) return kExitInvalid;
  const manifest::Object& object = parsed.manifests[0].object;
  if (!Send(*client, "POST", api::ObjectPath(object, /*collection=*/true), manifest::ToYaml(object),
            err, "notebook: ")) {
    return kExitInvalid;
  }
  err << "job " << f.ns << "/" << name << " created: Jupyter on " << f.gpus << " GPU(s)\n";
  int code = kExitOk;
  if (absl::Status s = AwaitRunning(*client, f.ns, name, f.start_timeout, err); !s.ok()) {
    err << "gpuctl notebook: " << s.message() << "\n";
    code = kExitInvalid;
  } else {
    code = ForwardNotebook(client->config(), name, remote, token, out, err);
  }
  if (f.remove) {
    if (Send(*client, "DELETE", api::JobPath(f.ns, name), "", err)) {
      err << "job " << f.ns << "/" << name << " deleted\n";
    }
  } else {
    err << "the notebook keeps running until idle for " << f.idle_timeout
        << ": gpuctl port-forward " << name << " " << (f.local_port > 0 ? f.local_port : 8888)
        << ":" << remote << " to open it again, gpuctl delete job " << name << " to end it\n";
  }
  return code;
}

int InteractiveCommands::ForwardNotebook(const api::ClientConfig& config, const std::string& name,
                                         int remote, const std::string& token, std::ostream& out,
                                         std::ostream& err) {
  Flags& f = *flags_;
  int local = f.local_port;
  if (local == 0) local = PortFree(8888) ? 8888 : 0;
  std::atomic<bool> done{false}, answered{false};
  GatedBuf gated_buf(err, answered);
  std::ostream gated(&gated_buf);
  std::thread probe;
  auto ready = [&](const std::vector<int>& ports) {
    const int port = ports.at(0);
    probe = std::thread([&, port] {
      // Jupyter answers GET /api without a token once it listens.
      for (auto until = std::chrono::steady_clock::now() + std::chrono::minutes(3);
           !done && std::chrono::steady_clock::now() < until;
           std::this_thread::sleep_for(std::chrono::milliseconds(250))) {
        if (!HttpOk(port, "/api")) continue;
        answered = true;
        out << "Jupyter is ready: http://127.0.0.1:" << port << "/?token=" << token << "\n"
            << "(Ctrl-C stops forwarding)\n";
        out.flush();
        return;
      }
      if (!done) {
        err << "gpuctl notebook: Jupyter did not answer within 3 minutes (is it in the image? "
               "gpuctl logs "
            << name << ")\n";
      }
    });
  };
  auto target_of = [&](int port) { return api::PortForwardPath(f.ns, name, 0, port); };
  absl::Status s = PortForward(config, "127.0.0.1", {ForwardSpec{local, remote}}, target_of, ready,
                               nullptr, /*handle_signals=*/true, gated);
  done = true;
  if (probe.joinable()) probe.join();
  if (!s.ok()) {
    err << "gpuctl notebook: " << s.message() << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

int InteractiveCommands::Run(const std::string& config_flag, std::ostream& out, std::ostream& err) {
  Flags& f = *flags_;
  if (f.notebook->parsed()) return Notebook(config_flag, out, err);
  std::vector<std::pair<std::string_view, std::string>> named = {{"namespace", f.ns}};
  std::optional<RemotePath> from, to;
  if (f.cp->parsed()) {
    from = ParseRemotePath(f.cp_args[0]);
    to = ParseRemotePath(f.cp_args[1]);
    if (from.has_value() == to.has_value()) {
      err << "gpuctl cp: give one side as JOB:/path and the other as a local path\n";
      return kExitUsage;
    }
    f.job = from ? from->job : to->job;
  }
  named.emplace_back("JOB", f.job);
  if (!NamesAreLabels(named, err)) return kExitUsage;
  std::vector<ForwardSpec> specs;
  for (const std::string& p : f.ports) {
    absl::StatusOr<ForwardSpec> s = ParseForwardSpec(p);
    if (!s.ok()) {
      err << "gpuctl port-forward: " << s.status().message() << "\n";
      return kExitUsage;
    }
    specs.push_back(*s);
  }
  std::optional<api::Client> client = Connect(config_flag, err);
  if (!client) return kExitInvalid;
  const api::ClientConfig& config = client->config();
  if (f.attach->parsed()) return Attach(*client, err);
  if (f.exec->parsed()) {
    ExecIo io;
    io.tty = f.tty;
    io.stdin_fd = f.stdin ? 0 : -1;
    io.on_stdout = [](std::string_view d) { WriteAll(1, d); };
    io.on_stderr = [](std::string_view d) { WriteAll(2, d); };
    out.flush();
    const std::string target = api::ExecPath(f.ns, f.job, f.rank, f.command, f.tty, f.stdin);
    return ReportExec(RunExec(config, target, io), "exec", err);
  }
  if (f.forward->parsed()) {
    auto target_of = [&](int remote) { return api::PortForwardPath(f.ns, f.job, f.rank, remote); };
    auto ready = [&](const std::vector<int>& ports) {
      for (size_t i = 0; i < ports.size(); ++i) {
        out << "Forwarding from " << f.address << ":" << ports[i] << " -> " << specs[i].remote
            << "\n";
      }
      out.flush();
    };
    absl::Status s = PortForward(config, f.address, specs, target_of, ready, nullptr,
                                 /*handle_signals=*/true, err);
    if (!s.ok()) {
      err << "gpuctl port-forward: " << s.message() << "\n";
      return kExitInvalid;
    }
    return kExitOk;
  }
  // cp: `cat` the file out, or into it (the task needs cat and sh, as kubectl cp needs tar).
  ExecIo io;
  std::string received, errors;
  io.on_stderr = [&](std::string_view d) { errors.append(d); };
  std::string target;
  if (from) {
    io.on_stdout = [&](std::string_view d) { received.append(d); };
    target = api::ExecPath(f.ns, f.job, f.rank, {"cat", "--", from->path}, false, false);
  } else {
    std::ifstream file(f.cp_args[0], std::ios::binary);
    if (!file) {
      err << "gpuctl cp: cannot read " << f.cp_args[0] << "\n";
      return kExitInvalid;
    }
    io.input.assign(std::istreambuf_iterator<char>(file), {});
    io.send_input = true;
    target = api::ExecPath(f.ns, f.job, f.rank, {"sh", "-c", "cat > \"$1\"", "sh", to->path}, false,
                           true);
  }
  absl::StatusOr<api::ExecStatus> s = RunExec(config, target, io);
  if (s.ok() && s->exit_code != 0 && s->error.empty()) {
    while (!errors.empty() && errors.back() == '\n') errors.pop_back();
    err << "gpuctl cp: " << (errors.empty() ? Cat("exit code ", s->exit_code) : errors) << "\n";
    return kExitInvalid;
  }
  if (int code = ReportExec(s, "cp", err); code != 0) return kExitInvalid;
  if (from) {
    const std::string tmp = f.cp_args[1] + ".gpuctl-partial";
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file.write(received.data(), static_cast<std::streamsize>(received.size()));
    file.close();
    if (!file || std::rename(tmp.c_str(), f.cp_args[1].c_str()) != 0) {
      std::remove(tmp.c_str());
      err << "gpuctl cp: cannot write " << f.cp_args[1] << "\n";
      return kExitInvalid;
    }
  }
  return kExitOk;
}

}  // namespace gpucloud::cli
