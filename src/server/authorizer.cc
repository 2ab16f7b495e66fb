#include "server/authorizer.h"

#include <algorithm>

#include "absl/time/time.h"
#include "authz/builtin_policies.h"
#include "core/text.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

// The verb of a read or write of an object or collection: Get, List, Watch, Create, Update,
// Delete ("" for a method the path does not take).
std::string ObjectVerb(const std::string& method, bool item, bool watch) {
  if (method == "GET") return item ? "Get" : (watch ? "Watch" : "List");
  if (method == "POST" && !item) return "Create";
  if ((method == "PUT" || method == "PATCH") && item) return "Update";
  if (method == "DELETE" && item) return "Delete";
  return "";
}

std::optional<RequestedAction> JobAction(const std::string& method, const std::string& ns,
                                         const std::vector<std::string>& rest, bool watch) {
  // rest: [name] [sub]
  const std::string name = rest.empty() ? "*" : rest[0];
  const std::string resource = ResourceName(ResourceType::kJob, ns, name);
  if (rest.size() <= 1) {
    std::string verb = ObjectVerb(method, !rest.empty(), watch);
    if (verb.empty()) return std::nullopt;
    return RequestedAction{Cat("jobs:", verb), resource};
  }
  const std::string& sub = rest[1];
  if (sub == "cancel" && method == "POST") return RequestedAction{"jobs:Cancel", resource};
  // The status sub-resource: read as the job; a write is decided as the job's update (and then
  // refused: the controller alone writes a status).
  if (sub == "status" && method == "GET") return RequestedAction{"jobs:Get", resource};
  if (sub == "status" && (method == "PUT" || method == "PATCH")) {
    return RequestedAction{"jobs:Update", resource};
  }
  if (sub == "events" && method == "GET") return RequestedAction{"jobs:Events", resource};
  if (sub == "logs" && method == "GET") return RequestedAction{"jobs:Logs", resource};
  if (sub == "logs" && method == "POST") return RequestedAction{"jobs:WriteLogs", resource};
  // A shell, a copy, a forwarded port or stdin into a running task: one action for all four.
  if ((sub == "exec" || sub == "portforward" || sub == "attach") && method == "GET") {
    return RequestedAction{"jobs:Exec", resource};
  }
  return std::nullopt;
}

std::optional<RequestedAction> NodeAction(const std::string& method,
                                          const std::vector<std::string>& parts, bool watch) {
  const std::string name = parts.size() >= 2 ? parts[1] : "*";
  const std::string resource = ResourceName(ResourceType::kNode, "", name);
  if (parts.size() <= 2) {
    if (method == "PUT" && parts.size() == 2) return RequestedAction{"nodes:Register", resource};
    std::string verb = ObjectVerb(method, parts.size() == 2, watch);
    if (verb.empty() || verb == "Create" || verb == "Update") return std::nullopt;
    return RequestedAction{Cat("nodes:", verb), resource};
  }
  const std::string& sub = parts[2];
  if (sub == "heartbeat" && method == "POST") return RequestedAction{"nodes:Heartbeat", resource};
  if (sub == "assignments" && method == "GET" && parts.size() == 5 && parts[4] == "secrets") {
    return RequestedAction{"nodes:GetTaskSecrets", resource};
  }
  if (sub == "assignments" && method == "GET" && parts.size() == 3) {
    return RequestedAction{"nodes:GetAssignments", resource};
  }
  if (method == "GET" &&
      ((sub == "tunnel" && parts.size() == 3) || (sub == "sessions" && parts.size() == 4))) {
    return RequestedAction{"nodes:Sessions", resource};
  }
  if (method != "POST") return std::nullopt;
  if (sub == "cordon") return RequestedAction{"nodes:Cordon", resource};
  if (sub == "uncordon") return RequestedAction{"nodes:Uncordon", resource};
  // A spot reclamation notice drains the node on a deadline.
  if (sub == "drain" || sub == "reclaim") return RequestedAction{"nodes:Drain", resource};
  return std::nullopt;
}

}  // namespace

