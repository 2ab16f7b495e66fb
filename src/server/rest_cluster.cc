// The cluster half of the REST API: nodes and their agents' traffic (registration, heartbeats,
// assignments), cordon/uncordon/drain, and the job sub-resources (cancel, events, logs).
#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "api/wire.h"
#include "core/text.h"
#include "server/events.h"
#include "server/fenced_store.h"
#include "server/job_status.h"
#include "server/log_store.h"
#include "server/node_certs.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "server/rest_util.h"
#include "server/ssh_keys.h"

namespace gpucloud::server {
namespace {

constexpr Resource kNodes{"nodes", "Node", false};

// A stored job whose phase does not decode: the server's own document is damaged.
Response Damaged(const std::string& key, const absl::Status& s) {
  return FromStatus(absl::InternalError(Cat(key, ": ", s.message())));
}

// A reclamation notice's period (?seconds=S, 1 to 86400), or nullopt when it is missing or out
// of range (answered with NoticeRequired).
std::optional<int64_t> NoticeSeconds(const Request& r) {
  std::optional<int64_t> seconds = QueryInt(r, "seconds");
  if (!seconds || *seconds < 1 || *seconds > 86400) return std::nullopt;
  return seconds;
}
// The images a node's spec asks it to pre-pull (spec.prePull), oldest first.
std::vector<std::string> PrePullOf(const Json& doc) {
  std::vector<std::string> out;
  if (!doc.is_object() || !doc.contains("spec") || !doc["spec"].is_object()) return out;
  const Json& list = doc["spec"].contains("prePull") ? doc["spec"]["prePull"] : Json();
  if (!list.is_array()) return out;
  for (const Json& i : list) {
    if (i.is_string()) out.push_back(i.get<std::string>());
  }
  return out;
}
constexpr size_t kPrePullKept = 16;

Response NoticeRequired() {
  return Status(400, "BadRequest", "seconds: the notice period is required, 1 to 86400");
}

// When an agent whose chunk was refused for the log quota tries again (room comes back only
// when jobs are deleted), and how often a full namespace is swept for deleted jobs' logs.
constexpr absl::Duration kLogQuotaRetry = absl::Seconds(30);

// The logs of jobs the store no longer has (the controller deletes a job whose tasks had to
// stop first, and keeps no log store) are removed, giving their bytes back to the quota.
void RemoveLogsOfDeletedJobs(store::Store& store, LogStore& logs, const std::string& ns) {
  for (const std::string& job : logs.Jobs(ns)) {
    if (absl::IsNotFound(store.Get(Cat("/jobs/", ns, "/", job)).status())) logs.RemoveJob(ns, job);
  }
}

// An agent's chunk at `offset` (see LogStore), read at `agent_ms` (its `time`, unix ms; the
// server's clock when it sends none; LogStore's ChunkTimeMs keeps it out of the future and in
// order): 200 {"size":N} when it is all stored,
// 409 {"size":N} when the log has another length (the agent follows N), and 429 QuotaExceeded
// (Retry-After, details.size, details.retryAfterSeconds) when the namespace's quota left room
// for only part of it: the part before N is stored, the rest refused. The agent gives the
// refused part up (it says so in the log) and tries again after Retry-After: room comes back
// only when jobs are deleted.
// Whether the job's current attempt places the rank of `key` on `node` (NodeRestriction for
// log upload: a node ships only its own tasks' output).
bool PlacedOn(const Json& job, const LogKey& key, const std::string& node) {
  if (!job.is_object() || !job.contains("status")) return false;
  absl::StatusOr<JobStatus> s = JobStatusFromJson(job);
  if (!s.ok() || s->attempt != key.attempt) return false;
  return std::any_of(s->placement.begin(), s->placement.end(),
                     [&](const PlacedReplica& p) { return p.rank == key.rank && p.node == node; });
}

Response AppendLog(store::Store& store, LogStore& logs, int64_t now_ms,
                   std::optional<int64_t> agent_ms, const LogKey& key, int64_t offset,
                   const std::string& data) {
  absl::StatusOr<LogAppend> a = logs.Append(key, offset, data, agent_ms, now_ms);
  if (a.ok() && a->refused > 0 &&
      logs.SweepDue(key.namespace_, absl::FromUnixMillis(now_ms), kLogQuotaRetry)) {
    RemoveLogsOfDeletedJobs(store, logs, key.namespace_);
    a = logs.Append(key, offset, data, agent_ms, now_ms);
  }
  if (absl::IsInvalidArgument(a.status())) return {409, Cat("{\"size\":", logs.Size(key), "}\n")};
  if (!a.ok()) return FromStatus(a.status());
  if (a->refused == 0) return {200, Cat("{\"size\":", a->size, "}\n")};
  const int64_t retry_s = absl::ToInt64Seconds(kLogQuotaRetry);
  Response out =
      Status(429, "QuotaExceeded",
             Cat("namespace ", key.namespace_, " holds ", a->namespace_bytes,
                 " bytes of logs; its quota is ", logs.max_bytes_per_namespace(),
                 " (--max-log-bytes-per-namespace): ", a->refused,
                 " bytes of this chunk were refused; delete finished jobs to make room"));
  Json body = Json::parse(out.body);
  body["details"] = {{"size", a->size}, {"retryAfterSeconds", retry_s}};
  out.body = body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  out.headers["Retry-After"] = std::to_string(retry_s);
  return out;
}

// The last `n` lines of `text` (a last line without its newline counts as one).
std::string_view LastLines(std::string_view text, int64_t n) {
  if (n == 0) return {};
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  for (size_t at = end; at > 0; --at) {
    if (text[at - 1] == '\n' && --n == 0) return text.substr(at);
  }
  return text;
}

}  // namespace

bool HoldsNothing(const Json& job) {
  absl::StatusOr<api::JobPhase> phase = JobPhaseOf(job);
  if (!phase.ok()) return false;  // not known to hold nothing
  return api::IsTerminal(*phase) ||
         (*phase == api::JobPhase::kPending &&
          !(job.contains("status") && job["status"].contains("placement")));
}

void ApplyLiveGpuHealth(const NodeTable& nodes, Json& doc) {
  if (!doc.is_object() || !doc.contains("metadata") || !doc["metadata"].is_object()) return;
  std::optional<NodeReport> report = nodes.Get(doc["metadata"].value("name", ""));
  if (!report || report->heartbeat == nullptr) return;
  auto status = doc.find("status");
  if (status == doc.end() || !status->is_object() || !status->contains("gpus")) return;
  Json& gpus = (*status)["gpus"];
  if (!gpus.is_array()) return;
  for (const api::GpuHealth& h : report->heartbeat->gpus) {
    for (Json& g : gpus) {
      if (!g.is_object() || g.value("index", -1) != h.index) continue;
      g["healthy"] = h.healthy;
      if (!h.healthy) {
        g["reason"] = h.reason;
      } else {
        g.erase("reason");
      }
      g["atRisk"] = h.at_risk;
      if (h.at_risk) {
        g["risk"] = h.risk;
      } else {
        g.erase("risk");
      }
    }
  }
  (*status)["lastHeartbeatMs"] = report->last_heartbeat_ms;
}

void RestApi::AttachCluster(NodeTable* nodes, LogStore* logs, std::function<void()> kick,
                            std::function<std::string()> summary) {
  nodes_ = nodes;
  logs_ = logs;
  kick_ = std::move(kick);
  summary_ = std::move(summary);
}

Response RestApi::HandleNodes(const Request& r, const std::vector<std::string>& parts) {
  const bool task_secrets = parts.size() == 5 && parts[2] == "assignments" && parts[4] == "secrets";
  const bool dial_back = parts.size() == 4 && parts[2] == "sessions";
  if (parts.size() > 3 && !task_secrets && !dial_back) {
    return Status(404, "NotFound", Cat("no such path ", r.path));
  }
  Route route{&kNodes, "", parts.size() >= 2 ? parts[1] : ""};
  if (!route.name.empty() && !ValidateDnsLabel(route.name).ok()) {
    return Status(400, "BadRequest", Cat("name \"", route.name, "\" is not a DNS label"));
  }
  if (parts.size() == 1) {
    if (r.method != "GET")
      return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
    if (std::optional<Response> bad = RefuseQuery(r, kCollectionQuery)) return *bad;
    if (QueryTrue(r, "watch")) return Watch(r, route.Prefix());
    return List(r, route);
  }
  if (parts.size() == 2) {
    if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
    if (r.method == "GET") return Read(r, route);
    if (r.method == "PUT") return RegisterNode(r, route.name);
    if (r.method == "DELETE") return DeleteNode(r, route.name);
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  const std::string& sub = parts[2];
  if (sub == "certificate" && r.method == "POST") {
    if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
    return IssueNodeCertificate(r, route.name);
  }
  if (sub == "heartbeat" && r.method == "POST") {
    if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
    return Heartbeat(r, route.name);
  }
  if ((sub == "tunnel" && parts.size() == 3) || dial_back) {
    if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
    return AgentSession(r, route.name, dial_back ? parts[3] : "");
  }
  if (sub == "assignments" && r.method == "GET" && parts.size() == 5 && parts[4] == "secrets") {
    if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
    return TaskSecretsFor(r, route.name, parts[3]);
  }
  if (sub == "assignments" && r.method == "GET" && parts.size() == 3) {
    std::string prefix = Cat("/assignments/", route.name, "/");
    if (std::optional<Response> bad =
            RefuseQuery(r, {"watch", "resourceVersion", "timeoutSeconds", "allowWatchBookmarks"})) {
      return *bad;
    }
    if (QueryTrue(r, "watch")) return Watch(r, prefix);
    absl::StatusOr<store::ListResult> list = store_.List(prefix);
    if (!list.ok()) return FromStatus(list.status());
    Json out{{"apiVersion", "gpucloud/v1"},
             {"kind", "AssignmentList"},
             {"metadata", {{"resourceVersion", std::to_string(list->revision)}}},
             {"items", Json::array()}};
    for (const store::KeyValue& kv : list->items) out["items"].push_back(WithRevision(kv));
    return {200, out.dump() + "\n"};
  }
  if ((sub == "cordon" || sub == "uncordon" || sub == "drain" || sub == "reclaim") &&
      r.method == "POST") {
    std::optional<Response> bad =
        sub == "reclaim" ? RefuseQuery(r, {"seconds"}) : RefuseQuery(r, kNoQuery);
    if (bad) return *bad;
    return SetNodeFlags(r, route.name, sub);
  }
  return Status(404, "NotFound", Cat("no such path ", r.method, " ", r.path));
}

Response RestApi::DeleteNode(const Request& r, const std::string& name) {
  (void)r;
  // Its certificates go with it, in the same transaction: a deleted node's agent is refused at
  // once, and a bootstrap token may join a machine under its name again.
  std::vector<store::Op> ops = {{store::Op::Kind::kDelete, Cat("/nodes/", name), "", std::nullopt}};
  if (node_certs_ != nullptr && store_.Get(NodeCertificates::ForgetOp(name).key).ok()) {
    ops.push_back(NodeCertificates::ForgetOp(name));
  }
  absl::StatusOr<int64_t> rev = store_.Txn(ops);
  if (!rev.ok()) return FromStatus(rev.status());
  if (node_certs_ != nullptr) node_certs_->Forget(name, *rev);
  if (nodes_ != nullptr) nodes_->Forget(name);
  if (kick_) kick_();
  return Status(200, "Deleted", Cat("Node ", name, " deleted at revision ", *rev));
}

Response RestApi::IssueNodeCertificate(const Request& r, const std::string& name) {
  if (node_certs_ == nullptr) return Status(404, "NotFound", "this server signs no certificates");
  using Asker = NodeCertificates::Asker;
  Asker asker;
  if (r.who.admin) {
    asker = Asker::kAdmin;
  } else if (r.who.node) {
    asker = Asker::kNode;
  } else if (r.who.bootstrap) {
    asker = Asker::kBootstrap;
  } else {
    return Status(403, "Forbidden", Cat("user ", r.who.user, " may not ask for node certificates"));
  }
  absl::StatusOr<NodeCertificates::Issued> issued =
      node_certs_->Issue(name, r.body, asker, r.who.node_name);
  if (absl::IsInvalidArgument(issued.status())) {
    return Status(422, "Invalid", Cat("body: ", issued.status().message()));
  }
  if (!issued.ok()) return FromStatus(issued.status());
  Json out{{"apiVersion", "gpucloud/v1"},
           {"kind", "NodeCertificate"},
           {"metadata", {{"name", name}}},
           {"status",
            {{"certificate", issued->certificate_pem},
             {"serial", issued->serial},
             {"notAfter",
              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", issued->not_after, absl::UTCTimeZone())}}}};
  return {201, out.dump(2) + "\n"};
}

Response RestApi::RegisterNode(const Request& r, const std::string& name) {
  absl::StatusOr<api::NodeInfo> info = api::NodeFromJson(r.body);
  if (!info.ok()) return Status(422, "Invalid", std::string(info.status().message()));
  if (info->name != name) {
    return Status(400, "BadRequest",
                  Cat("metadata.name: is ", info->name, ", but the path says ", name));
  }
  std::string key = Cat("/nodes/", name);
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<store::KeyValue> current = store_.Get(key);
    if (!current.ok() && !absl::IsNotFound(current.status())) return FromStatus(current.status());
    Json old = current.ok() ? Json::parse(current->value, nullptr, false) : Json::object();
    bool unschedulable = false, draining = false;
    int64_t health_reset = 0, reclaim_at = 0;
    Json pre_pull = Json::array();
    if (old.contains("spec") && old["spec"].is_object()) {
      if (old["spec"].contains("prePull") && old["spec"]["prePull"].is_array()) {
        pre_pull = old["spec"]["prePull"];
      }
      unschedulable = old["spec"].value("unschedulable", false);
      draining = old["spec"].value("draining", false);
      health_reset = old["spec"].value("healthReset", int64_t{0});
      reclaim_at = old["spec"].value("reclaimAtMs", int64_t{0});
    }
    // The operator's flags outlive a re-registration (an agent restart).
    Json doc = Json::parse(api::NodeToJson(*info, unschedulable));
    if (draining) doc["spec"]["draining"] = true;
    if (reclaim_at > 0) doc["spec"]["reclaimAtMs"] = reclaim_at;
    if (health_reset > 0) doc["spec"]["healthReset"] = health_reset;
    if (!pre_pull.empty()) doc["spec"]["prePull"] = pre_pull;
    std::string uid = old.contains("metadata") ? old["metadata"].value("uid", "") : "";
    doc["metadata"]["uid"] = uid.empty() ? NewUid() : uid;
    std::string created =
        old.contains("metadata") ? old["metadata"].value("creationTimestamp", "") : "";
    doc["metadata"]["creationTimestamp"] =
        created.empty()
            ? absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(clock_.NowMillis()),
                               absl::UTCTimeZone())
            : created;
    doc["status"]["ready"] = true;
    doc["status"]["readyReason"] = "Registered";
    doc["status"]["readyMessage"] = "the agent registered";
    doc["status"]["readySinceMs"] = clock_.NowMillis();
    absl::StatusOr<int64_t> rev =
        store_.Txn({{store::Op::Kind::kPut, key, doc.dump(2),
                     current.ok() ? std::optional<int64_t>(current->mod_revision)
                                  : std::optional<int64_t>(0)}});
    if (absl::IsAborted(rev.status()) || absl::IsAlreadyExists(rev.status()) ||
        absl::IsNotFound(rev.status())) {
      continue;  // the controller wrote meanwhile: read again
    }
    if (!rev.ok()) return FromStatus(rev.status());
    if (nodes_ != nullptr) {
      nodes_->Record(name, {}, clock_.NowMillis());
      nodes_->SetHealthReset(name, health_reset);
      nodes_->SetPrePull(name, PrePullOf(doc));
    }
    if (kick_) kick_();
    doc["metadata"]["resourceVersion"] = std::to_string(*rev);
    return {current.ok() ? 200 : 201, doc.dump(2) + "\n"};
  }
  return Status(409, "Conflict", Cat(key, " keeps changing; retry"));
}

namespace {

// Who leads, as the election key says ("" when nobody does or it does not parse).
std::string LeaderUrl(store::Store& store) {
  absl::StatusOr<store::KeyValue> kv = store.Get(kLeaderKey);
  if (!kv.ok()) return "";
  Json who = Json::parse(kv->value, nullptr, false);
  return who.is_object() && who.contains("url") && who["url"].is_string()
             ? who["url"].get<std::string>()
             : "";
}

}  // namespace

Response RestApi::Heartbeat(const Request& r, const std::string& name) {
  if (nodes_ == nullptr) return Status(404, "NotFound", "this server takes no heartbeats");
  if (leads_ && !leads_()) {
    std::string message = "this server is a standby: heartbeats go to the leader";
    if (std::string leader = LeaderUrl(store_); !leader.empty()) {
      message += ", ";
      message += leader;
    } else {
      message += " once one is elected (no server leads now)";
    }
    Response out = Status(503, "NotLeader", std::move(message));
    out.headers["Retry-After"] = std::to_string(1);
    return out;
  }
  absl::StatusOr<api::Heartbeat> hb = api::HeartbeatFromJson(r.body);
  if (!hb.ok()) return Status(422, "Invalid", std::string(hb.status().message()));
  if (!nodes_->Get(name)) {
    return Status(404, "NotFound", Cat("node ", name, " is not registered (register it first)"));
  }
  if (nodes_->Record(name, std::move(*hb), clock_.NowMillis()) && kick_) kick_();
  Json out{{"ok", true}, {"healthReset", nodes_->HealthReset(name)}};
  // The ended tasks' reports the controller has read: the agent stops sending those whose
  // assignment is gone (agent/heartbeat_reports.h). In the heartbeat's own encoding.
  api::Heartbeat read;
  read.tasks = nodes_->Acknowledged(name);
  out["acknowledged"] = Json::parse(api::HeartbeatToJson(read))["tasks"];
  if (std::vector<std::string> images = nodes_->PrePull(name); !images.empty()) {
    out["prePull"] = images;
  }
  return {200, out.dump() + "\n"};
}

Response RestApi::SetNodeFlags(const Request& r, const std::string& name, const std::string& verb) {
  std::string key = Cat("/nodes/", name);
  const std::optional<int64_t> notice = NoticeSeconds(r);
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<store::KeyValue> current = store_.Get(key);
    if (!current.ok()) {
      if (absl::IsNotFound(current.status()))
        return Status(404, "NotFound", Cat("Node ", name, " not found"));
      return FromStatus(current.status());
    }
    Json doc = Json::parse(current->value, nullptr, false);
    if (verb == "reclaim") {
      // A spot reclamation notice (the clouds give two minutes): its jobs checkpoint and
      // requeue before the node goes away.
      if (!notice) return NoticeRequired();
      doc["spec"]["reclaimAtMs"] = clock_.NowMillis() + *notice * 1000;
    } else {
      doc["spec"].erase("reclaimAtMs");
    }
    doc["spec"]["unschedulable"] = verb != "uncordon";
    int64_t health_reset = doc["spec"].value("healthReset", int64_t{0});
    if (verb == "uncordon") doc["spec"]["healthReset"] = ++health_reset;  // GPUs trusted again
    if (verb == "drain") {
      doc["spec"]["draining"] = true;
    } else {
      doc["spec"].erase("draining");
    }
    absl::StatusOr<int64_t> rev =
        store_.Txn({{store::Op::Kind::kPut, key, doc.dump(2), current->mod_revision}});
    if (absl::IsAborted(rev.status())) continue;
    if (!rev.ok()) return FromStatus(rev.status());
    if (nodes_ != nullptr) nodes_->SetHealthReset(name, health_reset);
    if (kick_) kick_();
    (void)r;
    return {200, Present({key, doc.dump(2), 0, *rev, 0}).dump(2) + "\n"};
  }
  return Status(409, "Conflict", Cat(key, " keeps changing; retry"));
}

Response RestApi::PrePullPool(const Request& r, const std::string& pool) {
  auto q = r.query.find("image");
  std::optional<std::string> image =
      q == r.query.end() ? std::nullopt : std::optional<std::string>(q->second);
  if (!image || image->empty() || image->size() > 4096 || (*image)[0] == '-' ||
      std::any_of(image->begin(), image->end(),
                  [](unsigned char c) { return c <= ' ' || c == 0x7f; })) {
    return Status(400, "BadRequest", "image: give an image reference (?image=registry/x:1)");
  }
  // Every node of the pool in one transaction; the newest kPrePullKept images per node.
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<store::ListResult> list = store_.List("/nodes/");
    if (!list.ok()) return FromStatus(list.status());
    std::vector<store::Op> ops;
    std::vector<std::pair<std::string, std::vector<std::string>>> updated;
    for (const store::KeyValue& kv : list->items) {
      Json doc = Json::parse(kv.value, nullptr, false);
      if (!doc.is_object() || !doc["spec"].is_object() || doc["spec"].value("pool", "") != pool)
        continue;
      std::vector<std::string> images = PrePullOf(doc);
      std::erase(images, *image);
      images.push_back(*image);
      if (images.size() > kPrePullKept) images.erase(images.begin());
      doc["spec"]["prePull"] = images;
      ops.push_back({store::Op::Kind::kPut, kv.key, doc.dump(2), kv.mod_revision});
      updated.emplace_back(doc["metadata"].value("name", ""), std::move(images));
    }
    if (ops.empty()) return Status(404, "NotFound", Cat("no node is in pool \"", pool, "\""));
    absl::StatusOr<int64_t> rev = store_.Txn(ops);
    if (absl::IsAborted(rev.status())) continue;
    if (!rev.ok()) return FromStatus(rev.status());
    Json names = Json::array();
    for (auto& [name, images] : updated) {
      names.push_back(name);
      nodes_->SetPrePull(name, std::move(images));
    }
    Json out{{"kind", "PoolPrePull"}, {"pool", pool}, {"image", *image}, {"nodes", names}};
    return {200, out.dump(2) + "\n"};
  }
  return Status(409, "Conflict", "the pool's nodes keep changing; retry");
}

Response RestApi::ReclaimPool(const Request& r, const std::string& pool) {
  std::optional<int64_t> seconds = NoticeSeconds(r);
  if (!seconds) return NoticeRequired();
  // Every node of the pool in one transaction: the notice is durable for all of them or none.
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<store::ListResult> list = store_.List("/nodes/");
    if (!list.ok()) return FromStatus(list.status());
    const int64_t at = clock_.NowMillis() + *seconds * 1000;
    std::vector<store::Op> ops;
    Json names = Json::array();
    for (const store::KeyValue& kv : list->items) {
      Json doc = Json::parse(kv.value, nullptr, false);
      if (!doc.is_object() || !doc["spec"].is_object() || doc["spec"].value("pool", "") != pool)
        continue;
      doc["spec"]["reclaimAtMs"] = at;
      doc["spec"]["unschedulable"] = true;
      ops.push_back({store::Op::Kind::kPut, kv.key, doc.dump(2), kv.mod_revision});
      names.push_back(doc["metadata"].value("name", ""));
    }
    if (ops.empty()) return Status(404, "NotFound", Cat("no node is in pool \"", pool, "\""));
    absl::StatusOr<int64_t> rev = store_.Txn(ops);
    if (absl::IsAborted(rev.status())) continue;
    if (!rev.ok()) return FromStatus(rev.status());
    if (kick_) kick_();
    Json out{{"kind", "PoolReclaim"},
             {"pool", pool},
             {"nodes", names},
             {"reclaimAtMs", at},
             {"metadata", {{"resourceVersion", std::to_string(*rev)}}}};
    return {200, out.dump(2) + "\n"};
  }
  return Status(409, "Conflict", Cat("the nodes of pool ", pool, " keep changing; retry"));
}

Response RestApi::HandleJobSub(const Request& r, const Route& route, const std::string& sub) {
  std::optional<Response> bad;
  if (sub == "cancel" && r.method == "POST") {
    if ((bad = RefuseQuery(r, {"resourceVersion"}))) return *bad;
    return Cancel(r, route, /*and_delete=*/false);
  }
  if (sub == "logs" && r.method == "GET") {
    // follow: a followed log is the HTTPS front's loop over these reads.
    if ((bad = RefuseQuery(r, {"rank", "attempt", "offset", "limitBytes", "follow", "tailLines",
                               "sinceSeconds", "timestamps", "previous"}))) {
      return *bad;
    }
    return Logs(r, route);
  }
  if (sub == "logs" && r.method == "POST") {
    if ((bad = RefuseQuery(r, {"rank", "attempt", "offset", "time"}))) return *bad;
    return Logs(r, route);
  }
  if (sub == "status") {  // the object; its status is the controller's to write
    if (r.method != "GET") {
      return Status(405, "MethodNotAllowed",
                    Cat(r.method, " is not allowed on ", r.path,
                        ": a job's status is written by the controller alone"));
    }
    if ((bad = RefuseQuery(r, kNoQuery))) return *bad;
    return Read(r, route);
  }
  if (sub == "events" && r.method == "GET") {
    if ((bad = RefuseQuery(r, kNoQuery))) return *bad;
    return EventListOf(store_, EventPrefix(route.namespace_, route.name));
  }
  if ((sub == "exec" || sub == "portforward" || sub == "attach") && r.method == "GET") {
    return SessionTarget(r, route, sub);
  }
  return Status(404, "NotFound", Cat("no such path ", r.method, " ", r.path));
}

Response RestApi::Cancel(const Request& r, const Route& route, bool and_delete) {
  std::optional<int64_t> expect = QueryInt(r, "resourceVersion");
  if (expect && *expect < 0) {
    return Status(
        400, "BadRequest",
        Cat("resourceVersion: \"", r.query.at("resourceVersion"), "\" is not a revision"));
  }
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<store::KeyValue> current = store_.Get(route.Key());
    if (!current.ok()) {
      if (absl::IsNotFound(current.status())) {
        // No job of that name: an array's (rest_array.cc), whose elements go together.
        if (!expect) {
          if (std::optional<Response> array = CancelArray(r, route, and_delete)) return *array;
        }
        return Status(404, "NotFound",
                      Cat("Job ", route.namespace_, "/", route.name, " not found"));
      }
      return FromStatus(current.status());
    }
    if (expect && *expect != current->mod_revision) {
      return FromStatus(absl::AbortedError(Cat(route.Key(), " was changed: it is at revision ",
                                               current->mod_revision, ", not ", *expect)));
    }
    Json doc = Json::parse(current->value, nullptr, false);
    absl::StatusOr<api::JobPhase> phase = JobPhaseOf(doc);
    if (!phase.ok()) return Damaged(route.Key(), phase.status());
    const bool holds_nothing = HoldsNothing(doc);
    // Its ssh keys go with the delete request (ssh_keys.h): a task that is stopping needs
    // none, and no task of the job starts again.
    std::optional<store::Op> ssh_secret;
    if (and_delete && !DryRun(r)) {
      const bool has_ssh = doc.is_object() && doc.contains("spec") && doc["spec"].is_object() &&
                           doc["spec"].contains("ssh");
      absl::StatusOr<std::optional<store::Op>> op =
          SshSecretDeleteOp(store_, route.namespace_, route.name, has_ssh);
      if (!op.ok()) return FromStatus(op.status());
      ssh_secret = *op;
    }
    if (and_delete && DryRun(r)) {
      return Status(holds_nothing ? 200 : 202, holds_nothing ? "Deleted" : "Deleting",
                    Cat("Job ", route.Key(),
                        holds_nothing ? " would be deleted"
                                      : " would have its tasks stopped, then be deleted",
                        " (dry run)"));
    }
    if (and_delete && holds_nothing) {
      std::vector<store::Op> ops{
          {store::Op::Kind::kDelete, route.Key(), "", current->mod_revision}};
      for (const std::string& k : EventKeysOf(store_, route.namespace_, route.name)) {
        ops.push_back({store::Op::Kind::kDelete, k, "", std::nullopt});
      }
      if (ssh_secret) ops.push_back(*ssh_secret);
      absl::StatusOr<int64_t> rev = store_.Txn(ops);
      if (absl::IsAborted(rev.status())) continue;
      if (!rev.ok()) return FromStatus(rev.status());
      if (logs_ != nullptr) logs_->RemoveJob(route.namespace_, route.name);
      if (kick_) kick_();
      return Status(200, "Deleted", Cat("Job ", route.Key(), " deleted at revision ", *rev));
    }
    if (!and_delete && api::IsTerminal(*phase)) {
      return Status(409, "Conflict",
                    Cat("Job ", route.namespace_, "/", route.name, " has already ended (",
                        api::PhaseName(*phase), ")"));
    }
    doc["status"]["cancelRequested"] = true;
    if (and_delete) doc["status"]["deleteRequested"] = true;
    std::vector<store::Op> ops{
        {store::Op::Kind::kPut, route.Key(), doc.dump(2), current->mod_revision}};
    if (ssh_secret) ops.push_back(*ssh_secret);
    absl::StatusOr<int64_t> rev = store_.Txn(ops);
    if (absl::IsAborted(rev.status())) continue;
    if (!rev.ok()) return FromStatus(rev.status());
    if (kick_) kick_();
    return Status(202, and_delete ? "Deleting" : "Cancelling",
                  Cat("Job ", route.namespace_, "/", route.name, " is ", api::PhaseName(*phase),
                      and_delete ? "; its tasks are being stopped, then it is deleted"
                                 : "; its tasks are being stopped"));
  }
  return Status(409, "Conflict", Cat(route.Key(), " keeps changing; retry"));
}

