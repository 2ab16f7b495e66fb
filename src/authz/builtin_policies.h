// The built-in policies that stand for gpucloud's roles before any Policy object exists, so that
// nothing changes for existing identities: gpucloud:admin (everything), gpucloud:tenant (its
// own namespace's jobs, secrets and service accounts; reads of the cluster's queues, pools and
// nodes; its own user, namespace and tokens) and gpucloud:node (Kubernetes' NodeRestriction: its
// own node object, heartbeats and assignments, and task logs). docs/policies.md prints them as
// YAML; examples/policies/builtin-*.yaml hold the same documents (a test checks they agree).
// Stateless functions; thread-safe.
#ifndef GPUCLOUD_AUTHZ_BUILTIN_POLICIES_H_
#define GPUCLOUD_AUTHZ_BUILTIN_POLICIES_H_

#include <string_view>
#include <vector>

#include "authz/policy_set.h"
#include "core/policy.h"

namespace gpucloud::authz {

inline constexpr std::string_view kAdminPolicyName = "gpucloud:admin";
inline constexpr std::string_view kTenantPolicyName = "gpucloud:tenant";
inline constexpr std::string_view kNodePolicyName = "gpucloud:node";

PolicyDocument AdminPolicy();
// Uses ${gpucloud:PrincipalNamespace} and ${gpucloud:UserName}; a principal without a namespace
// gets nothing namespaced from it.
PolicyDocument TenantPolicy();
// Uses ${gpucloud:NodeName}. jobs:WriteLogs is allowed on every job: that the task writing is
// placed on the asking node is the server's check (policies cannot see placements).
PolicyDocument NodePolicy();

// The three, named as above.
std::vector<NamedPolicy> BuiltinPolicies();

}  // namespace gpucloud::authz

#endif  // GPUCLOUD_AUTHZ_BUILTIN_POLICIES_H_
