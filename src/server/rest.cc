#include "server/rest.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "authz/policy_set.h"
#include "core/query.h"
#include "core/text.h"
#include "manifest/json_yaml.h"
#include "manifest/manifest.h"
#include "server/audited_store.h"
#include "server/authorizer.h"
#include "server/gpu_usage.h"
#include "server/identity_book.h"
#include "server/job_arrays.h"
#include "server/job_status.h"
#include "server/paths.h"
#include "server/rest_paging.h"
#include "server/rest_util.h"
#include "server/service_replicas.h"
#include "server/ssh_keys.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kPrefix = "/apis/gpucloud/v1/";

constexpr Resource kResources[] = {{"jobs", "Job", true},
                                   {"queues", "Queue", false},
                                   {"nodepools", "NodePool", false},
                                   {"runtimeclasses", "RuntimeClass", false},
                                   {"inferenceservices", "InferenceService", true}};

}  // namespace

const manifest::ParseResult& ParsedBody(const Request& r) {
  if (!r.parsed_body) {
    r.parsed_body =
        std::make_shared<const manifest::ParseResult>(manifest::ParseManifests(r.body, "body"));
  }
  return *r.parsed_body;
}

std::string ParseJsonBody(const std::string& body, Json* out) {
  std::string text = body;
  if (size_t at = text.find_first_not_of(" \t\r\n"); at == std::string::npos || text[at] != '{') {
    absl::StatusOr<std::string> json = manifest::YamlToJson(text);
    if (!json.ok()) return Cat("body: ", json.status().message());
    text = *json;
  }
  *out = Json::parse(text, nullptr, false);
  return out->is_object() ? "" : "body: must be a JSON or YAML object";
}

Response Status(int code, std::string_view reason, std::string message) {
  Json j = Json::object();
  j["apiVersion"] = "v1";
  j["kind"] = "Status";
  j["status"] = code < 400 ? "Success" : "Failure";
  j["message"] = std::move(message);
  j["reason"] = reason;
  j["code"] = code;
  // Messages quote what the client sent (paths, names), which need not be UTF-8.
  return {code, j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"};
}

namespace {

bool IsBoolKey(std::string_view key) {
  return key == "watch" || key == "follow" || key == "allowWatchBookmarks" || key == "timestamps" ||
         key == "previous" || key == "whatIf";
}

}  // namespace

void ParseTarget(std::string_view target, Request* r) {
  RequestTarget t = ParseRequestTarget(target);
  r->path = std::move(t.path);
  r->query = std::move(t.query);
}

std::optional<int64_t> QueryInt(const Request& r, const char* key, int64_t max) {
  auto it = r.query.find(key);
  if (it == r.query.end()) return std::nullopt;
  return ParseQueryInt(it->second, max).value_or(-1);
}

std::optional<bool> QueryBool(const Request& r, const char* key, bool absent) {
  auto it = r.query.find(key);
  if (it == r.query.end()) return absent;
  const std::string& v = it->second;
  if (v == "true" || v == "True" || v == "TRUE" || v == "1") return true;
  if (v == "false" || v == "False" || v == "FALSE" || v == "0") return false;
  return std::nullopt;
}

std::optional<Response> RefuseQuery(const Request& r, std::span<const std::string_view> allowed) {
  for (const auto& [key, value] : r.query) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::vector<std::string> names(allowed.begin(), allowed.end());
      return Status(
          400, "BadRequest",
          Cat("query parameter \"", key, "\" is not supported on ", r.method, " ", r.path,
              names.empty() ? " (it takes none)" : Cat(" (it takes ", Join(names, ", "), ")")));
    }
    if (IsBoolKey(key) && !QueryBool(r, key.c_str())) {
      return Status(
          400, "BadRequest",
          Cat(key, ": \"", value, "\" is not a boolean (true, True, 1, false, False, 0)"));
    }
    if (key == "fieldValidation" && value != "Strict" && value != "Warn" && value != "Ignore") {
      return Status(400, "BadRequest",
                    Cat("fieldValidation: \"", value, "\" is not Strict, Warn or Ignore"));
    }
    if (key == "dryRun" && value != "All") {
      return Status(400, "BadRequest",
                    Cat("dryRun: \"", value, "\" is not a dry run (the one value is All)"));
    }
    if (key == "timeoutSeconds" && *QueryInt(r, "timeoutSeconds", 999'999) < 0) {
      return Status(400, "BadRequest",
                    Cat("timeoutSeconds: \"", value, "\" is not a number from 0 to 999999"));
    }
  }
  return std::nullopt;
}

Response FromStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return Status(404, "NotFound", std::string(s.message()));
    case absl::StatusCode::kAlreadyExists:
      return Status(409, "AlreadyExists", std::string(s.message()));
    case absl::StatusCode::kAborted:
      return Status(409, "Conflict",
                    Cat(s.message(),
                        "; read the object again and retry with its "
                        "resourceVersion"));
    case absl::StatusCode::kOutOfRange:
      return Status(410, "Expired", std::string(s.message()));
    case absl::StatusCode::kInvalidArgument:
      return Status(400, "BadRequest", std::string(s.message()));
    case absl::StatusCode::kPermissionDenied:
      return Status(403, "Forbidden", std::string(s.message()));
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded: {
      // The store is away (etcd lost its quorum, or this server lost etcd): nothing was
      // acknowledged; try again, or another server (api::Client moves on at a 503).
      Response r = Status(503, "ServiceUnavailable", Cat("the store: ", s.message()));
      r.headers["Retry-After"] = std::to_string(1);
      return r;
    }
    default:
      return Status(500, "InternalError", std::string(s.message()));
  }
}

