// Properties of evaluation over random policies and requests from a seeded generator:
//   - adding a Deny never turns a deny into an allow (and keeps an explicit deny);
//   - adding an Allow never turns an allow into a deny;
//   - the order of statements and of policies never changes the effect;
//   - the indexed evaluation agrees with evaluating each statement on its own and combining the
//     results as AWS does (any Deny, else any Allow, else implicit deny).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "authz/policy_set.h"

namespace gpucloud::authz {
namespace {

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng_)];
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  Condition RandomCondition() {
    static const std::vector<Condition> kConditions = {
        {ConditionOperator::kStringLike, false, SetQualifier::kNone, "gpucloud:GpuType", {"H100*"}},
        {ConditionOperator::kStringEquals, true, SetQualifier::kNone, "gpucloud:GpuType", {"L4"}},
        {ConditionOperator::kStringNotEquals,
         false,
         SetQualifier::kNone,
         "gpucloud:Queue",
         {"prod"}},
        {ConditionOperator::kNumericLessThan,
         false,
         SetQualifier::kNone,
         "gpucloud:GpuCount",
         {"4"}},
        {ConditionOperator::kNumericGreaterThanEquals,
         true,
         SetQualifier::kNone,
         "gpucloud:GpuCount",
         {"8", "2"}},
        {ConditionOperator::kNull, false, SetQualifier::kNone, "gpucloud:GpuType", {"true"}},
        {ConditionOperator::kNull, false, SetQualifier::kNone, "gpucloud:Queue", {"false"}},
        {ConditionOperator::kStringEquals,
         false,
         SetQualifier::kForAnyValue,
         "gpucloud:Groups",
         {"ml-platform"}},
        {ConditionOperator::kStringNotEquals,
         false,
         SetQualifier::kForAllValues,
         "gpucloud:Groups",
         {"ml-platform"}},
        {ConditionOperator::kIpAddress,
         false,
         SetQualifier::kNone,
         "gpucloud:SourceIp",
         {"10.0.0.0/8"}},
        {ConditionOperator::kNotIpAddress,
         false,
         SetQualifier::kNone,
         "gpucloud:SourceIp",
         {"10.1.0.0/16"}},
        {ConditionOperator::kStringEquals,
         false,
         SetQualifier::kNone,
         "gpucloud:UserName",
         {"${gpucloud:UserName}"}},
    };
    return Pick(kConditions);
  }

  Statement RandomStatement(std::string sid) {
    static const std::vector<std::string> kActions = {
        "jobs:Create", "jobs:Get", "jobs:*", "*", "nodes:Get", "jobs:?et", "*:List", "nodes:*"};
    static const std::vector<std::string> kResources = {
        "*",
        "gpucloud:job/team-a/*",
        "gpucloud:job/*/train",
        "gpucloud:node/n1",
        "gpucloud:job/${gpucloud:PrincipalNamespace}/*",
        "gpucloud:node/n?"};
    Statement s;
    s.sid = std::move(sid);
    s.effect = Chance(0.3) ? PolicyEffect::kDeny : PolicyEffect::kAllow;
    s.not_action = Chance(0.15);
    for (int i = Int(1, 2); i > 0; --i) s.actions.push_back(Pick(kActions));
    s.not_resource = Chance(0.15);
    for (int i = Int(1, 2); i > 0; --i) s.resources.push_back(Pick(kResources));
    for (int i = Int(0, 2); i > 0; --i) s.conditions.push_back(RandomCondition());
    return s;
  }

  std::vector<NamedPolicy> RandomPolicies() {
    std::vector<NamedPolicy> policies;
    for (int p = Int(1, 4); p > 0; --p) {
      NamedPolicy np{"p" + std::to_string(policies.size()), {}};
      for (int s = Int(1, 4); s > 0; --s) {
        np.document.statements.push_back(
            RandomStatement("S" + std::to_string(np.document.statements.size())));
      }
      policies.push_back(std::move(np));
    }
    return policies;
  }

  Request RandomRequest() {
    static const std::vector<std::string> kActions = {"jobs:Create", "jobs:Get",   "jobs:List",
                                                      "nodes:Get",   "nodes:List", "jobs:Delete"};
    static const std::vector<std::string> kResources = {
        "gpucloud:job/team-a/train", "gpucloud:job/team-b/train", "gpucloud:job/team-a/*",
        "gpucloud:node/n1", "gpucloud:node/n22"};
    Request r;
    r.principal = {Chance(0.5) ? "alice" : "bob", PrincipalType::kUser, {}, "team-a", ""};
    if (Chance(0.5)) r.principal.groups.push_back(Chance(0.5) ? "ml-platform" : "ml-team");
    if (Chance(0.2)) r.principal.namespace_.clear();
    r.action = Pick(kActions);
    r.resource = Pick(kResources);
    auto maybe = [&](const char* key, const std::vector<std::string>& values) {
      if (Chance(0.6)) {
        EXPECT_TRUE(r.context.Set(key, Pick(values)).ok());
      }
    };
    maybe("gpucloud:GpuType", {"H100-80GB", "L4", "A100-40GB"});
    maybe("gpucloud:GpuCount", {"1", "4", "8", "16"});
    maybe("gpucloud:Queue", {"prod", "dev"});
    maybe("gpucloud:SourceIp", {"10.1.2.3", "10.2.0.1", "192.168.0.1"});
    return r;
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

Effect Evaluate(const std::vector<NamedPolicy>& policies, const Request& r) {
  absl::StatusOr<PolicySet> set = PolicySet::Compile(policies);
  EXPECT_TRUE(set.ok()) << set.status();
  return set.ok() ? set->Evaluate(r).effect : Effect::kImplicitDeny;
}

constexpr int kRounds = 3000;

TEST(PolicyProperties, AddingADenyNeverAllows) {
  Generator g(14);
  for (int i = 0; i < kRounds; ++i) {
    std::vector<NamedPolicy> policies = g.RandomPolicies();
    Request r = g.RandomRequest();
    Effect before = Evaluate(policies, r);
    Statement deny = g.RandomStatement("Added");
    deny.effect = PolicyEffect::kDeny;
    if (g.Chance(0.5)) {
      policies[g.Int(0, policies.size() - 1)].document.statements.push_back(deny);
    } else {
      policies.push_back({"added", PolicyDocument{.statements = {deny}}});
    }
    Effect after = Evaluate(policies, r);
    if (before != Effect::kAllow) {
      EXPECT_NE(after, Effect::kAllow) << i;
    }
    if (before == Effect::kExplicitDeny) {
      EXPECT_EQ(after, Effect::kExplicitDeny) << i;
    }
  }
}

TEST(PolicyProperties, AddingAnAllowNeverDenies) {
  Generator g(1414);
  for (int i = 0; i < kRounds; ++i) {
    std::vector<NamedPolicy> policies = g.RandomPolicies();
    Request r = g.RandomRequest();
    Effect before = Evaluate(policies, r);
    Statement allow = g.RandomStatement("Added");
    allow.effect = PolicyEffect::kAllow;
    policies[g.Int(0, policies.size() - 1)].document.statements.push_back(allow);
    Effect after = Evaluate(policies, r);
    if (before == Effect::kAllow) {
      EXPECT_EQ(after, Effect::kAllow) << i;
    }
    if (before == Effect::kExplicitDeny) {
      EXPECT_EQ(after, Effect::kExplicitDeny) << i;
    }
  }
}

TEST(PolicyProperties, OrderNeverChangesTheEffect) {
  Generator g(141414);
  for (int i = 0; i < kRounds; ++i) {
    std::vector<NamedPolicy> policies = g.RandomPolicies();
    Request r = g.RandomRequest();
    Effect before = Evaluate(policies, r);
    std::shuffle(policies.begin(), policies.end(), g.rng());
    for (NamedPolicy& p : policies) {
      std::shuffle(p.document.statements.begin(), p.document.statements.end(), g.rng());
    }
    EXPECT_EQ(Evaluate(policies, r), before) << i;
  }
}

TEST(PolicyProperties, IndexAgreesWithStatementByStatement) {
  Generator g(7);
  int allows = 0, denies = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::vector<NamedPolicy> policies = g.RandomPolicies();
    Request r = g.RandomRequest();
    bool any_allow = false, any_deny = false;
    for (const NamedPolicy& p : policies) {
      for (const Statement& s : p.document.statements) {
        std::vector<NamedPolicy> one = {{"one", PolicyDocument{.statements = {s}}}};
        Effect e = Evaluate(one, r);
        any_deny |= e == Effect::kExplicitDeny;
        any_allow |= e == Effect::kAllow;
      }
    }
    Effect want = any_deny    ? Effect::kExplicitDeny
                  : any_allow ? Effect::kAllow
                              : Effect::kImplicitDeny;
    EXPECT_EQ(Evaluate(policies, r), want) << i;
    allows += want == Effect::kAllow;
    denies += want == Effect::kExplicitDeny;
  }
  // The generator exercises every outcome often.
  EXPECT_GT(allows, kRounds / 10);
  EXPECT_GT(denies, kRounds / 10);
}

