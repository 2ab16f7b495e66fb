#include "authz/policy_set.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/text.h"

namespace gpucloud::authz {
namespace {

// A compiled pattern. All literal text lives in one string; pieces refer into it. A pattern
// that is "*" or has neither wildcards nor variables takes a fast path.
struct Pattern {
  enum class Kind : uint8_t { kAny, kExact, kPieces };
  struct Piece {
    PatternPart::Kind kind;
    ConditionKeyId variable;  // kVariable
    uint32_t offset, size;    // kLiteral: the text in `text`
  };
  Kind kind = Kind::kExact;
  std::string text;          // kExact: all of it; kPieces: the literals, back to back
  uint32_t prefix_size = 0;  // kPieces: the literal text before the first wildcard or variable
  std::vector<Piece> pieces;
};

struct CompiledCondition {
  ConditionOperator op;
  bool if_exists;
  SetQualifier qualifier;
  ConditionKeyId key;
  std::vector<Pattern> strings;  // string operators
  std::vector<double> numbers;   // numeric, date, bool (0/1), Null (1 = "true")
  std::vector<IpNetwork> networks;
};

struct CompiledStatement {
  int policy;
  int index;
  PolicyEffect effect;
  bool not_resource;
  std::vector<Pattern> resources;
  std::vector<CompiledCondition> conditions;
};

// The values a condition sees for one key: from RequestContext, or from the Principal.
struct KeyValues {
  bool present = false;
  const ContextValue* context = nullptr;  // when set in RequestContext
  const std::string* strings = nullptr;   // when derived from the principal
  size_t count = 0;
  std::string_view Text(size_t i) const { return context ? context[i].text : strings[i]; }
};

const std::string kPrincipalTypeNames[] = {"user", "serviceaccount", "node"};

KeyValues Lookup(const Request& r, ConditionKeyId key) {
  KeyValues v;
  if (const std::vector<ContextValue>* set = r.context.Get(key)) {
    v.present = true;
    v.context = set->data();
    v.count = set->size();
    return v;
  }
  const Principal& p = r.principal;
  auto one = [&](const std::string& s) {
    if (!s.empty()) v = KeyValues{true, nullptr, &s, 1};
  };
  switch (key) {
    case ConditionKeyId::kUserName:
      one(p.name);
      break;
    case ConditionKeyId::kPrincipalType:
      one(kPrincipalTypeNames[static_cast<int>(p.type)]);
      break;
    case ConditionKeyId::kPrincipalNamespace:
      one(p.namespace_);
      break;
    case ConditionKeyId::kNodeName:
      one(p.node_name);
      break;
    case ConditionKeyId::kGroups:
      if (p.type != PrincipalType::kNode)
        v = KeyValues{true, nullptr, p.groups.data(), p.groups.size()};
      break;
    default:
      break;
  }
  return v;
}

bool StartsWith(std::string_view text, size_t at, std::string_view chunk, bool ignore_case) {
  if (text.size() - at < chunk.size()) return false;
  std::string_view part = text.substr(at, chunk.size());
  return ignore_case ? EqualsIgnoreCase(part, chunk) : part == chunk;
}

Pattern CompilePattern(const std::vector<PatternPart>& parts) {
  Pattern p;
  if (parts.size() == 1 && parts[0].kind == PatternPart::Kind::kStar) {
    p.kind = Pattern::Kind::kAny;
    return p;
  }
  bool literal_only = true;
  for (const PatternPart& part : parts) {
    if (part.kind != PatternPart::Kind::kLiteral) {
      literal_only = false;
      p.pieces.push_back({part.kind, part.variable, 0, 0});
      continue;
    }
    if (literal_only) p.prefix_size += static_cast<uint32_t>(part.text.size());
    p.pieces.push_back({part.kind, part.variable, static_cast<uint32_t>(p.text.size()),
                        static_cast<uint32_t>(part.text.size())});
    p.text += part.text;
  }
  p.kind = literal_only ? Pattern::Kind::kExact : Pattern::Kind::kPieces;
  return p;
}

// Glob matching over pieces with one backtrack point (the last '*'), so never exponential. A
// variable is its request value, literally; a variable the request does not carry makes the
// pattern match nothing.
bool MatchPieces(const Pattern& p, std::string_view text, const Request& r, bool ignore_case) {
  const size_t n = p.pieces.size();
  size_t pi = 0, t = 0, star = SIZE_MAX, star_t = 0;
  while (true) {
    bool advanced = false;
    if (pi < n) {
      const Pattern::Piece& piece = p.pieces[pi];
      std::string_view chunk;
      switch (piece.kind) {
        case PatternPart::Kind::kStar:
          star = pi++;
          star_t = t;
          continue;
        case PatternPart::Kind::kQuestion:
          advanced = t < text.size();
          if (advanced) ++t;
          break;
        case PatternPart::Kind::kLiteral:
          chunk = std::string_view(p.text).substr(piece.offset, piece.size);
          advanced = StartsWith(text, t, chunk, ignore_case);
          break;
        case PatternPart::Kind::kVariable: {
          KeyValues v = Lookup(r, piece.variable);
          if (!v.present || v.count != 1) return false;
          chunk = v.Text(0);
          advanced = StartsWith(text, t, chunk, ignore_case);
          break;
        }
      }
      if (advanced) {
        if (piece.kind != PatternPart::Kind::kQuestion) t += chunk.size();
        ++pi;
        continue;
      }
    } else if (t == text.size()) {
      return true;
    }
    if (star == SIZE_MAX || star_t >= text.size()) return false;
    pi = star + 1;
    t = ++star_t;
  }
}

bool PatternMatches(const Pattern& p, std::string_view text, const Request& r, bool ignore_case) {
  switch (p.kind) {
    case Pattern::Kind::kAny:
      return true;
    case Pattern::Kind::kExact:
      return ignore_case ? EqualsIgnoreCase(p.text, text) : p.text == text;
    case Pattern::Kind::kPieces:
      break;
  }
  // Most patterns fail on their literal prefix ("gpucloud:job/team-a/"): check it first.
  if (!StartsWith(text, 0, std::string_view(p.text).substr(0, p.prefix_size), ignore_case)) {
    return false;
  }
  return MatchPieces(p, text, r, ignore_case);
}

// Does one request value match any of the condition's values, by the operator's positive form?
bool AnyValueMatches(const CompiledCondition& c, const KeyValues& v, size_t i, const Request& r) {
  using Op = ConditionOperator;
  const double x = v.context ? v.context[i].number : 0;
  auto any_number = [&](auto cmp) {
    return std::any_of(c.numbers.begin(), c.numbers.end(), [&](double y) { return cmp(x, y); });
  };
  switch (c.op) {
    case Op::kStringEquals:
    case Op::kStringNotEquals:
    case Op::kStringLike:
    case Op::kStringNotLike:
    case Op::kStringEqualsIgnoreCase:
    case Op::kStringNotEqualsIgnoreCase: {
      bool ignore_case =
          c.op == Op::kStringEqualsIgnoreCase || c.op == Op::kStringNotEqualsIgnoreCase;
      std::string_view text = v.Text(i);
      return std::any_of(c.strings.begin(), c.strings.end(),
                         [&](const Pattern& p) { return PatternMatches(p, text, r, ignore_case); });
    }
    case Op::kNumericEquals:
    case Op::kNumericNotEquals:
    case Op::kDateEquals:
    case Op::kDateNotEquals:
    case Op::kBool:
      return any_number([](double a, double b) { return a == b; });
    case Op::kNumericLessThan:
    case Op::kDateLessThan:
      return any_number([](double a, double b) { return a < b; });
    case Op::kNumericLessThanEquals:
    case Op::kDateLessThanEquals:
      return any_number([](double a, double b) { return a <= b; });
    case Op::kNumericGreaterThan:
    case Op::kDateGreaterThan:
      return any_number([](double a, double b) { return a > b; });
    case Op::kNumericGreaterThanEquals:
    case Op::kDateGreaterThanEquals:
      return any_number([](double a, double b) { return a >= b; });
    case Op::kIpAddress:
    case Op::kNotIpAddress:
      return v.context &&
             std::any_of(c.networks.begin(), c.networks.end(),
                         [&](const IpNetwork& n) { return n.Contains(v.context[i].ip); });
    case Op::kNull:
      break;
  }
  return false;
}

bool ConditionHolds(const CompiledCondition& c, const Request& r) {
  KeyValues v = Lookup(r, c.key);
  if (c.op == ConditionOperator::kNull) {
    // "Null": {"key": "true"} holds when the key is absent; "false" when it is present.
    return std::any_of(c.numbers.begin(), c.numbers.end(),
                       [&](double want_absent) { return (want_absent != 0) != v.present; });
  }
  const bool negated = IsNegatedOperator(c.op);
  if (!v.present) {
    if (c.if_exists || c.qualifier == SetQualifier::kForAllValues) return true;
    if (c.qualifier == SetQualifier::kForAnyValue) return false;
    return negated;
  }
  auto test = [&](size_t i) { return AnyValueMatches(c, v, i, r) != negated; };
  switch (c.qualifier) {
    case SetQualifier::kNone:
      return v.count > 0 && test(0);
    case SetQualifier::kForAnyValue:
      for (size_t i = 0; i < v.count; ++i) {
        if (test(i)) return true;
      }
      return false;
    case SetQualifier::kForAllValues:
      break;
  }
  for (size_t i = 0; i < v.count; ++i) {
    if (!test(i)) return false;
  }
  return true;
}

bool StatementApplies(const CompiledStatement& s, const Request& r) {
  bool matched = std::any_of(s.resources.begin(), s.resources.end(), [&](const Pattern& p) {
    return PatternMatches(p, r.resource, r, /*ignore_case=*/false);
  });
  if (matched == s.not_resource) return false;
  return std::all_of(s.conditions.begin(), s.conditions.end(),
                     [&](const CompiledCondition& c) { return ConditionHolds(c, r); });
}

absl::StatusOr<CompiledCondition> CompileCondition(const Condition& c) {
  const ConditionKeyInfo* key = FindConditionKey(c.key);
  if (key == nullptr) return absl::InvalidArgumentError(Cat("unknown condition key ", c.key));
  CompiledCondition out{c.op, c.if_exists, c.qualifier, key->id, {}, {}, {}};
  std::optional<ConditionKeyType> type = OperatorKeyType(c.op);
  if (type && *type != key->type) {
    return absl::InvalidArgumentError(Cat(ConditionOperatorName(c), " cannot test ",
                                          ConditionKeyTypeName(key->type), " key ", key->name));
  }
  if (c.values.empty()) return absl::InvalidArgumentError(Cat(key->name, ": no values"));
  for (const std::string& value : c.values) {
    absl::Status s;
    if (c.op == ConditionOperator::kNull || key->type == ConditionKeyType::kBool) {
      absl::StatusOr<bool> b = ParsePolicyBool(value);
      s = b.status();
      if (b.ok()) out.numbers.push_back(*b ? 1 : 0);
    } else if (key->type == ConditionKeyType::kString) {
      bool like =
          c.op == ConditionOperator::kStringLike || c.op == ConditionOperator::kStringNotLike;
      absl::StatusOr<std::vector<PatternPart>> parts = ParsePattern(value, like);
      s = parts.status();
      if (parts.ok()) out.strings.push_back(CompilePattern(*parts));
    } else if (key->type == ConditionKeyType::kIp) {
      absl::StatusOr<IpNetwork> n = ParseIpNetwork(value);
      s = n.status();
      if (n.ok()) out.networks.push_back(*n);
    } else {
      absl::StatusOr<double> d =
          key->type == ConditionKeyType::kDate ? ParsePolicyDate(value) : ParsePolicyNumber(value);
      s = d.status();
      if (d.ok()) out.numbers.push_back(*d);
    }
    if (!s.ok()) return absl::InvalidArgumentError(Cat(key->name, ": ", s.message()));
  }
  return out;
}

absl::StatusOr<CompiledStatement> CompileStatement(const Statement& st, int policy, int index,
                                                   std::vector<int>* action_ids) {
  CompiledStatement out{policy, index, st.effect, st.not_resource, {}, {}};
  std::vector<bool> covered(PolicyActions().size(), false);
  if (st.actions.empty()) return absl::InvalidArgumentError("no Action");
  for (const std::string& a : st.actions) {
    std::vector<int> ids = MatchPolicyActions(a);
    if (ids.empty()) return absl::InvalidArgumentError(Cat("unknown action ", a));
    for (int id : ids) covered[id] = true;
  }
  for (size_t id = 0; id < covered.size(); ++id) {
    if (covered[id] != st.not_action) action_ids->push_back(static_cast<int>(id));
  }
  if (st.resources.empty()) return absl::InvalidArgumentError("no Resource");
  for (const std::string& res : st.resources) {
    if (absl::Status s = ValidateResourcePattern(res); !s.ok()) return s;
    out.resources.push_back(CompilePattern(*ParsePattern(res, /*wildcards=*/true)));
  }
  for (const Condition& c : st.conditions) {
    absl::StatusOr<CompiledCondition> cc = CompileCondition(c);
    if (!cc.ok()) return cc.status();
    out.conditions.push_back(*std::move(cc));
  }
  return out;
}

}  // namespace

struct PolicySet::Compiled {
  std::vector<std::string> policy_names;
  std::vector<std::vector<std::string>> sids;  // [policy][statement]
  std::vector<CompiledStatement> statements;   // in policy order, then statement order
  // Per action id: the statements that may apply, Denies and Allows apart, in that order.
  std::vector<std::vector<uint32_t>> denies, allows;
  std::unordered_map<std::string_view, int> action_ids;  // exact spelling -> id
};

std::string_view PrincipalTypeName(PrincipalType type) {
  return kPrincipalTypeNames[static_cast<int>(type)];
}

std::string_view EffectName(Effect effect) {
  switch (effect) {
    case Effect::kAllow:
      return "Allow";
    case Effect::kExplicitDeny:
      return "ExplicitDeny";
    case Effect::kImplicitDeny:
      break;
  }
  return "ImplicitDeny";
}

std::string Decision::StatementName() const {
  if (statement_index < 0) return "no statement";
  return Cat("policy ", policy, ", statement ", statement_index,
             sid.empty() ? "" : Cat(" (Sid ", sid, ")"));
}

absl::Status RequestContext::Set(ConditionKeyId key, std::string_view value) {
  const ConditionKeyInfo& info = ConditionKeyOf(key);
  ContextValue v{std::string(value)};
  absl::Status s;
  switch (info.type) {
    case ConditionKeyType::kString:
      break;
    case ConditionKeyType::kNumeric: {
      absl::StatusOr<double> d = ParsePolicyNumber(value);
      s = d.status();
      if (d.ok()) v.number = *d;
      break;
    }
    case ConditionKeyType::kDate: {
      absl::StatusOr<double> d = ParsePolicyDate(value);
      s = d.status();
      if (d.ok()) v.number = *d;
      break;
    }
    case ConditionKeyType::kBool: {
      absl::StatusOr<bool> b = ParsePolicyBool(value);
      s = b.status();
      if (b.ok()) v.number = *b ? 1 : 0;
      break;
    }
    case ConditionKeyType::kIp: {
      absl::StatusOr<IpNetwork> n = ParseIpNetwork(value);
      s = n.status();
      if (n.ok()) v.ip = *n;
      break;
    }
  }
  if (!s.ok()) return absl::InvalidArgumentError(Cat(info.name, ": ", s.message()));
  int i = static_cast<int>(key);
  if (!info.multi_valued) values_[i].clear();
  values_[i].push_back(std::move(v));
  present_[i] = true;
  return absl::OkStatus();
}

absl::Status RequestContext::Set(std::string_view key, std::string_view value) {
  const ConditionKeyInfo* info = FindConditionKey(key);
  if (info == nullptr)
    return absl::InvalidArgumentError(Cat("unknown condition key \"", key, "\""));
  return Set(info->id, value);
}

void RequestContext::SetEmpty(ConditionKeyId key) {
  values_[static_cast<int>(key)].clear();
  present_[static_cast<int>(key)] = true;
}

const std::vector<ContextValue>* RequestContext::Get(ConditionKeyId key) const {
  int i = static_cast<int>(key);
  return present_[i] ? &values_[i] : nullptr;
}

absl::StatusOr<PolicySet> PolicySet::Compile(std::span<const NamedPolicy> policies) {
  auto c = std::make_unique<Compiled>();
  const size_t n_actions = PolicyActions().size();
  c->denies.resize(n_actions);
  c->allows.resize(n_actions);
  for (size_t id = 0; id < n_actions; ++id) c->action_ids.emplace(PolicyActions()[id], int(id));
  for (size_t p = 0; p < policies.size(); ++p) {
    c->policy_names.push_back(policies[p].name);
    c->sids.emplace_back();
    const std::vector<Statement>& statements = policies[p].document.statements;
    for (size_t i = 0; i < statements.size(); ++i) {
      std::vector<int> ids;
      absl::StatusOr<CompiledStatement> s =
          CompileStatement(statements[i], static_cast<int>(p), static_cast<int>(i), &ids);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            Cat("policy ", policies[p].name, " statement ", i, ": ", s.status().message()));
      }
      c->sids.back().push_back(statements[i].sid);
      auto& index = statements[i].effect == PolicyEffect::kDeny ? c->denies : c->allows;
      for (int id : ids) index[id].push_back(static_cast<uint32_t>(c->statements.size()));
      c->statements.push_back(*std::move(s));
    }
  }
  return PolicySet(std::move(c));
}

PolicySet::PolicySet(std::unique_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
PolicySet::PolicySet(PolicySet&&) noexcept = default;
PolicySet& PolicySet::operator=(PolicySet&&) noexcept = default;
PolicySet::~PolicySet() = default;

size_t PolicySet::statement_count() const { return compiled_->statements.size(); }

Decision PolicySet::Evaluate(const Request& request) const {
  const Compiled& c = *compiled_;
  int id;
  if (auto it = c.action_ids.find(request.action); it != c.action_ids.end()) {
    id = it->second;
  } else if (std::optional<int> found = FindPolicyAction(request.action)) {
    id = *found;
  } else {
    return Decision{};  // an action no statement can name
  }
  auto decide = [&](Effect effect, uint32_t index) {
    const CompiledStatement& s = c.statements[index];
    return Decision{effect, c.policy_names[s.policy], c.sids[s.policy][s.index], s.index};
  };
  for (uint32_t index : c.denies[id]) {
    if (StatementApplies(c.statements[index], request)) return decide(Effect::kExplicitDeny, index);
  }
  for (uint32_t index : c.allows[id]) {
    if (StatementApplies(c.statements[index], request)) return decide(Effect::kAllow, index);
  }
  return Decision{};
}

}  // namespace gpucloud::authz
