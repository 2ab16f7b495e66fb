#include "agent/node_agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "agent/assignment_events.h"
#include "agent/cdi.h"
#include "agent/checkpoints.h"
#include "agent/executor.h"
#include "agent/exit_watcher.h"
#include "agent/exporter.h"
#include "agent/health.h"
#include "agent/heartbeat_reports.h"
#include "agent/log_shipping.h"
#include "agent/node_identity.h"
#include "agent/sandbox.h"
#include "agent/task_env.h"
#include "agent/task_launch.h"
#include "agent/task_secrets.h"
#include "agent/task_times.h"
#include "api/wire.h"
#include "core/log.h"
#include "core/private_file.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The image puller's: the node's runtime options, with a private directory in the state
// directory for the credentials of pulls with a job's pull secrets and the record of images
// only such credentials pulled (container.h, ImagePuller).
ContainerRuntimeOptions PullerOptions(const NodeAgentOptions& o) {
  ContainerRuntimeOptions c = o.container;
  c.private_dir = Cat(o.state_dir, "/pull");  // made owner-only by PrepareStateDir at start
  c.image_scopes_file = Cat(c.private_dir, "/private-images.json");
  return c;
}

LaunchPolicy PolicyOf(const NodeAgentOptions& o) {
  LaunchPolicy p;
  p.allow_host_processes = o.allow_host_processes;
  p.allow_root = o.allow_root_tasks;
  p.switch_users = geteuid() == 0;
  p.agent_uid = geteuid();
  p.agent_gid = getegid();
  p.operator_workdir = o.workdir.empty() ? "" : fs::absolute(o.workdir).lexically_normal().string();
  p.pids_max = o.task_pids_max;
  p.runtime = o.container;
  FitUlimitsToHost(p.runtime);
  return p;
}

// Tasks started in one reconcile pass at most (a fork each): the rest follow in the next passes.
constexpr int kMaxStartsPerPass = 32;
constexpr LogLimits kLogLimits;

struct ProcStat {
  char state = '?';
  uint64_t start_time = 0;  // clock ticks after boot: with the pid, names one process for good
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream f(Cat("/proc/", pid, "/stat"));
  std::string text;
  if (!std::getline(f, text)) return std::nullopt;
  size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos || text.size() < close + 3) return std::nullopt;
  std::istringstream in(text.substr(close + 2));
  ProcStat st;
  std::string field;
  // Fields after the name start at 3 (state); starttime is field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 3) st.state = field[0];
  }
  st.start_time = std::stoull(field);
  return st;
}

// The process is still the one recorded (not a reused pid) and not a zombie.
bool Alive(pid_t pid, uint64_t start_time) {
  if (pid <= 0) return false;
  std::optional<ProcStat> st = ReadProcStat(pid);
  return st && st->start_time == start_time && st->state != 'Z';
}

std::string HostName() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

Json ReportToJson(const api::TaskReport& r) {
  Json j{{"state", api::TaskStateName(r.state)},
         {"exitCode", r.exit_code},
         {"signal", r.signal},
         {"oomKilled", r.oom_killed},
         {"message", r.message}};
  if (r.started_ms) j["startedMs"] = r.started_ms;
  if (r.finished_ms) j["finishedMs"] = r.finished_ms;
  return j;
}

}  // namespace

struct NodeAgent::Impl {
  struct Local {
    api::Assignment a;
    std::string exec_id;
    api::TaskReport report;
    bool in_executor = false;
    pid_t adopted_pid = 0;
    uint64_t adopted_start = 0;
    int adopted_pidfd = -1;  // a re-adopted task watched through a pidfd (-1: polled)
    bool stopping = false;
    absl::Time kill_at = absl::InfiniteFuture();
    std::optional<absl::Time> ended_at;
    std::string log_path;
    std::string checkpoint_dir;  // where the task writes them (node-local or the job's)
    absl::Time checkpoint_scanned = absl::InfinitePast();
    LogCursor log;
    absl::Time log_retry_at = absl::InfinitePast();  // over quota: the next chunk not before
    LaunchPlan plan;
    bool waiting_image = false;  // a container whose image is not on the node yet
    // Its secret references' values are not here yet (task_secrets.h): asked for again at
    // secrets_retry_at. Once here, they are in `secrets` (memory only, never in its record).
    bool waiting_secrets = false;
    int secret_failures = 0;
    absl::Time secrets_retry_at = absl::InfinitePast();
    std::optional<api::TaskSecrets> secrets;
    std::string container_name;  // "" for a host process
    bool assigned = true;        // its assignment (job uid and attempt) is still there
    // Its report as the server last acknowledged it (heartbeat_reports.h).
    std::optional<api::TaskReport> acknowledged;
  };

  api::Client client;
  api::Client watch_client;
  const api::ClientConfig bootstrap_config;  // as given: the bootstrap token's, or a certificate
  NodeCertificateInfo credential;            // the node certificate the clients present
  absl::Time renew_retry_at = absl::InfinitePast();
  GpuBackend& backend;
  const Clock& clock;  // every decision's time (deadlines, back-offs, reports); never waits
  NodeAgentOptions o;
  std::mutex mu;
  std::condition_variable wake;
  bool exited = false;  // guarded by mu: a task ended (ExitWatcher), poll the tasks now
  // Declared before the executor and after what its callback touches (destroyed in reverse).
  ExitWatcher exits{[this] { OnExit(); }};
  Executor exec{&exits};
  LaunchPolicy launch_policy;
  ImagePuller puller;
  absl::Time collected_at;  // the last image collection (the constructor's now at first)
  bool pulled_since_gc = false;
  std::map<std::string, int64_t> image_last_used;  // image -> unix s of its last pull or start
  std::map<std::string, int> pulls_logged;         // image -> ImagePuller::State::pulls logged
  std::set<std::string> pre_pulled;                // the operator's prePull images, once each
  std::atomic<bool> stop{false};

  std::map<std::string, api::Assignment> desired;  // guarded by mu
  bool desired_known = false;                      // guarded by mu: listed at least once
  bool dirty = false;                              // guarded by mu

  std::map<std::string, Local> tasks;  // the main loop's
  std::thread watcher;
  std::string cwd;
  std::map<std::string, absl::Time> arrived;  // guarded by mu: "name/attempt" -> when it came
  HealthMonitor health;                       // the main loop's
  CheckpointReplicator replicator;
  int gpu_count = 0;
  std::optional<int64_t> health_reset_seen;  // the server's reset generation, once heard

