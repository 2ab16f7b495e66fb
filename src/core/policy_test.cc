#include "core/policy.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

TEST(PolicyCatalog, ActionsAreUniqueAndFoundCaseInsensitively) {
  std::span<const std::string_view> actions = PolicyActions();
  EXPECT_EQ(actions.size(), 93u);
  for (size_t i = 0; i < actions.size(); ++i) {
    EXPECT_EQ(FindPolicyAction(actions[i]), static_cast<int>(i)) << actions[i];
  }
  EXPECT_EQ(FindPolicyAction("JOBS:create"), FindPolicyAction("jobs:Create"));
  EXPECT_EQ(FindPolicyAction("jobs:Launch"), std::nullopt);
}

TEST(PolicyCatalog, ActionWildcards) {
  EXPECT_EQ(MatchPolicyActions("jobs:*").size(), 11u);
  EXPECT_EQ(MatchPolicyActions("*").size(), PolicyActions().size());
  EXPECT_EQ(MatchPolicyActions("*:GetSummary").size(), 1u);
  EXPECT_EQ(MatchPolicyActions("nodes:?ordon").size(), 1u);  // Cordon, not Uncordon
  EXPECT_TRUE(MatchPolicyActions("jobs:Launch*").empty());
}

TEST(PolicyCatalog, WildcardMatch) {
  EXPECT_TRUE(WildcardMatch("H100*", "H100-80GB", false));
  EXPECT_FALSE(WildcardMatch("h100*", "H100-80GB", false));
  EXPECT_TRUE(WildcardMatch("h100*", "H100-80GB", true));
  EXPECT_TRUE(WildcardMatch("a?c", "abc", false));
  EXPECT_FALSE(WildcardMatch("a?c", "ac", false));
  EXPECT_TRUE(WildcardMatch("*a*b*", "xxaxxbxx", false));
  EXPECT_FALSE(WildcardMatch("*a*b", "xxaxxbxxc", false));
  EXPECT_TRUE(WildcardMatch("", "", false));
  EXPECT_TRUE(WildcardMatch("***", "", false));
  EXPECT_FALSE(WildcardMatch("", "x", false));
}

TEST(PolicyCatalog, ConditionKeys) {
  ASSERT_NE(FindConditionKey("GPUCLOUD:gputype"), nullptr);
  EXPECT_EQ(FindConditionKey("gpucloud:gputype")->name, "gpucloud:GpuType");
  EXPECT_TRUE(FindConditionKey("gpucloud:Groups")->multi_valued);
  EXPECT_EQ(FindConditionKey("ec2:InstanceType"), nullptr);
  for (const ConditionKeyInfo& k : ConditionKeys()) EXPECT_EQ(&ConditionKeyOf(k.id), &k);
}

TEST(PolicyCatalog, Operators) {
  absl::StatusOr<OperatorSpelling> s = ParseConditionOperator("ForAllValues:StringLikeIfExists");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->op, ConditionOperator::kStringLike);
  EXPECT_TRUE(s->if_exists);
  EXPECT_EQ(s->qualifier, SetQualifier::kForAllValues);
  Condition c{s->op, s->if_exists, s->qualifier, "gpucloud:Groups", {}};
  EXPECT_EQ(ConditionOperatorName(c), "ForAllValues:StringLikeIfExists");
  EXPECT_FALSE(ParseConditionOperator("StringEqual").ok());
  EXPECT_FALSE(ParseConditionOperator("stringequals").ok());
  EXPECT_FALSE(ParseConditionOperator("NullIfExists").ok());
  EXPECT_FALSE(ParseConditionOperator("ForAnyValue:Null").ok());
  EXPECT_TRUE(ParseConditionOperator("Null").ok());
  EXPECT_EQ(OperatorKeyType(ConditionOperator::kDateLessThan), ConditionKeyType::kDate);
  EXPECT_EQ(OperatorKeyType(ConditionOperator::kNull), std::nullopt);
  EXPECT_TRUE(IsNegatedOperator(ConditionOperator::kNotIpAddress));
  EXPECT_FALSE(IsNegatedOperator(ConditionOperator::kStringLike));
}

