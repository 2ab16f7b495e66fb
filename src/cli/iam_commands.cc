#include "cli/iam_commands.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>

#include "authz/policy_set.h"
#include "cli/remote.h"
#include "core/gpu_catalog.h"
#include "core/object_meta.h"
#include "core/policy.h"
#include "core/text.h"
#include "manifest/json_yaml.h"
#include "manifest/manifest.h"

namespace gpucloud::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // gpuctl.h's kExitInvalid; also "no" / "deny"
constexpr int kExitUsage = 2;
// Read-modify-write rounds of attach/detach before giving up on 409s.
constexpr int kCasAttempts = 5;

struct ResourceInfo {
  std::string_view plural;    // the API collection and the action prefix
  std::string_view singular;  // also accepted on the command line
  ResourceType type;
};
constexpr ResourceInfo kResources[] = {
    {"jobs", "job", ResourceType::kJob},
    {"queues", "queue", ResourceType::kQueue},
    {"nodepools", "nodepool", ResourceType::kNodePool},
    {"nodes", "node", ResourceType::kNode},
    {"namespaces", "namespace", ResourceType::kNamespace},
    {"users", "user", ResourceType::kUser},
    {"groups", "group", ResourceType::kGroup},
    {"serviceaccounts", "serviceaccount", ResourceType::kServiceAccount},
    {"tokens", "token", ResourceType::kToken},
    {"policies", "policy", ResourceType::kPolicy},
    {"secrets", "secret", ResourceType::kSecret},
    {"audit", "audit", ResourceType::kAudit},
    {"cluster", "cluster", ResourceType::kCluster},
    {"runtimeclasses", "runtimeclass", ResourceType::kRuntimeClass},
    {"services", "service", ResourceType::kService},
};

const ResourceInfo* FindResource(std::string_view word) {
  std::string lower = ToLower(word);
  for (const ResourceInfo& r : kResources) {
    if (lower == r.plural || lower == r.singular) return &r;
  }
  return nullptr;
}

std::string_view IamPlural(std::string_view resource) {
  for (std::string_view p : {"users", "groups", "tokens", "policies"}) {
    const ResourceInfo* r = FindResource(resource);
    if (r != nullptr && r->plural == p) return p;
  }
  return "";
}

std::string Strings(const nlohmann::json& j, std::string_view sep = ",") {
  if (!j.is_array() || j.empty()) return "-";
  std::vector<std::string> parts;
  for (const nlohmann::json& v : j)
    parts.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  return Join(parts, sep);
}

std::string Field(const nlohmann::json& j, const char* a, const char* b) {
  if (!j.is_object() || !j.contains(a) || !j[a].is_object()) return "-";
  const nlohmann::json& v = j[a].value(b, nlohmann::json());
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  if (v.is_array()) return Strings(v);
  return v.is_null() ? "-" : v.dump();
}

// A name that goes into a path must be a DNS label; says which and why on `err` otherwise.
bool IsLabel(std::string_view what, const std::string& value, std::ostream& err) {
  if (absl::Status s = ValidateDnsLabel(value); !s.ok()) {
    err << "gpuctl: " << what << " \"" << value << "\" is not a valid name: " << s.message()
        << "\n";
    return false;
  }
  return true;
}

absl::StatusOr<nlohmann::json> ParseAnswer(const api::HttpResponse& r) {
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the server's answer is not a JSON object");
  }
  return j;
}

}  // namespace

bool IsIamResource(std::string_view resource) { return !IamPlural(resource).empty(); }

absl::Status ValidateTtl(std::string_view ttl) {
  bool ok = ttl.size() >= 2 && ttl.size() <= 7 && ttl[0] != '0' &&
            (ttl.back() == 'm' || ttl.back() == 'h' || ttl.back() == 'd');
  for (size_t i = 0; ok && i + 1 < ttl.size(); ++i) ok = std::isdigit(ttl[i]) != 0;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat(
      "--ttl \"", ttl, "\": give a whole number of minutes, hours or days, e.g. 90m, 12h, 30d"));
}