Response RestApi::Logs(const Request& r, const Route& route) {
  if (logs_ == nullptr) return Status(404, "NotFound", "this server keeps no logs");
  constexpr int64_t kInt = std::numeric_limits<int32_t>::max();
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
  constexpr int64_t kSeconds = kAny / 1000;  // in milliseconds without overflow
  LogQuery q;
  for (auto [name, max, out] : {std::tuple{"rank", kInt, &q.rank},
                                {"attempt", kInt, &q.attempt},
                                {"offset", kAny, &q.offset},
                                {"limitBytes", kAny, &q.limit},
                                {"tailLines", kInt, &q.tail_lines},
                                {"sinceSeconds", kSeconds, &q.since_seconds},
                                {"time", kAny, &q.time_ms}}) {
    *out = QueryInt(r, name, max);
    if (*out && **out < 0) {
      return Status(400, "BadRequest",
                    Cat(name, ": \"", r.query.at(name), "\" is not a number",
                        max == kAny ? "" : Cat(" from 0 to ", max)));
    }
  }
  if (q.since_seconds && *q.since_seconds == 0) {  // Kubernetes: "must be greater than 0"
    return Status(400, "BadRequest", "sinceSeconds: \"0\" is not a number of seconds over 0");
  }
  q.timestamps = QueryTrue(r, "timestamps");
  absl::StatusOr<store::KeyValue> current = store_.Get(route.Key());
  if (!current.ok()) {
    if (absl::IsNotFound(current.status())) {
      return Status(404, "NotFound", Cat("Job ", route.namespace_, "/", route.name, " not found"));
    }
    return FromStatus(current.status());
  }
  Json doc = Json::parse(current->value, nullptr, false);
  int current_attempt = doc.contains("status") ? doc["status"].value("attempt", 0) : 0;
  if (QueryTrue(r, "previous")) {
    if (current_attempt == 0) {
      return Status(400, "BadRequest",
                    Cat("previous: job ", route.namespace_, "/", route.name,
                        " has had no attempt before its current one (0)"));
    }
    // With attempt (a followed log's later reads name the attempt they follow), the same one.
    if (q.attempt && *q.attempt != current_attempt - 1) {
      return Status(
          400, "BadRequest",
          Cat("previous: is attempt ", current_attempt - 1, ", but attempt says ", *q.attempt));
    }
    q.attempt = current_attempt - 1;
  }
  LogKey key{route.namespace_, route.name, static_cast<int>(q.attempt.value_or(current_attempt)),
             static_cast<int>(q.rank.value_or(0))};
  if (r.method == "POST") {
    if (r.who.node && !PlacedOn(doc, key, r.who.node_name)) {
      return Status(403, "Forbidden",
                    Cat("node ", r.who.node_name, " runs no rank ", key.rank, " of attempt ",
                        key.attempt, " of job ", route.namespace_, "/", route.name,
                        ": a node writes only its own tasks' logs"));
    }
    if (!q.rank || !q.attempt || !q.offset) {
      return Status(400, "BadRequest", "rank, attempt and offset are required to append to a log");
    }
    return AppendLog(store_, *logs_, clock_.NowMillis(), q.time_ms, key, *q.offset, r.body);
  }
  Response out = ReadLog(key, q);
  absl::StatusOr<api::JobPhase> phase = JobPhaseOf(doc);
  out.more = phase.ok() && !api::IsTerminal(*phase) && key.attempt == current_attempt;
  return out;
}