std::optional<RequestedAction> ActionOf(const std::string& method,
                                        const std::vector<std::string>& parts, bool watch) {
  if (parts.empty()) return std::nullopt;
  const std::string& top = parts[0];
  if (top == "namespaces" && parts.size() >= 3 && parts[2] == "jobs") {
    return JobAction(method, parts[1], {parts.begin() + 3, parts.end()}, watch);
  }
  // Usage records: what a namespace's jobs used, for who may list its jobs (rest_usage.cc).
  if (top == "usage" && parts.size() == 1 && method == "GET") {
    return RequestedAction{"jobs:List", "gpucloud:job/*/*"};
  }
  if (top == "namespaces" && parts.size() == 3 && parts[2] == "usage" && method == "GET") {
    return RequestedAction{"jobs:List", ResourceName(ResourceType::kJob, parts[1], "*")};
  }
  // A namespace's own events (its budget's alerts): for who may read the namespace.
  if (top == "namespaces" && parts.size() == 3 && parts[2] == "events" && method == "GET") {
    return RequestedAction{"namespaces:Get", ResourceName(ResourceType::kNamespace, "", parts[1])};
  }
  if (top == "jobs" && parts.size() == 1 && method == "GET") {  // every namespace's
    return RequestedAction{watch ? "jobs:Watch" : "jobs:List", "gpucloud:job/*/*"};
  }
  if (top == "nodes") {
    if (parts.size() == 3 && parts[2] == "certificate") return std::nullopt;
    return NodeAction(method, parts, watch);
  }
  if (top == "namespaces" && parts.size() <= 2) {  // the namespace objects themselves
    std::string verb = ObjectVerb(method, parts.size() == 2, watch);
    if (verb.empty()) return std::nullopt;
    return RequestedAction{
        Cat("namespaces:", verb),
        ResourceName(ResourceType::kNamespace, "", parts.size() == 2 ? parts[1] : "*")};
  }
  // InferenceServices; services:Invoke is the gateway's (a request to a service's replicas).
  if (top == "namespaces" && parts.size() >= 3 && parts.size() <= 4 &&
      parts[2] == "inferenceservices") {
    std::string verb = ObjectVerb(method, parts.size() == 4, watch);
    if (verb.empty()) return std::nullopt;
    return RequestedAction{
        Cat("services:", verb),
        ResourceName(ResourceType::kService, parts[1], parts.size() == 4 ? parts[3] : "*")};
  }
  if (top == "runtimeclasses" && parts.size() <= 2) {  // cluster-wide, as node.k8s.io's
    std::string verb = ObjectVerb(method, parts.size() == 2, watch);
    if (verb.empty()) return std::nullopt;
    return RequestedAction{Cat("runtimeclasses:", verb),
                           Cat("gpucloud:runtimeclass/", parts.size() == 2 ? parts[1] : "*")};
  }
  if ((top == "queues" || top == "nodepools") && parts.size() <= 2) {
    std::string verb = ObjectVerb(method, parts.size() == 2, watch);
    if (verb.empty()) return std::nullopt;
    ResourceType type = top == "queues" ? ResourceType::kQueue : ResourceType::kNodePool;
    return RequestedAction{Cat(top, ":", verb),
                           ResourceName(type, "", parts.size() == 2 ? parts[1] : "*")};
  }
  if (top == "pools" && parts.size() == 3 && method == "POST" &&
      (parts[2] == "prepull" || parts[2] == "reclaim")) {
    return RequestedAction{parts[2] == "prepull" ? "nodepools:PrePull" : "nodepools:Reclaim",
                           ResourceName(ResourceType::kNodePool, "", parts[1])};
  }
  if ((top == "users" || top == "groups" || top == "policies") && parts.size() <= 2) {
    std::string verb = ObjectVerb(method, parts.size() == 2, watch);
    if (verb.empty() || verb == "Watch") return std::nullopt;
    ResourceType type = top == "users"    ? ResourceType::kUser
                        : top == "groups" ? ResourceType::kGroup
                                          : ResourceType::kPolicy;
    return RequestedAction{Cat(top, ":", verb),
                           ResourceName(type, "", parts.size() == 2 ? parts[1] : "*")};
  }
  if (top == "namespaces" && parts.size() >= 3 && parts.size() <= 4 &&
      parts[2] == "serviceaccounts") {
    std::string verb = ObjectVerb(method, parts.size() == 4, watch);
    if (verb.empty() || verb == "Watch") return std::nullopt;
    return RequestedAction{
        Cat("serviceaccounts:", verb),
        ResourceName(ResourceType::kServiceAccount, parts[1], parts.size() == 4 ? parts[3] : "*")};
  }
  if (top == "namespaces" && parts.size() >= 3 && parts.size() <= 4 && parts[2] == "secrets") {
    std::string verb = ObjectVerb(method, parts.size() == 4, watch);
    if (verb.empty() || verb == "Watch") return std::nullopt;
    return RequestedAction{Cat("secrets:", verb), ResourceName(ResourceType::kSecret, parts[1],
                                                               parts.size() == 4 ? parts[3] : "*")};
  }
  if (top == "tokens" && parts.size() <= 2) {
    const bool item = parts.size() == 2;
    std::string resource = ResourceName(ResourceType::kToken, "", item ? parts[1] : "*");
    if (method == "POST" && !item) return RequestedAction{"tokens:Create", resource};
    if (method == "GET") return RequestedAction{item ? "tokens:Get" : "tokens:List", resource};
    if (method == "DELETE" && item) return RequestedAction{"tokens:Revoke", resource};
    return std::nullopt;
  }
  if (top == "cluster" && parts.size() == 1 && method == "GET") {
    return RequestedAction{"cluster:GetSummary", "gpucloud:cluster/summary"};
  }
  if (top == "audit" && parts.size() == 2 && method == "GET") {
    return RequestedAction{parts[1] == "verify" ? "audit:Verify" : "audit:Read",
                           Cat("gpucloud:audit/", parts[1])};
  }
  return std::nullopt;
}