absl::StatusOr<ActionAndResource> MapVerbAndResource(const CanIRequest& request) {
  const ResourceInfo* r = FindResource(request.resource);
  if (r == nullptr) {
    std::vector<std::string> known;
    for (const ResourceInfo& info : kResources) known.emplace_back(info.plural);
    return absl::InvalidArgumentError(
        Cat("unknown resource \"", request.resource, "\" (known: ", Join(known, ", "), ")"));
  }
  std::string verb;
  for (char c : request.verb) {
    if (c != '-' && c != '_') verb += c;
  }
  std::optional<int> id = FindPolicyAction(Cat(r->plural, ":", verb));
  if (!id || verb.empty()) {
    std::vector<std::string> verbs;
    for (std::string_view a : PolicyActions()) {
      if (a.starts_with(Cat(r->plural, ":")))
        verbs.push_back(ToLower(a.substr(r->plural.size() + 1)));
    }
    return absl::InvalidArgumentError(Cat("no action for \"", request.verb, " ", r->plural,
                                          "\" (verbs: ", Join(verbs, ", "), ")"));
  }
  std::string name = request.name;
  if (name.empty()) {
    name = r->type == ResourceType::kAudit || r->type == ResourceType::kCluster ? "default" : "*";
  }
  std::string ns = request.namespace_.empty() ? std::string(kDefaultNamespace) : request.namespace_;
  return ActionAndResource{std::string(PolicyActions()[*id]), ResourceName(r->type, ns, name)};
}

