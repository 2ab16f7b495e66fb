// Namespaces as API objects (issue 14): GET, POST, PUT and DELETE of namespaces[/{name}]; the
// check that a write into a namespace names one that exists (RequireNamespace); and the start-up
// migration that gives every namespace already in use its object (EnsureNamespaces).
#include <set>

#include "absl/time/time.h"
#include "core/log.h"
#include "core/object_meta.h"
#include "core/text.h"
#include "server/budgets.h"
#include "server/events.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kNamespacePrefix = "/namespaces/";

// Where the objects of a namespace live; what a delete must find empty.
constexpr std::string_view kContentPrefixes[][2] = {
    {"/jobs/", "jobs"}, {"/secrets/", "secrets"}, {"/iam/serviceaccounts/", "service accounts"}};

std::string NamespaceKey(std::string_view name) { return Cat(kNamespacePrefix, name); }

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string CheckStringMap(const Json& v, std::string_view field, bool labels) {
  if (!v.is_object()) return Cat("metadata.", field, ": must be a map of strings");
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) return Cat("metadata.", field, ".", key, ": must be a string");
    if (absl::Status s = ValidateLabelKey(key); !s.ok()) {
      return Cat("metadata.", field, ".", key, ": ", s.message());
    }
    if (!labels) continue;
    if (absl::Status s = ValidateLabelValue(value.get<std::string>()); !s.ok()) {
      return Cat("metadata.", field, ".", key, ": ", s.message());
    }
  }
  return "";
}

std::string CheckMetadata(const Json& meta, const std::string& name) {
  if (!meta.is_object()) return "metadata: is required";
  for (const auto& [key, value] : meta.items()) {
    if (key == "labels" || key == "annotations") {
      if (std::string e = CheckStringMap(value, key, key == "labels"); !e.empty()) return e;
    } else if (key != "name" && key != "resourceVersion" && key != "uid" &&
               key != "creationTimestamp") {
      return Cat("metadata.", key, ": unknown field");
    }
  }
  if (meta.value("name", "") != name) {
    return Cat("metadata.name: is \"", meta.value("name", ""), "\", but the path says \"", name,
               "\"");
  }
  return "";
}

}  // namespace

std::string ValidateNamespaceObject(const Json& doc, const std::string& name,
                                    std::string_view currency) {
  if (!doc.is_object()) return "body: must be an object";
  for (const auto& [key, _] : doc.items()) {
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "spec" &&
        key != "status") {
      return Cat(key, ": unknown field");
    }
  }
  const std::string api_version = doc.value("apiVersion", "");
  if (api_version != "gpucloud/v1" && api_version != "v1") {
    return "apiVersion: must be gpucloud/v1 (or Kubernetes' v1)";
  }
  if (doc.value("kind", "") != "Namespace") return "kind: must be Namespace";
  if (absl::Status s = ValidateDnsLabel(name); !s.ok()) {
    return Cat("metadata.name: \"", name, "\" is not a DNS label");
  }
  if (std::string e = CheckMetadata(doc.value("metadata", Json()), name); !e.empty()) return e;
  if (!doc.contains("spec")) return "";
  const Json& spec = doc["spec"];
  if (!spec.is_object()) return "spec: must be an object";
  for (const auto& [key, value] : spec.items()) {
    if (key == "owner") {
      if (!value.is_string() || !ValidateDnsLabel(value.get<std::string>()).ok()) {
        return "spec.owner: must be a user's name (a DNS label)";
      }
    } else if (key == "budget") {
      Budget budget;
      if (std::string e = ParseBudget(value, currency, &budget); !e.empty()) return e;
    } else if (key != "finalizers") {  // Kubernetes' finalizers: accepted, not acted on
      return Cat("spec.", key, ": unknown field");
    }
  }
  return "";
}

Json NewNamespaceObject(const std::string& name, const std::string& owner) {
  Json doc{{"apiVersion", "gpucloud/v1"},
           {"kind", "Namespace"},
           {"metadata", {{"name", name}}},
           {"spec", Json::object()}};
  if (!owner.empty()) doc["spec"]["owner"] = owner;
  return doc;
}