Response RestApi::ReadLog(const LogKey& key, const LogQuery& q) {
  // At most LogStore::kMaxReadBytes per answer, whatever limitBytes asks: clients page on with
  // the offset (and a followed log does). sinceSeconds: from the first line whose time is since
  // then; tailLines: the last lines of the log's last window of that size (of what is since,
  // with both: the shorter); offset: from there, whatever they say. X-Gpucloud-Offset says where
  // the log goes on (to follow it from there, or to page on).
  int64_t start = q.offset.value_or(0);
  if (!q.offset && q.since_seconds) {
    start = SinceStart(key, clock_.NowMillis() - *q.since_seconds * 1000);
  }
  const int64_t max_body =
      std::min(q.limit.value_or(LogStore::kMaxReadBytes), LogStore::kMaxReadBytes);
  std::string text;
  if (q.tail_lines && !q.offset) {
    const int64_t from = std::max<int64_t>(start, logs_->Size(key) - LogStore::kMaxReadBytes);
    text = logs_->Read(key, from, LogStore::kMaxReadBytes);
    const int64_t end = from + static_cast<int64_t>(text.size());
    text = std::string(LastLines(text, *q.tail_lines));
    start = end - static_cast<int64_t>(text.size());
    if (!q.timestamps && q.limit) text.resize(std::min<int64_t>(text.size(), max_body));
  } else {
    text = logs_->Read(key, start, q.timestamps ? max_body : q.limit.value_or(1 << 20));
  }
  int64_t next = start + static_cast<int64_t>(text.size());
  if (q.timestamps) {
    const bool at_line_start = start == 0 || logs_->Read(key, start - 1, 1) == "\n";
    const std::vector<LogTime> times = logs_->Times(key, start, next);
    PrefixedLog prefixed = PrefixLines(text, start, at_line_start, times, max_body);
    text = std::move(prefixed.text);
    next = start + prefixed.consumed;
  }
  Response out{200, std::move(text), "text/plain"};
  out.headers["X-Gpucloud-Attempt"] = std::to_string(key.attempt);
  out.headers["X-Gpucloud-Offset"] = std::to_string(next);
  return out;
}

int64_t RestApi::SinceStart(const LogKey& key, int64_t cutoff_ms) const {
  const int64_t chunk = logs_->SinceOffset(key, cutoff_ms);
  if (chunk == 0) return 0;
  // A chunk may begin within a line: that line's start is older, so the first line after it.
  std::string window = logs_->Read(key, chunk - 1, LogStore::kMaxReadBytes);
  return LineStartAtOrAfter(window, chunk - 1, chunk);
}

}  // namespace gpucloud::server
