// The policy parser: every example parses and prints back to itself; a bare IAM document (JSON
// or YAML) and a gpucloud/v1 Policy manifest read alike; and a table of bad policies with the
// exact errors, each naming the field path, line and column.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Errors(const std::vector<Diagnostic>& errors) {
  std::string out;
  for (const Diagnostic& d : errors) out += d.ToString() + "\n";
  return out;
}

TEST(PolicyParser, EveryExampleParsesAndRoundTrips) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(GPUCLOUD_SOURCE_DIR) +
                                                               "/examples/policies")) {
    SCOPED_TRACE(entry.path().string());
    ++files;
    std::string text = ReadFile(entry.path());
    ParseResult all = ParseManifests(text, entry.path().string());
    ASSERT_TRUE(all.ok()) << Errors(all.errors);
    ASSERT_EQ(all.policies.size(), 1u);
    EXPECT_TRUE(all.manifests.empty());
    PolicyDocumentResult one = ParsePolicyDocument(text, entry.path().string());
    ASSERT_TRUE(one.ok()) << Errors(one.errors);
    EXPECT_EQ(one.name, all.policies[0].policy.metadata.name);
    EXPECT_EQ(one.document, all.policies[0].policy.spec);
    std::string printed = PolicyToJson(all.policies[0].policy);
    PolicyDocumentResult again = ParsePolicyDocument(printed, "printed.json");
    ASSERT_TRUE(again.ok()) << Errors(again.errors) << printed;
    EXPECT_EQ(again.document, one.document);
    EXPECT_EQ(PolicyToJson(Policy{all.policies[0].policy.metadata, again.document}), printed);
  }
  EXPECT_GE(files, 4);
}

TEST(PolicyParser, SeedTranslation) {
  ParseResult r = ParseManifests(
      ReadFile(std::string(GPUCLOUD_SOURCE_DIR) + "/examples/policies/gpu-types-ml-platform.yaml"),
      "seed.yaml");
  ASSERT_TRUE(r.ok()) << Errors(r.errors);
  const PolicyDocument& d = r.policies[0].policy.spec;
  ASSERT_EQ(d.statements.size(), 1u);
  const Statement& s = d.statements[0];
  EXPECT_EQ(s.sid, "OnlyMlPlatformOnH100OrA100");
  EXPECT_EQ(s.effect, PolicyEffect::kDeny);
  EXPECT_EQ(s.actions, std::vector<std::string>{"jobs:Create"});
  ASSERT_EQ(s.conditions.size(), 2u);
  EXPECT_EQ(s.conditions[0].op, ConditionOperator::kStringLike);
  EXPECT_EQ(s.conditions[0].values, (std::vector<std::string>{"H100*", "A100*"}));
  EXPECT_EQ(s.conditions[1].qualifier, SetQualifier::kForAllValues);
  EXPECT_EQ(s.conditions[1].op, ConditionOperator::kStringNotEquals);
  EXPECT_EQ(s.conditions[1].key, "gpucloud:Groups");
}

// The seed's JSON shape, with gpucloud's names: a bare document, a statement list, key names in
// any case (canonicalized), values written as numbers, Null unquoted in YAML.
TEST(PolicyParser, BareDocuments) {
  PolicyDocumentResult json = ParsePolicyDocument(R"({
  "Version": "2012-10-17",
  "Statement": [
    {
      "Effect": "Allow",
      "Action": ["jobs:Create"],
      "Resource": ["gpucloud:job/*/*"],
      "Condition": {"StringLike": {"GPUCLOUD:gputype": ["H100*", "A100*"]},
                    "NumericLessThanEquals": {"gpucloud:GpuCount": 8}}
    }
  ]
})",
                                                  "seed.json");
  ASSERT_TRUE(json.ok()) << Errors(json.errors);
  EXPECT_EQ(json.name, "");
  ASSERT_EQ(json.document.statements.size(), 1u);
  const Statement& s = json.document.statements[0];
  ASSERT_EQ(s.conditions.size(), 2u);
  EXPECT_EQ(s.conditions[0].key, "gpucloud:GpuType");
  EXPECT_EQ(s.conditions[1].values, std::vector<std::string>{"8"});

  PolicyDocumentResult yaml = ParsePolicyDocument(
      "Statement:\n  Effect: Deny\n  NotAction: jobs:Get\n  NotResource: gpucloud:queue/q?\n"
      "  Condition:\n    \"Null\": {gpucloud:GpuType: true}\n",
      "one.yaml");
  ASSERT_TRUE(yaml.ok()) << Errors(yaml.errors);
  EXPECT_EQ(yaml.document.version, "2012-10-17");
  ASSERT_EQ(yaml.document.statements.size(), 1u);
  const Statement& t = yaml.document.statements[0];
  EXPECT_TRUE(t.not_action);
  EXPECT_TRUE(t.not_resource);
  EXPECT_EQ(t.conditions[0].op, ConditionOperator::kNull);
  EXPECT_EQ(t.conditions[0].values, std::vector<std::string>{"true"});
}

