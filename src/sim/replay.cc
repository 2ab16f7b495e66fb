#include "sim/replay.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/text.h"
#include "manifest/manifest.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"
#include "sim/recording.h"

namespace gpucloud::sim {
namespace {

using Json = nlohmann::json;

// One object of a manifest kind from its recorded gpucloud/v1 JSON.
template <typename T>
absl::StatusOr<T> ObjectFromJson(const Json& j, const GpuCatalog& catalog) {
  manifest::ParseResult r =
      manifest::ParseStoredManifest(nlohmann::ordered_json::parse(j.dump()), "recording", catalog);
  if (!r.ok()) return absl::InvalidArgumentError(r.errors[0].ToString());
  if (r.manifests.size() != 1 || !std::holds_alternative<T>(r.manifests[0].object)) {
    return absl::InvalidArgumentError("not the expected kind");
  }
  return std::get<T>(std::move(r.manifests[0].object));
}

struct ReplayJob {
  std::optional<Job> job;
  sched::JobView view;
};

class Replayer {
 public:
  Replayer(const ReplayOptions& o, const GpuCatalog& catalog) : o_(o), catalog_(catalog) {}

  absl::Status Line(const Json& j) {
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "header") return Header(j);
    if (!config_) return absl::InvalidArgumentError("the header must come first");
    if (kind == "queues") return Queues(j);
    if (kind == "node") return NodeLine(j);
    if (kind == "node-gone") {
      nodes_.erase(j.at("name").get<std::string>());
      node_list_.reset();
      return absl::OkStatus();
    }
    if (kind == "nodes-changed") {
      if (nodes_seen_++) ++result_.node_changes;
      return absl::OkStatus();
    }
    if (kind == "job") return JobLine(j);
    if (kind == "gone") {
      jobs_.erase(j.at("key").get<std::string>());
      return absl::OkStatus();
    }
    if (kind == "pass") return Pass(j);
    return absl::InvalidArgumentError(Cat("unknown kind \"", kind, "\""));
  }

  void Torn() { ++result_.torn_lines; }

  ReplayResult result() {
    result_.jobs = static_cast<int64_t>(seen_.size());
    return result_;
  }

 private:
  absl::Status Header(const Json& j) {
    if (j.at("version").get<int>() != kRecordingVersion) {
      return absl::InvalidArgumentError(Cat("recording version ", j.at("version").dump(),
                                            "; this build reads ", kRecordingVersion));
    }
    absl::StatusOr<SchedulerConfiguration> c =
        ObjectFromJson<SchedulerConfiguration>(j.at("config"), catalog_);
    if (!c.ok()) return absl::InvalidArgumentError(Cat("config: ", c.status().message()));
    config_ = o_.policy ? *o_.policy : c->spec;
    // A header after the first: a new leader term (or a restarted server) starts afresh.
    queues_.clear();
    nodes_.clear();
    node_list_.reset();
    jobs_.clear();
    scheduler_.reset();
    workload_.clear();
    return absl::OkStatus();
  }

  absl::Status Queues(const Json& j) {
    queues_.clear();
    for (const Json& q : j.at("queues")) {
      absl::StatusOr<Queue> queue = ObjectFromJson<Queue>(q, catalog_);
      if (!queue.ok()) return absl::InvalidArgumentError(Cat("queue: ", queue.status().message()));
      queues_[queue->metadata.name] = queue->spec;
    }
    scheduler_.reset();  // the server makes a new scheduler when its queues change
    return absl::OkStatus();
  }

  absl::Status NodeLine(const Json& j) {
    absl::StatusOr<Node> node = NodeFromJson(j.at("node"));
    if (!node.ok()) return node.status();
    std::string name = node->name;
    nodes_.insert_or_assign(std::move(name), *std::move(node));
    node_list_.reset();
    return absl::OkStatus();
  }

  absl::Status JobLine(const Json& j) {
    const std::string key = j.at("key").get<std::string>();
    ReplayJob& job = jobs_[key];
    seen_.insert(key);
    if (j.contains("spec")) {
      absl::StatusOr<Job> spec = ObjectFromJson<Job>(j["spec"], catalog_);
      if (!spec.ok())
        return absl::InvalidArgumentError(Cat(key, ": spec: ", spec.status().message()));
      job.job = *std::move(spec);
    }
    if (!job.job) return absl::InvalidArgumentError(Cat(key, ": no spec before its first view"));
    absl::StatusOr<sched::JobView> view = ViewFromJson(j.at("view"));
    if (!view.ok()) return view.status();
    job.view = *std::move(view);
    return absl::OkStatus();
  }

  absl::Status EnsureScheduler() {
    if (scheduler_) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<sched::Scheduler>> s =
        sched::Scheduler::FromConfig(*config_, queues_, catalog_);
    if (!s.ok()) return s.status();
    scheduler_ = *std::move(s);
    workload_.clear();  // as the server: a new scheduler has the default mix until a pass sets it
    return absl::OkStatus();
  }