absl::StatusOr<int> RestApi::EnsureNamespaces() {
  store::Store& store = store_;
  std::set<std::string> used = {std::string(kDefaultNamespace)};
  for (const auto& [prefix, _] : kContentPrefixes) {
    absl::StatusOr<store::ListResult> list = store.List(std::string(prefix));
    if (!list.ok()) return list.status();
    for (const store::KeyValue& kv : list->items) {
      std::string_view rest = std::string_view(kv.key).substr(prefix.size());
      used.insert(std::string(rest.substr(0, rest.find('/'))));
    }
  }
  std::map<std::string, std::string> owner;  // a user's home namespace: the user owns it
  absl::StatusOr<store::ListResult> users = store.List("/iam/users/");
  if (!users.ok()) return users.status();
  for (const store::KeyValue& kv : users->items) {
    Json u = Json::parse(kv.value, nullptr, false);
    if (!u.is_object() || !u.contains("spec") || !u["spec"].is_object()) continue;
    std::string ns = u["spec"].value("namespace", "");
    if (ns.empty()) continue;
    used.insert(ns);
    owner.emplace(ns, u["metadata"].value("name", ""));
  }
  std::vector<store::Op> ops;
  for (const std::string& ns : used) {
    if (!ValidateDnsLabel(ns).ok()) continue;
    absl::StatusOr<store::KeyValue> kv = store.Get(NamespaceKey(ns));
    if (kv.ok()) continue;
    if (!absl::IsNotFound(kv.status())) return kv.status();
    Json doc = NewNamespaceObject(ns, owner.contains(ns) ? owner[ns] : "");
    doc["metadata"]["uid"] = NewUid();
    doc["metadata"]["creationTimestamp"] = Rfc3339(absl::FromUnixMillis(clock_.NowMillis()));
    doc["status"] = {{"phase", "Active"}};
    ops.push_back(
        store::Op{.key = NamespaceKey(ns), .value = doc.dump(), .expect_mod_revision = 0});
  }
  if (ops.empty()) return 0;
  absl::StatusOr<int64_t> rev = store.Txn(ops);
  if (!rev.ok()) return rev.status();
  return static_cast<int>(ops.size());
}

std::optional<Response> RestApi::RequireNamespace(const std::string& ns) {
  if (namespace_provisioning_ != NamespaceProvisioning::kExplicit) return std::nullopt;
  absl::StatusOr<store::KeyValue> kv = store_.Get(NamespaceKey(ns));
  if (kv.ok()) return std::nullopt;
  if (!absl::IsNotFound(kv.status())) return FromStatus(kv.status());
  return Status(
      404, "NotFound",
      Cat("namespaces \"", ns, "\" not found: create it first (gpuctl create namespace ", ns, ")"));
}

void RestApi::ProvisionNamespace(const Request& r, const std::string& ns) {
  if (namespace_provisioning_ != NamespaceProvisioning::kAuto) return;
  Response made = PutNamespace(NamespaceKey(ns), NewNamespaceObject(ns, r.who.user), true);
  if (made.status >= 300 && made.status != 409) {  // 409: it is there already
    log::Warn("server", "namespace not provisioned",
              {{"namespace", ns}, {"status", made.status}, {"error", made.body}});
  }
}

Response RestApi::PutNamespace(const std::string& key, Json doc, bool create) {
  absl::StatusOr<store::KeyValue> current = store_.Get(key);
  if (!current.ok() && !absl::IsNotFound(current.status())) return FromStatus(current.status());
  if (create && current.ok()) {
    return Status(409, "AlreadyExists",
                  Cat("namespaces \"", doc["metadata"].value("name", ""), "\" already exists"));
  }
  // A PUT creates what is missing (as an apply does) and replaces what is there.
  std::optional<int64_t> expect = current.ok() ? current->mod_revision : 0;
  if (std::optional<Response> bad = StampMetadata(doc, current, expect)) return *bad;
  doc["apiVersion"] = "gpucloud/v1";
  // The server's; what a body says is not kept. The budget's alert state (budgets.h) stays: a
  // changed budget does not raise this month's alerts again.
  Json budget_state;
  if (current.ok()) {
    Json was = Json::parse(current->value, nullptr, false);
    if (was.is_object() && was.contains("status") && was["status"].is_object() &&
        was["status"].contains("budget")) {
      budget_state = was["status"]["budget"];
    }
  }
  doc["status"] = {{"phase", "Active"}};
  if (!budget_state.is_null()) doc["status"]["budget"] = std::move(budget_state);
  absl::StatusOr<int64_t> rev =
      store_.Txn({store::Op{.key = key, .value = doc.dump(), .expect_mod_revision = expect}});
  if (!rev.ok()) return FromStatus(rev.status());
  doc["metadata"]["resourceVersion"] = std::to_string(*rev);
  return {current.ok() ? 200 : 201, doc.dump(2) + "\n"};
}

