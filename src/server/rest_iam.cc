// The identity half of the API (issue 14): users, groups, service accounts, policies, tokens,
// whoami and authorize. Objects live in the IdentityBook (identity_book.h); authorization of
// each request happened in RestApi::Handle (authorizer.h) before it got here.
#include <algorithm>
#include <set>
#include <tuple>

#include "absl/time/time.h"
#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/json_yaml.h"
#include "manifest/manifest.h"
#include "server/authorizer.h"
#include "server/credentials.h"
#include "server/identity_book.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {

// What a kind's spec may hold: field -> "strings" (DNS labels), "policies" (DNS labels or
// built-in policy names) or "string" (one DNS label).
struct IamKind {
  std::string_view plural, kind;
  std::vector<std::pair<std::string_view, std::string_view>> spec;
};

namespace {

const IamKind kUsers{
    "users", "User", {{"groups", "strings"}, {"policies", "policies"}, {"namespace", "string"}}};
const IamKind kGroups{"groups", "Group", {{"policies", "policies"}}};
const IamKind kServiceAccounts{"serviceaccounts", "ServiceAccount", {{"policies", "policies"}}};

// A name list of spec.`field`: each a DNS label, or for policies a built-in's name too.
std::string CheckNames(const Json& v, std::string_view field, bool policies) {
  if (!v.is_array()) return Cat("spec.", field, ": must be a list of names");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = v[i].is_string() ? v[i].get<std::string>() : "";
    const bool builtin = policies && name.starts_with("gpucloud:");
    if (!builtin && !ValidateDnsLabel(name).ok()) {
      return Cat("spec.", field, "[", i, "]: \"", name, "\" is not a DNS label");
    }
  }
  return "";
}

// Checks `doc` as a `rules` object named `name`; "" when it is one, else the error naming the
// field. Unknown fields are errors, as in every manifest.
std::string Validate(const Json& doc, const IamKind& rules, const std::string& name) {
  for (const auto& [key, _] : doc.items()) {
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "spec") {
      return Cat(key, ": unknown field");
    }
  }
  if (doc.value("apiVersion", "") != "gpucloud/v1") return "apiVersion: must be gpucloud/v1";
  if (doc.value("kind", "") != rules.kind) return Cat("kind: must be ", rules.kind);
  if (!doc.contains("metadata") || !doc["metadata"].is_object()) return "metadata: is required";
  for (const auto& [key, _] : doc["metadata"].items()) {
    if (key != "name" && key != "labels" && key != "resourceVersion" && key != "uid" &&
        key != "creationTimestamp" && key != "namespace") {
      return Cat("metadata.", key, ": unknown field");
    }
  }
  if (doc["metadata"].value("name", "") != name) {
    return Cat("metadata.name: is \"", doc["metadata"].value("name", ""),
               "\", but the path says \"", name, "\"");
  }
  if (!doc.contains("spec")) return "";
  if (!doc["spec"].is_object()) return "spec: must be an object";
  for (const auto& [key, value] : doc["spec"].items()) {
    auto rule = std::find_if(rules.spec.begin(), rules.spec.end(),
                             [&](const auto& r) { return r.first == key; });
    if (rule == rules.spec.end()) return Cat("spec.", key, ": unknown field");
    if (rule->second == "string") {
      if (!value.is_string() || !ValidateDnsLabel(value.get<std::string>()).ok()) {
        return Cat("spec.", key, ": must be a DNS label");
      }
    } else if (std::string e = CheckNames(value, key, rule->second == "policies"); !e.empty()) {
      return e;
    }
  }
  return "";
}

Json Listed(std::string_view kind, const std::vector<Json>& items, int64_t revision) {
  return Json{{"apiVersion", "gpucloud/v1"},
              {"kind", Cat(kind, "List")},
              {"metadata", {{"resourceVersion", std::to_string(revision)}}},
              {"items", items}};
}

// "90m", "12h", "30d": at least a minute, at most a year.
std::optional<absl::Duration> ParseTtl(const std::string& text) {
  if (text.size() < 2) return std::nullopt;
  int64_t n = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (!isdigit(static_cast<unsigned char>(text[i])) || n > 1'000'000) return std::nullopt;
    n = n * 10 + (text[i] - '0');
  }
  absl::Duration d;
  switch (text.back()) {
    case 'm':
      d = absl::Minutes(n);
      break;
    case 'h':
      d = absl::Hours(n);
      break;
    case 'd':
      d = absl::Hours(24 * n);
      break;
    default:
      return std::nullopt;
  }
  if (d < absl::Minutes(1) || d > absl::Hours(24 * 366)) return std::nullopt;
  return d;
}