Response EventListOf(store::Store& store, const std::string& prefix) {
  absl::StatusOr<store::ListResult> list = store.List(prefix);
  if (!list.ok()) return FromStatus(list.status());
  Json out{{"apiVersion", "gpucloud/v1"},
           {"kind", "EventList"},
           {"metadata", {{"resourceVersion", std::to_string(list->revision)}}},
           {"items", Json::array()}};
  for (const store::KeyValue& kv : list->items) out["items"].push_back(WithRevision(kv));
  return {200, out.dump(2) + "\n"};
}

// The stored document with the store's revision as metadata.resourceVersion.
Json WithRevision(const store::KeyValue& kv) {
  Json j = Json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("metadata")) {
    j["metadata"]["resourceVersion"] = std::to_string(kv.mod_revision);
  }
  return j;
}

namespace {

// A label selector: "k=v,k!=v,k,!k" (equality, inequality, existence, absence).
struct Selector {
  struct Term {
    std::string key, value;
    enum { kEq, kNe, kExists, kAbsent } op;
  };
  std::vector<Term> terms;
  bool Matches(const Json& object) const {
    Json labels = Json::object();
    if (object.contains("metadata") && object["metadata"].contains("labels")) {
      labels = object["metadata"]["labels"];
    }
    for (const Term& t : terms) {
      bool has = labels.contains(t.key);
      std::string v = has && labels[t.key].is_string() ? labels[t.key].get<std::string>() : "";
      bool ok = t.op == Term::kEq       ? has && v == t.value
                : t.op == Term::kNe     ? !has || v != t.value
                : t.op == Term::kExists ? has
                                        : !has;
      if (!ok) return false;
    }
    return true;
  }
};

absl::StatusOr<Selector> ParseSelector(const std::string& text) {
  Selector s;
  for (const std::string& raw : SplitAny(text, ",")) {
    std::string part(raw);
    if (part.empty()) continue;
    Selector::Term t;
    size_t ne = part.find("!="), eq = part.find('=');
    if (ne != std::string::npos) {
      t = {part.substr(0, ne), part.substr(ne + 2), Selector::Term::kNe};
    } else if (eq != std::string::npos) {
      size_t skip = part.compare(eq, 2, "==") == 0 ? 2 : 1;
      t = {part.substr(0, eq), part.substr(eq + skip), Selector::Term::kEq};
    } else if (part[0] == '!') {
      t = {part.substr(1), "", Selector::Term::kAbsent};
    } else {
      t = {part, "", Selector::Term::kExists};
    }
    if (t.key.empty())
      return absl::InvalidArgumentError(Cat("labelSelector: bad term \"", part, "\""));
    s.terms.push_back(std::move(t));
  }
  return s;
}

// 400 for a path with an empty segment (but a trailing '/') or a segment that is not a DNS
// label ("..", "a%2Fb", "a?b" once decoded, NUL): every segment after /apis/gpucloud/v1/ is a
// resource, a namespace, a name or a sub-resource, all DNS labels, and dropping, resolving or
// splitting one would make the path name another object.
// An assignment's name ("{namespace}.{job}.{rank}") is DNS labels joined by '.'.
bool IsAssignmentName(std::string_view name) {
  if (name.size() > 253) return false;
  for (const std::string& label : SplitAny(name, ".")) {
    if (!ValidateDnsLabel(label).ok()) return false;
  }
  return !name.empty() && name.find("..") == std::string_view::npos && name.back() != '.';
}

std::optional<Response> RefuseSegments(const Request& r, const std::vector<std::string>& parts) {
  std::string_view rest = std::string_view(r.path).substr(kPrefix.size());
  if (rest.starts_with('/') || rest.find("//") != std::string_view::npos) {
    return Status(400, "BadRequest", Cat("path ", r.path, ": a segment is empty"));
  }
  // nodes/{node}/assignments/{assignment}/secrets: the one segment that is not a DNS label.
  const bool assignment = parts.size() == 5 && parts[0] == "nodes" && parts[2] == "assignments";
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (assignment && i == 3 && IsAssignmentName(p)) continue;
    if (!ValidateDnsLabel(p).ok()) {
      return Status(400, "BadRequest",
                    Cat("path ", r.path, ": \"", p,
                        "\" is not a DNS label (lower-case letters, digits and '-', at most 63)"));
    }
  }
  return std::nullopt;
}

}  // namespace

RestApi::RestApi(store::Store& store, const Clock& clock, uint64_t uid_seed)
    : store_(store),
      clock_(clock),
      rng_(uid_seed),
      authorizer_(std::make_unique<Authorizer>(clock)) {}

RestApi::~RestApi() = default;

std::string RestApi::NewUid() {
  absl::MutexLock lock(&mu_);
  uint64_t a = rng_.Next(), b = rng_.Next();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     ((b >> 48) & 0x3fff) | 0x8000, b & 0xffffffffffff);
}

