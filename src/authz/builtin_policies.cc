#include "authz/builtin_policies.h"

#include <string>

namespace gpucloud::authz {
namespace {

Statement Allow(std::string sid, std::vector<std::string> actions,
                std::vector<std::string> resources) {
  return Statement{.sid = std::move(sid),
                   .effect = PolicyEffect::kAllow,
                   .actions = std::move(actions),
                   .resources = std::move(resources)};
}

}  // namespace

PolicyDocument AdminPolicy() {
  return PolicyDocument{.statements = {Allow("Everything", {"*"}, {"*"})}};
}

PolicyDocument TenantPolicy() {
  const std::string ns = "${gpucloud:PrincipalNamespace}";
  Statement tokens =
      Allow("OwnTokens", {"tokens:Create", "tokens:Get", "tokens:List", "tokens:Revoke"},
            {"gpucloud:token/*"});
  tokens.conditions.push_back(Condition{.op = ConditionOperator::kStringEquals,
                                        .key = "gpucloud:ResourceOwner",
                                        .values = {"${gpucloud:UserName}"}});
  return PolicyDocument{
      .statements = {
          Allow("OwnNamespaceJobs",
                {"jobs:Create", "jobs:Get", "jobs:List", "jobs:Watch", "jobs:Update", "jobs:Delete",
                 "jobs:Cancel", "jobs:Logs", "jobs:Events", "jobs:Exec"},
                {"gpucloud:job/" + ns + "/*"}),
          Allow("OwnNamespaceServices", {"services:*"}, {"gpucloud:service/" + ns + "/*"}),
          Allow("OwnNamespaceSecretsAndServiceAccounts", {"secrets:*", "serviceaccounts:*"},
                {"gpucloud:secret/" + ns + "/*", "gpucloud:serviceaccount/" + ns + "/*"}),
          Allow("ReadCluster",
                {"queues:Get", "queues:List", "queues:Watch", "nodepools:Get", "nodepools:List",
                 "nodepools:Watch", "nodes:Get", "nodes:List", "nodes:Watch", "cluster:GetSummary",
                 "runtimeclasses:Get", "runtimeclasses:List", "runtimeclasses:Watch"},
                {"gpucloud:queue/*", "gpucloud:nodepool/*", "gpucloud:node/*", "gpucloud:cluster/*",
                 "gpucloud:runtimeclass/*"}),
          Allow("WhoAmI", {"users:Get", "namespaces:Get"},
                {"gpucloud:user/${gpucloud:UserName}", "gpucloud:namespace/" + ns}),
          std::move(tokens),
      }};
}

PolicyDocument NodePolicy() {
  return PolicyDocument{
      .statements = {
          Allow("OwnNode",
                {"nodes:Register", "nodes:Get", "nodes:Update", "nodes:Heartbeat",
                 "nodes:GetAssignments", "nodes:GetTaskSecrets", "nodes:Sessions"},
                {"gpucloud:node/${gpucloud:NodeName}"}),
          Allow("TaskLogs", {"jobs:WriteLogs"}, {"gpucloud:job/*/*"}),
      }};
}

std::vector<NamedPolicy> BuiltinPolicies() {
  return {{std::string(kAdminPolicyName), AdminPolicy()},
          {std::string(kTenantPolicyName), TenantPolicy()},
          {std::string(kNodePolicyName), NodePolicy()}};
}

}  // namespace gpucloud::authz
