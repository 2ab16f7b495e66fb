// Secrets over the API (issue 14): namespaces/{ns}/secrets[/{name}]. The values are sealed by
// the SecretStore (secret_store.h) before they reach the store and are never answered: GET
// shows each value's key and size (status.data), as `kubectl describe secret` does.
// Authorization (secrets:Create|Get|List|Update|Delete on gpucloud:secret/NS/NAME) happened in
// RestApi::Handle before this.
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/json_yaml.h"
#include "server/rest.h"
#include "server/rest_util.h"
#include "server/secret_box.h"
#include "server/secret_store.h"
#include "server/task_secrets.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kOpaque = "Opaque";
constexpr std::string_view kDockerConfigJson = kDockerConfigJsonType;
constexpr std::string_view kDockerConfigKey = kDockerConfigJsonKey;

// A Secret as written: its document without values, and the values.
struct SecretWrite {
  Json doc;
  std::map<std::string, std::string> values;
  std::optional<int64_t> resource_version;
};

// A data key as Kubernetes takes it: [-._a-zA-Z0-9]+, at most 253, not "." or "..".
std::string CheckDataKey(std::string_view field, const std::string& key) {
  if (!ValidateSecretKey(key).ok()) {
    return Cat(field, "[", key, "]: a key must be 1 to 253 of [-._a-zA-Z0-9], not . or ..");
  }
  return "";
}

std::string CheckMetadata(const Json& meta, const std::string& ns, const std::string& name) {
  if (!meta.is_object()) return "metadata: is required";
  for (const auto& [key, value] : meta.items()) {
    if (key != "name" && key != "namespace" && key != "labels" && key != "resourceVersion" &&
        key != "uid" && key != "creationTimestamp") {
      return Cat("metadata.", key, ": unknown field");
    }
  }
  const std::string given = meta.value("name", "");
  if (given != name) {
    return Cat("metadata.name: is \"", given, "\", but the path says \"", name, "\"");
  }
  if (meta.contains("namespace") && meta["namespace"] != ns) {
    return Cat("metadata.namespace: must be \"", ns, "\" (the path's)");
  }
  if (!meta.contains("labels")) return "";
  if (!meta["labels"].is_object()) return "metadata.labels: must be a map";
  for (const auto& [key, value] : meta["labels"].items()) {
    if (!ValidateLabelKey(key).ok()) return Cat("metadata.labels.", key, ": not a label key");
    if (!value.is_string() || !ValidateLabelValue(value.get<std::string>()).ok()) {
      return Cat("metadata.labels.", key, ": not a label value");
    }
  }
  return "";
}

// Reads data (strict standard base64) and stringData (text, which wins) into `values`.
std::string ReadValues(const Json& doc, std::map<std::string, std::string>* values) {
  for (const char* field : {"data", "stringData"}) {
    if (!doc.contains(field)) continue;
    if (!doc[field].is_object()) return Cat(field, ": must be a map of key to value");
    const bool base64 = std::string_view(field) == "data";
    for (const auto& [key, value] : doc[field].items()) {
      if (std::string e = CheckDataKey(field, key); !e.empty()) return e;
      if (!value.is_string()) return Cat(field, "[", key, "]: must be a string");
      std::string text = value.get<std::string>(), plain;
      if (base64 && (!absl::Base64Unescape(text, &plain) || absl::Base64Escape(plain) != text)) {
        return Cat("data[", key, "]: is not standard base64 (with padding)");
      }
      (*values)[key] = base64 ? plain : text;
    }
  }
  size_t total = 0;
  for (const auto& [key, value] : *values) total += value.size();
  if (total > kMaxSecretBytes) {
    return Cat("data: ", total, " bytes in all; a Secret holds at most ", kMaxSecretBytes);
  }
  return "";
}

std::string CheckType(const std::string& type, const std::map<std::string, std::string>& values) {
  if (type == kOpaque) return "";
  if (type != kDockerConfigJson) {
    return Cat("type: \"", type, "\" is not ", kOpaque, " or ", kDockerConfigJson);
  }
  auto it = values.find(std::string(kDockerConfigKey));
  if (it == values.end()) {
    return Cat("data[", kDockerConfigKey, "]: is required for type ", kDockerConfigJson);
  }
  Json config = Json::parse(it->second, nullptr, false);
  if (!config.is_object() || !config.contains("auths") || !config["auths"].is_object()) {
    return Cat("data[", kDockerConfigKey, "]: must be JSON with an \"auths\" object");
  }
  return "";
}