bool IsDiscoveryPath(std::string_view path) {
  if (path.size() > 1 && path.ends_with('/')) path.remove_suffix(1);
  return path == "/api" || path == "/apis" || path == "/apis/gpucloud" ||
         path == "/apis/gpucloud/v1" || path == "/version" || path == "/openapi/v2" ||
         path == "/openapi/v3" || path == "/openapi/v3/apis/gpucloud/v1";
}

namespace {

// The catalog types `r` accepts (all of them when it names none).
std::vector<const GpuType*> Acceptable(const GpuRequest& r, const GpuCatalog& catalog) {
  std::vector<const GpuType*> out;
  if (r.types.empty()) {
    for (const GpuType& t : catalog.types()) out.push_back(&t);
    return out;
  }
  for (const std::string& name : r.types) {
    if (const GpuType* t = catalog.Find(name)) out.push_back(t);
  }
  return out;
}

// GPUs one replica of `r` takes (a MIG instance counts as one, a share its fraction).
double GpusOf(const GpuRequest& r) {
  if (r.mode == GpuMode::kShared) return r.fraction.raw() / 1000.0;
  return r.count;
}

}  // namespace

std::vector<authz::RequestContext> JobContexts(const Job& job, const GpuCatalog& catalog) {
  authz::RequestContext base;
  (void)base.Set(ConditionKeyId::kQueue, job.spec.queue);
  (void)base.Set(ConditionKeyId::kBillingClass, BillingClassName(job.spec.billing));
  (void)base.Set(ConditionKeyId::kNamespace, job.metadata.namespace_);
  double gpus = 0;
  std::vector<std::string> types;  // the union, in catalog order
  for (const TaskSpec& t : job.spec.tasks) {
    const GpuRequest& g = t.resources.gpu;
    if (g.mode == GpuMode::kNone) continue;
    gpus += GpusOf(g) * t.replicas;
    if (g.mode == GpuMode::kMig) (void)base.Set(ConditionKeyId::kMigProfile, g.mig_profile);
    for (const GpuType* type : Acceptable(g, catalog)) {
      if (std::find(types.begin(), types.end(), type->name) == types.end()) {
        types.push_back(type->name);
      }
    }
  }
  (void)base.Set(ConditionKeyId::kGpuCount, std::to_string(gpus));
  if (types.empty()) {
    (void)base.Set(ConditionKeyId::kEstimatedHourlyCost, "0");
    return {base};
  }
  std::vector<authz::RequestContext> out;
  for (const std::string& type : types) {
    double usd = 0;
    for (const TaskSpec& t : job.spec.tasks) {
      const GpuRequest& g = t.resources.gpu;
      if (g.mode == GpuMode::kNone) continue;
      int64_t price = 0;  // micro-dollars per GPU-hour
      for (const GpuType* a : Acceptable(g, catalog)) {
        if (a->name == type) {
          price = a->on_demand_price_per_hour.raw();
          break;
        }
        price = std::max(price, a->on_demand_price_per_hour.raw());
      }
      usd += GpusOf(g) * t.replicas * static_cast<double>(price) / 1e6;
    }
    authz::RequestContext c = base;
    (void)c.Set(ConditionKeyId::kGpuType, type);
    (void)c.Set(ConditionKeyId::kEstimatedHourlyCost, std::to_string(usd));
    out.push_back(std::move(c));
  }
  return out;
}

