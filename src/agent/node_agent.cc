#include "agent/node_agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "agent/assignment_events.h"
#include "agent/node_agent_impl.h"

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

std::string HostName() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

namespace {

// An agent talks with its control plane every heartbeat: a server that has not answered within
// a few of them is as good as gone, and the next server should be asked (api::Client).
api::ClientConfig AgentClientConfig(api::ClientConfig c) {
  c.answer_seconds = std::min(c.answer_seconds, 5);
  // Its main loop waits on heartbeats: a leader cut off must not hold a task's start for long
  // (tests/e2e/ha_chaos.py saw 3.8 s with 3 s to connect). Servers answer SYNs in a LAN's
  // round trip; a lost one means the next server is tried.
  c.connect_seconds = 1;
  c.handshake_seconds = 2;
  return c;
}

}  // namespace

NodeAgent::Impl::Impl(api::ClientConfig server, GpuBackend& b, const Clock& c,
                      NodeAgentOptions opts)
    : client(AgentClientConfig(server)),
      watch_client(AgentClientConfig(server)),
      bootstrap_config(AgentClientConfig(server)),
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

void NodeAgent::Impl::OnExit() {
  {
    std::lock_guard lock(mu);
    exited = true;
  }
  wake.notify_all();
}

bool NodeAgent::Impl::Sleep(absl::Duration d) {
  std::unique_lock lock(mu);
  wake.wait_for(lock, absl::ToChronoMilliseconds(d), [this] { return stop.load(); });
  return !stop;
}