  // What /metrics shows, from the main loop's samples.
  mutable std::mutex metrics_mu;
  NodeGpus discovered;                  // guarded by metrics_mu
  std::vector<GpuSample> last_samples;  // guarded by metrics_mu
  std::multimap<int, GpuOwner> owners;  // guarded by metrics_mu
  // guarded by metrics_mu; health's, for /metrics, from the first heartbeat on
  std::optional<std::map<int, GpuCondition>> shown_health;
  struct Energy {
    std::string ns, job, task;
    int rank = 0, attempt = 0;
    double joules = 0;
  };
  std::map<std::string, Energy> energy;  // guarded by metrics_mu; by exec id

  Impl(api::ClientConfig server, GpuBackend& b, const Clock& c, NodeAgentOptions opts)
      : client(server),
        watch_client(server),
        bootstrap_config(server),
        backend(b),
        clock(c),
        o(std::move(opts)),
        launch_policy(PolicyOf(o)),
        puller(PullerOptions(o)) {
    if (o.node_name.empty()) o.node_name = ToLower(HostName());
    if (o.address.empty()) o.address = HostName();
    cwd = fs::current_path().string();
    collected_at = Now();
  }

  // The injected clock's now: what every time-dependent decision reads (waits use real time).
  absl::Time Now() const { return absl::FromUnixMillis(clock.NowMillis()); }

  void Log(const std::string& line, log::Level level = log::Level::kInfo) {
    log::Write(level, "agent", line, {{"node", o.node_name}});
  }

  // On the exit watcher's thread: a task (or a re-adopted process) ended.
  void OnExit() {
    {
      std::lock_guard lock(mu);
      exited = true;
    }
    wake.notify_all();
  }

  // What heartbeat_reports.h decides from, for one task.
  static ReportedTask Reported(const Local& t, absl::Time now) {
    ReportedTask v;
    v.ended = t.ended_at.has_value();
    v.assigned = t.assigned;
    v.acknowledged = t.acknowledged && *t.acknowledged == t.report;
    v.since_end = v.ended ? now - *t.ended_at : absl::ZeroDuration();
    return v;
  }

  // Everything the task wrote is on the server (or given up).
  static bool LogShipped(const Local& t) {
    if (t.log.gone || t.log_path.empty()) return true;
    struct stat st;
    return t.log.dropped == 0 &&
           (stat(t.log_path.c_str(), &st) != 0 || st.st_size <= t.log.read_pos);
  }

  // Sleeps up to `d`; returns false when stopping.
  bool Sleep(absl::Duration d) {
    std::unique_lock lock(mu);
    wake.wait_for(lock, absl::ToChronoMilliseconds(d), [this] { return stop.load(); });
    return !stop;
  }

  // --- registration --------------------------------------------------------------------------

  absl::StatusOr<std::string> RegistrationBody() {
    absl::StatusOr<NodeGpus> found = backend.Discover();
    if (!found.ok()) return found.status();
    api::NodeInfo n;
    n.name = o.node_name;
    n.labels = o.labels;
    n.pool = o.pool;
    n.address = o.address;
    n.hostname = HostName();
    n.cpu_milli = o.cpu_milli ? o.cpu_milli : sysconf(_SC_NPROCESSORS_ONLN) * 1000L;
    n.max_tasks = o.max_tasks;
    n.memory_mib = o.memory_mib ? o.memory_mib
                                : static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                                      sysconf(_SC_PAGE_SIZE) / (1 << 20);
    n.backend = found->backend;
    n.driver_version = found->driver_version;
    n.cuda_version = found->cuda_driver_version;
    for (const GpuDevice& d : found->gpus) {
      Gpu g;
      g.uuid = d.uuid;
      g.index = d.index;
      g.type = d.catalog_type.empty() ? Cat("generic-", d.name) : d.catalog_type;
      g.memory = d.memory;
      g.pci_bus_id = d.pci_bus_id;
      g.mig_enabled = d.mig_enabled;
      g.mig_layout = d.mig_layout;
      g.nvlink_island = d.nvlink_island;
      n.gpus.push_back(std::move(g));
    }
    n.gpu_topology = found->topology;
    return api::NodeToJson(n, false);
  }

  // --- the node's certificate (node_identity.h) ---------------------------------------------

  // Authenticates with the node certificate in the state directory when it is this node's and
  // has not expired; else asks for one with the bootstrap token, again and again (the server may
  // be down, or refuse while another agent holds the name). False when stopping.
  bool EnsureCredential() {
    if (bootstrap_config.token.empty()) return true;  // a certificate was configured: use it
    const std::string path = NodeCredentialPath(o.state_dir);
    absl::Duration backoff = absl::Milliseconds(200);
    while (!stop) {
      absl::StatusOr<NodeCertificateInfo> have = ReadNodeCredential(path);
      if (have.ok() && have->common_name == Cat("node:", o.node_name) &&
          have->not_after > Now() + absl::Minutes(1)) {
        UseCredential(*have);
        return true;
      }
      absl::StatusOr<NodeCertificateInfo> got =
          RequestNodeCertificate(api::Client(bootstrap_config), o.node_name, path);
      if (got.ok()) {
        Log("joined with the bootstrap token");
        UseCredential(*got);
        return true;
      }
      Log(Cat("cannot get a node certificate: ", got.status().message()));
      if (!Sleep(backoff)) return false;
      backoff = std::min(backoff * 2, absl::Seconds(8));
    }
    return false;
  }

  void UseCredential(const NodeCertificateInfo& info) {
    const api::ClientConfig c =
        WithNodeCredential(bootstrap_config, NodeCredentialPath(o.state_dir));
    client.SetConfig(c);
    watch_client.SetConfig(c);
    credential = info;
    Log(Cat("authenticating as ", info.common_name, " (certificate valid until ",
            absl::FormatTime(info.not_after), ")"));
  }

  // Renews the certificate with itself once two thirds of its life are gone (retrying each
  // minute); one that expired regardless (the server was away) is asked for again with the
  // bootstrap token. The clients pick up the new file on their next connection.
  void MaybeRenewCredential() {
    const absl::Time now = Now();
    if (bootstrap_config.token.empty() || now < renew_retry_at ||
        !RenewalDue(credential.not_before, credential.not_after, now)) {
      return;
    }
    const std::string path = NodeCredentialPath(o.state_dir);
    const bool expired = now >= credential.not_after;
    absl::StatusOr<NodeCertificateInfo> got =
        RequestNodeCertificate(expired ? api::Client(bootstrap_config) : client, o.node_name, path);
    if (!got.ok()) {
      Log(Cat("cannot renew the node certificate: ", got.status().message()));
      renew_retry_at = now + absl::Minutes(1);
      return;
    }
    credential = *got;
    Log(Cat("renewed the node certificate (valid until ", absl::FormatTime(got->not_after), ")"));
  }