Json WithoutSecret(Json doc) {
  doc.erase("hash");
  return doc;
}

}  // namespace

bool RestApi::IsIamPath(const std::vector<std::string>& parts) {
  if (parts.empty()) return false;
  const std::string& top = parts[0];
  if (top == "users" || top == "groups" || top == "policies" || top == "tokens") {
    return parts.size() <= 2;
  }
  if (top == "whoami" || top == "authorize") return parts.size() == 1;
  return top == "namespaces" && parts.size() >= 3 && parts.size() <= 4 &&
         parts[2] == "serviceaccounts";
}

Response RestApi::HandleIam(const Request& r, const std::vector<std::string>& parts) {
  if (identities_ == nullptr) return Status(404, "NotFound", Cat("no such path ", r.path));
  if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
  const std::string& top = parts[0];
  if (top == "whoami") return WhoAmI(r);
  if (top == "authorize") return AuthorizeFor(r);
  if (top == "tokens") return HandleTokens(r, parts.size() == 2 ? parts[1] : "");
  if (top == "namespaces") {
    return HandleIamObjects(r, kServiceAccounts, Cat("/iam/serviceaccounts/", parts[1], "/"),
                            parts.size() == 4 ? parts[3] : "");
  }
  const std::string name = parts.size() == 2 ? parts[1] : "";
  if (top == "policies") return HandlePolicies(r, name);
  return HandleIamObjects(r, top == "users" ? kUsers : kGroups, Cat("/iam/", top, "/"), name);
}