namespace {

// What the anomaly rules read of a job's create or update (docs/audit.md): the dearest estimated
// hourly cost over the GPU types it could get, and the type when there is only one.
void NoteJobForAudit(const std::vector<authz::RequestContext>& contexts) {
  double cost = 0;
  std::vector<std::string> types;
  for (const authz::RequestContext& c : contexts) {
    if (const auto* v = c.Get(ConditionKeyId::kEstimatedHourlyCost); v && !v->empty()) {
      cost = std::max(cost, v->front().number);
    }
    if (const auto* v = c.Get(ConditionKeyId::kGpuType); v && !v->empty()) {
      types.push_back(v->front().text);
    }
  }
  NoteAuditAnnotation("gpucloud.io/estimated-hourly-cost", absl::StrFormat("%.2f", cost));
  // The GPU type, when the job can get only one (a job that takes any is no first use of each).
  if (types.size() == 1) NoteAuditAnnotation("gpucloud.io/gpu-type", types[0]);
}

}  // namespace

Response RestApi::Handle(const Request& r) {
  if (r.body.size() > kMaxBodyBytes) {
    return Status(413, "RequestEntityTooLarge",
                  Cat("the body has ", r.body.size(), " bytes; the limit is ", kMaxBodyBytes));
  }
  std::vector<std::string> parts;
  if (r.path.starts_with(kPrefix)) parts = SplitAny(r.path.substr(kPrefix.size()), "/");
  // The bootstrap token asks for a node certificate and nothing else, discovery included.
  if (r.who.bootstrap && !(r.method == "POST" && parts.size() == 3 && parts[0] == "nodes" &&
                           parts[2] == "certificate")) {
    return Status(403, "Forbidden",
                  Cat("user ", r.who.user,
                      " (a bootstrap token) may only ask for a node certificate "
                      "(POST nodes/NAME/certificate)"));
  }
  if (IsDiscoveryPath(r.path)) return Discovery(r);  // every other authenticated identity's
  if (!r.path.starts_with(kPrefix)) return Status(404, "NotFound", Cat("no such path ", r.path));
  if (std::optional<Response> bad = RefuseSegments(r, parts)) return *bad;
  // A merge patch is served as the PUT of its result, authorized and validated as one.
  if (r.method == "PATCH") return Patch(r, parts);
  std::optional<RequestedAction> what = ActionOf(r.method, parts, QueryTrue(r, "watch"));
  if (!what) {
    // Paths with rules of their own: a node certificate (NodeCertificates decides who may ask),
    // whoami (oneself), authorize (checks policies:Simulate to ask for another).
    const bool own_rules =
        (parts.size() == 3 && parts[0] == "nodes" && parts[2] == "certificate") ||
        (parts.size() == 1 && (parts[0] == "whoami" || parts[0] == "authorize"));
    // Anything else names no action: the API answers it 404 or 405. Only admins get that answer
    // from the handlers; others get 404 here, so that no handler's mistake about methods can
    // ever serve an unauthorized request.
    if (own_rules || r.who.admin) return Dispatch(r, parts);
    return Status(404, "NotFound", Cat("no such path ", r.method, " ", r.path));
  }
  // A job's create or update is decided on what it asks for (JobContexts); anything else on
  // the path alone.
  std::vector<authz::RequestContext> contexts;
  const bool job_write = what->action == "jobs:Create" || what->action == "jobs:Update";
  const bool service_write = what->action == "services:Create" || what->action == "services:Update";
  if (service_write) {
    // A service's replicas are jobs the service controller makes on its author's behalf: its
    // write is decided as its action and as jobs:Create of a replica, both on what a replica
    // asks for, so that no condition on jobs (GPU type, cost, billing, queue) is bypassed.
    const manifest::ParseResult& p = ParsedBody(r);
    const auto* svc = p.ok() && p.manifests.size() == 1
                          ? std::get_if<InferenceService>(&p.manifests[0].object)
                          : nullptr;
    if (svc == nullptr) return Dispatch(r, parts);  // the handler says what is wrong with it
    if (what->action == "services:Create") {
      what->resource = ResourceName(ResourceType::kService, parts[1], svc->metadata.name);
    }
    const Job replica = ReplicaJob(*svc, ReplicaName(svc->metadata.name, 1), 0, "");
    const RequestedAction as_job{"jobs:Create",
                                 ResourceName(ResourceType::kJob, parts[1], replica.metadata.name)};
    contexts = JobContexts(replica, GpuCatalog::Default());
    const RequestedAction* first = &*what;  // the service's own action first
    for (const RequestedAction* action : {first, &as_job}) {
      for (const authz::RequestContext& c : contexts) {
        authz::Decision d = authorizer_->Decide(r.who, *action, c);
        if (!d.allowed()) return Denied(r.who, *action, d);
      }
    }
    NoteJobForAudit(contexts);
  } else if (job_write) {
    const manifest::ParseResult& p = ParsedBody(r);
    const Job* job =
        p.ok() && p.manifests.size() == 1 ? std::get_if<Job>(&p.manifests[0].object) : nullptr;
    if (job == nullptr) return Dispatch(r, parts);  // the handler says what is wrong with it
    if (what->action == "jobs:Create") {
      what->resource = ResourceName(ResourceType::kJob, parts[1], job->metadata.name);
    }
    contexts = JobContexts(*job, GpuCatalog::Default());
    NoteJobForAudit(contexts);
  } else {
    contexts.emplace_back();
    if (what->action.starts_with("tokens:") && identities_ != nullptr) {
      // Whose token: a tenant manages its own (gpucloud:tenant's condition).
      std::string owner = r.who.user;
      if (parts.size() == 2) owner = identities_->TokenOwner(parts[1]);
      if (r.method == "POST") {
        Json body;
        owner = ParseJsonBody(r.body, &body).empty() ? body.value("user", "") : "";
      }
      (void)contexts[0].Set(ConditionKeyId::kResourceOwner, owner);
    }
    if (what->action.starts_with("namespaces:") && parts.size() >= 2) {  // also .../events
      absl::StatusOr<store::KeyValue> ns = store_.Get(Cat("/namespaces/", parts[1]));
      Json doc = ns.ok() ? Json::parse(ns->value, nullptr, false) : Json();
      if (doc.is_object() && doc.contains("spec") && doc["spec"].is_object() &&
          !doc["spec"].value("owner", "").empty()) {
        (void)contexts[0].Set(ConditionKeyId::kResourceOwner, doc["spec"].value("owner", ""));
      }
    }
  }
  authz::Decision allowed;
  for (authz::RequestContext& c : contexts) {
    authz::Decision d = authorizer_->Decide(r.who, *what, std::move(c));
    if (!d.allowed()) return Denied(r.who, *what, d);
    allowed = d;
  }
  Response::Authorization decided{what->action, what->resource, "allow", allowed.StatementName()};
  NoteAuditAuthorization(decided);  // for the records committed with the request's writes
  // A create or replace of an object in a namespace needs the namespace (after authorization:
  // who may not write there learns nothing of it).
  const bool namespaced_write = parts.size() >= 3 && parts.size() <= 4 &&
                                parts[0] == "namespaces" && ValidateDnsLabel(parts[1]).ok() &&
                                (r.method == "POST" || r.method == "PUT");
  if (namespaced_write) {
    if (std::optional<Response> missing = RequireNamespace(parts[1])) {
      missing->authorization = std::move(decided);
      return *missing;
    }
  }
  Response out = Dispatch(r, parts);
  if (namespaced_write && out.status < 300 && !r.query.contains("dryRun")) {
    ProvisionNamespace(r, parts[1]);
  }
  // A handler's own denial (a second decision, e.g. policies:Attach) is what the record says.
  if (out.authorization.decision != "deny") out.authorization = std::move(decided);
  return out;
}

