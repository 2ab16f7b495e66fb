#include "sim/recording.h"

#include <functional>
#include <utility>

#include "manifest/manifest.h"

namespace gpucloud::sim {
namespace {

using Json = nlohmann::json;

// A replica's placement in the keys and GPU mode names of a job status's placement.
Json PlacementToJson(const sched::ReplicaPlacement& p) {
  Json gpus = Json::array();
  for (const sched::GpuAssignment& g : p.gpus) {
    Json a{{"index", g.gpu}, {"mode", GpuModeName(g.mode)}};
    if (g.mode == GpuMode::kMig) {
      a["migProfile"] = g.mig.profile;
      a["migStart"] = g.mig.start;
    }
    if (g.mode == GpuMode::kShared) {
      a["fractionMilli"] = g.fraction.raw();
      a["memoryMiB"] = g.memory.raw();
      a["mps"] = g.sharing == GpuSharing::kMps;
    }
    gpus.push_back(std::move(a));
  }
  return {{"task", p.task},
          {"replica", p.replica},
          {"gpus", std::move(gpus)},
          {"cpuMilli", p.cpu.raw()},
          {"memoryMiB", p.memory.raw()}};
}

sched::ReplicaPlacement PlacementFromJson(const Json& j) {
  sched::ReplicaPlacement p;
  p.task = j.at("task").get<std::string>();
  p.replica = j.at("replica").get<int32_t>();
  p.cpu = MilliCpu(j.at("cpuMilli").get<int64_t>());
  p.memory = MiB(j.at("memoryMiB").get<int64_t>());
  for (const Json& a : j.at("gpus")) {
    sched::GpuAssignment g;
    g.gpu = a.at("index").get<int32_t>();
    const std::string mode = a.at("mode").get<std::string>();
    g.mode = ParseGpuMode(mode).value_or(GpuMode::kNone);
    if (g.mode == GpuMode::kMig) {
      g.mig = {a.at("migProfile").get<std::string>(), a.at("migStart").get<int>()};
    }
    if (g.mode == GpuMode::kShared) {
      g.fraction = MilliGpu(a.at("fractionMilli").get<int64_t>());
      g.memory = MiB(a.at("memoryMiB").get<int64_t>());
      g.sharing = a.at("mps").get<bool>() ? GpuSharing::kMps : GpuSharing::kTimeSlicing;
    }
    p.gpus.push_back(std::move(g));
  }
  return p;
}

constexpr const char* kPhases[] = {"waiting", "holding", "stopping", "other"};

// How a job's view changed, for people reading the file.
std::string EventOf(const sched::JobView* before, const sched::JobView& after) {
  using P = sched::JobViewPhase;
  if (!before) return "arrival";
  if (before->phase != after.phase) {
    if (after.phase == P::kHolding) return "bound";
    if (after.phase == P::kStopping) return "stopping";
    if (after.phase == P::kWaiting) return "requeued";
    return "ended";
  }
  if (before->started_ms != after.started_ms) return "started";
  if (before->last_checkpoint_ms != after.last_checkpoint_ms) return "checkpoint";
  return "changed";
}

}  // namespace

Json NodeToJson(const Node& n) {
  Json gpus = Json::array();
  for (const Gpu& g : n.gpus) {
    Json mig = Json::array();
    for (const MigPlacement& m : g.mig_layout) mig.push_back({m.profile, m.start});
    gpus.push_back({{"uuid", g.uuid},
                    {"index", g.index},
                    {"type", g.type},
                    {"memory", g.memory.raw()},
                    {"pci", g.pci_bus_id},
                    {"migEnabled", g.mig_enabled},
                    {"migLayout", std::move(mig)},
                    {"nvlinkIsland", g.nvlink_island},
                    {"numaNode", g.numa_node},
                    {"healthy", g.healthy}});
  }
  Json taints = Json::array();
  for (const Taint& t : n.taints) taints.push_back({t.key, t.value, t.effect});
  return {{"name", n.name},
          {"gpus", std::move(gpus)},
          {"cpu", n.cpu.raw()},
          {"memory", n.memory.raw()},
          {"maxTasks", n.max_tasks},
          {"labels", n.labels},
          {"taints", std::move(taints)},
          {"pool", n.pool},
          {"driver", n.driver_version},
          {"cuda", n.cuda_version},
          {"topology", {n.topology.zone, n.topology.spine, n.topology.leaf}},
          {"cordoned", n.cordoned}};
}

absl::StatusOr<Node> NodeFromJson(const Json& j) try {
  Node n;
  n.name = j.at("name").get<std::string>();
  for (const Json& x : j.at("gpus")) {
    Gpu g;
    g.uuid = x.at("uuid").get<std::string>();
    g.index = x.at("index").get<int>();
    g.type = x.at("type").get<std::string>();
    g.memory = MiB(x.at("memory").get<int64_t>());
    g.pci_bus_id = x.at("pci").get<std::string>();
    g.mig_enabled = x.at("migEnabled").get<bool>();
    for (const Json& m : x.at("migLayout")) {
      g.mig_layout.push_back({m.at(0).get<std::string>(), m.at(1).get<int>()});
    }
    g.nvlink_island = x.at("nvlinkIsland").get<int>();
    g.numa_node = x.at("numaNode").get<int>();
    g.healthy = x.at("healthy").get<bool>();
    n.gpus.push_back(std::move(g));
  }
  n.cpu = MilliCpu(j.at("cpu").get<int64_t>());
  n.memory = MiB(j.at("memory").get<int64_t>());
  n.max_tasks = j.at("maxTasks").get<int32_t>();
  n.labels = j.at("labels").get<std::map<std::string, std::string>>();
  for (const Json& t : j.at("taints")) {
    n.taints.push_back(
        {t.at(0).get<std::string>(), t.at(1).get<std::string>(), t.at(2).get<std::string>()});
  }
  n.pool = j.at("pool").get<std::string>();
  n.driver_version = j.at("driver").get<std::string>();
  n.cuda_version = j.at("cuda").get<int>();
  const Json& topo = j.at("topology");
  n.topology = {topo.at(0).get<std::string>(), topo.at(1).get<std::string>(),
                topo.at(2).get<std::string>()};
  n.cordoned = j.at("cordoned").get<bool>();
  return n;
} catch (const Json::exception& e) {
  return absl::InvalidArgumentError(std::string("node: ") + e.what());
}

Json ViewToJson(const sched::JobView& v) {
  Json placement = Json::array();
  for (const sched::HeldReplica& r : v.placement) {
    Json p = PlacementToJson(r.placement);
    p["node"] = r.node;
    placement.push_back(std::move(p));
  }
  Json usage = Json::array();
  for (const sched::UsageSpan& u : v.usage) usage.push_back({u.end_ms, u.gpu_type, u.gpu_seconds});
  return {{"phase", kPhases[static_cast<int>(v.phase)]},
          {"submitMs", v.submit_ms},
          {"notBeforeMs", v.not_before_ms},
          {"attainedGpuMs", v.attained_gpu_ms},
          {"waitingSinceMs", v.waiting_since_ms},
          {"placement", std::move(placement)},
          {"boundMs", v.bound_ms},
          {"startedMs", v.started_ms},
          {"lastCheckpointMs", v.last_checkpoint_ms},
          {"lasServiceGpuMs", v.las_service_gpu_ms},
          {"usage", std::move(usage)}};
}

absl::StatusOr<sched::JobView> ViewFromJson(const Json& j) try {
  sched::JobView v;
  const std::string phase = j.at("phase").get<std::string>();
  bool known = false;
  for (int i = 0; i < 4; ++i) {
    if (phase == kPhases[i]) {
      v.phase = static_cast<sched::JobViewPhase>(i);
      known = true;
    }
  }
  if (!known) return absl::InvalidArgumentError("view.phase: unknown phase " + phase);
  v.submit_ms = j.at("submitMs").get<int64_t>();
  v.not_before_ms = j.at("notBeforeMs").get<int64_t>();
  v.attained_gpu_ms = j.at("attainedGpuMs").get<int64_t>();
  v.waiting_since_ms = j.at("waitingSinceMs").get<int64_t>();
  for (const Json& r : j.at("placement")) {
    v.placement.push_back({r.at("node").get<std::string>(), PlacementFromJson(r)});
  }
  v.bound_ms = j.at("boundMs").get<int64_t>();
  v.started_ms = j.at("startedMs").get<int64_t>();
  v.last_checkpoint_ms = j.at("lastCheckpointMs").get<int64_t>();
  v.las_service_gpu_ms = j.at("lasServiceGpuMs").get<int64_t>();
  for (const Json& u : j.at("usage")) {
    v.usage.push_back({u.at(0).get<int64_t>(), u.at(1).get<std::string>(), u.at(2).get<double>()});
  }
  return v;
} catch (const Json::exception& e) {
  return absl::InvalidArgumentError(std::string("view: ") + e.what());
}

Json DecisionToJson(const sched::Decision& d, const sched::ClusterState& state) {
  static constexpr const char* kKinds[] = {"bind", "wait", "reject", "preempt"};
  Json j{{"kind", kKinds[static_cast<int>(d.kind)]}, {"job", d.job}};
  if (!d.reason.empty()) j["reason"] = d.reason;
  if (d.expected_start_ms) j["expectedStartMs"] = *d.expected_start_ms;
  if (d.kind == sched::DecisionKind::kPreempt) {
    j["preemptor"] = d.preemptor;
    j["graceMs"] = d.grace_ms;
  }
  if (d.allocation) {
    Json replicas = Json::array();
    for (const sched::ReplicaPlacement& r : d.allocation->replicas) {
      Json p = PlacementToJson(r);
      p["node"] = state.node(r.node).name;
      replicas.push_back(std::move(p));
    }
    j["replicas"] = std::move(replicas);
    j["expectedEndMs"] = d.allocation->expected_end_ms;
    j["lasServiceGpuMs"] = d.allocation->las_service_gpu_ms;
  }
  return j;
}

bool IsRecording(std::string_view first_line) {
  Json j = Json::parse(first_line, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("kind", "") == "header" && j.contains("version");
}

void RecordingWriter::Line(const Json& j) { out_ << j.dump() << '\n'; }

void RecordingWriter::Header(const SchedulerConfig& config) {
  SchedulerConfiguration c;
  c.metadata.name = "recorded";
  c.metadata.namespace_.clear();  // cluster-scoped
  c.spec = config;
  Line({{"kind", "header"},
        {"version", kRecordingVersion},
        {"config", Json::parse(manifest::ToJson(c))}});
  out_.flush();
}

void RecordingWriter::Queues(int64_t t_ms, const std::map<std::string, QueueSpec>& queues) {
  Json list = Json::array();
  for (const auto& [name, spec] : queues) {
    Queue q;
    q.metadata.name = name;
    q.metadata.namespace_.clear();  // cluster-scoped
    q.spec = spec;
    list.push_back(Json::parse(manifest::ToJson(q)));
  }
  Line({{"kind", "queues"}, {"t", t_ms}, {"queues", std::move(list)}});
}

void RecordingWriter::Nodes(int64_t t_ms, const std::vector<Node>& nodes) {
  std::map<std::string, const Node*> now;
  for (const Node& n : nodes) now[n.name] = &n;
  bool changed = false;
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (now.contains(it->first)) {
      ++it;
      continue;
    }
    Line({{"kind", "node-gone"}, {"t", t_ms}, {"name", it->first}});
    it = nodes_.erase(it);
    changed = true;
  }
  for (const auto& [name, node] : now) {
    auto [it, added] = nodes_.try_emplace(name, *node);
    if (!added && it->second == *node) continue;
    it->second = *node;
    Line({{"kind", "node"}, {"t", t_ms}, {"node", NodeToJson(*node)}});
    changed = true;
  }
  if (changed) Line({{"kind", "nodes-changed"}, {"t", t_ms}});
}

void RecordingWriter::Job(int64_t t_ms, const std::string& key, const gpucloud::Job& job,
                          const sched::JobView& view) {
  auto [it, added] = jobs_.try_emplace(key);
  Seen& seen = it->second;
  seen.this_pass = true;
  if (!added && seen.view == view) return;
  Json line{{"kind", "job"},
            {"t", t_ms},
            {"event", EventOf(added ? nullptr : &seen.view, view)},
            {"key", key}};
  std::string spec = manifest::ToJson(job);
  const size_t spec_hash = std::hash<std::string>()(spec);
  if (added || spec_hash != seen.spec_hash) line["spec"] = Json::parse(spec);
  line["view"] = ViewToJson(view);
  seen.view = view;
  seen.spec_hash = spec_hash;
  Line(line);
}

void RecordingWriter::Pass(int64_t t_ms, bool ran,
                           const std::vector<const sched::PendingJob*>& pending,
                           const std::vector<sched::Decision>& decisions,
                           const sched::ClusterState& state) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second.this_pass) {
      it->second.this_pass = false;
      ++it;
      continue;
    }
    Line({{"kind", "gone"}, {"t", t_ms}, {"key", it->first}});
    it = jobs_.erase(it);
  }
  if (ran) {
    Json keys = Json::array();
    for (const sched::PendingJob* p : pending) keys.push_back(p->request.key);
    Json list = Json::array();
    for (const sched::Decision& d : decisions) list.push_back(DecisionToJson(d, state));
    Line({{"kind", "pass"}, {"t", t_ms}, {"pending", std::move(keys)}, {"decisions", list}});
  }
  out_.flush();
}

}  // namespace gpucloud::sim
