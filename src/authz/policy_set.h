// Evaluation of IAM-style policies (core/policy.h) for one identity: a request (who, which
// action on which resource, with which condition-key values) and the identity's policies give a
// decision, and the statement that made it — as AWS IAM evaluates identity-based policies:
//   1. Only statements whose Action (or NotAction) covers the action, whose Resource (or
//      NotResource) covers the resource, and whose conditions all hold, apply.
//   2. If any applying statement is a Deny, the decision is an explicit deny, naming the first
//      such Deny in policy order, then statement order.
//   3. Otherwise, if any applying statement is an Allow, the decision is allow, naming the first
//      such Allow in the same order.
//   4. Otherwise the request is implicitly denied.
// The effect never depends on the order of policies or statements; only which statement is
// named does. Condition semantics (missing keys, IfExists, Null, ForAnyValue/ForAllValues) are in
// docs/policies.md, "Evaluation".
//
// Speed: Compile() indexes statements by action. The catalog of actions is finite, so every
// action pattern (wildcards and NotAction included) is resolved to action ids once, at compile
// time; a decision only visits the statements that can apply to its action, Denies first.
//
// Pure: no I/O, no clock (the caller sets gpucloud:CurrentTime and gpucloud:HourOfDay). A
// PolicySet is immutable after Compile() and thread-safe; Request and RequestContext are value
// types (thread-compatible).
#ifndef GPUCLOUD_AUTHZ_POLICY_SET_H_
#define GPUCLOUD_AUTHZ_POLICY_SET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/policy.h"

namespace gpucloud::authz {

enum class PrincipalType { kUser, kServiceAccount, kNode };
// "user", "serviceaccount", "node": the value of gpucloud:PrincipalType.
std::string_view PrincipalTypeName(PrincipalType type);

// Who asks. Its fields are the values of gpucloud:UserName (name), gpucloud:PrincipalType,
// gpucloud:Groups (present, maybe empty, for users and service accounts; absent for nodes),
// gpucloud:PrincipalNamespace and gpucloud:NodeName (each absent when empty). A value set in
// RequestContext for the same key takes precedence.
struct Principal {
  std::string name;  // user name, service account name, or node name
  PrincipalType type = PrincipalType::kUser;
  std::vector<std::string> groups;
  std::string namespace_;  // a service account's namespace, or a tenant user's home namespace
  std::string node_name;   // for nodes
};

// One condition-key value as the request carries it: its text and, for numeric, date, bool and
// ip keys, the parsed form.
struct ContextValue {
  std::string text;
  double number = 0;  // numeric, date (epoch seconds), bool (0 or 1)
  IpNetwork ip;
};

// The condition-key values of one request (gpucloud:GpuType, gpucloud:EstimatedHourlyCost, ...).
class RequestContext {
 public:
  // Sets a key's value, replacing any earlier one (for gpucloud:Groups: adds one value).
  // InvalidArgument when the value does not fit the key's type (docs/policies.md).
  absl::Status Set(ConditionKeyId key, std::string_view value);
  // The same by key name (case-insensitive); InvalidArgument for an unknown key too.
  absl::Status Set(std::string_view key, std::string_view value);
  // Marks a multi-valued key present with no values (an empty set).
  void SetEmpty(ConditionKeyId key);
  // The values of `key`, or nullptr when the request does not carry it.
  const std::vector<ContextValue>* Get(ConditionKeyId key) const;

 private:
  std::array<std::vector<ContextValue>, kConditionKeyCount> values_;
  std::array<bool, kConditionKeyCount> present_{};
};

struct Request {
  Principal principal;
  std::string action;    // "jobs:Create" (case-insensitive)
  std::string resource;  // "gpucloud:job/team-a/train" (see ResourceName in core/policy.h)
  RequestContext context;
};

enum class Effect { kImplicitDeny, kAllow, kExplicitDeny };
// "ImplicitDeny", "Allow", "ExplicitDeny".
std::string_view EffectName(Effect effect);

struct Decision {
  Effect effect = Effect::kImplicitDeny;
  // The statement that decided (empty / -1 for an implicit deny).
  std::string policy;
  std::string sid;
  int statement_index = -1;  // 0-based, in its policy's Statement list

  bool allowed() const { return effect == Effect::kAllow; }
  // "policy team-a, statement 2 (Sid AllowJobs)"; "no statement" for an implicit deny.
  std::string StatementName() const;
};

struct NamedPolicy {
  std::string name;
  PolicyDocument document;
};

class PolicySet {
 public:
  // Compiles the policies of one identity. InvalidArgument naming the policy and statement when
  // a document does not validate (the parser has normally checked it already).
  static absl::StatusOr<PolicySet> Compile(std::span<const NamedPolicy> policies);

  PolicySet(PolicySet&&) noexcept;
  PolicySet& operator=(PolicySet&&) noexcept;
  ~PolicySet();

  Decision Evaluate(const Request& request) const;
  size_t statement_count() const;

 private:
  struct Compiled;
  explicit PolicySet(std::unique_ptr<const Compiled> compiled);
  std::unique_ptr<const Compiled> compiled_;
};

}  // namespace gpucloud::authz

#endif  // GPUCLOUD_AUTHZ_POLICY_SET_H_