// Resource wildcards agree with core's reference matcher, backtracking included, and a policy
// variable's value is literal text (a '*' in it matches only '*').
TEST(PolicyProperties, ResourceWildcardsAgreeWithWildcardMatch) {
  std::mt19937 rng(99);
  auto random_text = [&](std::string_view alphabet, int max) {
    std::string out;
    for (int n = static_cast<int>(rng() % (max + 1)); n > 0; --n) {
      out += alphabet[rng() % alphabet.size()];
    }
    return out;
  };
  for (int i = 0; i < 5000; ++i) {
    std::string pattern = "x" + random_text("ab*?", 6);
    std::string name = "x" + random_text("ab", 8);
    Statement s{.effect = PolicyEffect::kAllow,
                .actions = {"nodes:Get"},
                .resources = {"gpucloud:node/" + pattern}};
    std::vector<NamedPolicy> policies = {{"p", PolicyDocument{.statements = {s}}}};
    Request r{{"u", PrincipalType::kUser, {}, "", ""}, "nodes:Get", "gpucloud:node/" + name, {}};
    EXPECT_EQ(Evaluate(policies, r) == Effect::kAllow, WildcardMatch(pattern, name, false))
        << pattern << " " << name;
  }
  Statement own{.effect = PolicyEffect::kAllow,
                .actions = {"jobs:Get"},
                .resources = {"gpucloud:job/${gpucloud:PrincipalNamespace}/*"}};
  std::vector<NamedPolicy> policies = {{"p", PolicyDocument{.statements = {own}}}};
  Request star{{"u", PrincipalType::kUser, {}, "*", ""}, "jobs:Get", "gpucloud:job/team-a/x", {}};
  EXPECT_EQ(Evaluate(policies, star), Effect::kImplicitDeny);
  star.resource = "gpucloud:job/*/x";
  EXPECT_EQ(Evaluate(policies, star), Effect::kAllow);
}

}  // namespace
}  // namespace gpucloud::authz
