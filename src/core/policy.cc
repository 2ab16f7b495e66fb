#include "core/policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>

#include "core/text.h"

namespace gpucloud {
namespace {

constexpr std::string_view kActions[] = {
    "jobs:Create", "jobs:Get", "jobs:List", "jobs:Watch", "jobs:Update", "jobs:Delete",
    "jobs:Cancel", "jobs:Logs", "jobs:Events", "jobs:WriteLogs", "jobs:Exec",
    //
    "queues:Create", "queues:Get", "queues:List", "queues:Watch", "queues:Update", "queues:Delete",
    //
    "nodepools:Create", "nodepools:Get", "nodepools:List", "nodepools:Watch", "nodepools:Update",
    "nodepools:Delete", "nodepools:Reclaim", "nodepools:PrePull",
    //
    "runtimeclasses:Create", "runtimeclasses:Get", "runtimeclasses:List", "runtimeclasses:Watch",
    "runtimeclasses:Update", "runtimeclasses:Delete",
    //
    "services:Create", "services:Get", "services:List", "services:Watch", "services:Update",
    "services:Delete", "services:Invoke",
    //
    "nodes:Register", "nodes:Get", "nodes:List", "nodes:Watch", "nodes:Update", "nodes:Delete",
    "nodes:Heartbeat", "nodes:Cordon", "nodes:Uncordon", "nodes:Drain", "nodes:GetAssignments",
    "nodes:GetTaskSecrets", "nodes:Sessions",
    //
    "namespaces:Create", "namespaces:Get", "namespaces:List", "namespaces:Update",
    "namespaces:Delete", "namespaces:Watch",
    //
    "users:Create", "users:Get", "users:List", "users:Update", "users:Delete",
    //
    "groups:Create", "groups:Get", "groups:List", "groups:Update", "groups:Delete",
    //
    "serviceaccounts:Create", "serviceaccounts:Get", "serviceaccounts:List",
    "serviceaccounts:Update", "serviceaccounts:Delete",
    //
    "policies:Create", "policies:Get", "policies:List", "policies:Update", "policies:Delete",
    "policies:Attach", "policies:Detach", "policies:Simulate",
    //
    "secrets:Create", "secrets:Get", "secrets:List", "secrets:Update", "secrets:Delete",
    //
    "tokens:Create", "tokens:Get", "tokens:List", "tokens:Revoke",
    //
    "audit:Read", "audit:Verify",
    //
    "cluster:GetSummary", "cluster:GetMetrics"};

constexpr ConditionKeyInfo kKeys[] = {
    {ConditionKeyId::kGpuType, "gpucloud:GpuType", ConditionKeyType::kString, false},
    {ConditionKeyId::kGpuCount, "gpucloud:GpuCount", ConditionKeyType::kNumeric, false},
    {ConditionKeyId::kMigProfile, "gpucloud:MigProfile", ConditionKeyType::kString, false},
    {ConditionKeyId::kBillingClass, "gpucloud:BillingClass", ConditionKeyType::kString, false},
    {ConditionKeyId::kQueue, "gpucloud:Queue", ConditionKeyType::kString, false},
    {ConditionKeyId::kNamespace, "gpucloud:Namespace", ConditionKeyType::kString, false},
    {ConditionKeyId::kEstimatedHourlyCost, "gpucloud:EstimatedHourlyCost",
     ConditionKeyType::kNumeric, false},
    {ConditionKeyId::kCurrentTime, "gpucloud:CurrentTime", ConditionKeyType::kDate, false},
    {ConditionKeyId::kHourOfDay, "gpucloud:HourOfDay", ConditionKeyType::kNumeric, false},
    {ConditionKeyId::kSourceIp, "gpucloud:SourceIp", ConditionKeyType::kIp, false},
    {ConditionKeyId::kSecureTransport, "gpucloud:SecureTransport", ConditionKeyType::kBool, false},
    {ConditionKeyId::kUserName, "gpucloud:UserName", ConditionKeyType::kString, false},
    {ConditionKeyId::kGroups, "gpucloud:Groups", ConditionKeyType::kString, true},
    {ConditionKeyId::kPrincipalType, "gpucloud:PrincipalType", ConditionKeyType::kString, false},
    {ConditionKeyId::kPrincipalNamespace, "gpucloud:PrincipalNamespace", ConditionKeyType::kString,
     false},
    {ConditionKeyId::kNodeName, "gpucloud:NodeName", ConditionKeyType::kString, false},
    {ConditionKeyId::kResourceOwner, "gpucloud:ResourceOwner", ConditionKeyType::kString, false},
};
static_assert(std::size(kKeys) == kConditionKeyCount);

struct OperatorName {
  ConditionOperator op;
  std::string_view name;
};
constexpr OperatorName kOperators[] = {
    {ConditionOperator::kStringEquals, "StringEquals"},
    {ConditionOperator::kStringNotEquals, "StringNotEquals"},
    {ConditionOperator::kStringEqualsIgnoreCase, "StringEqualsIgnoreCase"},
    {ConditionOperator::kStringNotEqualsIgnoreCase, "StringNotEqualsIgnoreCase"},
    {ConditionOperator::kStringLike, "StringLike"},
    {ConditionOperator::kStringNotLike, "StringNotLike"},
    {ConditionOperator::kNumericEquals, "NumericEquals"},
    {ConditionOperator::kNumericNotEquals, "NumericNotEquals"},
    {ConditionOperator::kNumericLessThan, "NumericLessThan"},
    {ConditionOperator::kNumericLessThanEquals, "NumericLessThanEquals"},
    {ConditionOperator::kNumericGreaterThan, "NumericGreaterThan"},
    {ConditionOperator::kNumericGreaterThanEquals, "NumericGreaterThanEquals"},
    {ConditionOperator::kDateEquals, "DateEquals"},
    {ConditionOperator::kDateNotEquals, "DateNotEquals"},
    {ConditionOperator::kDateLessThan, "DateLessThan"},
    {ConditionOperator::kDateLessThanEquals, "DateLessThanEquals"},
    {ConditionOperator::kDateGreaterThan, "DateGreaterThan"},
    {ConditionOperator::kDateGreaterThanEquals, "DateGreaterThanEquals"},
    {ConditionOperator::kBool, "Bool"},
    {ConditionOperator::kIpAddress, "IpAddress"},
    {ConditionOperator::kNotIpAddress, "NotIpAddress"},
    {ConditionOperator::kNull, "Null"},
};

constexpr std::string_view kResourceTypes[] = {
    "job",   "queue",  "nodepool", "node",  "namespace", "user",         "group",  "serviceaccount",
    "token", "policy", "secret",   "audit", "cluster",   "runtimeclass", "service"};

char Fold(char c, bool ignore_case) {
  return ignore_case ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
}

bool ParseDigits(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::span<const std::string_view> PolicyActions() { return kActions; }

std::optional<int> FindPolicyAction(std::string_view action) {
  for (size_t i = 0; i < std::size(kActions); ++i) {
    if (EqualsIgnoreCase(kActions[i], action)) return static_cast<int>(i);
  }
  return std::nullopt;
}

// Iterative glob matching with one backtrack point: linear in practice, never exponential.
bool WildcardMatch(std::string_view pattern, std::string_view text, bool ignore_case) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() &&
        (pattern[p] == '?' || Fold(pattern[p], ignore_case) == Fold(text[t], ignore_case))) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<int> MatchPolicyActions(std::string_view pattern) {
  std::vector<int> ids;
  for (size_t i = 0; i < std::size(kActions); ++i) {
    if (WildcardMatch(pattern, kActions[i], /*ignore_case=*/true)) ids.push_back(int(i));
  }
  return ids;
}

std::span<const ConditionKeyInfo> ConditionKeys() { return kKeys; }

const ConditionKeyInfo* FindConditionKey(std::string_view name) {
  for (const ConditionKeyInfo& k : kKeys) {
    if (EqualsIgnoreCase(k.name, name)) return &k;
  }
  return nullptr;
}

const ConditionKeyInfo& ConditionKeyOf(ConditionKeyId id) { return kKeys[static_cast<int>(id)]; }

absl::StatusOr<OperatorSpelling> ParseConditionOperator(std::string_view text) {
  OperatorSpelling s{ConditionOperator::kNull};
  std::string_view rest = text;
  if (rest.starts_with("ForAnyValue:")) {
    s.qualifier = SetQualifier::kForAnyValue;
    rest.remove_prefix(12);
  } else if (rest.starts_with("ForAllValues:")) {
    s.qualifier = SetQualifier::kForAllValues;
    rest.remove_prefix(13);
  }
  if (rest.ends_with("IfExists")) {
    s.if_exists = true;
    rest.remove_suffix(8);
  }
  for (const OperatorName& o : kOperators) {
    if (o.name != rest) continue;
    s.op = o.op;
    if (o.op == ConditionOperator::kNull && (s.if_exists || s.qualifier != SetQualifier::kNone)) {
      return absl::InvalidArgumentError(
          Cat("\"", text, "\": Null takes no IfExists suffix and no ForAnyValue/ForAllValues"));
    }
    return s;
  }
  std::vector<std::string> names;
  for (const OperatorName& o : kOperators) names.emplace_back(o.name);
  return absl::InvalidArgumentError(
      Cat("unknown condition operator \"", text, "\" (known: ", Join(names, ", "),
          ", each with an optional IfExists suffix and ForAnyValue: or ForAllValues: prefix)"));
}

std::string ConditionOperatorName(const Condition& c) {
  std::string out;
  if (c.qualifier == SetQualifier::kForAnyValue) out = "ForAnyValue:";
  if (c.qualifier == SetQualifier::kForAllValues) out = "ForAllValues:";
  out += kOperators[static_cast<int>(c.op)].name;
  if (c.if_exists) out += "IfExists";
  return out;
}

std::optional<ConditionKeyType> OperatorKeyType(ConditionOperator op) {
  if (op <= ConditionOperator::kStringNotLike) return ConditionKeyType::kString;
  if (op <= ConditionOperator::kNumericGreaterThanEquals) return ConditionKeyType::kNumeric;
  if (op <= ConditionOperator::kDateGreaterThanEquals) return ConditionKeyType::kDate;
  if (op == ConditionOperator::kBool) return ConditionKeyType::kBool;
  if (op == ConditionOperator::kNull) return std::nullopt;
  return ConditionKeyType::kIp;
}

bool IsNegatedOperator(ConditionOperator op) {
  switch (op) {
    case ConditionOperator::kStringNotEquals:
    case ConditionOperator::kStringNotEqualsIgnoreCase:
    case ConditionOperator::kStringNotLike:
    case ConditionOperator::kNumericNotEquals:
    case ConditionOperator::kDateNotEquals:
    case ConditionOperator::kNotIpAddress:
      return true;
    default:
      return false;
  }
}

std::string_view ConditionKeyTypeName(ConditionKeyType type) {
  switch (type) {
    case ConditionKeyType::kString:
      return "string";
    case ConditionKeyType::kNumeric:
      return "numeric";
    case ConditionKeyType::kDate:
      return "date";
    case ConditionKeyType::kBool:
      return "bool";
    case ConditionKeyType::kIp:
      break;
  }
  return "ip";
}

std::string_view ResourceTypeName(ResourceType type) {
  return kResourceTypes[static_cast<int>(type)];
}

bool IsNamespacedResource(ResourceType type) {
  return type == ResourceType::kJob || type == ResourceType::kServiceAccount ||
         type == ResourceType::kSecret || type == ResourceType::kService;
}

std::string ResourceName(ResourceType type, std::string_view ns, std::string_view name) {
  if (IsNamespacedResource(type))
    return Cat("gpucloud:", ResourceTypeName(type), "/", ns, "/", name);
  return Cat("gpucloud:", ResourceTypeName(type), "/", name);
}

absl::Status ValidateResourcePattern(std::string_view pattern) {
  if (pattern == "*") return absl::OkStatus();
  constexpr std::string_view kPrefix = "gpucloud:";
  if (!pattern.starts_with(kPrefix)) {
    return absl::InvalidArgumentError(
        Cat("resource \"", pattern, "\" must be \"*\" or gpucloud:<type>/<name>"));
  }
  std::string_view rest = pattern.substr(kPrefix.size());
  size_t slash = rest.find('/');
  std::string_view type = rest.substr(0, slash);
  auto it = std::find(std::begin(kResourceTypes), std::end(kResourceTypes), type);
  if (it == std::end(kResourceTypes)) {
    std::vector<std::string> names(std::begin(kResourceTypes), std::end(kResourceTypes));
    return absl::InvalidArgumentError(Cat("resource \"", pattern, "\": unknown type \"", type,
                                          "\" (known: ", Join(names, ", "), ")"));
  }
  auto rt = static_cast<ResourceType>(it - std::begin(kResourceTypes));
  size_t want = IsNamespacedResource(rt) ? 2 : 1;
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  std::vector<std::string_view> segments;
  for (size_t start = 0;;) {
    size_t end = path.find('/', start);
    segments.push_back(path.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  bool empty_segment =
      std::any_of(segments.begin(), segments.end(), [](std::string_view s) { return s.empty(); });
  if (slash == std::string_view::npos || segments.size() != want || empty_segment) {
    return absl::InvalidArgumentError(
        Cat("resource \"", pattern, "\": a ", type, " is named gpucloud:", type,
            want == 2 ? "/<namespace>/<name>" : "/<name>", " (wildcards * and ? allowed)"));
  }
  absl::StatusOr<std::vector<PatternPart>> parts = ParsePattern(pattern, /*wildcards=*/true);
  return parts.status();
}

absl::StatusOr<std::vector<PatternPart>> ParsePattern(std::string_view text, bool wildcards) {
  std::vector<PatternPart> parts;
  auto literal = [&](std::string_view s) {
    if (parts.empty() || parts.back().kind != PatternPart::Kind::kLiteral) {
      parts.push_back(PatternPart{PatternPart::Kind::kLiteral});
    }
    parts.back().text += s;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (wildcards && (c == '*' || c == '?')) {
      parts.push_back(
          PatternPart{c == '*' ? PatternPart::Kind::kStar : PatternPart::Kind::kQuestion});
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      size_t end = text.find('}', i);
      if (end == std::string_view::npos) {
        return absl::InvalidArgumentError(Cat("\"", text, "\": unterminated \"${\""));
      }
      std::string_view name = text.substr(i + 2, end - i - 2);
      i = end;
      if (name == "*" || name == "?" || name == "$") {
        literal(name);
        continue;
      }
      const ConditionKeyInfo* key = FindConditionKey(name);
      if (key == nullptr || std::find(kPolicyVariables.begin(), kPolicyVariables.end(), key->id) ==
                                kPolicyVariables.end()) {
        return absl::InvalidArgumentError(
            Cat("\"", text, "\": unknown policy variable \"${", name,
                "}\" (known: ${gpucloud:UserName}, ${gpucloud:PrincipalNamespace}, "
                "${gpucloud:NodeName}, and ${*}, ${?}, ${$})"));
      }
      parts.push_back(PatternPart{PatternPart::Kind::kVariable, "", key->id});
    } else {
      literal(std::string_view(&text[i], 1));
    }
  }
  return parts;
}

absl::StatusOr<double> ParsePolicyNumber(std::string_view text) {
  std::string_view s = text;
  bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || !digits(whole) || !digits(frac) ||
      (dot != std::string_view::npos && frac.empty()) || s.size() > 40) {
    return absl::InvalidArgumentError(Cat("must be a number such as 8 or 2.5, got \"", text, "\""));
  }
  double value = 0;
  std::from_chars(s.data(), s.data() + s.size(), value);
  return negative ? -value : value;
}

absl::StatusOr<double> ParsePolicyDate(std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        Cat("must be a date such as 2026-12-01 or 2026-12-01T20:00:00Z, or epoch seconds, got \"",
            text, "\""));
  };
  if (!text.empty() && text.size() <= 12 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return static_cast<double>(std::stoll(std::string(text)));
  }
  int y, mo, d, h = 0, mi = 0, sec = 0;
  if (text.size() < 10 || text[4] != '-' || text[7] != '-' || !ParseDigits(text.substr(0, 4), &y) ||
      !ParseDigits(text.substr(5, 2), &mo) || !ParseDigits(text.substr(8, 2), &d)) {
    return bad();
  }
  std::string_view rest = text.substr(10);
  double fraction = 0;
  int offset = 0;
  if (!rest.empty()) {
    if ((rest[0] != 'T' && rest[0] != 't') || rest.size() < 9 || rest[3] != ':' || rest[6] != ':' ||
        !ParseDigits(rest.substr(1, 2), &h) || !ParseDigits(rest.substr(4, 2), &mi) ||
        !ParseDigits(rest.substr(7, 2), &sec)) {
      return bad();
    }
    rest.remove_prefix(9);
    if (!rest.empty() && rest[0] == '.') {
      size_t n = 1;
      while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
      if (n == 1 || n > 10) return bad();
      std::from_chars(rest.data(), rest.data() + n, fraction);
      rest.remove_prefix(n);
    }
    int oh, om;
    if (rest.empty()) return bad();  // a time needs its zone: Z or an offset
    if (rest == "Z" || rest == "z") {
      rest = "";
    } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
               ParseDigits(rest.substr(1, 2), &oh) && ParseDigits(rest.substr(4, 2), &om) &&
               oh < 24 && om < 60) {
      offset = (rest[0] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
      rest = "";
    }
    if (!rest.empty()) return bad();
  }
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap) || h > 23 ||
      mi > 59 || sec > 60) {
    return bad();
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<double>(timegm(&tm) - offset) + fraction;
}