Response RestApi::HandleIamObjects(const Request& r, const IamKind& rules,
                                   const std::string& prefix, const std::string& name) {
  if (r.method == "GET" && name.empty()) {
    absl::StatusOr<store::ListResult> list = store_.List(prefix);
    if (!list.ok()) return FromStatus(list.status());
    std::vector<Json> items;
    for (const store::KeyValue& kv : list->items) {
      if (kv.key.find('/', prefix.size()) == std::string::npos) items.push_back(WithRevision(kv));
    }
    return {200, Listed(rules.kind, items, list->revision).dump(2) + "\n"};
  }
  const bool create = r.method == "POST" && name.empty();
  // POST on the collection, PUT on an item: the two that authorization decided as Create and
  // Update (ActionOf); anything else, a POST on an item included, is refused here.
  const bool write = create || (r.method == "PUT" && !name.empty());
  if (!write && (name.empty() || (r.method != "GET" && r.method != "DELETE"))) {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  if (r.method == "GET") {
    absl::StatusOr<store::KeyValue> kv = store_.Get(prefix + name);
    if (!kv.ok()) return FromStatus(kv.status());
    return {200, WithRevision(*kv).dump(2) + "\n"};
  }
  if (r.method == "DELETE") {
    absl::StatusOr<int64_t> rev = identities_->Delete(prefix + name, std::nullopt);
    if (!rev.ok()) return FromStatus(rev.status());
    return Status(200, "Deleted", Cat(rules.kind, " ", name, " deleted at revision ", *rev));
  }
  Json doc;
  if (std::string e = ParseJsonBody(r.body, &doc); !e.empty()) {
    return Status(422, "Invalid", e);
  }
  const std::string target =
      create && doc["metadata"].is_object() ? doc["metadata"].value("name", "") : name;
  if (!ValidateDnsLabel(target).ok()) {
    return Status(422, "Invalid", "metadata.name: must be a DNS label");
  }
  if (std::string e = Validate(doc, rules, target); !e.empty()) return Status(422, "Invalid", e);
  const bool has_policies =
      std::any_of(rules.spec.begin(), rules.spec.end(),
                  [](const auto& field) { return field.second == "policies"; });
  if (has_policies) {
    if (std::optional<Response> denied = AuthorizeAttachments(r, prefix + target, doc)) {
      return *denied;
    }
  }
  // A user's home namespace is made with the user (owned by it) when it does not exist yet.
  const std::string home =
      rules.kind == "User" && doc.contains("spec") ? doc["spec"].value("namespace", "") : "";
  if (!home.empty()) {
    Response made = PutNamespace(Cat("/namespaces/", home), NewNamespaceObject(home, target),
                                 /*create=*/true);
    if (made.status >= 300 && made.status != 409) return made;
  }
  return PutIamObject(prefix + target, doc.dump(), create);
}

namespace {

std::set<std::string> PoliciesOf(const Json& doc) {
  std::set<std::string> out;
  if (!doc.is_object() || !doc.contains("spec") || !doc["spec"].is_object()) return out;
  const Json& p = doc["spec"].value("policies", Json::array());
  for (const Json& name : p) {
    if (name.is_string()) out.insert(name.get<std::string>());
  }
  return out;
}

}  // namespace

// Who may write a user, group or service account may not thereby attach any policy: each policy
// the write adds needs policies:Attach on it, each it removes policies:Detach (so that a
// tenant who manages its service accounts cannot attach gpucloud:admin to one).
std::optional<Response> RestApi::AuthorizeAttachments(const Request& r, const std::string& key,
                                                      const Json& doc) {
  absl::StatusOr<store::KeyValue> current = store_.Get(key);
  const std::set<std::string> before = current.ok()
                                           ? PoliciesOf(Json::parse(current->value, nullptr, false))
                                           : std::set<std::string>{};
  const std::set<std::string> after = PoliciesOf(doc);
  for (const auto& [names, other, action] : {std::tuple{&after, &before, "policies:Attach"},
                                             std::tuple{&before, &after, "policies:Detach"}}) {
    for (const std::string& name : *names) {
      if (other->contains(name)) continue;
      const RequestedAction what{action, Cat("gpucloud:policy/", name)};
      authz::Decision d = authorizer_->Decide(r.who, what, {});
      if (!d.allowed()) return Denied(r.who, what, d);
    }
  }
  return std::nullopt;
}

std::optional<Response> RestApi::StampMetadata(Json& doc,
                                               const absl::StatusOr<store::KeyValue>& current,
                                               std::optional<int64_t>& expect) {
  Json& meta = doc["metadata"];
  if (meta.contains("resourceVersion")) {
    int64_t rv = 0;
    if (!meta["resourceVersion"].is_string() ||
        !absl::SimpleAtoi(meta["resourceVersion"].get<std::string>(), &rv) || rv <= 0) {
      return Status(422, "Invalid", "metadata.resourceVersion: must be a revision number");
    }
    expect = rv;
    meta.erase("resourceVersion");
  }
  Json old = current.ok() ? Json::parse(current->value, nullptr, false) : Json::object();
  const Json old_meta = old.is_object() && old.contains("metadata") && old["metadata"].is_object()
                            ? old["metadata"]
                            : Json::object();
  const std::string uid = old_meta.value("uid", "");
  meta["uid"] = uid.empty() ? NewUid() : uid;
  const std::string created = old_meta.value("creationTimestamp", "");
  meta["creationTimestamp"] =
      created.empty()
          ? absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(clock_.NowMillis()),
                             absl::UTCTimeZone())
          : created;
  return std::nullopt;
}

// Writes a validated object: a create must not exist; a PUT with metadata.resourceVersion is a
// compare-and-swap. The store owns uid, creationTimestamp and resourceVersion.
Response RestApi::PutIamObject(const std::string& key, const std::string& text, bool create) {
  Json doc = Json::parse(text);
  absl::StatusOr<store::KeyValue> current = store_.Get(key);
  if (!current.ok() && !absl::IsNotFound(current.status())) return FromStatus(current.status());
  std::optional<int64_t> expect =
      current.ok() ? std::optional<int64_t>(current->mod_revision) : std::optional<int64_t>(0);
  if (create) expect = 0;
  if (std::optional<Response> bad = StampMetadata(doc, current, expect)) return *bad;
  absl::StatusOr<int64_t> rev = identities_->Put(key, doc, expect);
  if (!rev.ok()) return FromStatus(rev.status());
  doc["metadata"]["resourceVersion"] = std::to_string(*rev);
  return {current.ok() && !create ? 200 : 201, doc.dump(2) + "\n"};
}