Response RestApi::Dispatch(const Request& r, const std::vector<std::string>& parts) {
  if (IsIamPath(parts)) return HandleIam(r, parts);
  if (!parts.empty() && parts[0] == "nodes") return HandleNodes(r, parts);
  if (!parts.empty() && parts[0] == "audit") return HandleAudit(r, parts);
  if (parts.size() >= 3 && parts[0] == "namespaces" && parts[2] == "secrets") {
    return HandleSecrets(r, parts);
  }
  if (parts.size() == 3 && parts[0] == "pools" && nodes_ != nullptr &&
      (parts[2] == "prepull" || parts[2] == "reclaim")) {
    // An operator's verb on every node of a pool: POST, admins, one query parameter.
    const bool prepull = parts[2] == "prepull";
    if (r.method != "POST")
      return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
    if (!ValidateDnsLabel(parts[1]).ok()) {
      return Status(400, "BadRequest", Cat("pool \"", parts[1], "\" is not a DNS label"));
    }
    if (std::optional<Response> bad = RefuseQuery(r, {prepull ? "image" : "seconds"})) return *bad;
    return prepull ? PrePullPool(r, parts[1]) : ReclaimPool(r, parts[1]);
  }
  if (parts.size() == 1 && parts[0] == "usage") return HandleUsage(r, "");
  if (parts.size() == 3 && parts[0] == "namespaces" && parts[2] == "events") {
    return NamespaceEvents(r, parts[1]);
  }
  if (parts.size() == 3 && parts[0] == "namespaces" && parts[2] == "usage") {
    return HandleUsage(r, parts[1]);
  }
  if (parts.size() == 1 && parts[0] == "cluster" && summary_) {
    if (r.method != "GET")
      return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
    if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
    return Response{.body = summary_()};
  }
  if (!parts.empty() && parts.size() <= 2 && parts[0] == "namespaces") {
    return HandleNamespaces(r, parts.size() == 2 ? parts[1] : "");
  }
  Route route;
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "namespaces") {
    route.namespace_ = parts[1];
    if (!ValidateDnsLabel(route.namespace_).ok()) {
      return Status(400, "BadRequest",
                    Cat("namespace \"", route.namespace_, "\" is not a DNS label"));
    }
    i = 2;
  }
  if (i >= parts.size() || parts.size() > i + 3) {
    return Status(404, "NotFound", Cat("no such path ", r.path));
  }
  for (const Resource& res : kResources) {
    if (res.plural == parts[i]) route.resource = &res;
  }
  // Every namespace's jobs at once: for admins (gpuctl get jobs -A, gpuctl top).
  if (route.resource != nullptr && route.resource->namespaced && route.namespace_.empty() &&
      parts.size() == i + 1 && r.method == "GET") {
    if (std::optional<Response> bad = RefuseQuery(r, kCollectionQuery)) return *bad;
    if (QueryTrue(r, "watch")) return Watch(r, Cat("/", route.resource->plural, "/"));
    return ListObjects(r, Cat("/", route.resource->plural, "/"), route.resource->kind);
  }
  if (route.resource == nullptr || route.resource->namespaced != !route.namespace_.empty()) {
    return Status(404, "NotFound", Cat("no such resource ", r.path));
  }
  if (parts.size() >= i + 2) {
    route.name = parts[i + 1];
    if (!ValidateDnsLabel(route.name).ok()) {
      return Status(400, "BadRequest", Cat("name \"", route.name, "\" is not a DNS label"));
    }
  }
  if (parts.size() == i + 3) {
    if (route.resource->plural != "jobs") {
      return Status(404, "NotFound", Cat("no such path ", r.path));
    }
    return HandleJobSub(r, route, parts[i + 2]);
  }
  return HandleObjects(r, route);
}

