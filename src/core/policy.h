// IAM-style policy documents (after AWS IAM's JSON policy language) and the catalog they are
// validated against: gpucloud's actions ("jobs:Create"), resource names
// ("gpucloud:job/team-a/train"), condition keys ("gpucloud:GpuType") and condition operators.
// The parser (manifest) and the evaluator (authz) share these definitions, so that what parses
// is exactly what evaluates. docs/policies.md is the user's reference.
// Value types are thread-compatible; the catalog functions are stateless and thread-safe.
#ifndef GPUCLOUD_CORE_POLICY_H_
#define GPUCLOUD_CORE_POLICY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/object_meta.h"

namespace gpucloud {

// The only policy language version (AWS's current one; policy variables need it).
inline constexpr std::string_view kPolicyVersion = "2012-10-17";

enum class PolicyEffect { kAllow, kDeny };

enum class ConditionOperator {
  kStringEquals,
  kStringNotEquals,
  kStringEqualsIgnoreCase,
  kStringNotEqualsIgnoreCase,
  kStringLike,
  kStringNotLike,
  kNumericEquals,
  kNumericNotEquals,
  kNumericLessThan,
  kNumericLessThanEquals,
  kNumericGreaterThan,
  kNumericGreaterThanEquals,
  kDateEquals,
  kDateNotEquals,
  kDateLessThan,
  kDateLessThanEquals,
  kDateGreaterThan,
  kDateGreaterThanEquals,
  kBool,
  kIpAddress,
  kNotIpAddress,
  kNull,
};

// The ForAnyValue: / ForAllValues: prefix of an operator, for multi-valued keys.
enum class SetQualifier { kNone, kForAnyValue, kForAllValues };

// The type of a condition key's values, and so of the operators that may test it.
enum class ConditionKeyType { kString, kNumeric, kDate, kBool, kIp };

// One test of a Condition block: `"StringLike": {"gpucloud:GpuType": ["H100*", "A100*"]}` is
// {op = kStringLike, key = "gpucloud:GpuType", values = {"H100*", "A100*"}}. Values are kept as
// written (they may hold policy variables); the parser has checked that they fit the key's type.
struct Condition {
  ConditionOperator op = ConditionOperator::kStringEquals;
  bool if_exists = false;
  SetQualifier qualifier = SetQualifier::kNone;
  std::string key;  // canonical spelling from the catalog, e.g. "gpucloud:GpuType"
  std::vector<std::string> values;

  bool operator==(const Condition&) const = default;
};

struct Statement {
  std::string sid;  // optional
  PolicyEffect effect = PolicyEffect::kAllow;
  // Action patterns; when not_action is true they were written as NotAction.
  std::vector<std::string> actions;
  bool not_action = false;
  // Resource patterns; when not_resource is true they were written as NotResource.
  std::vector<std::string> resources;
  bool not_resource = false;
  std::vector<Condition> conditions;  // ANDed

  bool operator==(const Statement&) const = default;
};

struct PolicyDocument {
  std::string version = std::string(kPolicyVersion);
  std::vector<Statement> statements;

  bool operator==(const PolicyDocument&) const = default;
};

// The gpucloud/v1 Policy object: cluster-scoped, attached to users, groups or service accounts.
struct Policy {
  ObjectMeta metadata;
  PolicyDocument spec;

