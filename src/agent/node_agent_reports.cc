// What the agent tells the server: heartbeats, task logs; GPU samples for /metrics; images.
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

#include "absl/strings/str_split.h"
#include "agent/cdi.h"
#include "agent/node_agent_impl.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr LogLimits kLogLimits;

}  // namespace

bool NodeAgent::Impl::ShipLogs() {
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
    const int64_t written_by_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
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

std::string NodeAgent::Impl::ReadAt(const std::string& path, int64_t offset, int64_t max) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(offset);
  std::string data(std::max<int64_t>(0, max), '\0');
  f.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(std::max<std::streamsize>(0, f.gcount()));
  return data;
}

bool NodeAgent::Impl::ShipChunk(Local& t, const std::string& data, ChunkKind kind,
                                std::optional<int64_t> written_by_ms) {
  const int64_t time_ms = ShipTimeMs(absl::ToUnixMillis(Now()), written_by_ms);
  absl::StatusOr<api::HttpResponse> r = client.Call(
      "POST",
      LogChunkTarget(t.a.namespace_, t.a.job, t.a.rank, t.a.attempt, t.log.shipped, time_ms), data);
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

void NodeAgent::Impl::RecordSamples(const std::vector<GpuSample>& samples) {
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
      double share = g.mode == "whole" ? 1.0 : g.mode == "shared" ? g.fraction_milli / 1000.0 : 0.0;
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

std::string NodeAgent::Impl::MetricsText() const {
  std::lock_guard lock(metrics_mu);
  std::vector<TaskEnergy> tasks_energy;
  for (const auto& [id, e] : energy) {
    tasks_energy.push_back({e.ns, e.job, e.task, e.rank, e.attempt, e.joules});
  }
  const auto* health_shown = shown_health ? &*shown_health : nullptr;
  return Cat(DcgmMetricsText(discovered, last_samples, {o.node_name, &owners, health_shown}),
             TaskEnergyMetricsText(tasks_energy, o.node_name));
}

std::set<int> NodeAgent::Impl::BusyGpus() const {
  std::set<int> busy;
  for (const auto& [name, t] : tasks) {
    // A shell or notebook computes only when its user makes it (through a session): its GPUs
    // read idle on simulated GPUs, so that its idle timeout can be seen at work.
    if (t.ended_at || t.a.idle_timeout_seconds > 0) continue;
    for (const api::AssignedGpu& g : t.a.gpus) busy.insert(g.index);
  }
  return busy;
}

void NodeAgent::Impl::Heartbeat() {
  api::Heartbeat h;
  h.tasks = HeartbeatTasks(Now());
  h.gpus = HeartbeatGpus();
  absl::StatusOr<api::HttpResponse> r =
      client.Call("POST", api::NodeVerbPath(o.node_name, "heartbeat"), api::HeartbeatToJson(h));
  if (r.ok() && r->status == 404) {
    Log("the server does not know this node: registering again");
    Register();
  }
  const bool taken = r.ok() && r->status == 200;
  if (taken) ReadHeartbeatAnswer(r->body);
  if (taken == heartbeat_failing) {
    heartbeat_failing = !taken;
    Log(taken ? Cat("heartbeats are taken again, by ", client.server().host, ":",
                    client.server().port)
              : Cat("heartbeat not taken: ", r.ok() ? Cat("HTTP ", r->status, " ", r->body)
                                                    : std::string(r.status().message())));
  }
}

std::vector<api::TaskReport> NodeAgent::Impl::HeartbeatTasks(absl::Time now) {
  std::vector<api::TaskReport> reports;
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
    {
      std::lock_guard lock(metrics_mu);
      if (auto e = energy.find(t.exec_id); e != energy.end()) t.report.energy_j = e->second.joules;
    }
    UpdateIdleness(t, now);
    if (InHeartbeat(Reported(t, now))) reports.push_back(t.report);
  }
  return reports;
}

void NodeAgent::Impl::UpdateIdleness(Local& t, absl::Time now) {
  t.report.idle_ms = 0;
  if (t.a.idle_timeout_seconds <= 0 || t.report.state != api::TaskState::kRunning) return;
  if (t.last_used == absl::InfinitePast()) t.last_used = now;  // it has just started
  if (sessions) {
    if (std::optional<absl::Time> traffic = sessions->LastActivity(t.a.name)) {
      t.last_used = std::max(t.last_used, *traffic);
    }
  }
  {
    std::lock_guard lock(metrics_mu);
    for (const GpuSample& s : last_samples) {
      for (const api::AssignedGpu& g : t.a.gpus) {
        if (g.index == s.index && s.gpu_util_percent.value_or(0) >= kInteractiveBusyPercent) {
          t.last_used = now;
        }
      }
    }
  }
  const int64_t idle_s = absl::ToInt64Seconds(now - t.last_used);  // whole seconds: fewer changes
  t.report.idle_ms = idle_s * 1000;
  const int64_t timeout = t.a.idle_timeout_seconds;
  const int64_t warn_at = std::max<int64_t>(
      static_cast<int64_t>(static_cast<double>(timeout) * kIdleWarningFraction), timeout - 60);
  if (idle_s < warn_at) {
    t.idle_announced = false;
  } else if (!t.idle_announced && sessions) {
    t.idle_announced = true;
    sessions->Announce(t.a.name, Cat("idle for ", idle_s, " s: this interactive job stops in ",
                                     std::max<int64_t>(0, timeout - idle_s),
                                     " s unless used (any input, or GPU work)"));
  }
}

std::vector<api::GpuHealth> NodeAgent::Impl::HeartbeatGpus() {
  std::vector<api::GpuHealth> gpus;
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
          Log(Cat("GPU ", gpu, c.at_risk ? ": likely to fail: " + c.risk : ": no longer at risk"));
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
    gpus.push_back(
        {g, healthy, healthy ? "" : c->second.reason, at_risk, at_risk ? c->second.risk : ""});
  }
  AddGpuUsage(sampled, gpus);
  return gpus;
}

void NodeAgent::Impl::ReadHeartbeatAnswer(const std::string& body) {
  // The operator's uncordon bumps the node's health-reset generation: GPUs marked
  // unhealthy are trusted again.
  Json j = Json::parse(body, nullptr, false);
  int64_t gen = j.is_object() ? j.value("healthReset", int64_t{0}) : 0;
  if (health_reset_seen && gen > *health_reset_seen && health.ResetAll()) {
    Log("the operator reset this node's GPU health");
  }
  health_reset_seen = gen;
  // Ended reports the server's controller has read: those no longer assigned leave the
  // heartbeat (unless they change again).
  for (api::TaskReport& acked : AcknowledgedReports(body)) {
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

bool NodeAgent::Impl::PollXids() {
  bool changed = false;
  for (const XidEvent& e : backend.TakeXids()) {
    bool c = health.OnXid(e.gpu, e.xid, absl::ToUnixMillis(Now()));
    Log(Cat("GPU ", e.gpu, ": ", DescribeXid(e.xid), c ? "; marked unhealthy" : ""));
    changed = changed || c;
  }
  return changed;
}

void NodeAgent::Impl::RemoveOrphanContainers() {
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

void NodeAgent::Impl::WriteCdi(const NodeGpus& gpus) {
  if (o.cdi_spec_dir.empty() || backend.Name() != "nvml") return;
  if (std::string said = RefreshCdiSpec(o.cdi_spec_dir, gpus); !said.empty()) Log(said);
}

void NodeAgent::Impl::CollectImages() {
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

}  // namespace gpucloud::agent
