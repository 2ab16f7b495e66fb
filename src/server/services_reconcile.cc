// ServiceController::Reconcile: one service's round (services.h says what it does).
#include <algorithm>
#include <cmath>

#include "absl/time/time.h"
#include "api/job_status.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/service_replicas.h"
#include "server/services.h"

namespace gpucloud::server {

using Json = nlohmann::ordered_json;

namespace {

double Round2(double v) { return std::round(v * 100) / 100; }

std::string Rfc3339(int64_t ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
}

// The node's address as its agent registered it ("" when unknown).
std::string AddressOf(const ObjectCache& nodes, const std::string& node) {
  auto it = nodes.objects().find(Cat("/nodes/", node));
  if (it == nodes.objects().end()) return "";
  const Json& st = it->second.doc.value("status", Json::object());
  return st.is_object() ? st.value("address", "") : "";
}

// A status equal but for its load figures (which change every round) is not worth a write
// more than every few seconds.
bool SameButLoad(Json a, Json b) {
  a.erase("load");
  b.erase("load");
  return a == b;
}

constexpr int64_t kLoadRefreshMs = 5000;

}  // namespace

const ServiceController::ParsedService* ServiceController::ParsedOf(CachedObject& obj,
                                                                    const std::string& key) {
  if (!obj.derived) {
    manifest::ParseResult p = manifest::ParseStoredManifest(obj.doc, key);
    const auto* svc = p.ok() && p.manifests.size() == 1
                          ? std::get_if<InferenceService>(&p.manifests[0].object)
                          : nullptr;
    if (svc == nullptr) return nullptr;  // never, unless edited in the store
    obj.derived = std::make_shared<ParsedService>(ParsedService{*svc, TemplateHash(*svc)});
  }
  return static_cast<const ParsedService*>(obj.derived.get());
}

ServiceController::Views ServiceController::ViewsOf(const Round& round, const std::string& ns,
                                                    const std::string& svc_key,
                                                    const std::string& tmpl) const {
  Views out;
  auto it = round.by_service.find(svc_key);
  if (it == round.by_service.end()) return out;
  for (const Replica& r : it->second) {
    out.existing.insert(r.job);
    std::shared_ptr<const gateway::ReplicaHealth::Entry> h = health_.Find(Cat(ns, "/", r.job));
    const bool is_ready = h && h->ready.load();
    ReplicaView v{.job = r.job, .current = r.tmpl == tmpl};
    v.state = r.stopping                 ? ReplicaView::State::kStopping
              : api::IsTerminal(r.phase) ? ReplicaView::State::kEnded
              : r.phase == api::JobPhase::kRunning
                  ? (is_ready ? ReplicaView::State::kReady : ReplicaView::State::kStarting)
              : r.phase == api::JobPhase::kScheduled ? ReplicaView::State::kStarting
                                                     : ReplicaView::State::kPending;
    v.in_flight = h ? h->in_flight.load() : 0;
    if (v.state == ReplicaView::State::kReady) ++out.ready;
    if (v.state != ReplicaView::State::kStopping && v.state != ReplicaView::State::kEnded) {
      ++out.live;
    }
    const std::string address = AddressOf(nodes_, r.node);
    if (!r.stopping && r.phase == api::JobPhase::kRunning && !address.empty() && r.port > 0) {
      out.endpoints.push_back(Json{{"job", r.job},
                                   {"node", r.node},
                                   {"address", Cat(address, ":", r.port)},
                                   {"ready", is_ready},
                                   {"current", v.current}});
    }
    out.replicas.push_back(std::move(v));
  }
  return out;
}

int64_t ServiceController::JobsIn(const std::string& ns) const {
  const std::string prefix = Cat("/jobs/", ns, "/");
  int64_t n = 0;
  for (auto it = jobs_.objects().lower_bound(prefix);
       it != jobs_.objects().end() && it->first.starts_with(prefix); ++it) {
    ++n;
  }
  return n;
}

absl::Status ServiceController::CreateReplicas(Round& round, const ParsedService& parsed,
                                               int32_t count, Views& views, int64_t* next,
                                               std::vector<store::Op>* ops) {
  const InferenceService& svc = parsed.svc;
  const std::string& ns = svc.metadata.namespace_;
  for (int32_t i = 0; i < count; ++i) {
    std::string name;
    do {
      name = ReplicaName(svc.metadata.name, (*next)++);
    } while (views.existing.count(name) || jobs_.objects().count(Cat("/jobs/", ns, "/", name)));
    views.existing.insert(name);
    const int port = FreeServicePort(round.ports, name);
    if (port == 0) return absl::ResourceExhaustedError("every service port is held");
    round.ports.insert(port);
    Job job = ReplicaJob(svc, name, port, parsed.tmpl);
    job.metadata.uid = NewUid();
    job.metadata.creation_unix_seconds = round.now / 1000;
    Json doc = Json::parse(manifest::ToJson(manifest::Object(job)));
    doc["status"] =
        Json{{"phase", api::PhaseName(api::JobPhase::kPending)}, {"submittedMs", round.now}};
    ops->push_back({store::Op::Kind::kPut, Cat("/jobs/", ns, "/", name), doc.dump(2), 0});
  }
  return absl::OkStatus();
}

absl::Status ServiceController::Reconcile(Round& round, const std::string& key, CachedObject& obj) {
  const ParsedService* parsed = ParsedOf(obj, key);
  if (parsed == nullptr) return absl::OkStatus();
  const InferenceService& svc = parsed->svc;
  const std::string& ns = svc.metadata.namespace_;
  const std::string svc_key = Cat(ns, "/", svc.metadata.name);
  const InferenceServiceSpec& spec = svc.spec;
  Views views = ViewsOf(round, ns, svc_key, parsed->tmpl);
  // How many: the scaler on the gateway's measurements.
  const ServiceAutoscaling& a = spec.autoscaling;
  gateway::LoadMeter::Reading load = load_.Read(svc_key, a.stable_window_seconds);
  remote_.MergeInto(svc_key, round.now, &load);  // the other servers' gateways' measurements
  autoscale::ScalerMemory& memory = memory_[svc_key];
  const int32_t before = memory.desired;
  autoscale::ScaleDecision d = autoscale::DecideReplicas(
      spec, load.samples,
      {.ready = views.ready,
       .live = views.live,
       .queued = load.queued,
       .last_request_ms = load.last_request_ms,
       .created_ms = std::max(svc.metadata.creation_unix_seconds * 1000, started_ms_)},
      memory, round.now);
  memory = d.memory;
  ReplicaPlan plan = PlanReplicas(spec, d.desired, views.replicas);
  // The namespace's job quota holds for replicas as for any job (the API's 403 QuotaExceeded).
  std::string quota;
  if (plan.create > 0 && options_.max_jobs_per_namespace > 0) {
    const int64_t held = JobsIn(ns);
    const int64_t room = std::max<int64_t>(0, options_.max_jobs_per_namespace - held);
    if (room < plan.create) {
      quota =
          Cat("namespace ", ns, " holds ", held, " jobs, its quota is ",
              options_.max_jobs_per_namespace, ": ", plan.create - room, " replica(s) not started");
      plan.create = static_cast<int32_t>(room);
    }
  }
  const Json old_status = obj.doc.value("status", Json::object());
  int64_t next = old_status.is_object() ? old_status.value("nextReplica", int64_t{1}) : 1;
  std::vector<store::Op> ops;
  if (absl::Status s = CreateReplicas(round, *parsed, plan.create, views, &next, &ops); !s.ok()) {
    return s;
  }
  for (const std::vector<std::string>* names : {&plan.stop, &plan.clear}) {
    for (const std::string& job : *names) {
      for (const Replica& r : round.by_service[svc_key]) {
        if (r.job != job || r.obj == nullptr) continue;
        ops.push_back(StopReplicaOp(Cat("/jobs/", ns, "/", job), r.obj->doc, r.obj->mod_revision));
      }
    }
  }
  const int32_t after = views.live + plan.create - static_cast<int32_t>(plan.stop.size());
  Json status = StatusOf(round, svc_key, old_status, d, before, after, views, load, spec);
  status["nextReplica"] = next;
  if (plan.waiting_for_idle) status["waitingForIdleReplica"] = true;
  if (!quota.empty()) status["quotaExceeded"] = quota;
  return WriteStatus(round.now, key, obj, svc_key, old_status, std::move(status), std::move(ops));
}

Json ServiceController::StatusOf(Round& round, const std::string& svc_key, const Json& old_status,
                                 const autoscale::ScaleDecision& d, int32_t before, int32_t after,
                                 Views& views, const gateway::LoadMeter::Reading& load,
                                 const InferenceServiceSpec& spec) {
  const ServiceAutoscaling& a = spec.autoscaling;
  Json history =
      old_status.is_object() ? old_status.value("history", Json::array()) : Json::array();
  ServiceMetrics::One& m = round.metrics.services[svc_key];
  if (before >= 0 && d.desired != before) {
    history.push_back(Json{
        {"time", Rfc3339(round.now)}, {"from", before}, {"to", d.desired}, {"reason", d.reason}});
    while (history.size() > kMaxServiceHistory) history.erase(history.begin());
    (d.desired > before ? m.scale_ups : m.scale_downs) += 1;
  }
  m.desired = d.desired;
  m.ready = views.ready;
  m.stable_load = d.stable_load;
  m.panic_load = d.panic_load;
  m.live = after;
  return Json{{"desiredReplicas", d.desired},
              {"replicas", after},
              {"readyReplicas", views.ready},
              {"reason", d.reason},
              {"load", Json{{"stable", Round2(d.stable_load)},
                            {"panic", Round2(d.panic_load)},
                            {"queued", load.queued},
                            {"metric", ServiceMetricName(a.metric)},
                            {"target", a.target}}},
              {"endpoints", std::move(views.endpoints)},
              {"history", std::move(history)}};
}

absl::Status ServiceController::WriteStatus(int64_t now, const std::string& key,
                                            const CachedObject& obj, const std::string& svc_key,
                                            const Json& old_status, Json status,
                                            std::vector<store::Op> ops) {
  const int64_t written = old_status.is_object() ? old_status.value("updatedMs", int64_t{0}) : 0;
  const bool due =
      now - written >= kLoadRefreshMs && old_status.value("load", Json()) != status["load"];
  status["updatedMs"] = written;
  if (ops.empty() && old_status.is_object() && SameButLoad(old_status, status) && !due) {
    return absl::OkStatus();
  }
  status["updatedMs"] = now;
  Json doc = obj.doc;
  doc["status"] = std::move(status);
  ops.push_back({store::Op::Kind::kPut, key, doc.dump(2), obj.mod_revision});
  absl::StatusOr<int64_t> rev = store_.Txn(ops);
  if (!rev.ok()) {
    if (!absl::IsAborted(rev.status())) Log(Cat(svc_key, ": ", rev.status().message()));
    return rev.status();
  }
  return absl::OkStatus();
}

std::string RenderServiceMetrics(const ServiceMetrics& m) {
  PromText out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out.Family(name, type, help);
    for (const auto& [svc, one] : m.services) {
      const size_t slash = svc.find('/');
      out.Sample({{"namespace", svc.substr(0, slash)}, {"service", svc.substr(slash + 1)}},
                 static_cast<double>(value(one)));
    }
  };
  using One = ServiceMetrics::One;
  family("gpucloud_service_replicas_desired", "gauge", "Replicas the autoscaler asks for.",
         [](const One& o) { return o.desired; });
  family("gpucloud_service_replicas", "gauge", "Replicas that exist (not being stopped).",
         [](const One& o) { return o.live; });
  family("gpucloud_service_replicas_ready", "gauge", "Replicas whose readiness check passes.",
         [](const One& o) { return o.ready; });
  family("gpucloud_service_load_stable", "gauge", "The scaling metric over the stable window.",
         [](const One& o) { return o.stable_load; });
  family("gpucloud_service_load_panic", "gauge", "The scaling metric over the panic window.",
         [](const One& o) { return o.panic_load; });
  family("gpucloud_service_scale_ups_total", "counter", "Scale-ups of the service.",
         [](const One& o) { return o.scale_ups; });
  family("gpucloud_service_scale_downs_total", "counter", "Scale-downs of the service.",
         [](const One& o) { return o.scale_downs; });
  return out.Take();
}

}  // namespace gpucloud::server