Response RestApi::HandleObjects(const Request& r, const Route& route) {
  const bool item = !route.name.empty();
  const bool get = r.method == "GET";
  const bool known = get || (r.method == "POST" && !item) || (r.method == "PUT" && item) ||
                     (r.method == "DELETE" && item);
  if (!known) return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  std::optional<Response> bad =
      get && !item           ? RefuseQuery(r, kCollectionQuery)
      : get                  ? RefuseQuery(r, kNoQuery)
      : r.method == "DELETE" ? RefuseQuery(r, {"resourceVersion", "dryRun"})
      : r.method == "POST" && route.resource->plural == "jobs" ? RefuseQuery(r, kJobCreateQuery)
                                                               : RefuseQuery(r, kWriteQuery);
  if (bad) return *bad;
  if (get && item) return Read(r, route);
  if (get && QueryTrue(r, "watch")) return Watch(r, route.Prefix());
  if (get) return List(r, route);
  if (r.method == "POST") return Create(r, route);
  if (r.method == "PUT") return Apply(r, route);
  return Delete(r, route);
}

namespace {

ObjectMeta& MetaOfMutable(manifest::Object& o) {
  return std::visit([](auto& x) -> ObjectMeta& { return x.metadata; }, o);
}

// The one object of the request body, checked against the route. On error, the response.
struct Parsed {
  std::optional<manifest::Object> object;
  std::optional<Response> error;
};

Parsed ParseBody(const Request& r, std::string_view kind, const std::string& namespace_,
                 const std::string& name) {
  const manifest::ParseResult& p = ParsedBody(r);
  if (!p.ok()) {
    std::vector<std::string> lines;
    for (const manifest::Diagnostic& d : p.errors) lines.push_back(d.ToString());
    return {std::nullopt, Status(422, "Invalid", Join(lines, "\n"))};
  }
  if (p.manifests.size() != 1) {
    return {std::nullopt,
            Status(422, "Invalid",
                   Cat("the body holds ", p.manifests.size(), " objects; send exactly one"))};
  }
  manifest::Object o = p.manifests[0].object;
  if (manifest::KindOf(o) != kind) {
    return {std::nullopt,
            Status(422, "Invalid",
                   Cat("kind: is ", manifest::KindOf(o), ", but this path holds ", kind, "s"))};
  }
  ObjectMeta& meta = MetaOfMutable(o);
  if (!namespace_.empty()) {
    // An omitted namespace reads as "default": the path's namespace applies then.
    if (meta.namespace_ == kDefaultNamespace) meta.namespace_ = namespace_;
    if (meta.namespace_ != namespace_) {
      return {std::nullopt, Status(400, "BadRequest",
                                   Cat("metadata.namespace: is ", meta.namespace_,
                                       ", but the path says ", namespace_))};
    }
  }
  if (!name.empty() && meta.name != name) {
    return {std::nullopt,
            Status(400, "BadRequest",
                   Cat("metadata.name: is ", meta.name, ", but the path says ", name))};
  }
  return {std::move(o), std::nullopt};
}

// A job's paths are the operator's: its checkpoint directory must lie in its namespace's tree.
std::optional<Response> CheckJobPaths(const manifest::Object& o, const std::string& root) {
  const Job* job = std::get_if<Job>(&o);
  if (job == nullptr || root.empty()) return std::nullopt;
  absl::StatusOr<std::string> dir = ResolveCheckpointDir(
      root, job->metadata.namespace_, job->metadata.name, job->spec.checkpoint.dir);
  if (!dir.ok()) return Status(422, "Invalid", std::string(dir.status().message()));
  return std::nullopt;
}

// 422 when `now` changes the spec of the job `before` (stored as `old`) while its tasks run.
std::optional<Response> RefuseRunningSpecChange(const std::string& key, const Json& old,
                                                const manifest::Object& before,
                                                const manifest::Object& now) {
  if (!old.contains("status")) return std::nullopt;
  absl::StatusOr<api::JobPhase> phase = JobPhaseOf(old);
  if (!phase.ok()) return FromStatus(absl::InternalError(Cat(key, ": ", phase.status().message())));
  bool settled = *phase == api::JobPhase::kPending || api::IsTerminal(*phase);
  const Job* was = std::get_if<Job>(&before);
  const Job* job = std::get_if<Job>(&now);
  if (settled || was == nullptr || job == nullptr || was->spec == job->spec) return std::nullopt;
  return Status(422, "Invalid",
                Cat("spec: ", key, " is ", api::PhaseName(*phase),
                    "; its spec cannot change while its tasks run (cancel it first)"));
}

}  // namespace