nlohmann::json UserBody(const std::string& name, const std::vector<std::string>& groups,
                        const std::vector<std::string>& policies, const std::string& namespace_) {
  nlohmann::json spec = {{"groups", groups}, {"policies", policies}};
  if (!namespace_.empty()) spec["namespace"] = namespace_;
  return {{"apiVersion", "gpucloud/v1"},
          {"kind", "User"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

nlohmann::json GroupBody(const std::string& name, const std::vector<std::string>& policies) {
  return {{"apiVersion", "gpucloud/v1"},
          {"kind", "Group"},
          {"metadata", {{"name", name}}},
          {"spec", {{"policies", policies}}}};
}

nlohmann::json NamespaceBody(const std::string& name, const std::string& owner,
                             const std::map<std::string, std::string>& labels) {
  nlohmann::json meta = {{"name", name}};
  if (!labels.empty()) meta["labels"] = labels;
  nlohmann::json spec = nlohmann::json::object();
  if (!owner.empty()) spec["owner"] = owner;
  return {{"apiVersion", "gpucloud/v1"}, {"kind", "Namespace"}, {"metadata", meta}, {"spec", spec}};
}

nlohmann::json ServiceAccountBody(const std::string& name, const std::string& namespace_,
                                  const std::vector<std::string>& policies) {
  return {{"apiVersion", "gpucloud/v1"},
          {"kind", "ServiceAccount"},
          {"metadata", {{"name", name}, {"namespace", namespace_}}},
          {"spec", {{"policies", policies}}}};
}

nlohmann::json TokenRequestBody(const std::string& subject, const std::string& who,
                                const std::string& ttl, const std::string& name) {
  nlohmann::json body = {{subject, who}};
  if (!ttl.empty()) body["ttl"] = ttl;
  if (!name.empty()) body["name"] = name;
  return body;
}

absl::StatusOr<std::string> FormatNewToken(const nlohmann::json& answer) {
  if (!answer.is_object() || !answer.contains("status") || !answer["status"].is_object() ||
      !answer["status"].contains("token") || !answer["status"]["token"].is_string()) {
    return absl::InvalidArgumentError("the server's answer holds no token (status.token)");
  }
  std::string subject = Field(answer, "spec", "user");
  subject = subject != "-" ? Cat("user ", subject)
                           : Cat("service account ", Field(answer, "spec", "serviceAccount"));
  return Cat("token ", Field(answer, "metadata", "name"), " created for ", subject, ", expires ",
             Field(answer, "spec", "expiresAt"), ":\n",
             answer["status"]["token"].get<std::string>(),
             "\nKeep it now: the token is not shown again (the server keeps only its hash).\n");
}

bool ChangePolicies(nlohmann::json& object, const std::string& policy, bool attach) {
  if (!object["spec"].is_object()) object["spec"] = nlohmann::json::object();
  nlohmann::json& list = object["spec"]["policies"];
  if (!list.is_array()) list = nlohmann::json::array();
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (*it != policy) continue;
    if (attach) return false;
    list.erase(it);
    return true;
  }
  if (!attach) return false;
  list.push_back(policy);
  return true;
}

void PrintIamTable(std::string_view resource, const std::vector<nlohmann::json>& items,
                   std::ostream& out) {
  std::string_view plural = IamPlural(resource);
  auto name = [](const nlohmann::json& i) { return Field(i, "metadata", "name"); };
  if (plural == "users") {
    out << fmt::format("{:<24} {:<24} {:<32} {}\n", "NAME", "GROUPS", "POLICIES", "NAMESPACE");
    for (const nlohmann::json& i : items) {
      out << fmt::format("{:<24} {:<24} {:<32} {}\n", name(i), Field(i, "spec", "groups"),
                         Field(i, "spec", "policies"), Field(i, "spec", "namespace"));
    }
  } else if (plural == "groups") {
    out << fmt::format("{:<24} {}\n", "NAME", "POLICIES");
    for (const nlohmann::json& i : items) {
      out << fmt::format("{:<24} {}\n", name(i), Field(i, "spec", "policies"));
    }
  } else if (plural == "tokens") {
    out << fmt::format("{:<24} {:<32} {}\n", "NAME", "FOR", "EXPIRES");
    for (const nlohmann::json& i : items) {
      std::string user = Field(i, "spec", "user");
      std::string who = user != "-" ? Cat("user ", user)
                                    : Cat("serviceaccount ", Field(i, "spec", "serviceAccount"));
      out << fmt::format("{:<24} {:<32} {}\n", name(i), who, Field(i, "spec", "expiresAt"));
    }
  } else {
    out << fmt::format("{:<32} {:>10}  {}\n", "NAME", "STATEMENTS", "SIDS");
    for (const nlohmann::json& i : items) {
      nlohmann::json statements = nlohmann::json::array();
      if (i.contains("spec") && i["spec"].is_object()) {
        statements = i["spec"].value("Statement", nlohmann::json::array());
      }
      if (statements.is_object()) statements = nlohmann::json::array({statements});
      std::vector<std::string> sids;
      for (const nlohmann::json& s : statements) {
        if (s.is_object() && s.contains("Sid") && s["Sid"].is_string()) sids.push_back(s["Sid"]);
      }
      out << fmt::format("{:<32} {:>10}  {}\n", name(i), statements.size(),
                         sids.empty() ? "-" : Join(sids, ","));
    }
  }
}

std::string FormatWhoami(const nlohmann::json& answer) {
  std::string text;
  for (const char* key : {"user", "type", "groups", "namespace", "policies", "token"}) {
    std::string value = "-";
    if (answer.contains(key) && answer[key].is_string() && !answer[key].get<std::string>().empty())
      value = answer[key].get<std::string>();
    if (answer.contains(key) && answer[key].is_array()) value = Strings(answer[key], ", ");
    text += Cat(key, ": ", value, "\n");
  }
  return text;
}

std::string DecisionLine(bool allowed, const std::string& policy, const std::string& sid,
                         int statement_index) {
  if (policy.empty() || statement_index < 0) {
    return "denied: no statement allows it (implicit deny)";
  }
  authz::Decision d{.policy = policy, .sid = sid, .statement_index = statement_index};
  return Cat(allowed ? "allowed by " : "denied by ", d.StatementName());
}

int GetIamObjects(const CallFn& call, const std::string& resource, const std::string& name,
                  const std::string& format, std::ostream& out, std::ostream& err) {
  std::string plural(IamPlural(resource));
  if (!name.empty() && !IsLabel("NAME", name, err)) return kExitUsage;
  std::string path = Cat(kApiRoot, plural, name.empty() ? "" : "/", name);
  std::optional<api::HttpResponse> r = SendRequest(call, "GET", path, "", err);
  if (!r) return kExitFailed;
  if (format == "json") {
    out << r->body;
    if (!r->body.empty() && r->body.back() != '\n') out << "\n";
    return kExitOk;
  }
  absl::StatusOr<nlohmann::json> j = ParseAnswer(*r);
  if (!j.ok()) {
    err << "gpuctl: " << j.status().message() << "\n";
    return kExitFailed;
  }
  std::vector<nlohmann::json> items;
  if (j->contains("items") && (*j)["items"].is_array()) {
    for (const nlohmann::json& item : (*j)["items"]) items.push_back(item);
  } else {
    items.push_back(*j);
  }
  if (format == "yaml") {
    for (const nlohmann::json& item : items) {
      absl::StatusOr<std::string> yaml = manifest::JsonToYaml(item.dump());
      if (yaml.ok()) out << "---\n" << *yaml;
    }
    return kExitOk;
  }
  PrintIamTable(plural, items, out);
  return kExitOk;
}

namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(Cat(path, ": cannot read: ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The policies of `files`, each named by its metadata.name or else its file's stem; false (the
// diagnostics on `err`) when one does not read or parse.
bool LoadPolicies(const std::vector<std::string>& files, std::vector<authz::NamedPolicy>& out,
                  std::ostream& err) {
  bool ok = true;
  for (const std::string& file : files) {
    absl::StatusOr<std::string> text = ReadWholeFile(file);
    if (!text.ok()) {
      err << text.status().message() << "\n";
      ok = false;
      continue;
    }
    manifest::PolicyDocumentResult p = manifest::ParsePolicyDocument(*text, file);
    for (const manifest::Diagnostic& d : p.warnings) err << d.ToString() << "\n";
    for (const manifest::Diagnostic& d : p.errors) err << d.ToString() << "\n";
    if (!p.ok()) {
      ok = false;
      continue;
    }
    std::string name = p.name.empty() ? std::filesystem::path(file).stem().string() : p.name;
    out.push_back({name, std::move(p.document)});
  }
  return ok;
}

}  // namespace

int SimulatePolicies(const SimulateOptions& o, std::ostream& out, std::ostream& err) {
  authz::Request request;
  request.action = o.action;
  request.resource = o.resource;
  if (!FindPolicyAction(o.action)) {
    err << "gpuctl policy simulate: --action \"" << o.action
        << "\" is not an action (docs/policies.md lists them)\n";
    return kExitUsage;
  }
  if (absl::Status s = ValidateResourcePattern(o.resource); !s.ok()) {
    err << "gpuctl policy simulate: --resource: " << s.message() << "\n";
    return kExitUsage;
  }
  request.principal.name = o.user;
  request.principal.groups = o.groups;
  for (const std::string& entry : o.context) {
    size_t eq = entry.find('=');
    absl::Status s = eq == std::string::npos
                         ? absl::InvalidArgumentError("give KEY=VALUE")
                         : request.context.Set(entry.substr(0, eq), entry.substr(eq + 1));
    if (!s.ok()) {
      err << "gpuctl policy simulate: --context \"" << entry << "\": " << s.message() << "\n";
      return kExitUsage;
    }
  }
  std::vector<authz::NamedPolicy> policies;
  if (!LoadPolicies(o.policy_files, policies, err)) return kExitFailed;
  absl::StatusOr<authz::PolicySet> set = authz::PolicySet::Compile(policies);
  if (!set.ok()) {
    err << "gpuctl policy simulate: " << set.status().message() << "\n";
    return kExitFailed;
  }
  authz::Decision d = set->Evaluate(request);
  out << authz::EffectName(d.effect) << "\n"
      << DecisionLine(d.allowed(), d.policy, d.sid, d.statement_index) << "\n";
  return d.allowed() ? kExitOk : kExitFailed;
}

namespace {

int CreateObject(const CallFn& call, std::string_view collection, std::string_view kind,
                 const std::string& name, const nlohmann::json& body, std::ostream& out,
                 std::ostream& err) {
  std::string what = Cat(kind, " ", name);
  if (!SendRequest(call, "POST", Cat(kApiRoot, collection), body.dump(), err, what)) {
    return kExitFailed;
  }
  out << what << " created\n";
  return kExitOk;
}

int CreateToken(const CallFn& call, const nlohmann::json& body, const std::string& format,
                std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> r =
      SendRequest(call, "POST", Cat(kApiRoot, "tokens"), body.dump(), err);
  if (!r) return kExitFailed;
  absl::StatusOr<nlohmann::json> j = ParseAnswer(*r);
  absl::StatusOr<std::string> text =
      j.ok() ? FormatNewToken(*j) : absl::StatusOr<std::string>(j.status());
  if (!text.ok()) {
    err << "gpuctl: " << text.status().message() << "\n";
    return kExitFailed;
  }
  if (format == "json") {
    out << j->dump(2) << "\n";
    err << "gpuctl: keep status.token now: the token is not shown again\n";
  } else {
    out << *text;
  }
  return kExitOk;
}

// attach / detach: read the user or group, change spec.policies, write it back only if it still
// has the resourceVersion read (the server answers 409 otherwise, and the round is redone).
int ChangeAttachment(const CallFn& call, const std::string& policy, std::string_view collection,
                     std::string_view kind, const std::string& who, bool attach, std::ostream& out,
                     std::ostream& err) {
  std::string path = Cat(kApiRoot, collection, "/", who);
  std::string what = Cat(kind, " ", who);
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<api::HttpResponse> got = SendRequest(call, "GET", path, "", err, what);
    if (!got) return kExitFailed;
    absl::StatusOr<nlohmann::json> object = ParseAnswer(*got);
    if (!object.ok()) {
      err << "gpuctl: " << what << ": " << object.status().message() << "\n";
      return kExitFailed;
    }
    if (!ChangePolicies(*object, policy, attach)) {
      out << "policy " << policy << (attach ? " is already attached to " : " is not attached to ")
          << what << "\n";
      return kExitOk;
    }
    absl::StatusOr<api::HttpResponse> put = call("PUT", path, object->dump());
    if (put.ok() && put->status == 409) continue;  // changed since we read it: read again
    if (!put.ok() || put->status < 200 || put->status > 299) {
      err << "gpuctl: " << what << ": "
          << (put.ok() ? StatusMessage(*put) : std::string(put.status().message())) << "\n";
      return kExitFailed;
    }
    out << "policy " << policy << (attach ? " attached to " : " detached from ") << what << "\n";
    return kExitOk;
  }
  err << "gpuctl: " << what << " kept changing while being updated (" << kCasAttempts
      << " conflicts); try again\n";
  return kExitFailed;
}

int Whoami(const CallFn& call, const std::string& format, std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> r = SendRequest(call, "GET", Cat(kApiRoot, "whoami"), "", err);
  if (!r) return kExitFailed;
  absl::StatusOr<nlohmann::json> j = ParseAnswer(*r);
  if (!j.ok()) {
    err << "gpuctl: " << j.status().message() << "\n";
    return kExitFailed;
  }
  out << (format == "json" ? j->dump(2) + "\n" : FormatWhoami(*j));
  return kExitOk;
}

// The gpucloud/v1 Policy manifest of `file` (a Policy manifest or a bare IAM document, checked
// as strictly as the server checks it), named `name` or its metadata.name; nullopt, the
// diagnostics (file:line:column) on `err`, when it does not read, parse or have a name.
std::optional<nlohmann::json> PolicyBody(const std::string& file, const std::string& name,
                                         std::ostream& err) {
  absl::StatusOr<std::string> text = ReadWholeFile(file);
  if (!text.ok()) {
    err << text.status().message() << "\n";
    return std::nullopt;
  }
  manifest::PolicyDocumentResult p = manifest::ParsePolicyDocument(*text, file);
  for (const manifest::Diagnostic& d : p.warnings) err << d.ToString() << "\n";
  for (const manifest::Diagnostic& d : p.errors) err << d.ToString() << "\n";
  if (!p.ok()) return std::nullopt;
  if (!p.name.empty() && !name.empty() && p.name != name) {
    err << "gpuctl create policy: --name " << name << ", but " << file << " names it " << p.name
        << "\n";
    return std::nullopt;
  }
  Policy policy;
  policy.metadata.name = p.name.empty() ? name : p.name;
  if (policy.metadata.name.empty()) {
    err << "gpuctl create policy: " << file << " is a bare IAM document: give it a --name\n";
    return std::nullopt;
  }
  if (!IsLabel("policy name", policy.metadata.name, err)) return std::nullopt;
  policy.spec = std::move(p.document);
  return nlohmann::json::parse(manifest::PolicyToJson(policy));
}

struct CanIFlags {
  std::vector<std::string> args;  // VERB RESOURCE [NAME]
  std::string ns = std::string(kDefaultNamespace), gpu_type, gpus, mig_profile, queue, as;
};

// The body of POST authorize, or InvalidArgument for a bad flag.
absl::StatusOr<nlohmann::json> AuthorizeBody(const CanIFlags& f) {
  CanIRequest request{f.args[0], f.args[1], f.args.size() > 2 ? f.args[2] : "", f.ns};
  absl::StatusOr<ActionAndResource> mapped = MapVerbAndResource(request);
  if (!mapped.ok()) return mapped.status();
  nlohmann::json context = nlohmann::json::object();
  if (!f.gpu_type.empty()) {
    std::vector<const GpuType*> types = GpuCatalog::Default().Resolve(f.gpu_type);
    if (types.size() != 1) {
      std::vector<std::string> names;
      names.reserve(types.size());
      for (const GpuType* t : types) names.push_back(t->name);
      return absl::InvalidArgumentError(
          types.empty() ? Cat("--gpu-type: unknown GPU type \"", f.gpu_type, "\" (gpuctl catalog)")
                        : Cat("--gpu-type \"", f.gpu_type, "\" is several types (",
                              Join(names, ", "), "): name one"));
    }
    context["gpucloud:GpuType"] = types[0]->name;
  }
  if (!f.gpus.empty()) {
    if (absl::StatusOr<double> n = ParsePolicyNumber(f.gpus); !n.ok() || *n < 0) {
      return absl::InvalidArgumentError(Cat("--gpus \"", f.gpus, "\": give a number of GPUs"));
    }
    context["gpucloud:GpuCount"] = f.gpus;
  }
  if (!f.mig_profile.empty()) context["gpucloud:MigProfile"] = f.mig_profile;
  if (!f.queue.empty()) context["gpucloud:Queue"] = f.queue;
  nlohmann::json body = {
      {"action", mapped->action}, {"resource", mapped->resource}, {"context", context}};
  if (!f.as.empty()) body["user"] = f.as;
  return body;
}

int CanI(const CallFn& call, const nlohmann::json& body, std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> r =
      SendRequest(call, "POST", Cat(kApiRoot, "authorize"), body.dump(), err);
  if (!r) return kExitFailed;
  absl::StatusOr<nlohmann::json> j = ParseAnswer(*r);
  if (!j.ok() || !(*j)["allowed"].is_boolean()) {
    err << "gpuctl: the server's answer holds no decision (allowed)\n";
    return kExitFailed;
  }
  bool allowed = (*j)["allowed"].get<bool>();
  int index = (*j)["statementIndex"].is_number_integer() ? (*j)["statementIndex"].get<int>() : -1;
  out << (allowed ? "yes" : "no") << "\n"
      << DecisionLine(allowed, j->value("policy", ""), j->value("sid", ""), index) << "\n";
  return allowed ? kExitOk : kExitFailed;
}

}  // namespace

struct IamCommands::Flags {
  CLI::App* create_user = nullptr;
  CLI::App* create_group = nullptr;
  CLI::App* create_token = nullptr;
  CLI::App* create_policy = nullptr;
  CLI::App* create_namespace = nullptr;
  CLI::App* create_service_account = nullptr;
  CLI::App* revoke_token = nullptr;
  CLI::App* attach = nullptr;
  CLI::App* detach = nullptr;
  CLI::App* whoami = nullptr;
  CLI::App* can_i = nullptr;
  CLI::App* simulate = nullptr;
  std::string name, ns, policy, user, group, service_account, ttl = "30d", format = "table";
  std::string policy_file;
  std::vector<std::string> groups, policies, labels;
  std::string owner;
  CanIFlags can;
  SimulateOptions sim;
};

namespace {

void DeclareCreate(CLI::App& app, auto& f) {
  CLI::App* create = app.add_subcommand(
      "create", "Create a user, group, policy, token, namespace, service account or secret");
  create->require_subcommand(1);
  f.create_user = create->add_subcommand("user", "create user NAME [--group G]... [--policy P]...");
  f.create_user->add_option("name", f.name, "NAME")->required();
  f.create_user->add_option("--group", f.groups, "a group the user is in (repeatable)");
  f.create_user->add_option("--policy", f.policies, "a policy attached to the user (repeatable)");
  f.create_user->add_option("-n,--namespace", f.ns, "the user's home namespace");
  f.create_group = create->add_subcommand("group", "create group NAME [--policy P]...");
  f.create_group->add_option("name", f.name, "NAME")->required();
  f.create_group->add_option("--policy", f.policies, "a policy attached to the group");
  f.create_policy = create->add_subcommand(
      "policy", "create policy -f FILE [--name N]: a Policy manifest or a bare IAM document");
  f.create_policy->add_option("-f,--filename", f.policy_file, "the policy file")->required();
  f.create_policy->add_option("--name", f.name, "its name (a bare IAM document has none)");
  f.create_namespace =
      create->add_subcommand("namespace", "create namespace NAME [--owner USER] [-l KEY=VALUE]");
  f.create_namespace->alias("ns");
  f.create_namespace->add_option("name", f.name, "NAME")->required();
  f.create_namespace->add_option("--owner", f.owner, "the user who owns it");
  f.create_namespace->add_option("-l,--label", f.labels, "a label KEY=VALUE (repeatable)");
  f.create_service_account =
      create->add_subcommand("serviceaccount", "create serviceaccount NAME -n NS [--policy P]");
  f.create_service_account->alias("sa");
  f.create_service_account->add_option("name", f.name, "NAME")->required();
  f.create_service_account->add_option("-n,--namespace", f.ns, "its namespace")->required();
  f.create_service_account->add_option("--policy", f.policies, "a policy attached (repeatable)");
  f.create_token =
      create->add_subcommand("token", "An API token for a user or service account, shown once");
  CLI::Option* user = f.create_token->add_option("--user", f.user, "the user");
  f.create_token->add_option("--service-account", f.service_account, "NS/NAME")->excludes(user);
  f.create_token->add_option("--ttl", f.ttl, "lifetime: 90m, 12h, 30d (default 30d)");
  f.create_token->add_option("--name", f.name, "the token's name (default: the server picks)");
  f.create_token->add_option("-o,--output", f.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
}

void DeclareOthers(CLI::App& app, auto& f) {
  CLI::App* revoke = app.add_subcommand("revoke", "Revoke a token at once: revoke token NAME");
  revoke->require_subcommand(1);
  f.revoke_token = revoke->add_subcommand("token", "revoke token NAME");
  f.revoke_token->add_option("name", f.name, "NAME")->required();
  for (bool attach : {true, false}) {
    CLI::App* verb = app.add_subcommand(
        attach ? "attach" : "detach",
        attach ? "attach policy P --user U | --group G" : "detach policy P --user U | --group G");
    // `attach JOB` (interactive_commands.h) shares the verb: attach's `policy` is optional.
    verb->require_subcommand(attach ? 0 : 1, 1);
    CLI::App* policy = verb->add_subcommand("policy", "the policy, and --user or --group");
    policy->add_option("policy", f.policy, "POLICY")->required();
    CLI::Option* user = policy->add_option("--user", f.user, "the user");
    policy->add_option("--group", f.group, "the group")->excludes(user);
    (attach ? f.attach : f.detach) = policy;
  }
  f.whoami = app.add_subcommand("whoami", "Who the server takes you for: user, groups, policies");
  f.whoami->add_option("-o,--output", f.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  CLI::App* auth = app.add_subcommand("auth", "auth can-i VERB RESOURCE [NAME]");
  auth->require_subcommand(1);
  f.can_i = auth->add_subcommand("can-i", "Whether the server would allow a request, and why");
  f.can_i->add_option("args", f.can.args, "VERB RESOURCE [NAME]")->required()->expected(2, 3);
  f.can_i->add_option("-n,--namespace", f.can.ns, "namespace (namespaced resources)");
  f.can_i->add_option("--gpu-type", f.can.gpu_type, "gpucloud:GpuType, e.g. h100");
  f.can_i->add_option("--gpus", f.can.gpus, "gpucloud:GpuCount");
  f.can_i->add_option("--mig-profile", f.can.mig_profile, "gpucloud:MigProfile");
  f.can_i->add_option("--queue", f.can.queue, "gpucloud:Queue");
  f.can_i->add_option("--as", f.can.as, "ask for this user (needs policies:Simulate)");
  CLI::App* policy = app.add_subcommand("policy", "policy simulate: evaluate policy files locally");
  policy->require_subcommand(1);
  f.simulate = policy->add_subcommand("simulate", "The decision of policy files on one request");
  f.simulate->add_option("--policy", f.sim.policy_files, "a policy file (repeatable)")->required();
  f.simulate->add_option("--action", f.sim.action, "e.g. jobs:Create")->required();
  f.simulate->add_option("--resource", f.sim.resource, "e.g. gpucloud:job/team-a/*")->required();
  f.simulate->add_option("--context", f.sim.context, "KEY=VALUE, e.g. gpucloud:GpuType=H100-80GB");
  f.simulate->add_option("--user", f.sim.user, "gpucloud:UserName");
  f.simulate->add_option("--group", f.sim.groups, "a group of the caller (repeatable)");
}

}  // namespace

IamCommands::IamCommands(CLI::App& app) : flags_(std::make_shared<Flags>()) {
  DeclareCreate(app, *flags_);
  DeclareOthers(app, *flags_);
}

bool IamCommands::parsed() const {
  const Flags& f = *flags_;
  for (CLI::App* c : {f.create_user, f.create_group, f.create_token, f.create_policy,
                      f.create_namespace, f.create_service_account, f.revoke_token, f.attach,
                      f.detach, f.whoami, f.can_i, f.simulate}) {
    if (c->parsed()) return true;
  }
  return false;
}

// What the parsed command puts into paths and bodies, checked before anything is sent: nullopt
// when it is fine, else the exit code (the reason said on `err`). Fills `authorize` for can-i.
std::optional<int> IamCommands::CheckFlags(nlohmann::json& authorize, std::ostream& err) const {
  const Flags& f = *flags_;
  std::vector<std::pair<std::string_view, std::string>> labels;
  if (f.create_user->parsed() || f.create_group->parsed() || f.revoke_token->parsed()) {
    labels.emplace_back("NAME", f.name);
  }
  if (f.create_user->parsed() && !f.ns.empty()) labels.emplace_back("namespace", f.ns);
  if (f.create_namespace->parsed()) {
    labels.emplace_back("NAME", f.name);
    if (!f.owner.empty()) labels.emplace_back("--owner", f.owner);
    for (const std::string& l : f.labels) {
      if (l.find('=') == std::string::npos) {
        err << "gpuctl create namespace: -l \"" << l << "\": give KEY=VALUE\n";
        return kExitUsage;
      }
    }
  }
  if (f.create_service_account->parsed()) {
    labels.emplace_back("NAME", f.name);
    labels.emplace_back("--namespace", f.ns);
  }
  if (f.create_token->parsed()) {
    if (f.user.empty() == f.service_account.empty()) {
      err << "gpuctl create token: give --user USER or --service-account NS/NAME\n";
      return kExitUsage;
    }
    if (absl::Status s = ValidateTtl(f.ttl); !s.ok()) {
      err << "gpuctl create token: " << s.message() << "\n";
      return kExitUsage;
    }
    if (!f.name.empty()) labels.emplace_back("--name", f.name);
    if (!f.user.empty()) labels.emplace_back("--user", f.user);
    size_t slash = f.service_account.find('/');
    if (!f.service_account.empty()) {
      labels.emplace_back("--service-account namespace", f.service_account.substr(0, slash));
      labels.emplace_back("--service-account name",
                          slash == std::string::npos ? "" : f.service_account.substr(slash + 1));
    }
  }
  if (f.attach->parsed() || f.detach->parsed()) {
    if (f.user.empty() == f.group.empty()) {
      err << "gpuctl: give --user USER or --group GROUP\n";
      return kExitUsage;
    }
    // A built-in policy is named "gpucloud:<label>" (authz/builtin_policies.h).
    std::string_view policy = f.policy;
    if (policy.starts_with("gpucloud:")) policy.remove_prefix(9);
    labels.emplace_back("POLICY", std::string(policy));
    labels.emplace_back(f.user.empty() ? "--group" : "--user", f.user.empty() ? f.group : f.user);
  }
  if (f.can_i->parsed()) {
    absl::StatusOr<nlohmann::json> body = AuthorizeBody(f.can);
    if (!body.ok()) {
      err << "gpuctl auth can-i: " << body.status().message() << "\n";
      return kExitUsage;
    }
    authorize = *std::move(body);
  }
  for (const auto& [what, value] : labels) {
    if (!IsLabel(what, value, err)) return kExitUsage;
  }
  return std::nullopt;
}

int IamCommands::Run(const std::function<std::optional<CallFn>()>& connect, std::ostream& out,
                     std::ostream& err) {
  const Flags& f = *flags_;
  if (f.simulate->parsed()) return SimulatePolicies(f.sim, out, err);
  nlohmann::json body;
  if (std::optional<int> bad = CheckFlags(body, err)) return *bad;
  std::optional<nlohmann::json> policy;  // read and checked before connecting
  if (f.create_policy->parsed() && !(policy = PolicyBody(f.policy_file, f.name, err))) {
    return kExitFailed;
  }
  std::optional<CallFn> call = connect();
  if (!call) return kExitFailed;
  if (f.create_user->parsed()) {
    return CreateObject(*call, "users", "user", f.name,
                        UserBody(f.name, f.groups, f.policies, f.ns), out, err);
  }
  if (f.create_group->parsed()) {
    return CreateObject(*call, "groups", "group", f.name, GroupBody(f.name, f.policies), out, err);
  }
  if (f.create_namespace->parsed()) {
    std::map<std::string, std::string> labels;
    for (const std::string& l : f.labels)
      labels[l.substr(0, l.find('='))] = l.substr(l.find('=') + 1);
    return CreateObject(*call, "namespaces", "namespace", f.name,
                        NamespaceBody(f.name, f.owner, labels), out, err);
  }
  if (f.create_service_account->parsed()) {
    return CreateObject(*call, Cat("namespaces/", f.ns, "/serviceaccounts"), "serviceaccount",
                        f.name, ServiceAccountBody(f.name, f.ns, f.policies), out, err);
  }
  if (f.create_policy->parsed()) {
    return CreateObject(*call, "policies", "policy", (*policy)["metadata"]["name"], *policy, out,
                        err);
  }
  if (f.create_token->parsed()) {
    nlohmann::json request =
        f.user.empty() ? TokenRequestBody("serviceAccount", f.service_account, f.ttl, f.name)
                       : TokenRequestBody("user", f.user, f.ttl, f.name);
    return CreateToken(*call, request, f.format, out, err);
  }
  if (f.revoke_token->parsed()) {
    if (!SendRequest(*call, "DELETE", Cat(kApiRoot, "tokens/", f.name), "", err))
      return kExitFailed;
    out << "token " << f.name << " revoked\n";
    return kExitOk;
  }
  if (f.attach->parsed() || f.detach->parsed()) {
    return ChangeAttachment(*call, f.policy, f.user.empty() ? "groups" : "users",
                            f.user.empty() ? "group" : "user", f.user.empty() ? f.group : f.user,
                            f.attach->parsed(), out, err);
  }
  if (f.whoami->parsed()) return Whoami(*call, f.format, out, err);
  if (f.can_i->parsed()) return CanI(*call, body, out, err);
  return kExitUsage;
}

}  // namespace gpucloud::cli
