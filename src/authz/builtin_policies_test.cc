#include "authz/builtin_policies.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "manifest/manifest.h"

namespace gpucloud::authz {
namespace {

PolicyDocument Example(const std::string& file) {
  std::ifstream f(std::string(GPUCLOUD_SOURCE_DIR) + "/examples/policies/" + file);
  std::stringstream ss;
  ss << f.rdbuf();
  manifest::PolicyDocumentResult r = manifest::ParsePolicyDocument(ss.str(), file);
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].ToString());
  return r.document;
}

// The documents in the code and the YAML in examples/ (and so in docs) are the same.
TEST(BuiltinPolicies, MatchTheirExamples) {
  EXPECT_EQ(AdminPolicy(), Example("builtin-admin.yaml"));
  EXPECT_EQ(TenantPolicy(), Example("builtin-tenant.yaml"));
  EXPECT_EQ(NodePolicy(), Example("builtin-node.yaml"));
}

TEST(BuiltinPolicies, CompileAndAreNamed) {
  std::vector<NamedPolicy> all = BuiltinPolicies();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "gpucloud:admin");
  EXPECT_EQ(all[1].name, "gpucloud:tenant");
  EXPECT_EQ(all[2].name, "gpucloud:node");
  for (const NamedPolicy& p : all) {
    std::vector<NamedPolicy> one = {p};
    EXPECT_TRUE(PolicySet::Compile(one).ok()) << p.name;
  }
}

// NodeRestriction: every node verb on another node is denied; on its own node, allowed.
TEST(BuiltinPolicies, NodeOnlyTouchesItself) {
  std::vector<NamedPolicy> node = {{"gpucloud:node", NodePolicy()}};
  absl::StatusOr<PolicySet> set = PolicySet::Compile(node);
  ASSERT_TRUE(set.ok());
  Principal n1{"n1", PrincipalType::kNode, {}, "", "n1"};
  for (std::string_view action : PolicyActions()) {
    if (!action.starts_with("nodes:")) continue;
    Decision other = set->Evaluate({n1, std::string(action), "gpucloud:node/n2", {}});
    EXPECT_FALSE(other.allowed()) << action;
    Decision own = set->Evaluate({n1, std::string(action), "gpucloud:node/n1", {}});
    bool want = action == "nodes:Register" || action == "nodes:Get" || action == "nodes:Update" ||
                action == "nodes:Heartbeat" || action == "nodes:GetAssignments" ||
                action == "nodes:GetTaskSecrets" || action == "nodes:Sessions";
    EXPECT_EQ(own.allowed(), want) << action;
  }
}

// A tenant reaches nothing outside its namespace, whatever the namespaced action.
TEST(BuiltinPolicies, TenantStaysInItsNamespace) {
  std::vector<NamedPolicy> tenant = {{"gpucloud:tenant", TenantPolicy()}};
  absl::StatusOr<PolicySet> set = PolicySet::Compile(tenant);
  ASSERT_TRUE(set.ok());
  Principal alice{"alice", PrincipalType::kUser, {}, "team-a", ""};
  for (std::string_view action : PolicyActions()) {
    for (std::string_view type : {"job", "secret", "serviceaccount"}) {
      std::string other = "gpucloud:" + std::string(type) + "/team-b/x";
      EXPECT_FALSE(set->Evaluate({alice, std::string(action), other, {}}).allowed())
          << action << " " << other;
    }
  }
}

}  // namespace
}  // namespace gpucloud::authz