absl::StatusOr<bool> ParsePolicyBool(std::string_view text) {
  if (EqualsIgnoreCase(text, "true")) return true;
  if (EqualsIgnoreCase(text, "false")) return false;
  return absl::InvalidArgumentError(Cat("must be true or false, got \"", text, "\""));
}

bool IpNetwork::Contains(const IpNetwork& address) const {
  if (v6 != address.v6) return false;
  int full = prefix / 8;
  if (!std::equal(bytes.begin(), bytes.begin() + full, address.bytes.begin())) return false;
  int rest = prefix % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (bytes[full] & mask) == (address.bytes[full] & mask);
}

absl::StatusOr<IpNetwork> ParseIpNetwork(std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        Cat("must be an IPv4 or IPv6 address or CIDR such as 10.0.0.0/8 or 2001:db8::/32, got \"",
            text, "\""));
  };
  size_t slash = text.find('/');
  std::string addr(text.substr(0, slash));
  IpNetwork net;
  if (addr.size() > 45) return bad();
  net.v6 = addr.find(':') != std::string::npos;
  if (inet_pton(net.v6 ? AF_INET6 : AF_INET, addr.c_str(), net.bytes.data()) != 1) return bad();
  int max = net.v6 ? 128 : 32;
  net.prefix = max;
  if (slash != std::string_view::npos) {
    if (!ParseDigits(text.substr(slash + 1), &net.prefix) || text.size() - slash > 4 ||
        net.prefix < 0 || net.prefix > max) {
      return bad();
    }
  }
  return net;
}

absl::Status ValidateConditionValue(ConditionKeyType type, std::string_view value) {
  switch (type) {
    case ConditionKeyType::kString:
      return ParsePattern(value, /*wildcards=*/false).status();
    case ConditionKeyType::kNumeric:
      return ParsePolicyNumber(value).status();
    case ConditionKeyType::kDate:
      return ParsePolicyDate(value).status();
    case ConditionKeyType::kBool:
      return ParsePolicyBool(value).status();
    case ConditionKeyType::kIp:
      break;
  }
  return ParseIpNetwork(value).status();
}

}  // namespace gpucloud