  absl::Status Pass(const Json& j) {
    if (absl::Status s = EnsureScheduler(); !s.ok()) return s;
    const int64_t now = j.at("t").get<int64_t>();
    ++result_.passes;
    std::vector<sched::SnapshotJob> in;
    in.reserve(jobs_.size());
    for (const auto& [key, job] : jobs_) in.push_back({key, &*job.job, &job.view});
    if (!node_list_) {  // rebuilt only after a node line
      node_list_.emplace();
      for (const auto& [name, node] : nodes_) node_list_->push_back(node);
    }
    sched::Snapshot snap =
        sched::BuildSnapshot(*node_list_, in, config_->fair_share_window_s * 1000, now, catalog_);
    result_.holding_conflicts += static_cast<int64_t>(snap.holding_conflicts.size());
    if (scheduler_->options().fair_share) scheduler_->SetHistory(snap.history);
    if (snap.workload != workload_) {
      scheduler_->SetWorkload(snap.workload);
      workload_ = snap.workload;
    }
    std::vector<const sched::PendingJob*> pending;
    Json keys = Json::array();
    for (const sched::PendingJob& p : snap.pending) {
      pending.push_back(&p);
      keys.push_back(p.request.key);
    }
    std::vector<sched::Decision> decisions = scheduler_->Schedule(*snap.state, pending, now);
    Compare(j, now, keys, decisions, *snap.state);
    return absl::OkStatus();
  }

  void Compare(const Json& j, int64_t now, const Json& keys,
               const std::vector<sched::Decision>& decisions, const sched::ClusterState& state) {
    const Json& recorded = j.at("decisions");
    for (const Json& d : recorded) {
      ++result_.decisions;
      const std::string kind = d.at("kind").get<std::string>();
      result_.binds += kind == "bind";
      result_.preemptions += kind == "preempt";
      result_.rejections += kind == "reject";
      result_.waits += kind == "wait";
    }
    std::optional<Divergence> diff;
    if (keys != j.at("pending")) {
      diff = Divergence{result_.passes, now, -1, j.at("pending").dump(), keys.dump()};
    }
    for (size_t i = 0; !diff && i < std::max(recorded.size(), decisions.size()); ++i) {
      std::string server = i < recorded.size() ? recorded[i].dump() : "";
      std::string replay = i < decisions.size() ? DecisionToJson(decisions[i], state).dump() : "";
      if (server != replay) {
        diff = Divergence{result_.passes, now, static_cast<int64_t>(i), server, replay};
      }
    }
    if (!diff) return;
    ++result_.differing_passes;
    if (!result_.first) result_.first = std::move(diff);
  }

  const ReplayOptions& o_;
  const GpuCatalog& catalog_;
  std::optional<SchedulerConfig> config_;
  std::map<std::string, QueueSpec> queues_;
  std::map<std::string, Node> nodes_;           // the scheduler's nodes are in name order
  std::optional<std::vector<Node>> node_list_;  // nodes_ as a list, until a node line
  int64_t nodes_seen_ = 0;
  std::map<std::string, ReplayJob> jobs_;
  std::set<std::string> seen_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::vector<WorkloadShare> workload_;
  ReplayResult result_;
};

}  // namespace

absl::StatusOr<ReplayResult> Replay(std::string_view recording, const ReplayOptions& options,
                                    const GpuCatalog& catalog) {
  Replayer r(options, catalog);
  int line_no = 0;
  for (std::string_view rest = recording; !rest.empty();) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    ++line_no;
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      // A line cut short by a crash: the file's last, or followed by the restarted server's
      // header. Anything else is not a recording.
      std::string_view next = rest.substr(0, rest.find('\n'));
      if (rest.empty() || IsRecording(next)) {
        r.Torn();
        continue;
      }
      return absl::InvalidArgumentError(Cat("recording line ", line_no, ": not a JSON object"));
    }
    absl::Status s;
    try {
      s = r.Line(j);
    } catch (const Json::exception& e) {
      s = absl::InvalidArgumentError(e.what());
    }
    if (!s.ok()) {
      return absl::InvalidArgumentError(Cat("recording line ", line_no, ": ", s.message()));
    }
  }
  if (line_no == 0) return absl::InvalidArgumentError("recording: empty");
  return r.result();
}

std::string DescribeDivergence(const Divergence& d) {
  std::string what = d.index < 0 ? std::string("the waiting jobs") : Cat("decision ", d.index + 1);
  return Cat("first difference at pass ", d.pass, " (t=", d.t_ms, " ms), ", what,
             ":\n  server: ", d.server.empty() ? "(none)" : d.server,
             "\n  replay: ", d.replay.empty() ? "(none)" : d.replay);
}

}  // namespace gpucloud::sim