Authorizer::Authorizer(const Clock& clock) : clock_(clock) {}

void Authorizer::SetPolicies(std::map<std::string, PolicyDocument> policies) {
  absl::MutexLock lock(&mu_);
  policies_ = std::move(policies);
  compiled_.clear();
}

std::shared_ptr<const authz::PolicySet> Authorizer::SetFor(
    const std::vector<std::string>& names) const {
  const std::string key = Join(names, "\n");
  absl::MutexLock lock(&mu_);
  if (auto it = compiled_.find(key); it != compiled_.end()) return it->second;
  std::vector<authz::NamedPolicy> named;
  const std::vector<authz::NamedPolicy> builtin = authz::BuiltinPolicies();
  for (const std::string& name : names) {
    auto b = std::find_if(builtin.begin(), builtin.end(),
                          [&](const authz::NamedPolicy& p) { return p.name == name; });
    if (b != builtin.end()) {
      named.push_back(*b);
    } else if (auto s = policies_.find(name); s != policies_.end()) {
      named.push_back({name, s->second});
    }
  }
  absl::StatusOr<authz::PolicySet> set = authz::PolicySet::Compile(named);
  // Stored policies were validated when written; one that no longer compiles grants nothing.
  if (!set.ok()) set = authz::PolicySet::Compile({});
  auto shared = std::make_shared<const authz::PolicySet>(std::move(*set));
  if (compiled_.size() > 10'000) compiled_.clear();  // bounded: distinct lists are few
  compiled_[key] = shared;
  return shared;
}

std::vector<std::string> EffectivePolicies(const Identity& who) {
  if (who.policies) return *who.policies;
  if (who.admin) return {std::string(authz::kAdminPolicyName)};
  if (who.node) return {std::string(authz::kNodePolicyName)};
  if (!who.namespace_.empty()) return {std::string(authz::kTenantPolicyName)};
  return {};
}

authz::Principal Authorizer::PrincipalOf(const Identity& who) {
  authz::Principal p;
  p.name = who.node ? who.node_name : who.user;
  p.type = who.node ? authz::PrincipalType::kNode : authz::PrincipalType::kUser;
  p.groups = who.groups;
  p.namespace_ = who.namespace_;
  p.node_name = who.node_name;
  return p;
}

authz::Decision Authorizer::Decide(const Identity& who, const RequestedAction& what,
                                   authz::RequestContext context) const {
  const absl::Time now = absl::FromUnixMillis(clock_.NowMillis());
  (void)context.Set(ConditionKeyId::kCurrentTime,
                    absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()));
  (void)context.Set(ConditionKeyId::kHourOfDay,
                    std::to_string(absl::ToCivilHour(now, absl::UTCTimeZone()).hour()));
  authz::Request request{PrincipalOf(who), what.action, what.resource, std::move(context)};
  return SetFor(EffectivePolicies(who))->Evaluate(request);
}

Response Denied(const Identity& who, const RequestedAction& what, const authz::Decision& d) {
  std::string why = d.effect == authz::Effect::kExplicitDeny ? Cat("denied by ", d.StatementName())
                                                             : "no policy attached to it allows it";
  Response r = Status(403, "Forbidden",
                      Cat(who.node ? Cat("node ", who.node_name) : Cat("user ", who.user),
                          " may not ", what.action, " on ", what.resource, ": ", why));
  r.authorization = {what.action, what.resource, "deny", d.StatementName()};
  return r;
}

}  // namespace gpucloud::server