  bool Register() {
    absl::Duration backoff = absl::Milliseconds(200);
    while (!stop) {
      absl::StatusOr<std::string> body = RegistrationBody();
      if (!body.ok()) {
        Log(Cat("discovery failed: ", body.status().message()));
      } else {
        absl::StatusOr<api::HttpResponse> r = client.Call("PUT", api::NodePath(o.node_name), *body);
        if (r.ok() && (r->status == 200 || r->status == 201)) {
          Log(Cat("registered with ", client.config().host, ":", client.config().port));
          return true;
        }
        Log(Cat("registration failed: ", r.ok() ? Cat("HTTP ", r->status, " ", r->body)
                                                : std::string(r.status().message())));
      }
      if (!Sleep(backoff)) return false;
      backoff = std::min(backoff * 2, absl::Seconds(8));
    }
    return false;
  }

  // --- assignments (watcher thread) ----------------------------------------------------------

  void Watch() {
    absl::Duration backoff = absl::Milliseconds(200);
    while (!stop) {
      absl::StatusOr<api::HttpResponse> list =
          watch_client.Call("GET", api::AssignmentsPath(o.node_name));
      int64_t rev = 0;
      if (list.ok() && list->status == 200) {
        Json j = Json::parse(list->body, nullptr, false);
        std::map<std::string, api::Assignment> items;
        if (j.is_object() && j.contains("items")) {
          for (const Json& item : j["items"]) {
            absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(item.dump());
            if (a.ok()) {
              items[a->name] = std::move(*a);
            } else {
              Log(Cat("ignoring a bad assignment: ", a.status().message()));
            }
          }
          if (j["metadata"].is_object() && j["metadata"]["resourceVersion"].is_string()) {
            rev = ParseRevision(j["metadata"]["resourceVersion"].get<std::string>());
          }
        }
        {
          std::lock_guard lock(mu);
          for (const auto& [name, a] : items) arrived.try_emplace(Cat(name, "/", a.attempt), Now());
          desired = std::move(items);
          desired_known = true;
          dirty = true;
        }
        wake.notify_all();
        backoff = absl::Milliseconds(200);
      } else {
        if (!Sleep(backoff)) return;
        backoff = std::min(backoff * 2, absl::Seconds(8));
        continue;
      }
      // Watch from the list's revision until the stream fails; then list again.
      while (!stop) {
        bool expired = false;
        auto on_line = [&](const std::string& line) {
          AssignmentEvent e = ParseAssignmentEvent(line);
          if (e.type == AssignmentEvent::Type::kIgnored) return;
          rev = std::max(rev, e.revision);
          if (e.type == AssignmentEvent::Type::kBookmark) return;
          if (e.type == AssignmentEvent::Type::kPut && !e.assignment) {
            Log(Cat("ignoring a bad assignment: ", e.error));
            return;
          }
          std::lock_guard lock(mu);
          if (e.type == AssignmentEvent::Type::kDeleted) {
            desired.erase(e.name);
          } else {
            arrived.try_emplace(Cat(e.assignment->name, "/", e.assignment->attempt), Now());
            desired[e.assignment->name] = std::move(*e.assignment);
          }
          dirty = true;
          wake.notify_all();
        };
        absl::StatusOr<api::HttpResponse> r = watch_client.Stream(
            Cat(api::AssignmentsPath(o.node_name),
                "?watch=true&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion=", rev),
            on_line, 15, &stop);
        if (r.ok() && r->status == 200) continue;  // the server ended it after its timeout
        expired = r.ok() && r->status == 410;
        if (!expired) Sleep(backoff);
        break;
      }
    }
  }

  // --- tasks (main loop) ---------------------------------------------------------------------

  std::string RecordPath(const std::string& exec_id) const {
    return Cat(o.state_dir, "/tasks/", exec_id, ".json");
  }

  void SaveRecord(const Local& t) {
    Json j{{"assignment", Json::parse(api::AssignmentToJson(t.a))},
           {"pid", t.in_executor ? exec.Pid(t.exec_id) : t.adopted_pid},
           {"startTime", 0},
           {"report", ReportToJson(t.report)},
           {"logPath", t.log_path},
           {"container", t.container_name},
           {"logShipped", t.log.shipped},
           {"logReadPos", t.log.read_pos}};
    pid_t pid = j["pid"].get<pid_t>();
    if (pid > 0) {
      std::optional<ProcStat> st = ReadProcStat(pid);
      j["startTime"] = st ? st->start_time : 0;
    }
    std::error_code ec;
    fs::create_directories(Cat(o.state_dir, "/tasks"), ec);
    if (absl::Status s = WritePrivateFile(RecordPath(t.exec_id), j.dump()); !s.ok()) {
      Log(Cat("task ", t.a.name, ": its record is not saved: ", s.message()));
    }
  }

