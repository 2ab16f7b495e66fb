#include "server/services.h"

#include <algorithm>
#include <iostream>
#include <random>
#include <set>

#include "api/job_status.h"
#include "api/wire.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "fmt/format.h"
#include "manifest/manifest.h"
#include "server/job_status.h"
#include "server/service_replicas.h"

namespace gpucloud::server {

using Json = nlohmann::ordered_json;

namespace {

std::string JobKey(const std::string& ns, const std::string& name) {
  return Cat("/jobs/", ns, "/", name);
}

bool StoppingAlready(const CachedObject& obj) {
  const Json& s = obj.doc.contains("status") ? obj.doc["status"] : Json::object();
  return s.is_object() && s.value("deleteRequested", false);
}

}  // namespace

ServiceController::ServiceController(store::Store& store, const Clock& clock,
                                     gateway::LoadMeter& load, gateway::ReplicaHealth& health,
                                     ServiceControllerOptions options)
    : store_(store),
      clock_(clock),
      load_(load),
      health_(health),
      options_(std::move(options)),
      started_ms_(clock.NowMillis()),
      uid_state_(std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32)) {}

ServiceController::~ServiceController() { Stop(); }

void ServiceController::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void ServiceController::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ServiceController::Kick() {
  {
    std::lock_guard lock(mu_);
    kicked_ = true;
  }
  cv_.notify_all();
}

ServiceMetrics ServiceController::Metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

void ServiceController::Log(const std::string& what) const {
  if (options_.log) {
    options_.log(what);
  } else {
    std::cerr << "services: " << what << "\n";
  }
}

void ServiceController::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    kicked_ = false;
    lock.unlock();
    absl::Status s = RunOnce();
    if (!s.ok()) Log(Cat("round failed: ", s.message()));
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(options_.tick_ms),
                 [this] { return stopping_ || kicked_; });
  }
}

std::string ServiceController::NewUid() {
  auto next = [this] {
    uid_state_ ^= uid_state_ << 13;
    uid_state_ ^= uid_state_ >> 7;
    uid_state_ ^= uid_state_ << 17;
    return uid_state_;
  };
  const uint64_t a = next(), b = next();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     ((b >> 48) & 0x3fff) | 0x8000, b & 0xffffffffffff);
}

absl::Status ServiceController::ReadRemoteLoads(int64_t now_ms) {
  if (!options_.merge_remote || now_ms - remote_read_ms_ < 1000) return absl::OkStatus();
  remote_read_ms_ = now_ms;
  absl::StatusOr<store::ListResult> list = store_.List("/serviceload/");
  if (!list.ok()) return list.status();
  std::vector<store::Op> gone;
  constexpr std::string_view kPrefix = "/serviceload/";
  for (const store::KeyValue& kv : list->items) {
    // /serviceload/{gateway}/{ns}/{name}
    std::vector<std::string> parts = SplitAny(std::string_view(kv.key).substr(kPrefix.size()), "/");
    if (parts.size() != 3 || parts[0] == options_.local_gateway) continue;
    absl::StatusOr<gateway::LoadReport> report = gateway::LoadReportFromJson(kv.value);
    if (!report.ok() || now_ms - report->updated_ms > 60'000) {
      gone.push_back({store::Op::Kind::kDelete, kv.key, "", kv.mod_revision});
      continue;
    }
    remote_.Add(parts[0], Cat(parts[1], "/", parts[2]), *report);
  }
  remote_.Prune(now_ms);
  if (!gone.empty()) {
    absl::StatusOr<int64_t> rev = store_.Txn(gone);
    if (!rev.ok() && !absl::IsAborted(rev.status())) return rev.status();
  }
  return absl::OkStatus();
}

void ServiceController::CollectReplicas(Round& round) {
  std::map<std::string, std::string> address;  // node -> address, read when needed
  for (const auto& [key, obj] : jobs_.objects()) {
    // Every job in the cluster passes here each round: no copies of the ones that are no
    // service's replicas.
    auto m = obj.doc.find("metadata");
    if (m == obj.doc.end() || !m->is_object()) continue;
    const Json& meta = *m;
    auto l = meta.find("labels");
    if (l == meta.end() || !l->is_object()) continue;
    const Json& labels = *l;
    auto svc = labels.find(std::string(kServiceLabel));
    if (svc == labels.end() || !svc->is_string()) continue;
    Replica r;
    r.ns = meta.value("namespace", "");
    r.job = meta.value("name", "");
    r.tmpl = labels.value(std::string(kServiceTemplateLabel), "");
    r.obj = &obj;
    absl::StatusOr<JobStatus> status = JobStatusFromJson(obj.doc);
    if (status.ok()) {
      r.phase = status->phase;
      r.stopping = status->delete_requested || status->cancel_requested;
      if (!status->placement.empty()) r.node = status->placement[0].node;
    }
    // The port is the replica's PORT (service_replicas.h).
    const Json& spec = obj.doc.value("spec", Json::object());
    if (spec.contains("tasks") && spec["tasks"].is_array() && !spec["tasks"].empty()) {
      for (const Json& e : spec["tasks"][0].value("env", Json::array())) {
        if (e.is_object() && e.value("name", "") == "PORT") {
          r.port = std::atoi(e.value("value", "0").c_str());
        }
      }
    }
    if (r.port > 0 && !api::IsTerminal(r.phase)) round.ports.insert(r.port);
    round.by_service[Cat(r.ns, "/", svc->get<std::string>())].push_back(std::move(r));
  }
}

absl::Status ServiceController::RunOnce() {
  for (ObjectCache* c : {&services_, &jobs_, &nodes_}) {
    absl::StatusOr<bool> synced = c->Sync(store_);
    if (!synced.ok()) return synced.status();
  }
  Round round;
  round.now = clock_.NowMillis();
  if (absl::Status s = ReadRemoteLoads(round.now); !s.ok()) Log(Cat("load reports: ", s.message()));
  CollectReplicas(round);
  std::set<std::string> present;
  absl::Status result;
  for (auto& [key, obj] : services_.mutable_objects()) {
    const std::string ns = obj.doc["metadata"].value("namespace", "");
    const std::string name = obj.doc["metadata"].value("name", "");
    present.insert(Cat(ns, "/", name));
    absl::Status s = Reconcile(round, key, obj);
    if (!s.ok() && !absl::IsAborted(s)) result = s;
  }
  // A deleted service's replicas go with it.
  for (const auto& [svc, replicas] : round.by_service) {
    if (present.count(svc)) continue;
    std::vector<store::Op> ops;
    for (const Replica& r : replicas) {
      if (!StoppingAlready(*r.obj))
        ops.push_back(StopReplicaOp(JobKey(r.ns, r.job), r.obj->doc, r.obj->mod_revision));
    }
    if (!ops.empty()) {
      absl::StatusOr<int64_t> rev = store_.Txn(ops);
      if (!rev.ok() && !absl::IsAborted(rev.status())) result = rev.status();
    }
    memory_.erase(svc);
  }
  for (auto it = memory_.begin(); it != memory_.end();) {
    it = present.count(it->first) ? std::next(it) : memory_.erase(it);
  }
  {
    std::lock_guard lock(mu_);
    for (auto& [svc, one] : round.metrics.services) {
      auto old = metrics_.services.find(svc);
      if (old == metrics_.services.end()) continue;
      one.scale_ups += old->second.scale_ups;
      one.scale_downs += old->second.scale_downs;
    }
    metrics_ = std::move(round.metrics);
  }
  return result;
}

}  // namespace gpucloud::server