  bool operator==(const Policy&) const = default;
};

// --- Catalog -------------------------------------------------------------------------------

// Every action, "resource:Verb", in a fixed order (docs/policies.md has the table). An action's
// index in this list is its id.
std::span<const std::string_view> PolicyActions();
// The id of `action` (compared case-insensitively, as AWS does), or nullopt.
std::optional<int> FindPolicyAction(std::string_view action);
// Wildcard match ('*' any run, '?' one character) of a whole string.
bool WildcardMatch(std::string_view pattern, std::string_view text, bool ignore_case);
// The ids of every action an action pattern matches ("jobs:*", "*:Get", "*"), case-insensitive.
std::vector<int> MatchPolicyActions(std::string_view pattern);

enum class ConditionKeyId {
  kGpuType,
  kGpuCount,
  kMigProfile,
  kBillingClass,
  kQueue,
  kNamespace,
  kEstimatedHourlyCost,
  kCurrentTime,
  kHourOfDay,
  kSourceIp,
  kSecureTransport,
  kUserName,
  kGroups,
  kPrincipalType,
  kPrincipalNamespace,
  kNodeName,
  kResourceOwner,
};
inline constexpr int kConditionKeyCount = 17;

struct ConditionKeyInfo {
  ConditionKeyId id;
  std::string_view name;  // canonical spelling
  ConditionKeyType type;
  bool multi_valued;
};
std::span<const ConditionKeyInfo> ConditionKeys();
// The key named `name` (case-insensitive, as AWS), or nullptr.
const ConditionKeyInfo* FindConditionKey(std::string_view name);
const ConditionKeyInfo& ConditionKeyOf(ConditionKeyId id);

// An operator as written: "ForAllValues:StringNotEqualsIfExists".
struct OperatorSpelling {
  ConditionOperator op;
  bool if_exists = false;
  SetQualifier qualifier = SetQualifier::kNone;
};
// Case-sensitive, as AWS. InvalidArgument for an unknown operator, `NullIfExists`, or a
// qualifier on Null.
absl::StatusOr<OperatorSpelling> ParseConditionOperator(std::string_view text);
std::string ConditionOperatorName(const Condition& c);
// The key type an operator tests; nullopt for Null (any type).
std::optional<ConditionKeyType> OperatorKeyType(ConditionOperator op);
bool IsNegatedOperator(ConditionOperator op);  // StringNotEquals, NotIpAddress, ...
std::string_view ConditionKeyTypeName(ConditionKeyType type);

// Resource types, in the order of docs/policies.md.
enum class ResourceType {
  kJob,
  kQueue,
  kNodePool,
  kNode,
  kNamespace,
  kUser,
  kGroup,
  kServiceAccount,
  kToken,
  kPolicy,
  kSecret,
  kAudit,
  kCluster,
  kRuntimeClass,
  kService,  // an InferenceService
};
// "job", "nodepool", ...
std::string_view ResourceTypeName(ResourceType type);
// job, serviceaccount, secret and service are named <namespace>/<name>; the others <name>.
bool IsNamespacedResource(ResourceType type);
// The name a request uses for one object: "gpucloud:job/team-a/train", "gpucloud:node/n1".
// `ns` is ignored for a type that is not namespaced. For a collection (List, Watch, Create
// before the name is known) pass name "*": "gpucloud:job/team-a/*".
std::string ResourceName(ResourceType type, std::string_view ns, std::string_view name);

// Checks a Resource / NotResource pattern: "*", or "gpucloud:<type>/<segments>" with as many
// non-empty segments as the type has, each possibly holding '*', '?' and policy variables.
absl::Status ValidateResourcePattern(std::string_view pattern);

// Policy variables "${gpucloud:UserName}", "${gpucloud:PrincipalNamespace}" and
// "${gpucloud:NodeName}" (and the escapes "${*}", "${?}", "${$}" for literal characters), in
// resources and in string condition values.
inline constexpr std::array<ConditionKeyId, 3> kPolicyVariables = {
    ConditionKeyId::kUserName, ConditionKeyId::kPrincipalNamespace, ConditionKeyId::kNodeName};
// One piece of a pattern: literal text, a '*' or '?' wildcard, or a variable.
struct PatternPart {
  enum class Kind { kLiteral, kStar, kQuestion, kVariable };
  Kind kind = Kind::kLiteral;
  std::string text;                                     // kLiteral
  ConditionKeyId variable = ConditionKeyId::kUserName;  // kVariable
  bool operator==(const PatternPart&) const = default;
};
// Splits a pattern into parts; with `wildcards` false, '*' and '?' are literal (StringEquals).
// InvalidArgument for an unknown variable or an unterminated "${".
absl::StatusOr<std::vector<PatternPart>> ParsePattern(std::string_view text, bool wildcards);

// Typed condition values. Numbers are decimals ("8", "-2.5"); dates are RFC 3339 / ISO 8601
// ("2026-12-01", "2026-12-01T20:00:00Z", "2026-12-01T20:00:00.5+01:00") or integer epoch
// seconds; booleans are "true" or "false" (case-insensitive); addresses are IPv4 or IPv6, with
// an optional "/prefix" (CIDR).
absl::StatusOr<double> ParsePolicyNumber(std::string_view text);
// Seconds since the epoch (fractions kept).
absl::StatusOr<double> ParsePolicyDate(std::string_view text);
absl::StatusOr<bool> ParsePolicyBool(std::string_view text);
struct IpNetwork {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 in the first 4
  int prefix = 0;                   // bits; 32 or 128 for a single address
  bool Contains(const IpNetwork& address) const;
};
absl::StatusOr<IpNetwork> ParseIpNetwork(std::string_view text);
// Checks `value` for a key of `type` (policy variables are allowed in string values only).
absl::Status ValidateConditionValue(ConditionKeyType type, std::string_view value);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_POLICY_H_