Response RestApi::HandlePolicies(const Request& r, const std::string& name) {
  if (r.method == "GET" || r.method == "DELETE") {
    return HandleIamObjects(r, IamKind{"policies", "Policy", {}}, "/iam/policies/", name);
  }
  const bool create = r.method == "POST" && name.empty();
  if (!create && !(r.method == "PUT" && !name.empty())) {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  manifest::PolicyDocumentResult p = manifest::ParsePolicyDocument(r.body, "body");
  if (!p.ok()) {
    std::vector<std::string> lines;
    for (const manifest::Diagnostic& d : p.errors) lines.push_back(d.ToString());
    return Status(422, "Invalid", Join(lines, "\n"));
  }
  const std::string target = create ? p.name : name;
  if (!ValidateDnsLabel(target).ok() || (!p.name.empty() && p.name != target)) {
    return Status(422, "Invalid",
                  Cat("metadata.name: is \"", p.name, "\"",
                      create ? "; a policy needs a DNS label for a name"
                             : Cat(", but the path says \"", name, "\"")));
  }
  Policy policy;
  policy.metadata.name = target;
  policy.spec = std::move(p.document);
  return PutIamObject("/iam/policies/" + target, manifest::PolicyToJson(policy), create);
}

Response RestApi::HandleTokens(const Request& r, const std::string& name) {
  if (r.method == "GET" && name.empty()) {
    absl::StatusOr<store::ListResult> list = store_.List("/iam/tokens/");
    if (!list.ok()) return FromStatus(list.status());
    std::vector<Json> items;
    for (const store::KeyValue& kv : list->items) {
      Json doc = WithoutSecret(WithRevision(kv));
      // Only the tokens the caller may read (its own, for a tenant).
      authz::RequestContext c;
      (void)c.Set(ConditionKeyId::kResourceOwner, doc["spec"].value("user", ""));
      const std::string token = doc["metadata"].value("name", "");
      if (authorizer_->Decide(r.who, {"tokens:Get", Cat("gpucloud:token/", token)}, std::move(c))
              .allowed()) {
        items.push_back(std::move(doc));
      }
    }
    return {200, Listed("Token", items, list->revision).dump(2) + "\n"};
  }
  if (r.method == "GET" || r.method == "DELETE") {
    if (name.empty()) return Status(405, "MethodNotAllowed", Cat(r.method, " needs a token name"));
    if (r.method == "GET") {
      absl::StatusOr<store::KeyValue> kv = store_.Get(IdentityBook::TokenKey(name));
      if (!kv.ok()) return FromStatus(kv.status());
      return {200, WithoutSecret(WithRevision(*kv)).dump(2) + "\n"};
    }
    absl::StatusOr<int64_t> rev = identities_->Delete(IdentityBook::TokenKey(name), std::nullopt);
    if (!rev.ok()) return FromStatus(rev.status());
    return Status(200, "Revoked", Cat("token ", name, " revoked at revision ", *rev));
  }
  if (r.method != "POST" || !name.empty()) {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  return CreateToken(r);
}

Response RestApi::CreateToken(const Request& r) {
  Json body;
  if (std::string e = ParseJsonBody(r.body, &body); !e.empty()) {
    return Status(422, "Invalid", e);
  }
  for (const auto& [key, _] : body.items()) {
    if (key != "user" && key != "serviceAccount" && key != "ttl" && key != "name") {
      return Status(422, "Invalid", Cat(key, ": unknown field (user, serviceAccount, ttl, name)"));
    }
  }
  const std::string user = body.value("user", ""), sa = body.value("serviceAccount", "");
  if (user.empty() == sa.empty()) {
    return Status(422, "Invalid", "user, serviceAccount: give exactly one");
  }
  if (!user.empty() && !identities_->IdentityOfUser(user)) {
    return Status(422, "Invalid", Cat("user: there is no user \"", user, "\""));
  }
  if (!sa.empty() && !store_.Get(Cat("/iam/serviceaccounts/", sa)).ok()) {
    return Status(422, "Invalid", Cat("serviceAccount: there is no service account \"", sa, "\""));
  }
  std::optional<absl::Duration> ttl = ParseTtl(body.value("ttl", "30d"));
  if (!ttl) return Status(422, "Invalid", "ttl: must be like 90m, 12h or 30d (1m to 366d)");
  std::string name = body.value("name", "");
  if (name.empty()) name = Cat(user.empty() ? "sa" : user, "-", NewToken().substr(0, 8));
  if (!ValidateDnsLabel(name).ok()) return Status(422, "Invalid", "name: must be a DNS label");
  const std::string secret = NewToken();
  const absl::Time now = absl::FromUnixMillis(clock_.NowMillis()), expires = now + *ttl;
  auto stamp = [](absl::Time t) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
  };
  Json spec{{"expiresAt", stamp(expires)},
            {"expiresAtMs", absl::ToUnixMillis(expires)},
            {"createdBy", r.who.user}};
  spec[user.empty() ? "serviceAccount" : "user"] = user.empty() ? sa : user;
  Json doc{{"apiVersion", "gpucloud/v1"},
           {"kind", "Token"},
           {"metadata", {{"name", name}, {"creationTimestamp", stamp(now)}}},
           {"spec", spec},
           {"hash", Sha256Hex(secret)}};
  absl::StatusOr<int64_t> rev = identities_->Put(IdentityBook::TokenKey(name), doc, 0);
  if (!rev.ok()) return FromStatus(rev.status());
  Json out = WithoutSecret(doc);
  out["metadata"]["resourceVersion"] = std::to_string(*rev);
  out["status"] = {{"token", secret}};
  return {201, out.dump(2) + "\n"};
}

Response RestApi::WhoAmI(const Request& r) {
  if (r.method != "GET") return Status(405, "MethodNotAllowed", "whoami takes GET");
  Json out{{"user", r.who.node ? r.who.node_name : r.who.user},
           {"type", r.who.node                                         ? "node"
                    : r.who.user.starts_with("system:serviceaccount:") ? "serviceaccount"
                                                                       : "user"},
           {"groups", r.who.groups},
           {"namespace", r.who.namespace_},
           {"policies", EffectivePolicies(r.who)},
           {"token", r.who.token_name}};
  return {200, out.dump(2) + "\n"};
}

// POST authorize: what the policies decide for a request, by the caller or (with
// policies:Simulate on the user) on another user's behalf.
Response RestApi::AuthorizeFor(const Request& r) {
  if (r.method != "POST") return Status(405, "MethodNotAllowed", "authorize takes POST");
  Json body;
  if (std::string e = ParseJsonBody(r.body, &body); !e.empty()) {
    return Status(422, "Invalid", e);
  }
  Identity who = r.who;
  if (std::string user = body.value("user", ""); !user.empty() && user != r.who.user) {
    RequestedAction simulate{"policies:Simulate", Cat("gpucloud:user/", user)};
    authz::Decision may = authorizer_->Decide(r.who, simulate, {});
    if (!may.allowed()) return Denied(r.who, simulate, may);
    std::optional<Identity> other = identities_->IdentityOfUser(user);
    if (!other) return Status(404, "NotFound", Cat("user ", user, " not found"));
    who = *other;
  }
  RequestedAction what{body.value("action", ""), body.value("resource", "")};
  if (!FindPolicyAction(what.action)) {
    return Status(422, "Invalid", Cat("action: \"", what.action, "\" is not a gpucloud action"));
  }
  if (absl::Status s = ValidateResourcePattern(what.resource); !s.ok() || what.resource.empty()) {
    return Status(422, "Invalid", Cat("resource: ", s.ok() ? "is required" : s.message()));
  }
  authz::RequestContext context;
  if (body.contains("context")) {
    if (!body["context"].is_object()) return Status(422, "Invalid", "context: must be a map");
    for (const auto& [key, value] : body["context"].items()) {
      std::string text = value.is_string() ? value.get<std::string>() : value.dump();
      if (absl::Status s = context.Set(key, text); !s.ok()) {
        return Status(422, "Invalid", Cat("context.", key, ": ", s.message()));
      }
    }
  }
  authz::Decision d = authorizer_->Decide(who, what, std::move(context));
  Json out{{"allowed", d.allowed()},
           {"effect", authz::EffectName(d.effect)},
           {"policy", d.policy},
           {"sid", d.sid},
           {"statementIndex", d.statement_index},
           {"reason", d.StatementName()}};
  return {200, out.dump(2) + "\n"};
}

}  // namespace gpucloud::server