TEST(PolicyCatalog, Resources) {
  for (std::string_view ok :
       {"*", "gpucloud:job/team-a/*", "gpucloud:job/*/*", "gpucloud:node/n?", "gpucloud:queue/*",
        "gpucloud:node/${gpucloud:NodeName}", "gpucloud:secret/${gpucloud:PrincipalNamespace}/*"}) {
    EXPECT_TRUE(ValidateResourcePattern(ok).ok()) << ok;
  }
  for (std::string_view bad :
       {"", "gpucloud:job/team-a", "gpucloud:job/a/b/c", "gpucloud:queue/a/b", "gpucloud:gpu/x",
        "arn:aws:ec2:*:*:instance/*", "gpucloud:node", "gpucloud:node/", "gpucloud:job//x",
        "gpucloud:node/${gpucloud:GpuType}", "gpucloud:node/${gpucloud:NodeName"}) {
    EXPECT_FALSE(ValidateResourcePattern(bad).ok()) << bad;
  }
  EXPECT_EQ(ResourceName(ResourceType::kJob, "team-a", "train"), "gpucloud:job/team-a/train");
  EXPECT_EQ(ResourceName(ResourceType::kNode, "ignored", "n1"), "gpucloud:node/n1");
}

TEST(PolicyCatalog, Patterns) {
  absl::StatusOr<std::vector<PatternPart>> p =
      ParsePattern("gpucloud:job/${gpucloud:PrincipalNamespace}/a*${*}?", true);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 6u);
  EXPECT_EQ((*p)[0].text, "gpucloud:job/");
  EXPECT_EQ((*p)[1].kind, PatternPart::Kind::kVariable);
  EXPECT_EQ((*p)[1].variable, ConditionKeyId::kPrincipalNamespace);
  EXPECT_EQ((*p)[2].text, "/a");
  EXPECT_EQ((*p)[3].kind, PatternPart::Kind::kStar);
  EXPECT_EQ((*p)[4].text, "*");
  EXPECT_EQ((*p)[5].kind, PatternPart::Kind::kQuestion);
  absl::StatusOr<std::vector<PatternPart>> lit = ParsePattern("a*b", false);
  ASSERT_TRUE(lit.ok());
  ASSERT_EQ(lit->size(), 1u);
  EXPECT_EQ((*lit)[0].text, "a*b");
}

TEST(PolicyValues, Numbers) {
  EXPECT_EQ(*ParsePolicyNumber("8"), 8);
  EXPECT_EQ(*ParsePolicyNumber("-2.5"), -2.5);
  for (std::string_view bad : {"", "-", "1.", ".5", "1e3", "0x10", " 1", "eight", "1,5"}) {
    EXPECT_FALSE(ParsePolicyNumber(bad).ok()) << bad;
  }
}

TEST(PolicyValues, Dates) {
  EXPECT_EQ(*ParsePolicyDate("1970-01-02"), 86400);
  EXPECT_EQ(*ParsePolicyDate("2026-12-01T20:00:00Z"), 1796155200);
  EXPECT_EQ(*ParsePolicyDate("2026-12-01T21:00:00+01:00"), 1796155200);
  EXPECT_EQ(*ParsePolicyDate("2026-12-01T20:00:00.5Z"), 1796155200.5);
  EXPECT_EQ(*ParsePolicyDate("1796155200"), 1796155200);
  EXPECT_TRUE(ParsePolicyDate("2024-02-29").ok());
  for (std::string_view bad :
       {"", "2026-13-01", "2026-02-30", "2025-02-29", "2026-12-01T25:00:00Z", "2026-12-01T20:00:00",
        "2026-12-01 20:00:00Z", "yesterday", "2026-1-01", "2026-12-01T20:00:00+1:00"}) {
    EXPECT_FALSE(ParsePolicyDate(bad).ok()) << bad;
  }
}

TEST(PolicyValues, BoolsAndAddresses) {
  EXPECT_TRUE(*ParsePolicyBool("TRUE"));
  EXPECT_FALSE(*ParsePolicyBool("false"));
  EXPECT_FALSE(ParsePolicyBool("yes").ok());
  absl::StatusOr<IpNetwork> net = ParseIpNetwork("10.1.0.0/16");
  ASSERT_TRUE(net.ok());
  EXPECT_TRUE(net->Contains(*ParseIpNetwork("10.1.200.3")));
  EXPECT_FALSE(net->Contains(*ParseIpNetwork("10.2.0.1")));
  EXPECT_FALSE(net->Contains(*ParseIpNetwork("::ffff:10.1.0.1")));
  absl::StatusOr<IpNetwork> v6 = ParseIpNetwork("2001:db8::/33");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->Contains(*ParseIpNetwork("2001:db8:7fff::1")));
  EXPECT_FALSE(v6->Contains(*ParseIpNetwork("2001:db8:8000::1")));
  EXPECT_TRUE(ParseIpNetwork("0.0.0.0/0")->Contains(*ParseIpNetwork("8.8.8.8")));
  for (std::string_view bad : {"", "10.0.0.0/33", "10.0.0/8", "::/129", "10.0.0.0/", "host",
                               "10.0.0.0/-1", "10.0.0.0/08x"}) {
    EXPECT_FALSE(ParseIpNetwork(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gpucloud