// Validates a Secret body for NS/NAME (NAME from the path, or for a create the body's); ""
// and `out` filled, or the error naming the field. Strict: an unknown field is an error.
std::string ParseSecret(const std::string& body, const std::string& ns, const std::string& name,
                        SecretWrite* out) {
  Json doc;
  if (std::string e = ParseJsonBody(body, &doc); !e.empty()) return e;
  for (const auto& [key, value] : doc.items()) {
    if (key == "status") return "status: is the server's (sizes of the stored values)";
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "type" &&
        key != "data" && key != "stringData") {
      return Cat(key, ": unknown field");
    }
  }
  if (doc.value("apiVersion", "") != "gpucloud/v1") return "apiVersion: must be gpucloud/v1";
  if (doc.value("kind", "") != "Secret") return "kind: must be Secret";
  if (!doc.contains("metadata")) return "metadata: is required";
  if (std::string e = CheckMetadata(doc["metadata"], ns, name); !e.empty()) return e;
  if (doc.contains("type") && !doc["type"].is_string()) return "type: must be a string";
  const std::string type = doc.value("type", std::string(kOpaque));
  if (std::string e = ReadValues(doc, &out->values); !e.empty()) return e;
  if (std::string e = CheckType(type, out->values); !e.empty()) return e;
  Json& meta = doc["metadata"];
  if (meta.contains("resourceVersion")) {
    int64_t rv = 0;
    if (!meta["resourceVersion"].is_string() ||
        !absl::SimpleAtoi(meta["resourceVersion"].get<std::string>(), &rv) || rv <= 0) {
      return "metadata.resourceVersion: must be a revision number";
    }
    out->resource_version = rv;
  }
  Json kept{{"name", name}, {"namespace", ns}};
  if (meta.contains("labels")) kept["labels"] = meta["labels"];
  out->doc = Json{{"apiVersion", "gpucloud/v1"},
                  {"kind", "Secret"},
                  {"metadata", std::move(kept)},
                  {"type", type}};
  return "";
}

}  // namespace

Response RestApi::HandleSecrets(const Request& r, const std::vector<std::string>& parts) {
  if (secrets_ == nullptr || parts.size() > 4) {
    return Status(404, "NotFound", Cat("no such path ", r.path));
  }
  if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
  const std::string& ns = parts[1];
  const std::string name = parts.size() == 4 ? parts[3] : "";
  if (!ValidateDnsLabel(ns).ok()) {
    return Status(400, "BadRequest", Cat("namespace \"", ns, "\" is not a DNS label"));
  }
  if (!name.empty() && !ValidateDnsLabel(name).ok()) {
    return Status(400, "BadRequest", Cat("name \"", name, "\" is not a DNS label"));
  }
  if (r.method == "GET" && name.empty()) {
    absl::StatusOr<store::ListResult> list = store_.List(Cat("/secrets/", ns, "/"));
    if (!list.ok()) return FromStatus(list.status());
    Json out{{"apiVersion", "gpucloud/v1"},
             {"kind", "SecretList"},
             {"metadata", {{"resourceVersion", std::to_string(list->revision)}}},
             {"items", Json::array()}};
    for (const store::KeyValue& kv : list->items) {
      out["items"].push_back(SecretStore::Describe(kv));
    }
    return {200, out.dump(2) + "\n"};
  }
  if (r.method == "GET") {
    absl::StatusOr<store::KeyValue> kv = store_.Get(SecretStore::Key(ns, name));
    if (!kv.ok()) return FromStatus(kv.status());
    return {200, SecretStore::Describe(*kv).dump(2) + "\n"};
  }
  if (r.method == "DELETE" && !name.empty()) {
    absl::StatusOr<int64_t> rev = secrets_->Delete(ns, name);
    if (!rev.ok()) return FromStatus(rev.status());
    return Status(200, "Deleted", Cat("Secret ", ns, "/", name, " deleted at revision ", *rev));
  }
  const bool create = r.method == "POST" && name.empty();
  if (create || (r.method == "PUT" && !name.empty())) return PutSecret(r, ns, name);
  return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
}