Response RestApi::Create(const Request& r, const Route& route) {
  if (QueryTrue(r, "whatIf") && !DryRun(r)) {  // before anything is read or counted
    return Status(400, "BadRequest", "whatIf: asks only with dryRun=All (nothing is created)");
  }
  Parsed p = ParseBody(r, route.resource->kind, route.namespace_, "");
  if (p.error) return *p.error;
  if (std::optional<Response> bad = CheckJobPaths(*p.object, checkpoint_root_)) return *bad;
  std::string warning;
  if (std::optional<Response> bad = ResolveRuntimeClass(store_, *p.object, &warning)) return *bad;
  if (const Job* j = std::get_if<Job>(&*p.object); j && AsksForArray(j->spec)) {
    if (QueryTrue(r, "whatIf")) {
      return Status(400, "BadRequest", "whatIf: asks for one job, not a job array");
    }
    return CreateArray(r, route, *j, warning, /*apply=*/false);  // rest_array.cc
  }
  ObjectMeta& meta = MetaOfMutable(*p.object);
  Route item = route;
  item.name = meta.name;
  meta.uid = NewUid();
  meta.creation_unix_seconds = clock_.NowMillis() / 1000;
  meta.resource_version = 0;
  if (route.resource->plural == "jobs" && max_jobs_per_namespace_ > 0) {
    absl::StatusOr<int64_t> n = store_.Count(route.Prefix());
    if (!n.ok()) return FromStatus(n.status());
    if (*n >= max_jobs_per_namespace_) {
      return Status(403, "QuotaExceeded",
                    Cat("namespace ", route.namespace_, " holds ", *n, " jobs, its quota is ",
                        max_jobs_per_namespace_, ": delete finished jobs first"));
    }
  }
  Json doc = Json::parse(manifest::ToJson(*p.object));
  if (route.resource->plural == "jobs") {
    doc["status"] = Json{{"phase", api::PhaseName(api::JobPhase::kPending)},
                         {"submittedMs", clock_.NowMillis()}};
  }
  Response created{201};
  if (!warning.empty()) created.headers["Warning"] = warning;
  const Job* job = std::get_if<Job>(&*p.object);
  if (DryRun(r)) {  // as it would be stored, less the revision it would get
    if (absl::StatusOr<store::KeyValue> kv = store_.Get(item.Key()); kv.ok()) {
      return FromStatus(absl::AlreadyExistsError(Cat(item.Key(), " already exists")));
    }
    if (job != nullptr) {
      if (absl::Status free = CheckSshSecretFree(store_, *job); !free.ok()) return FromStatus(free);
    }
    if (job != nullptr && QueryTrue(r, "whatIf")) {
      if (!what_if_) return Status(503, "ServiceUnavailable", "no scheduler answers here");
      absl::StatusOr<Json> answer = what_if_(route.namespace_, *job);
      if (!answer.ok()) return FromStatus(answer.status());
      doc["status"]["whatIf"] = *std::move(answer);
    }
    created.body = doc.dump(2) + "\n";
    return created;
  }
  // A job with ssh keys is written with its Secret, all or nothing (ssh_keys.h).
  store::Op put{store::Op::Kind::kPut, item.Key(), doc.dump(2), 0};
  absl::StatusOr<int64_t> rev =
      job == nullptr
          ? store_.Txn({std::move(put)})
          : WriteJobWithSshKeys(store_, secrets_, *job, /*had_ssh=*/false, std::move(put), NewUid(),
                                doc["metadata"].value("creationTimestamp", ""));
  if (!rev.ok()) return FromStatus(rev.status());
  if (kick_) kick_();
  doc["metadata"]["resourceVersion"] = std::to_string(*rev);
  created.body = doc.dump(2) + "\n";
  return created;
}

