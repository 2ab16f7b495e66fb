// Authorization of API requests by IAM-style policies (issue 14; docs/policies.md):
//   - ActionOf maps a request's method and path to the policy action and resource it needs
//     ("POST namespaces/team-a/jobs" -> jobs:Create on gpucloud:job/team-a/*); pure.
//   - Authorizer decides a request of an Identity: the policies attached to it (Identity::
//     policies: built-in gpucloud:admin / gpucloud:tenant / gpucloud:node, or stored Policy
//     objects by name) are compiled once per distinct list and evaluated with the request's
//     condition keys (gpucloud:CurrentTime and gpucloud:HourOfDay from the clock, in UTC; the
//     principal's name, type, groups, namespace and node; what the caller adds, such as a job's
//     GPU type and count).
// An explicit Deny wins, then an Allow, else the request is denied (authz/policy_set.h). A name
// attached to an identity that names no policy grants nothing.
// Thread-safe: policies may be replaced (SetPolicies) while requests are decided.
#ifndef GPUCLOUD_SERVER_AUTHORIZER_H_
#define GPUCLOUD_SERVER_AUTHORIZER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "authz/policy_set.h"
#include "core/clock.h"
#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/policy.h"
#include "server/rest.h"

namespace gpucloud::server {

struct RequestedAction {
  std::string action;    // "jobs:Create"
  std::string resource;  // "gpucloud:job/team-a/*"
};

// The action and resource a request needs: `parts` is its path below /apis/gpucloud/v1, split
// at '/'; `watch` whether it asks to watch. nullopt for a path that names nothing the policies
// cover (the API answers it 404 or 405) and for the node certificate path (NodeCertificates
// decides who may ask).
std::optional<RequestedAction> ActionOf(const std::string& method,
                                        const std::vector<std::string>& parts, bool watch);

// The discovery paths (/api, /apis, /apis/gpucloud, /apis/gpucloud/v1, /version, and the
// OpenAPI documents /openapi/v2, /openapi/v3, /openapi/v3/apis/gpucloud/v1, each with or
// without a trailing '/'): readable by every authenticated identity but the bootstrap token
// (which only joins), as Kubernetes' system:discovery role allows, and decided by no policy
// (they name no object).
bool IsDiscoveryPath(std::string_view path);

class Authorizer {
 public:
  // Borrows `clock`.
  explicit Authorizer(const Clock& clock);

  // The stored Policy objects, by name (replacing the earlier ones); the built-in policies
  // always exist and cannot be replaced.
  void SetPolicies(std::map<std::string, PolicyDocument> policies);

  // Decides `what` for `who`, with `context` holding the request's own condition keys (the
  // principal's and the time's are added here).
  authz::Decision Decide(const Identity& who, const RequestedAction& what,
                         authz::RequestContext context) const;

  // The principal a request of `who` is evaluated as.
  static authz::Principal PrincipalOf(const Identity& who);

 private:
  std::shared_ptr<const authz::PolicySet> SetFor(const std::vector<std::string>& names) const;

  const Clock& clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, PolicyDocument> policies_ ABSL_GUARDED_BY(mu_);
  // Compiled sets by the identity's policy names joined with '\n'; emptied by SetPolicies.
  mutable std::map<std::string, std::shared_ptr<const authz::PolicySet>> compiled_
      ABSL_GUARDED_BY(mu_);
};

// The condition keys of creating or updating `job`, once per GPU type it could run on (the
// union of its tasks' acceptable types; every catalog type for a task that accepts any):
// gpucloud:GpuType, gpucloud:GpuCount (GPUs of all replicas; a share counts its fraction),
// gpucloud:MigProfile, gpucloud:Queue, gpucloud:BillingClass, gpucloud:Namespace and
// gpucloud:EstimatedHourlyCost (US dollars an hour at the catalog's on-demand prices; a task
// that cannot take the type priced at its dearest acceptable type). A job is allowed only if
// every one of them is: naming no type (or several) cannot slip past a Deny on one. A job
// without GPUs gives one context, without GpuType.
std::vector<authz::RequestContext> JobContexts(const Job& job, const GpuCatalog& catalog);

// The policies a request of `who` is decided by: Identity::policies, or its role's built-in one.
std::vector<std::string> EffectivePolicies(const Identity& who);

// The 403 answer for a denied request: names the user, the action, the resource and the
// statement that decided (or that no statement allows it).
Response Denied(const Identity& who, const RequestedAction& what, const authz::Decision& d);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_AUTHORIZER_H_