absl::StatusOr<std::string> NodeAgent::Impl::RegistrationBody() {
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

bool NodeAgent::Impl::EnsureCredential() {
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

void NodeAgent::Impl::UseCredential(const NodeCertificateInfo& info) {
  const api::ClientConfig c = WithNodeCredential(bootstrap_config, NodeCredentialPath(o.state_dir));
  client.SetConfig(c);
  watch_client.SetConfig(c);
  credential = info;
  Log(Cat("authenticating as ", info.common_name, " (certificate valid until ",
          absl::FormatTime(info.not_after), ")"));
}

void NodeAgent::Impl::MaybeRenewCredential() {
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

bool NodeAgent::Impl::Register() {
  absl::Duration backoff = absl::Milliseconds(200);
  while (!stop) {
    absl::StatusOr<std::string> body = RegistrationBody();
    if (!body.ok()) {
      Log(Cat("discovery failed: ", body.status().message()));
    } else {
      absl::StatusOr<api::HttpResponse> r = client.Call("PUT", api::NodePath(o.node_name), *body);
      if (r.ok() && (r->status == 200 || r->status == 201)) {
        Log(Cat("registered with ", client.server().host, ":", client.server().port));
        return true;
      }
      Log(Cat("registration failed: ",
              r.ok() ? Cat("HTTP ", r->status, " ", r->body) : std::string(r.status().message())));
    }
    if (!Sleep(backoff)) return false;
    backoff = std::min(backoff * 2, absl::Seconds(8));
  }
  return false;
}

std::optional<int64_t> NodeAgent::Impl::ListAssignments() {
  absl::StatusOr<api::HttpResponse> list =
      watch_client.Call("GET", api::AssignmentsPath(o.node_name));
  if (!list.ok() || list->status != 200) return std::nullopt;
  int64_t rev = 0;
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
  return rev;
}

void NodeAgent::Impl::OnWatchLine(const std::string& line, int64_t& rev) {
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
}

// The server sends a bookmark after each second without events: a watch silent for this long
// is on a server that froze or was cut off, and is opened again on the next server.
constexpr int kWatchIdleSeconds = 5;

void NodeAgent::Impl::Watch() {
  absl::Duration backoff = absl::Milliseconds(200);
  while (!stop) {
    std::optional<int64_t> listed = ListAssignments();
    if (!listed) {
      if (!Sleep(backoff)) return;
      backoff = std::min(backoff * 2, absl::Seconds(8));
      continue;
    }
    backoff = absl::Milliseconds(200);
    int64_t rev = *listed;
    // Watch from the list's revision until the stream fails; then list again.
    while (!stop) {
      absl::StatusOr<api::HttpResponse> r = watch_client.Stream(
          Cat(api::AssignmentsPath(o.node_name),
              "?watch=true&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion=", rev),
          [&](const std::string& line) { OnWatchLine(line, rev); }, kWatchIdleSeconds, &stop);
      if (r.ok() && r->status == 200) continue;         // the server ended it after its timeout
      const bool expired = r.ok() && r->status == 410;  // compacted: list again at once
      if (!expired) Sleep(backoff);
      break;
    }
  }
}

absl::Status NodeAgent::Impl::Run() {
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
  janitor.Sweep(Cat(o.state_dir, "/sandbox"));  // what a killed agent left half removed
  janitor.Sweep(Cat(o.state_dir, "/run"));
  if (o.allow_host_processes && !launch_policy.switch_users) {
    Log("the agent is not root, so tasks without an image run as its own user and can read "
        "what it can (its state and tokens): for a single user's machine only",
        log::Level::kWarn);
  }
  LoadRecords();
  RemoveOrphanContainers();
  if (!EnsureCredential() || !Register()) return absl::OkStatus();
  watcher = std::thread([this] { Watch(); });
  StartSessions();
  MainLoop();
  if (sessions) sessions->Stop();
  if (watcher.joinable()) watcher.join();
  Leave();
  return absl::OkStatus();
}

void NodeAgent::Impl::MainLoop() {
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
      ++passes_begun;
    }
    if (stop) break;
    bool changed = Reconcile();
    changed = PollTasks() || changed;
    CollectImages();
    changed = PollXids() || changed;
    PublishSessionTargets();
    // A chatty task's output goes out a bounded piece per pass, the heartbeat on time.
    const bool due = changed || Now() - last_heartbeat >= o.heartbeat;
    if (due || log_backlog) log_backlog = ShipLogs();
    if (due) {
      Heartbeat();
      last_heartbeat = Now();
      MaybeRenewCredential();
    }
    {
      std::lock_guard lock(mu);
      ++passes_done;
    }
    pass_done.notify_all();
  }
  pass_done.notify_all();  // stopping: no more passes
}

void NodeAgent::Impl::StartSessions() {
  SessionManager::Options so;
  so.node = o.node_name;
  so.server = client.config();
  so.find = [this](const std::string& assignment,
                   int attempt) -> std::shared_ptr<const SessionTarget> {
    std::lock_guard lock(targets_mu);
    auto it = session_targets.find(Cat(assignment, "/", attempt));
    return it == session_targets.end() ? nullptr : it->second;
  };
  sessions = std::make_unique<SessionManager>(std::move(so), clock);
  sessions->Start();
}

void NodeAgent::Impl::PublishSessionTargets() {
  // Rebuilt only when the running tasks change (a task's environment is copied).
  std::string running;
  for (const auto& [exec_id, t] : tasks) {
    if (t.report.state == api::TaskState::kRunning && !t.stopping) running += exec_id + ",";
  }
  if (running == published_targets) return;
  published_targets = running;
  std::map<std::string, std::shared_ptr<const SessionTarget>> out;
  for (const auto& [exec_id, t] : tasks) {
    if (t.report.state != api::TaskState::kRunning || t.stopping) continue;
    SessionTarget target;
    target.exec_id = exec_id;
    target.container = t.container_name;
    if (!t.container_name.empty()) target.podman = PodmanGlobalArgv(o.container);
    target.env = t.plan.spec.env;
    target.workdir = t.plan.spec.workdir;
    target.uid = t.plan.spec.uid;
    target.gid = t.plan.spec.gid;
    target.stdin_path = t.plan.spec.stdin_path;
    if (t.in_executor) target.cgroup_join = exec.CgroupJoinFiles(exec_id);
    // A host process re-adopted after an agent restart has no plan here: sessions enter it as
    // its shim says (adopted_target.h), never with the agent's own environment and user.
    if (t.container_name.empty() && target.env.empty()) {
      if (t.adopted_session == nullptr) continue;
      target = *t.adopted_session;
      target.exec_id = exec_id;
    }
    out[Cat(t.a.name, "/", t.a.attempt)] = std::make_shared<const SessionTarget>(std::move(target));
  }
  std::lock_guard lock(targets_mu);
  session_targets = std::move(out);
}

bool NodeAgent::Impl::AwaitPass(absl::Duration timeout) {
  std::unique_lock lock(mu);
  // The first pass to begin after this: the one under way (if any) may have read the clock
  // before the caller moved it.
  const int64_t target = passes_begun + 1;
  dirty = true;  // at once rather than at the tick
  wake.notify_all();
  return pass_done.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] {
    return passes_done >= target || stop.load();
  }) && !stop;
}

void NodeAgent::Impl::Leave() {
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
}

NodeAgent::NodeAgent(api::ClientConfig server, GpuBackend& backend, const Clock& clock,
                     NodeAgentOptions options)
    : impl_(std::make_unique<Impl>(std::move(server), backend, clock, std::move(options))) {}

NodeAgent::~NodeAgent() { Stop(); }

absl::Status NodeAgent::Run() { return impl_->Run(); }

std::string NodeAgent::MetricsText() const { return impl_->MetricsText(); }

bool NodeAgent::AwaitPassForTest(absl::Duration timeout) { return impl_->AwaitPass(timeout); }

void NodeAgent::Stop() {
  impl_->stop = true;
  impl_->wake.notify_all();
}

}  // namespace gpucloud::agent