Response RestApi::Apply(const Request& r, const Route& route) {
  Parsed p = ParseBody(r, route.resource->kind, route.namespace_, route.name);
  if (p.error) return *p.error;
  if (std::optional<Response> bad = CheckJobPaths(*p.object, checkpoint_root_)) return *bad;
  std::string warning;
  if (std::optional<Response> bad = ResolveRuntimeClass(store_, *p.object, &warning)) return *bad;
  if (const Job* j = std::get_if<Job>(&*p.object); j && AsksForArray(j->spec)) {
    return CreateArray(r, route, *j, warning, /*apply=*/true);  // never applied over a job
  }
  ObjectMeta& meta = MetaOfMutable(*p.object);
  const int64_t precondition = meta.resource_version;
  absl::StatusOr<store::KeyValue> current = store_.Get(route.Key());
  if (!current.ok() && !absl::IsNotFound(current.status())) return FromStatus(current.status());
  if (!current.ok()) {
    if (precondition > 0) {
      return Status(409, "Conflict",
                    Cat(route.Key(),
                        " does not exist (any more), but the body "
                        "has resourceVersion ",
                        precondition));
    }
    return Create(r, Route{route.resource, route.namespace_, ""});
  }
  if (precondition > 0 && precondition != current->mod_revision) {
    return FromStatus(absl::AbortedError(Cat(route.Key(), " was changed: it is at revision ",
                                             current->mod_revision, ", not ", precondition)));
  }
  // Keep what the store owns; write only when something changed (apply is idempotent).
  manifest::ParseResult stored = manifest::ParseManifests(current->value, route.Key());
  if (!stored.ok() || stored.manifests.size() != 1) {
    return Status(500, "InternalError", Cat(route.Key(), ": the stored object does not parse"));
  }
  Json old = Json::parse(current->value, nullptr, false);
  meta.uid = old["metadata"].value("uid", "");
  meta.resource_version = 0;
  manifest::Object& before = stored.manifests[0].object;
  MetaOfMutable(before).resource_version = 0;
  MetaOfMutable(before).uid = meta.uid;
  if (before == *p.object) {
    Json j = WithRevision(*current);
    return {200, j.dump(2) + "\n"};
  }
  // The status is the server's: it is kept, and a job's spec is fixed while its tasks run.
  if (std::optional<Response> bad = RefuseRunningSpecChange(route.Key(), old, before, *p.object)) {
    return *bad;
  }
  std::string ts = old["metadata"].value("creationTimestamp", "");
  std::string value = manifest::ToJson(*p.object);
  {
    Json j = Json::parse(value);
    if (!ts.empty()) j["metadata"]["creationTimestamp"] = ts;
    if (old.contains("status")) j["status"] = old["status"];
    value = j.dump(2);
  }
  if (DryRun(r))
    return {200, WithRevision({route.Key(), value, 0, current->mod_revision, 0}).dump(2) + "\n"};
  store::Op put{store::Op::Kind::kPut, route.Key(), value, current->mod_revision};
  const Job* job = std::get_if<Job>(&*p.object);
  const Job* was = std::get_if<Job>(&before);
  absl::StatusOr<int64_t> rev =
      job == nullptr
          ? store_.Txn({std::move(put)})
          : WriteJobWithSshKeys(store_, secrets_, *job, was != nullptr && was->spec.ssh.has_value(),
                                std::move(put), NewUid(), ts);
  if (!rev.ok()) return FromStatus(rev.status());
  return {200, WithRevision({route.Key(), value, 0, *rev, 0}).dump(2) + "\n"};
}

Response RestApi::Read(const Request&, const Route& route) {
  absl::StatusOr<store::KeyValue> kv = store_.Get(route.Key());
  if (!kv.ok()) {
    if (absl::IsNotFound(kv.status())) {
      return Status(
          404, "NotFound",
          Cat(route.resource->kind, " ", route.namespace_.empty() ? "" : route.namespace_ + "/",
              route.name, " not found"));
    }
    return FromStatus(kv.status());
  }
  return {200, Present(*kv).dump(2) + "\n"};
}

Json RestApi::Present(const store::KeyValue& kv) const {
  Json j = WithRevision(kv);
  if (nodes_ != nullptr && kv.key.starts_with("/nodes/")) {
    ApplyLiveGpuHealth(*nodes_, j);
    ApplyLiveNodeUsage(*nodes_, clock_.NowMillis(), j);
  }
  if (nodes_ != nullptr && kv.key.starts_with("/jobs/")) {
    ApplyLiveJobUsage(*nodes_, clock_.NowMillis(), j);
  }
  return j;
}

Response RestApi::List(const Request& r, const Route& route) {
  return ListObjects(r, route.Prefix(), route.resource->kind);
}

namespace {

// The page of `items` after `after_key` (every matching one when `limit` is 0), and how many
// matching ones follow it.
struct Page {
  std::vector<Json> items;
  std::string last_key;
  int64_t remaining = 0;
};

template <typename Present>
Page PageOf(const std::vector<store::KeyValue>& items, const Selector& sel,
            const std::string& after_key, int64_t limit, Present present) {
  Page page;
  for (const store::KeyValue& kv : items) {
    if (!after_key.empty() && kv.key <= after_key) continue;
    const bool full = limit > 0 && static_cast<int64_t>(page.items.size()) >= limit;
    if (full && sel.terms.empty()) {  // every one matches: counted without reading it
      ++page.remaining;
      continue;
    }
    Json j = present(kv);
    if (!sel.Matches(j)) continue;
    if (full) {
      ++page.remaining;
      continue;
    }
    page.last_key = kv.key;
    page.items.push_back(std::move(j));
  }
  return page;
}

}  // namespace

Response RestApi::ListObjects(const Request& r, const std::string& prefix, std::string_view kind) {
  absl::StatusOr<Selector> sel =
      ParseSelector(r.query.contains("labelSelector") ? r.query.at("labelSelector") : "");
  if (!sel.ok()) return FromStatus(sel.status());
  for (const char* key : {"resourceVersion", "limit"}) {
    if (std::optional<int64_t> v = QueryInt(r, key); v && *v < 0) {
      return Status(400, "BadRequest",
                    Cat(key, ": \"", r.query.at(key), "\" is not a non-negative integer"));
    }
  }
  std::optional<ContinueToken> token;
  if (auto c = r.query.find("continue"); c != r.query.end() && !c->second.empty()) {
    token = DecodeContinue(c->second);
    if (!token || token->prefix != prefix) {
      return Status(400, "BadRequest", "continue: is not a continue token of this list");
    }
    if (token->revision < store_.CompactedRevision()) {
      return Status(410, "Expired",
                    Cat("continue: the list's revision ", token->revision,
                        " was compacted; the token is too old to continue a consistent list: "
                        "start a new list without continue"));
    }
  }
  const int64_t limit = QueryInt(r, "limit").value_or(0);
  const std::string after = token ? token->after_key : "";
  // Without a selector a page is read alone (the store counts the keys after it); a selector
  // must read every object to know which follow.
  int64_t remaining = 0;
  const bool ranged = limit > 0 && sel->terms.empty();
  absl::StatusOr<store::ListResult> list =
      ranged ? store_.ListPage(prefix, after, limit, &remaining) : store_.List(prefix);
  if (!list.ok()) return FromStatus(list.status());
  const int64_t revision = token ? token->revision : list->revision;
  Page page = PageOf(list->items, *sel, after, limit,
                     [this](const store::KeyValue& kv) { return Present(kv); });
  if (ranged) page.remaining = remaining;
  Json meta{{"resourceVersion", std::to_string(revision)}};
  if (page.remaining > 0) {
    meta["continue"] = EncodeContinue({prefix, revision, page.last_key});
    meta["remainingItemCount"] = page.remaining;
  }
  Json out{{"apiVersion", "gpucloud/v1"},
           {"kind", Cat(kind, "List")},
           {"metadata", std::move(meta)},
           {"items", Json::array()}};
  for (Json& j : page.items) out["items"].push_back(std::move(j));
  return {200, out.dump(2) + "\n"};
}