  // Tasks a previous agent left: re-adopted when still running, else reported lost (or as they
  // ended, when that was recorded).
  void LoadRecords() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(Cat(o.state_dir, "/tasks"), ec)) {
      if (e.path().extension() != ".json") continue;
      std::ifstream f(e.path());
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      Json j = Json::parse(text, nullptr, false);
      if (!j.is_object() || !j.contains("assignment")) continue;
      absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(j["assignment"].dump());
      if (!a.ok()) continue;
      Local t;
      t.a = *a;
      t.exec_id = e.path().stem().string();
      t.report = {a->name, a->job_uid, a->attempt, api::TaskState::kLost, -1, 0, false, ""};
      t.log_path = j.value("logPath", "");
      t.container_name = j.value("container", "");
      t.log.shipped = j.value("logShipped", 0);
      t.log.read_pos = j.value("logReadPos", 0);
      const Json& rep = j["report"];
      std::string state = rep.is_object() ? rep.value("state", "") : "";
      pid_t pid = j.value("pid", 0);
      uint64_t start = j.value("startTime", uint64_t{0});
      if (state == "Starting" && pid == 0) {
        // It waited for its image and never ran: it starts again from its assignment.
        fs::remove(e.path(), ec);
        continue;
      }
      if (rep.is_object()) {
        t.report.started_ms = rep.value("startedMs", int64_t{0});
        t.report.finished_ms = rep.value("finishedMs", int64_t{0});
      }
      if (state != "Running" && state != "Starting" && !state.empty()) {
        for (api::TaskState s : {api::TaskState::kSucceeded, api::TaskState::kFailed,
                                 api::TaskState::kStopped, api::TaskState::kLost}) {
          if (api::TaskStateName(s) == state) t.report.state = s;
        }
        t.report.exit_code = rep.value("exitCode", -1);
        t.report.signal = rep.value("signal", 0);
        t.report.message = rep.value("message", "");
        t.ended_at = Now();
      } else if (Alive(pid, start)) {
        t.adopted_pid = pid;
        t.adopted_start = start;
        // Watched through a pidfd where there are pidfds (opened, then checked to be still the
        // same process, so a reused pid is not watched); else polled on the tick.
        t.adopted_pidfd = OpenPidFd(pid);
        if (t.adopted_pidfd >= 0 && !(Alive(pid, start) && exits.Add(t.adopted_pidfd))) {
          close(t.adopted_pidfd);
          t.adopted_pidfd = -1;
        }
        t.report.state = api::TaskState::kRunning;
        Log(Cat("re-adopted task ", t.a.name, " (attempt ", t.a.attempt, ", pid ", pid, ")"));
      } else if (std::optional<TaskExit> e = ReadExitStatus(StatusPath(t))) {
        Ended(t, *e);
        t.ended_at = Now();
        t.report.finished_ms =
            TaskEndedMs(StatusPath(t), t.report.started_ms, absl::ToUnixMillis(*t.ended_at));
        Log(Cat("task ", t.a.name, " ended while the agent was away: ", t.report.message));
      } else {
        t.report.message = "it ended while the agent was away; its exit status is unknown";
        t.ended_at = Now();
        t.report.finished_ms = absl::ToUnixMillis(*t.ended_at);
        Log(Cat("task ", t.a.name, " was lost while the agent was away"));
        if (!t.container_name.empty()) RemoveContainer(t);  // its podman run was killed
      }
      SetCheckpointDir(t);
      tasks[a->name] = std::move(t);
      SaveRecord(tasks[a->name]);
    }
  }

  // The agent's own directory for a task (0700 under STATE_DIR/run): its exit file, its
  // Volcano files.
  std::string RunDir(const Local& t) const { return Cat(o.state_dir, "/run/", t.exec_id); }

  // Where the task's shim writes how it ended (TaskSpecToRun::status_path).
  std::string StatusPath(const Local& t) const { return RunDir(t) + "/exit"; }

  // A task's exit: a container's read through Podman's codes, and the container removed should
  // its `podman run` have been killed (the container lives on in conmon, outside the group).
  void Ended(Local& t, TaskExit e) {
    if (t.container_name.empty()) {
      SetExit(t, e);
      return;
    }
    e = ContainerExit(e);
    if (t.stopping || e.signal != 0) RemoveContainer(t);
    SetExit(t, e);
    t.report.message = DescribeContainerExit(e);
  }

  void RemoveContainer(const Local& t) {
    std::string out;
    if (RunCaptured(PodmanRemoveArgv(o.container, t.container_name), &out) != 0) {
      Log(Cat("task ", t.a.name, ": cannot remove container ", t.container_name, ": ",
              PullErrorReason(out)));
    }
  }

  void SetExit(Local& t, TaskExit e) {
    e.stopped = t.stopping;
    t.report.exit_code = e.exit_code;
    t.report.signal = e.signal;
    t.report.oom_killed = e.oom_killed;
    t.report.message = e.Describe();
    t.report.state = t.stopping                          ? api::TaskState::kStopped
                     : e.exit_code == 0 && e.signal == 0 ? api::TaskState::kSucceeded
                                                         : api::TaskState::kFailed;
  }

  // The task's checkpoint directory: the job's, or with nodeLocal one on this node, replicated
  // to the job's when asked.
  void SetCheckpointDir(Local& t) {
    const api::Assignment& a = t.a;
    if (!a.checkpoint_node_local) {
      t.checkpoint_dir = a.checkpoint_dir;
      return;
    }
    t.checkpoint_dir = Cat(o.state_dir, "/checkpoints/", a.namespace_, "/", a.job);
    if (a.checkpoint_replicate && !a.checkpoint_dir.empty()) {
      replicator.Track(t.exec_id, t.checkpoint_dir, a.checkpoint_dir);
    }
  }

  // The CUDA device of a MIG instance (its "MIG-..." UUID), from discovery.
  std::string MigUuid(const api::AssignedGpu& g) {
    std::lock_guard lock(metrics_mu);
    if (g.index >= 0 && g.index < static_cast<int>(discovered.gpus.size())) {
      const auto& by_start = discovered.gpus[g.index].mig_uuid_by_start;
      if (auto it = by_start.find(g.mig_start); it != by_start.end()) return it->second;
    }
    Log(Cat("GPU ", g.index, " has no MIG instance ", g.mig_profile, " at slice ", g.mig_start,
            ": the task gets the whole GPU's UUID"));
    return g.uuid;
  }

  LaunchInput Launch(const Local& t) {
    LaunchInput in;
    in.a = t.a;
    in.env = EnvInputOf(t.a, [this](const api::AssignedGpu& g) { return MigUuid(g); });
    in.exec_id = t.exec_id;
    in.log_path = t.log_path;
    in.status_path = StatusPath(t);
    in.sandbox = SandboxPath(t);
    in.checkpoint_dir = t.checkpoint_dir;
    if (!t.a.task_hosts.empty()) {
      in.volcano_dir = t.a.image.empty() ? SandboxPath(t) + "/volcano" : VolcanoDir(t);
    }
    for (const char* k : {"PATH", "LANG", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME"}) {
      if (const char* v = getenv(k); v != nullptr) in.host_env[k] = v;
    }
    if (backend.Name() == "nvml") {
      for (const std::string& uuid : in.env.gpu_uuids)
        in.cdi_devices.push_back(CdiDeviceName(uuid));
    }
    in.node_name = o.node_name;
    if (t.secrets) {
      in.secret_env = t.secrets->env;
      if (!t.a.secret_volumes.empty()) in.secrets_dir = Cat(in.sandbox, "/", kSandboxSecretsDir);
    }
    return in;
  }

  std::string VolcanoDir(const Local& t) const { return RunDir(t) + "/volcano"; }

  std::string SandboxPath(const Local& t) const { return Cat(o.state_dir, "/sandbox/", t.exec_id); }

  void StartTask(const api::Assignment& a) {
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

  // Its directories, then its image, then the task itself.
  void Prepare(Local& t) {
    if (absl::Status s = PrepareDirs(t); !s.ok()) {
      Fail(t, Cat("TaskSetupFailed: ", s.message()));
    } else if (!t.a.image.empty()) {
      t.waiting_image = true;
      StartWhenPulled(t);
    } else {
      Exec(t);
    }
  }

  static bool Waiting(const Local& t) { return t.waiting_image || t.waiting_secrets; }

  // A task with secret references: their values from the server, then on as any task. Until
  // they come, it is Starting with the server's reason, asked again with back-off (5 s to
  // 5 min). Returns true when the task changed (started preparing, or its message did).
  bool StartWhenSecretsFetched(Local& t) {
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

  void Fail(Local& t, std::string why) {
    t.report.state = api::TaskState::kFailed;
    t.report.message = std::move(why);
    t.ended_at = Now();
    Log(Cat("task ", t.a.name, " could not start: ", t.report.message));
  }

  // The sandbox, the checkpoint directory (node-local ones restored from their replica) and the
  // hostfile, all the task's own. What the agent writes there, it writes while the directory is
  // root's, through descriptors: no task of the same user can plant a link in its way.
  absl::Status PrepareDirs(Local& t) {
    const TaskIdentity& id = t.plan.identity;
    std::error_code ec;
    RemoveTaskDir(SandboxPath(t));  // an earlier start's, if any
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
    return s;
  }

  static absl::Status WriteTaskFile(int dirfd, const char* name, const std::string& content,
                                    const TaskIdentity& id) {
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 &&
              write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
    ok = ok && fchown(fd, id.uid, id.gid) == 0;
    if (fd >= 0) close(fd);
    return ok ? absl::OkStatus()
              : absl::InternalError(
                    Cat("cannot write the task's ", name, ": ", std::strerror(errno)));
  }

  // The checkpoint directory, taken back from its task's user while the agent restores replicas
  // into it (a restart after a lost node), then given to the task.
  absl::Status PrepareCheckpointDir(const Local& t) {
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

  // Volcano's <task>.host files for a host process: in its sandbox's volcano/, its user's.
  static absl::Status WriteSandboxVolcanoFiles(int sandbox, const Local& t) {
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

  // Volcano's /etc/volcano/<task>.host files, for a container (mounted read-only: the directory
  // and files readable by its user; the run directory above them is the agent's).
  absl::Status WriteVolcanoFiles(const Local& t) {
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

  // A container's image: the task starts once it is on the node; until then it is Starting,
  // its message says why (pulling, or the last pull's failure and when the next one is).
  // Returns true when the task changed (started, or its message did).
  bool StartWhenPulled(Local& t) {
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

  void Exec(Local& t) {
    std::string warning;
    absl::Status s = exec.Start(t.plan.spec, &warning);
    if (!warning.empty()) Log(warning, log::Level::kWarn);
    if (!s.ok()) {
      Fail(t, std::string(s.message()));
      return;
    }
    t.in_executor = true;
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
    Log(Cat("started ", t.a.name, " (attempt ", t.a.attempt, ", rank ", t.a.rank, "/",
            t.a.world_size, t.plan.container ? ", container " + t.container_name : "", ", pid ",
            exec.Pid(t.exec_id), after, ")"));
  }

  void StopTask(Local& t, bool hard) {
    if (t.ended_at) return;
    if (!t.stopping) {
      t.stopping = true;
      t.kill_at = Now() + absl::Seconds(t.a.grace_seconds);
      Log(Cat("stopping ", t.a.name, " (attempt ", t.a.attempt, ")"));
    }
    int sig = hard ? SIGKILL : SIGTERM;
    if (hard && !t.container_name.empty() && !Waiting(t)) RemoveContainer(t);
    if (t.in_executor) {
      (void)(hard ? exec.Kill(t.exec_id) : exec.Terminate(t.exec_id));
    } else if (t.adopted_pid > 0) {
      kill(-t.adopted_pid, sig);
    }
  }

  // Returns true when a task changed state.
  bool Reconcile() {
    std::map<std::string, api::Assignment> want;
    bool known;
    {
      std::lock_guard lock(mu);
      want = desired;
      known = desired_known;
      dirty = false;
    }
    bool changed = false;
    if (!known) return false;
    // A bounded number of starts per pass: between passes the agent reaps, heartbeats, sees a
    // newer assignment list (a cancelled job) and notices a stop, however much it was given.
    int starts = 0;
    bool more = false;
    for (const auto& [name, a] : want) {
      auto it = tasks.find(name);
      if (it != tasks.end()) {
        Local& t = it->second;
        if (t.a.job_uid == a.job_uid && t.a.attempt == a.attempt) continue;
        if (!t.ended_at) {
          StopTask(t, false);  // the old attempt goes first
          continue;
        }
        std::error_code ec;
        fs::remove(RecordPath(t.exec_id), ec);
        replicator.Untrack(t.exec_id);
        tasks.erase(it);
      }
      if (stop || starts == kMaxStartsPerPass) {
        more = true;
        break;
      }
      StartTask(a);
      ++starts;
      changed = true;
    }
    if (more) {
      std::lock_guard lock(mu);
      dirty = true;  // the next pass goes on at once
    }
    absl::Time now = Now();
    for (auto it = tasks.begin(); it != tasks.end();) {
      Local& t = it->second;
      auto w = want.find(it->first);
      bool wanted =
          w != want.end() && w->second.job_uid == t.a.job_uid && w->second.attempt == t.a.attempt;
      if (!wanted && !t.ended_at && !t.stopping) StopTask(t, false);
      if (t.stopping && !t.ended_at && now >= t.kill_at) StopTask(t, true);
      t.assigned = wanted;
      // Ended and no longer assigned: forgotten once the server acknowledged its report and its
      // log is shipped, or after a while regardless (heartbeat_reports.h).
      ReportedTask v = Reported(t, now);
      v.log_shipped = v.ended && !v.assigned && v.acknowledged && LogShipped(t);
      if (Forgettable(v)) {
        std::error_code ec;
        fs::remove(RecordPath(t.exec_id), ec);
        fs::remove_all(RunDir(t), ec);
        RemoveTaskDir(SandboxPath(t));
        exec.Forget(t.exec_id);
        replicator.Untrack(t.exec_id);
        it = tasks.erase(it);
        continue;
      }
      ++it;
    }
    return changed;
  }

  bool PollTasks() {
    bool changed = false;
    for (auto& [name, t] : tasks) {
      if (t.ended_at) continue;
      if (Waiting(t) && !t.stopping) {
        const bool moved = t.waiting_secrets ? StartWhenSecretsFetched(t) : StartWhenPulled(t);
        // It started (or could not): its record says so, for an agent that restarts.
        if (moved && !Waiting(t)) SaveRecord(t);
        changed = moved || changed;
        continue;
      }
      if (Waiting(t)) {
        t.report.state = api::TaskState::kStopped;
        t.report.message = t.waiting_secrets ? "stopped while waiting for its secrets"
                                             : "stopped while its image was not yet on the node";
      } else if (t.in_executor) {
        std::optional<TaskExit> e = exec.Poll(t.exec_id);
        if (!e) continue;
        Ended(t, *e);
      } else if (t.adopted_pid > 0) {
        if (Alive(t.adopted_pid, t.adopted_start)) continue;
        if (t.adopted_pidfd >= 0) close(t.adopted_pidfd);
        t.adopted_pidfd = -1;
        // Not this agent's child: its shim left the exit status in a file.
        if (std::optional<TaskExit> e = ReadExitStatus(StatusPath(t))) {
          Ended(t, *e);
        } else {
          t.report.state = t.stopping ? api::TaskState::kStopped : api::TaskState::kLost;
          t.report.message = "it ended after the agent restarted; its exit status is unknown";
          if (!t.container_name.empty()) RemoveContainer(t);
        }
      } else {
        continue;
      }
      t.ended_at = Now();
      if (!Waiting(t)) {  // a process ended: when its shim wrote its exit, if it could
        t.report.finished_ms =
            TaskEndedMs(StatusPath(t), t.report.started_ms, absl::ToUnixMillis(*t.ended_at));
      }
      changed = true;
      Log(Cat("task ", name, " (attempt ", t.a.attempt,
              ") ended: ", api::TaskStateName(t.report.state),
              t.report.message.empty() ? "" : ", " + t.report.message));
      SaveRecord(t);
    }
    return changed;
  }

  // Ships what each task wrote since the last pass, at most LogLimits::bytes_per_pass each;
  // true when some is left for the next pass. Rotation is decided here (PlanLogShipping): a
  // log is rotated once shipped, and a backlog the server could not take (or output its
  // namespace's log quota has no room for) is dropped with a marker line that says how much and
  // where it is kept.
  bool ShipLogs() {
    bool more = false;
    const absl::Time now = Now();
    for (auto& [name, t] : tasks) {
      if (t.log.gone || t.log_path.empty() || stop) continue;
      struct stat st;
      if (stat(t.log_path.c_str(), &st) != 0) continue;
      if (st.st_size < t.log.read_pos) t.log.read_pos = 0;  // truncated by someone else
      ShipPlan plan = PlanLogShipping(st.st_size, t.log.read_pos, kLogLimits, t.log.over_quota);
      if (plan.drop > 0) {  // bounded on disk even while the server is away or full
        t.log.dropped += plan.drop;
        t.log.read_pos += plan.drop;
        if (t.log.over_quota) t.log.cause = DropCause::kQuota;
        if (plan.rotate) {
          RotateLog(t.log_path, 1, 3);
          t.log.read_pos = 0;
        }
      }
      if (now < t.log_retry_at) continue;  // over quota: the marker tries again after a while
      if (t.log.dropped > 0) {
        std::string marker = DroppedLogMarker(t.log.dropped, t.log.cause, t.log_path, o.node_name);
        if (!ShipChunk(t, marker, ChunkKind::kMarker)) continue;
        t.log.dropped = 0;
        t.log.cause = DropCause::kBacklog;
        if (plan.drop > 0) continue;  // the new file's output in the next pass
      }
      const int64_t end = t.log.read_pos + plan.ship;
      const int64_t written_by_ms =
          int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
      while (t.log.read_pos < end && !stop) {
        std::string data =
            ReadAt(t.log_path, t.log.read_pos, std::min<int64_t>(end - t.log.read_pos, 256 << 10));
        if (data.empty() || !ShipChunk(t, data, ChunkKind::kFile, written_by_ms)) break;
      }
      if (t.log.read_pos < end) continue;  // the server is away or full: see next time
      if (plan.rotate) {
        RotateLog(t.log_path, 1, 3);
        // What the task wrote between the last read and the copy is in .1: ship it too.
        std::string tail = ReadAt(t.log_path + ".1", t.log.read_pos, kLogLimits.bytes_per_pass);
        t.log.read_pos = 0;
        if (!tail.empty()) ShipChunk(t, tail, ChunkKind::kTail);
      }
      // More to do at once (only while it moves: the server away `continue`d above).
      more = more || st.st_size > end;
    }
    return more;
  }

  static std::string ReadAt(const std::string& path, int64_t offset, int64_t max) {
    std::ifstream f(path, std::ios::binary);
    f.seekg(offset);
    std::string data(std::max<int64_t>(0, max), '\0');
    f.read(data.data(), static_cast<std::streamsize>(data.size()));
    data.resize(std::max<std::streamsize>(0, f.gcount()));
    return data;
  }

  // POSTs `data` at the shipped offset, stamped with the time it was read (or `written_by_ms`,
  // when all of it was written by then: ShipTimeMs). False when it did not all go (the server
  // is away or full, or the log is gone).
  bool ShipChunk(Local& t, const std::string& data, ChunkKind kind,
                 std::optional<int64_t> written_by_ms = std::nullopt) {
    const int64_t time_ms = ShipTimeMs(absl::ToUnixMillis(Now()), written_by_ms);
    absl::StatusOr<api::HttpResponse> r = client.Call(
        "POST",
        LogChunkTarget(t.a.namespace_, t.a.job, t.a.rank, t.a.attempt, t.log.shipped, time_ms),
        data);
    if (!r.ok()) return false;  // the server is away; try again later
    ShipAnswer answer = ReadShipAnswer(r->status, r->body);
    const bool was_over_quota = t.log.over_quota;
    bool all = ApplyShipAnswer(answer, static_cast<int64_t>(data.size()), kind, t.log);
    if (answer.kind == ShipAnswer::Kind::kOverQuota) {
      // Output is given up until the server takes the marker, tried again after Retry-After.
      t.log_retry_at = Now() + absl::Seconds(answer.retry_after_s);
      if (!was_over_quota) {
        Log(Cat("task ", t.a.name,
                ": its output is dropped until the server has room: ", answer.message));
      }
    } else if (was_over_quota && !t.log.over_quota) {
      Log(Cat("task ", t.a.name, ": its log ships again"));
    }
    return all;
  }

  // Keeps the sample for /metrics; adds each running task's share of its GPUs' energy since
  // the previous sample (whole GPUs fully, shared ones by their fraction; MIG instances are not
  // metered separately by NVML and are left out).
  void RecordSamples(const std::vector<GpuSample>& samples) {
    std::lock_guard lock(metrics_mu);
    std::map<int, uint64_t> before;
    for (const GpuSample& s : last_samples) {
      if (s.energy_mj) before[s.index] = *s.energy_mj;
    }
    owners.clear();
    for (const auto& [name, t] : tasks) {
      if (t.ended_at) continue;
      Energy& e = energy[t.exec_id];
      e.ns = t.a.namespace_;
      e.job = t.a.job;
      e.task = Cat(t.a.task, "-", t.a.replica);
      e.rank = t.a.rank;
      e.attempt = t.a.attempt;
      for (const api::AssignedGpu& g : t.a.gpus) {
        int mig_start = g.mode == "mig" ? g.mig_start : -1;
        owners.insert({g.index, {t.a.namespace_, t.a.job, e.task, mig_start}});
        double share = g.mode == "whole"    ? 1.0
                       : g.mode == "shared" ? g.fraction_milli / 1000.0
                                            : 0.0;
        for (const GpuSample& s : samples) {
          if (s.index != g.index || !s.energy_mj || !before.contains(g.index)) continue;
          if (*s.energy_mj >= before[g.index])
            e.joules += share * (*s.energy_mj - before[g.index]) / 1000.0;
        }
      }
    }
    // Forget the energy of tasks the agent forgot.
    std::set<std::string> known;
    for (const auto& [name, t] : tasks) known.insert(t.exec_id);
    std::erase_if(energy, [&](const auto& e) { return !known.contains(e.first); });
    last_samples = samples;
  }

  std::string MetricsText() const {
    std::lock_guard lock(metrics_mu);
    std::vector<TaskEnergy> tasks_energy;
    for (const auto& [id, e] : energy) {
      tasks_energy.push_back({e.ns, e.job, e.task, e.rank, e.attempt, e.joules});
    }
    const auto* health_shown = shown_health ? &*shown_health : nullptr;
    return Cat(DcgmMetricsText(discovered, last_samples, {o.node_name, &owners, health_shown}),
               TaskEnergyMetricsText(tasks_energy, o.node_name));
  }

  // The GPUs the running tasks hold (for the simulated backend's readings).
  std::set<int> BusyGpus() const {
    std::set<int> busy;
    for (const auto& [name, t] : tasks) {
      if (t.ended_at) continue;
      for (const api::AssignedGpu& g : t.a.gpus) busy.insert(g.index);
    }
    return busy;
  }

  void Heartbeat() {
    api::Heartbeat h;
    absl::Time now = Now();
    for (auto& [name, t] : tasks) {
      // The newest checkpoint: every 2 s while the task runs (a listing of the directory; it
      // may be remote), then once after it ended (the checkpoint it wrote on SIGTERM).
      bool due = t.ended_at ? t.checkpoint_scanned < *t.ended_at
                            : now - t.checkpoint_scanned >= absl::Seconds(2);
      if (!t.checkpoint_dir.empty() && due) {
        t.report.checkpoint_ms = NewestCheckpointMs(t.checkpoint_dir);
        t.checkpoint_scanned = now;
      }
      if (t.a.checkpoint_replicate) t.report.replicated_ms = replicator.Replicated(t.exec_id);
      if (InHeartbeat(Reported(t, now))) h.tasks.push_back(t.report);
    }
    backend.SetBusyGpus(BusyGpus());
    std::vector<GpuSample> sampled;
    if (absl::StatusOr<std::vector<GpuSample>> samples = backend.Sample(); samples.ok()) {
      sampled = *samples;
      RecordSamples(*samples);
      std::map<int, GpuCondition> before = health.conditions();
      if (health.OnSamples(*samples, gpu_count, absl::ToUnixMillis(Now()))) {
        for (const auto& [gpu, c] : health.conditions()) {
          const GpuCondition& was = before[gpu];
          if (was.healthy != c.healthy)
            Log(Cat("GPU ", gpu, c.healthy ? ": healthy again" : ": unhealthy: " + c.reason));
          if (was.at_risk != c.at_risk)
            Log(Cat("GPU ", gpu,
                    c.at_risk ? ": likely to fail: " + c.risk : ": no longer at risk"));
        }
      }
    }
    {
      std::lock_guard lock(metrics_mu);
      shown_health = health.conditions();
    }
    for (int g = 0; g < gpu_count; ++g) {
      auto c = health.conditions().find(g);
      bool healthy = c == health.conditions().end() || c->second.healthy;
      bool at_risk = c != health.conditions().end() && c->second.at_risk;
      h.gpus.push_back(
          {g, healthy, healthy ? "" : c->second.reason, at_risk, at_risk ? c->second.risk : ""});
    }
    AddGpuUsage(sampled, h.gpus);
    absl::StatusOr<api::HttpResponse> r =
        client.Call("POST", api::NodePath(o.node_name) + "/heartbeat", api::HeartbeatToJson(h));
    if (r.ok() && r->status == 404) {
      Log("the server does not know this node: registering again");
      Register();
    }
    if (r.ok() && r->status == 200) {
      // The operator's uncordon bumps the node's health-reset generation: GPUs marked
      // unhealthy are trusted again.
      Json j = Json::parse(r->body, nullptr, false);
      int64_t gen = j.is_object() ? j.value("healthReset", int64_t{0}) : 0;
      if (health_reset_seen && gen > *health_reset_seen && health.ResetAll()) {
        Log("the operator reset this node's GPU health");
      }
      health_reset_seen = gen;
      // Ended reports the server's controller has read: those no longer assigned leave the
      // heartbeat (unless they change again).
      for (api::TaskReport& acked : AcknowledgedReports(r->body)) {
        auto it = tasks.find(acked.name);
        if (it != tasks.end() && it->second.ended_at && it->second.report == acked) {
          it->second.acknowledged = std::move(acked);
        }
      }
      if (j.is_object() && j.contains("prePull") && j["prePull"].is_array()) {
        for (const Json& image : j["prePull"]) {
          if (!image.is_string() || !pre_pulled.insert(image.get<std::string>()).second) continue;
          Log(Cat("pulling image ", image.get<std::string>(), " ahead of its tasks"));
          puller.Prefetch(image.get<std::string>());
        }
      }
    }
  }

  // Xid events since the last look; true when a GPU's health changed (report it at once).
  bool PollXids() {
    bool changed = false;
    for (const XidEvent& e : backend.TakeXids()) {
      bool c = health.OnXid(e.gpu, e.xid, absl::ToUnixMillis(Now()));
      Log(Cat("GPU ", e.gpu, ": ", DescribeXid(e.xid), c ? "; marked unhealthy" : ""));
      changed = changed || c;
    }
    return changed;
  }

  // Containers of this node that no task record names any more (an agent killed with its
  // records lost, a kill before the record was saved) go: nothing runs unaccounted for.
  void RemoveOrphanContainers() {
    std::vector<std::string> argv = PodmanGlobalArgv(o.container);
    argv.insert(argv.end(), {"ps", "--all", "--filter", "label=gpucloud.node=" + o.node_name,
                             "--format", "{{.Names}}"});
    std::string out;
    if (RunCaptured(argv, &out) != 0) return;  // no Podman here
    std::set<std::string> known;
    for (const auto& [name, t] : tasks) {
      if (!t.container_name.empty()) known.insert(t.container_name);
    }
    std::vector<std::string> names = absl::StrSplit(out, '\n', absl::SkipWhitespace());
    for (const std::string& name : names) {
      if (known.contains(name)) continue;
      Log(Cat("removing container ", name, ": no task of this node is its"));
      std::string ignored;
      (void)RunCaptured(PodmanRemoveArgv(o.container, name), &ignored);
    }
  }

  // The CDI spec of the node's NVIDIA GPUs, for containers.
  void WriteCdi(const NodeGpus& gpus) {
    if (o.cdi_spec_dir.empty() || backend.Name() != "nvml") return;
    if (std::string said = RefreshCdiSpec(o.cdi_spec_dir, gpus); !said.empty()) Log(said);
  }

  // Image garbage collection (PlanImageEviction): once an hour the images unused for
  // image_gc_age go; with image_store_max_bytes, also after each pull, the least recently used
  // until the store fits. Never an image a task of this node runs or waits for.
  void CollectImages() {
    const absl::Time now = Now();
    bool limit = o.image_store_max_bytes > 0;
    if (now - collected_at < absl::Hours(1) && !(limit && pulled_since_gc)) return;
    collected_at = now;
    pulled_since_gc = false;
    std::string out;
    if (RunCaptured(PodmanImagesArgv(o.container), &out) != 0) return;  // no Podman here
    absl::StatusOr<std::vector<StoredImage>> images = ParseImageList(out);
    if (!images.ok()) {
      Log(Cat("image collection: ", images.status().message()));
      return;
    }
    std::set<std::string> keep;
    for (const auto& [name, t] : tasks) {
      if (!t.ended_at && !t.a.image.empty()) keep.insert(t.a.image);
    }
    std::vector<StoredImage> remove =
        PlanImageEviction(*images, limit ? o.image_store_max_bytes : -1,
                          absl::ToUnixSeconds(now - o.image_gc_age), image_last_used, keep);
    for (const StoredImage& image : remove) {
      std::string what = image.names.empty() ? image.id.substr(0, 12) : Join(image.names, ", ");
      bool removed = RunCaptured(PodmanRemoveImageArgv(o.container, image), &out) == 0;
      Log(removed ? Cat("image collection: removed ", what, " (", image.size >> 20, " MiB)")
                  : Cat("image collection: cannot remove ", what, ": ", PullErrorReason(out)));
    }
    if (!remove.empty()) puller.Invalidate();
  }

  absl::Status Run() {
    absl::StatusOr<NodeGpus> d = backend.Discover();
    if (!d.ok()) return d.status();
    {
      std::lock_guard lock(metrics_mu);
      discovered = *d;
    }
    gpu_count = static_cast<int>(d->gpus.size());
    if (absl::Status s = PrepareStateDir(o.state_dir, launch_policy.switch_users); !s.ok()) {
      return s;
    }
    WriteCdi(*d);
    if (o.allow_host_processes && !launch_policy.switch_users) {
      Log("the agent is not root, so tasks without an image run as its own user and can read "
          "what it can (its state and tokens): for a single user's machine only",
          log::Level::kWarn);
    }
    LoadRecords();
    RemoveOrphanContainers();
    if (!EnsureCredential() || !Register()) return absl::OkStatus();
    watcher = std::thread([this] { Watch(); });
    absl::Time last_heartbeat = absl::InfinitePast();
    bool log_backlog = false;
    while (!stop) {
      {
        std::unique_lock lock(mu);
        // A task's end wakes the loop at once (ExitWatcher); the tick is for what is polled
        // (re-adopted tasks without a pidfd, image pulls, the heartbeat's period).
        wake.wait_for(lock, std::chrono::milliseconds(100),
                      [&] { return dirty || exited || log_backlog || stop.load(); });
        exited = false;
      }
      if (stop) break;
      bool changed = Reconcile();
      changed = PollTasks() || changed;
      CollectImages();
      changed = PollXids() || changed;
      // A chatty task's output goes out a bounded piece per pass, the heartbeat on time.
      const bool due = changed || Now() - last_heartbeat >= o.heartbeat;
      if (due || log_backlog) log_backlog = ShipLogs();
      if (due) {
        Heartbeat();
        last_heartbeat = Now();
        MaybeRenewCredential();
      }
    }
    if (watcher.joinable()) watcher.join();
    if (o.kill_tasks_on_stop) {
      for (auto& [name, t] : tasks) StopTask(t, false);
      // A real wait (not a decision): at most 5 s for the tasks to go.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      for (auto& [name, t] : tasks) {
        while (!t.ended_at && t.in_executor && std::chrono::steady_clock::now() < deadline) {
          if (exec.Poll(t.exec_id)) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      std::error_code ec2;
      fs::remove_all(Cat(o.state_dir, "/tasks"), ec2);
    } else {
      exec.Detach();
    }
    return absl::OkStatus();
  }
};

NodeAgent::NodeAgent(api::ClientConfig server, GpuBackend& backend, const Clock& clock,
                     NodeAgentOptions options)
    : impl_(std::make_unique<Impl>(std::move(server), backend, clock, std::move(options))) {}

NodeAgent::~NodeAgent() { Stop(); }

absl::Status NodeAgent::Run() { return impl_->Run(); }

std::string NodeAgent::MetricsText() const { return impl_->MetricsText(); }

void NodeAgent::Stop() {
  impl_->stop = true;
  impl_->wake.notify_all();
}

}  // namespace gpucloud::agent