TEST(PolicyParser, PoliciesBesideOtherKinds) {
  ParseResult r = ParseManifests(
      "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 1}\n---\n"
      "apiVersion: gpucloud/v1\nkind: Policy\nmetadata: {name: p}\n"
      "spec: {Statement: {Effect: Allow, Action: jobs:Get, Resource: \"*\"}}\n---\n"
      "apiVersion: gpucloud/v1\nkind: Policy\nmetadata: {name: p}\n"
      "spec: {Statement: {Effect: Deny, Action: jobs:Get, Resource: \"*\"}}\n",
      "mixed.yaml");
  EXPECT_EQ(Errors(r.errors),
            "mixed.yaml:11:1: [doc 3] metadata.name: duplicate Policy p with different content "
            "(also document 2)\n");
  EXPECT_TRUE(r.policies.empty());
  EXPECT_TRUE(r.manifests.empty());
}

struct Case {
  const char* name;
  const char* yaml;
  const char* want;  // every error, one per line
};

TEST(PolicyParser, BadPoliciesNameFieldAndLocation) {
  const Case cases[] = {
      {"unknown_field",
       "Statement:\n- Effect: Allow\n  Action: jobs:Get\n  Resource: \"*\"\n  Principal: x\n",
       "p.yaml:5:3: Statement[0].Principal: unknown field\n"},
      {"unknown_top_field", "Version: \"2012-10-17\"\nStatements: []\n",
       "p.yaml:1:1: Statement: is required\np.yaml:2:1: Statements: unknown field\n"},
      {"bad_version",
       "Version: \"2008-10-17\"\nStatement: {Effect: Allow, Action: jobs:Get, Resource: \"*\"}\n",
       "p.yaml:1:10: Version: must be 2012-10-17, got \"2008-10-17\"\n"},
      {"unknown_action",
       "Statement:\n- Effect: Allow\n  Action: [jobs:Get, jobs:Launch]\n  Resource: \"*\"\n",
       "p.yaml:3:22: Statement[0].Action[1]: unknown action \"jobs:Launch\": an action is "
       "<resource>:<Verb> such as jobs:Create, and a wildcard must match at least one "
       "(docs/policies.md lists them)\n"},
      {"wildcard_matches_nothing",
       "Statement:\n- Effect: Allow\n  Action: \"ec2:*\"\n  Resource: \"*\"\n",
       "p.yaml:3:11: Statement[0].Action: unknown action \"ec2:*\": an action is <resource>:<Verb> "
       "such as jobs:Create, and a wildcard must match at least one (docs/policies.md lists "
       "them)\n"},
      {"action_and_notaction",
       "Statement:\n- Effect: Allow\n  Action: jobs:Get\n  NotAction: jobs:List\n  Resource: "
       "\"*\"\n",
       "p.yaml:4:14: Statement[0].NotAction: a statement has Action or NotAction, not both\n"},
      {"no_action", "Statement:\n- Effect: Allow\n  Resource: \"*\"\n",
       "p.yaml:2:3: Statement[0]: a statement needs Action or NotAction\n"},
      {"bad_effect", "Statement:\n- Effect: allow\n  Action: jobs:Get\n  Resource: \"*\"\n",
       "p.yaml:2:11: Statement[0].Effect: must be Allow or Deny, got \"allow\"\n"},
      {"bad_resource_type",
       "Statement:\n- Effect: Allow\n  Action: jobs:Get\n  Resource: gpucloud:gpu/x\n",
       "p.yaml:4:13: Statement[0].Resource: resource \"gpucloud:gpu/x\": unknown type \"gpu\" "
       "(known: job, queue, nodepool, node, namespace, user, group, serviceaccount, token, policy, "
       "secret, audit, cluster, runtimeclass, service)\n"},
      {"bad_resource_segments",
       "Statement:\n- Effect: Allow\n  Action: jobs:Get\n  Resource: [gpucloud:job/team-a]\n",
       "p.yaml:4:14: Statement[0].Resource[0]: resource \"gpucloud:job/team-a\": a job is named "
       "gpucloud:job/<namespace>/<name> (wildcards * and ? allowed)\n"},
      {"bad_resource_arn",
       "Statement:\n- Effect: Allow\n  Action: jobs:Get\n  Resource: "
       "\"arn:aws:ec2:*:*:instance/*\"\n",
       "p.yaml:4:13: Statement[0].Resource: resource \"arn:aws:ec2:*:*:instance/*\" must be \"*\" "
       "or gpucloud:<type>/<name>\n"},
      {"unknown_variable",
       "Statement:\n- Effect: Allow\n  Action: jobs:Get\n  Resource: "
       "\"gpucloud:node/${gpucloud:Node}\"\n",
       "p.yaml:4:13: Statement[0].Resource: \"gpucloud:node/${gpucloud:Node}\": unknown policy "
       "variable \"${gpucloud:Node}\" (known: ${gpucloud:UserName}, "
       "${gpucloud:PrincipalNamespace}, ${gpucloud:NodeName}, and ${*}, ${?}, ${$})\n"},
      {"unknown_operator",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "StringEqual: {gpucloud:GpuType: H100}\n",
       "p.yaml:6:18: Statement[0].Condition.StringEqual: unknown condition operator "
       "\"StringEqual\" (known: StringEquals, StringNotEquals, StringEqualsIgnoreCase, "
       "StringNotEqualsIgnoreCase, StringLike, StringNotLike, NumericEquals, NumericNotEquals, "
       "NumericLessThan, NumericLessThanEquals, NumericGreaterThan, NumericGreaterThanEquals, "
       "DateEquals, DateNotEquals, DateLessThan, DateLessThanEquals, DateGreaterThan, "
       "DateGreaterThanEquals, Bool, IpAddress, NotIpAddress, Null, each with an optional IfExists "
       "suffix and ForAnyValue: or ForAllValues: prefix)\n"},
      {"unknown_key",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "StringEquals: {ec2:InstanceType: p3.*}\n",
       "p.yaml:6:38: Statement[0].Condition.StringEquals.ec2:InstanceType: unknown condition key "
       "\"ec2:InstanceType\" (known: gpucloud:GpuType, gpucloud:GpuCount, gpucloud:MigProfile, "
       "gpucloud:BillingClass, gpucloud:Queue, gpucloud:Namespace, gpucloud:EstimatedHourlyCost, "
       "gpucloud:CurrentTime, gpucloud:HourOfDay, gpucloud:SourceIp, gpucloud:SecureTransport, "
       "gpucloud:UserName, gpucloud:Groups, gpucloud:PrincipalType, gpucloud:PrincipalNamespace, "
       "gpucloud:NodeName, gpucloud:ResourceOwner)\n"},
      {"mistyped_key",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "NumericLessThan: {gpucloud:GpuType: 8}\n",
       "p.yaml:6:41: Statement[0].Condition.NumericLessThan.gpucloud:GpuType: gpucloud:GpuType is "
       "a string key; NumericLessThan tests numeric keys\n"},
      {"bad_number",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "NumericLessThan:\n      gpucloud:GpuCount: [4, eight]\n",
       "p.yaml:7:30: Statement[0].Condition.NumericLessThan.gpucloud:GpuCount[1]: must be a number "
       "such as 8 or 2.5, got \"eight\"\n"},
      {"bad_date",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "DateLessThan: {gpucloud:CurrentTime: \"2026-13-01\"}\n",
       "p.yaml:6:42: Statement[0].Condition.DateLessThan.gpucloud:CurrentTime: must be a date such "
       "as 2026-12-01 or 2026-12-01T20:00:00Z, or epoch seconds, got \"2026-13-01\"\n"},
      {"bad_ip",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "IpAddress: {gpucloud:SourceIp: 10.0.0.0/33}\n",
       "p.yaml:6:36: Statement[0].Condition.IpAddress.gpucloud:SourceIp: must be an IPv4 or IPv6 "
       "address or CIDR such as 10.0.0.0/8 or 2001:db8::/32, got \"10.0.0.0/33\"\n"},
      {"bad_bool",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "Bool: {gpucloud:SecureTransport: \"yes\"}\n",
       "p.yaml:6:38: Statement[0].Condition.Bool.gpucloud:SecureTransport: must be true or false, "
       "got \"yes\"\n"},
      {"bad_null",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "\"Null\": {gpucloud:GpuType: maybe}\n",
       "p.yaml:6:32: Statement[0].Condition.Null.gpucloud:GpuType: must be true or false, got "
       "\"maybe\"\n"},
      {"multi_valued_without_qualifier",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "StringEquals: {gpucloud:Groups: ml}\n",
       "p.yaml:6:37: Statement[0].Condition.StringEquals.gpucloud:Groups: gpucloud:Groups is "
       "multi-valued: write ForAnyValue:StringEquals or ForAllValues:StringEquals\n"},
      {"qualifier_on_single",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "ForAnyValue:StringEquals: {gpucloud:GpuType: H100}\n",
       "p.yaml:6:50: Statement[0].Condition.ForAnyValue:StringEquals.gpucloud:GpuType: "
       "gpucloud:GpuType is single-valued: drop ForAnyValue:/ForAllValues:\n"},
      {"null_if_exists",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n    "
       "NullIfExists: {gpucloud:GpuType: \"true\"}\n",
       "p.yaml:6:19: Statement[0].Condition.NullIfExists: \"NullIfExists\": Null takes no IfExists "
       "suffix and no ForAnyValue/ForAllValues\n"},
      {"duplicate_sid",
       "Statement:\n- {Sid: A, Effect: Allow, Action: jobs:Get, Resource: \"*\"}\n- {Sid: A, "
       "Effect: Deny, Action: jobs:Get, Resource: \"*\"}\n",
       "p.yaml:3:3: Statement[1].Sid: duplicate Sid \"A\"\n"},
      {"bad_sid",
       "Statement:\n- {Sid: \"a b\", Effect: Allow, Action: jobs:Get, Resource: \"*\"}\n",
       "p.yaml:2:9: Statement[0].Sid: must be at most 128 letters, digits, - and _, got \"a b\"\n"},
      {"empty_action_list", "Statement:\n- {Effect: Allow, Action: [], Resource: \"*\"}\n",
       "p.yaml:2:27: Statement[0].Action: must not be empty\n"},
      {"action_not_string", "Statement:\n- {Effect: Allow, Action: 4, Resource: \"*\"}\n",
       "p.yaml:2:27: Statement[0].Action: must be a string, got integer 4 (quote it: \"4\")\n"},
      {"no_statement", "Version: \"2012-10-17\"\n", "p.yaml:1:1: Statement: is required\n"},
      {"empty_statement_list", "Statement: []\n",
       "p.yaml:1:12: Statement: must hold 1 to 100 statements, got 0\n"},
      {"statement_not_map", "Statement: [jobs:Get]\n",
       "p.yaml:1:13: Statement[0]: must be a mapping, got string \"jobs:Get\"\n"},
      {"json_unknown_action",
       "{\n  \"Version\": \"2012-10-17\",\n  \"Statement\": [{\"Effect\": \"Allow\",\n    "
       "\"Action\": \"ec2:RunInstances\", \"Resource\": \"*\"}]\n}\n",
       "p.yaml:4:15: Statement[0].Action: unknown action \"ec2:RunInstances\": an action is "
       "<resource>:<Verb> such as jobs:Create, and a wildcard must match at least one "
       "(docs/policies.md lists them)\n"},
      {"manifest_bad_kind",
       "apiVersion: gpucloud/v1\nkind: Polcy\nmetadata: {name: p}\nspec: {Statement: {Effect: "
       "Allow, Action: jobs:Get, Resource: \"*\"}}\n",
       "p.yaml:2:7: kind: must be Policy, got \"Polcy\"\n"},
      {"manifest_spec_error",
       "apiVersion: gpucloud/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n  Statement:\n    "
       "Effect: Allow\n    Action: jobs:Get\n    Resource: gpucloud:job/*\n",
       "p.yaml:8:15: spec.Statement.Resource: resource \"gpucloud:job/*\": a job is named "
       "gpucloud:job/<namespace>/<name> (wildcards * and ? allowed)\n"},
      {"two_documents",
       "Statement: {Effect: Allow, Action: jobs:Get, Resource: \"*\"}\n---\nStatement: {Effect: "
       "Allow, Action: jobs:Get, Resource: \"*\"}\n",
       "p.yaml: must hold one policy document, got 2 documents\n"},
      {"syntax_error", "Statement: [\n",
       "p.yaml:2:1: invalid YAML: end of sequence flow not found (check the indentation of this "
       "line and the lines above it)\n"},
      // Found by the fuzzer: an operator or a key with no value.
      {"condition_key_without_value",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n"
       "    StringLike: {gpucloud:GpuType: }\n    NumericLessThan:\n",
       "p.yaml:6:18: Statement[0].Condition.StringLike.gpucloud:GpuType: is required, got null\n"
       "p.yaml:7:5: Statement[0].Condition.NumericLessThan: is required, got null\n"},
      // YAML reads a plain Null as null, not as the operator's name: it must be quoted.
      {"unquoted_null",
       "Statement:\n- Effect: Allow\n  Action: jobs:Create\n  Resource: \"*\"\n  Condition:\n"
       "    Null: {gpucloud:GpuType: \"true\"}\n",
       "p.yaml:6:5: Statement[0].Condition: keys must be strings, got null\n"},
  };
  for (const Case& c : cases) {
    PolicyDocumentResult r = ParsePolicyDocument(c.yaml, "p.yaml");
    EXPECT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(Errors(r.errors), c.want) << c.name << "\n" << c.yaml;
  }
}

}  // namespace
}  // namespace gpucloud::manifest