namespace {

std::string WatchEvent(const char* type, Json object) {
  return Json{{"type", type}, {"object", std::move(object)}}.dump() + "\n";
}

}  // namespace

Response RestApi::Watch(const Request& r, const std::string& prefix) {
  absl::StatusOr<Selector> sel =
      ParseSelector(r.query.contains("labelSelector") ? r.query.at("labelSelector") : "");
  if (!sel.ok()) return FromStatus(sel.status());
  std::optional<int64_t> after = QueryInt(r, "resourceVersion");
  if (after && *after < 0) {
    return Status(
        400, "BadRequest",
        Cat("resourceVersion: \"", r.query.at("resourceVersion"), "\" is not a revision"));
  }
  if (r.query.contains("continue")) {
    return Status(400, "BadRequest", "continue: a watch takes no continue token (a list does)");
  }
  Response out{200, "", "application/x-ndjson"};
  out.watch_prefix = prefix;
  if (after.value_or(0) == 0) {  // the current state, then changes from there
    absl::StatusOr<store::ListResult> list = store_.List(prefix);
    if (!list.ok()) return FromStatus(list.status());
    for (const store::KeyValue& kv : list->items) {
      Json object = Present(kv);
      if (sel->Matches(object)) out.body += WatchEvent("ADDED", std::move(object));
    }
    out.revision = list->revision;
    return out;
  }
  // A revision from the future: wait a little for it (a client may have read it from another
  // replica), then say so, as Kubernetes does ("Too large resource version").
  if (*after > store_.Revision() && !store_.WaitForChange(*after - 1, absl::Seconds(3)) &&
      *after > store_.Revision()) {
    return Status(504, "Timeout",
                  Cat("resourceVersion: ", *after, " is newer than the store's ", store_.Revision(),
                      " (too large resource version)"));
  }
  int64_t revision = store_.Revision();  // read first: every change up to it is in the log
  absl::StatusOr<std::vector<store::Event>> events =
      store_.Changes(prefix, *after, kMaxWatchBatch + 1);
  if (!events.ok()) return FromStatus(events.status());
  if (static_cast<int>(events->size()) > kMaxWatchBatch) {
    // Over a batch (the store's pages hold whole revisions): leave the last revision to the
    // next batch, unless it is the only one (a revision larger than a batch goes whole).
    if (const int64_t last = events->back().revision; events->front().revision != last) {
      std::erase_if(*events, [last](const store::Event& e) { return e.revision == last; });
    }
    revision = events->back().revision;
  }
  for (const store::Event& e : *events) {
    Json object = Present(e.kv);
    if (!sel->Matches(object)) continue;
    const char* type = e.kind == store::Event::Kind::kDelete ? "DELETED"
                       : e.kv.version == 1                   ? "ADDED"
                                                             : "MODIFIED";
    out.body += WatchEvent(type, std::move(object));
  }
  out.revision = std::max(revision, *after);
  return out;
}

Response RestApi::Delete(const Request& r, const Route& route) {
  if (route.resource->plural == "jobs") return Cancel(r, route, /*and_delete=*/true);
  std::optional<int64_t> expect = QueryInt(r, "resourceVersion");
  if (expect && *expect < 0) {
    return Status(
        400, "BadRequest",
        Cat("resourceVersion: \"", r.query.at("resourceVersion"), "\" is not a revision"));
  }
  if (DryRun(r)) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(route.Key());
    if (!kv.ok()) return FromStatus(kv.status());
    if (expect && *expect != kv->mod_revision) {
      return FromStatus(absl::AbortedError(Cat(route.Key(), " was changed: it is at revision ",
                                               kv->mod_revision, ", not ", *expect)));
    }
    return Status(200, "Deleted",
                  Cat(route.resource->kind, " ", route.Key(), " would be deleted (dry run)"));
  }
  absl::StatusOr<int64_t> rev = store_.Txn({{store::Op::Kind::kDelete, route.Key(), "", expect}});
  if (!rev.ok()) return FromStatus(rev.status());
  return Status(200, "Deleted",
                Cat(route.resource->kind, " ", route.Key(), " deleted at revision ", *rev));
}

}  // namespace gpucloud::server