// POST (create: 409 if it exists) or PUT (create or replace every value; with
// metadata.resourceVersion a compare-and-swap, 409 when stale). 2xx once durable.
Response RestApi::PutSecret(const Request& r, const std::string& ns, const std::string& path_name) {
  const bool create = path_name.empty();
  std::string name = path_name;
  if (create) {
    Json peek;
    if (std::string e = ParseJsonBody(r.body, &peek); !e.empty()) return Status(422, "Invalid", e);
    if (peek.contains("metadata") && peek["metadata"].is_object()) {
      name = peek["metadata"].value("name", "");
    }
    if (!ValidateDnsLabel(name).ok()) {
      return Status(422, "Invalid", "metadata.name: must be a DNS label");
    }
  }
  SecretWrite w;
  if (std::string e = ParseSecret(r.body, ns, name, &w); !e.empty()) {
    return Status(422, "Invalid", e);
  }
  const std::string key = SecretStore::Key(ns, name);
  absl::StatusOr<store::KeyValue> current = store_.Get(key);
  if (!current.ok() && !absl::IsNotFound(current.status())) return FromStatus(current.status());
  std::optional<int64_t> expect = create ? std::optional<int64_t>(0) : w.resource_version;
  Json old = current.ok() ? Json::parse(current->value, nullptr, false) : Json::object();
  const Json* old_meta = old.is_object() && old.contains("metadata") && old["metadata"].is_object()
                             ? &old["metadata"]
                             : nullptr;
  std::string uid = old_meta ? old_meta->value("uid", "") : "";
  std::string created = old_meta ? old_meta->value("creationTimestamp", "") : "";
  w.doc["metadata"]["uid"] = uid.empty() ? NewUid() : uid;
  w.doc["metadata"]["creationTimestamp"] =
      created.empty()
          ? absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(clock_.NowMillis()),
                             absl::UTCTimeZone())
          : created;
  absl::StatusOr<store::KeyValue> stored = secrets_->Put(ns, name, w.doc, w.values, expect);
  if (!stored.ok()) return FromStatus(stored.status());
  return {current.ok() && !create ? 200 : 201, SecretStore::Describe(*stored).dump(2) + "\n"};
}

// The node that runs the task, and only it (NodeRestriction): an admin's or another node's
// request is refused even where a policy would allow it, so a value leaves the server only for
// the process that starts the task. The answer is never stored, audited (the audit log records
// requests, never bodies) or cached by a client (Cache-Control: no-store).
Response RestApi::TaskSecretsFor(const Request& r, const std::string& node,
                                 const std::string& name) {
  if (!r.who.node || r.who.node_name != node) {
    return Status(403, "Forbidden",
                  Cat("only node ", node, "'s own certificate may read the secrets of its tasks"));
  }
  absl::StatusOr<store::KeyValue> kv = store_.Get(Cat("/assignments/", node, "/", name));
  if (absl::IsNotFound(kv.status())) {
    return Status(404, "NotFound", Cat("node ", node, " has no assignment ", name));
  }
  if (!kv.ok()) return FromStatus(kv.status());
  absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(kv->value);
  if (!a.ok()) return FromStatus(a.status());
  if (a->UsesSecrets() && secrets_ == nullptr) {
    return Status(503, "Unavailable", "this server keeps no secrets");
  }
  absl::StatusOr<api::TaskSecrets> resolved =
      ResolveTaskSecrets(*a, [&](const std::string& secret) -> absl::StatusOr<RevealedSecret> {
        RevealedSecret out;
        absl::StatusOr<std::map<std::string, std::string>> values =
            secrets_->Reveal(a->namespace_, secret, &out.type);
        if (!values.ok()) return values.status();
        out.values = *std::move(values);
        return out;
      });
  if (!resolved.ok()) {
    if (absl::IsFailedPrecondition(resolved.status())) {
      return Status(409, "CreateContainerConfigError", std::string(resolved.status().message()));
    }
    return FromStatus(resolved.status());
  }
  Response out{200, api::TaskSecretsToJson(*resolved) + "\n"};
  out.headers["Cache-Control"] = "no-store";
  return out;
}

}  // namespace gpucloud::server