Response RestApi::DeleteNamespace(const std::string& name) {
  if (name == kDefaultNamespace) {
    return Status(403, "Forbidden", "namespace default may not be deleted");
  }
  absl::StatusOr<store::KeyValue> current = store_.Get(NamespaceKey(name));
  if (!current.ok()) return FromStatus(current.status());
  std::vector<std::string> held;
  for (const auto& [prefix, what] : kContentPrefixes) {
    absl::StatusOr<int64_t> n = store_.Count(Cat(prefix, name, "/"));
    if (!n.ok()) return FromStatus(n.status());
    if (*n > 0) held.push_back(Cat(*n, " ", what));
  }
  if (!held.empty()) {
    return Status(409, "Conflict",
                  Cat("namespace ", name, " still holds ", Join(held, ", "),
                      ": delete them first (gpuctl delete jobs,secrets --all -n ", name, ")"));
  }
  // The namespace's own events (budget alerts) go with it; its usage records stay (billing
  // history outlives what it bills, as a deleted job's does).
  std::vector<store::Op> ops = {store::Op{.kind = store::Op::Kind::kDelete,
                                          .key = NamespaceKey(name),
                                          .expect_mod_revision = current->mod_revision}};
  for (const std::string& key : EventKeysOf(store_, name, std::string(kNamespaceEvents))) {
    ops.push_back({store::Op::Kind::kDelete, key, "", std::nullopt});
  }
  absl::StatusOr<int64_t> rev = store_.Txn(ops);
  if (!rev.ok()) return FromStatus(rev.status());
  return Status(200, "Deleted", Cat("Namespace ", name, " deleted at revision ", *rev));
}

Response RestApi::NamespaceEvents(const Request& r, const std::string& ns) {
  if (r.method != "GET") {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
  return EventListOf(store_, EventPrefix(ns, std::string(kNamespaceEvents)));
}

Response RestApi::HandleNamespaces(const Request& r, const std::string& name) {
  if (r.method == "GET" && name.empty()) {
    if (std::optional<Response> bad = RefuseQuery(r, kCollectionQuery)) return *bad;
    if (QueryTrue(r, "watch")) return Watch(r, std::string(kNamespacePrefix));
    return ListObjects(r, std::string(kNamespacePrefix), "Namespace");
  }
  if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
  if (!name.empty() && !ValidateDnsLabel(name).ok()) {
    return Status(400, "BadRequest", Cat("name \"", name, "\" is not a DNS label"));
  }
  if (r.method == "GET" && !name.empty()) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(NamespaceKey(name));
    if (absl::IsNotFound(kv.status())) {
      return Status(404, "NotFound", Cat("namespaces \"", name, "\" not found"));
    }
    if (!kv.ok()) return FromStatus(kv.status());
    return {200, WithRevision(*kv).dump(2) + "\n"};
  }
  if (r.method == "DELETE" && !name.empty()) return DeleteNamespace(name);
  const bool create = r.method == "POST" && name.empty();
  if (!create && !(r.method == "PUT" && !name.empty())) {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  Json doc;
  if (std::string e = ParseJsonBody(r.body, &doc); !e.empty()) return Status(422, "Invalid", e);
  const std::string target =
      create && doc["metadata"].is_object() ? doc["metadata"].value("name", "") : name;
  if (std::string e = ValidateNamespaceObject(doc, target, currency_); !e.empty()) {
    return Status(422, "Invalid", e);
  }
  return PutNamespace(NamespaceKey(target), std::move(doc), create);
}

}  // namespace gpucloud::server
