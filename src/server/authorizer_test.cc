#include "server/authorizer.h"

#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace gpucloud::server {
namespace {

std::vector<std::string> Parts(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string ActionText(const std::string& method, const std::string& path, bool watch = false) {
  std::optional<RequestedAction> a = ActionOf(method, Parts(path), watch);
  return a ? a->action + " " + a->resource : "none";
}

TEST(ActionOfTest, EveryRouteNeedsItsAction) {
  struct Case {
    std::string method, path;
    bool watch;
    std::string want;
  };
  const Case cases[] = {
      {"GET", "namespaces/team-a/jobs", false, "jobs:List gpucloud:job/team-a/*"},
      {"GET", "namespaces/team-a/jobs", true, "jobs:Watch gpucloud:job/team-a/*"},
      {"POST", "namespaces/team-a/jobs", false, "jobs:Create gpucloud:job/team-a/*"},
      {"GET", "namespaces/team-a/jobs/train", false, "jobs:Get gpucloud:job/team-a/train"},
      {"PUT", "namespaces/team-a/jobs/train", false, "jobs:Update gpucloud:job/team-a/train"},
      {"DELETE", "namespaces/team-a/jobs/train", false, "jobs:Delete gpucloud:job/team-a/train"},
      {"POST", "namespaces/team-a/jobs/train/cancel", false,
       "jobs:Cancel gpucloud:job/team-a/train"},
      {"GET", "namespaces/team-a/jobs/train/events", false,
       "jobs:Events gpucloud:job/team-a/train"},
      {"GET", "namespaces/team-a/jobs/train/logs", false, "jobs:Logs gpucloud:job/team-a/train"},
      {"POST", "namespaces/team-a/jobs/train/logs", false,
       "jobs:WriteLogs gpucloud:job/team-a/train"},
      {"GET", "jobs", false, "jobs:List gpucloud:job/*/*"},
      {"GET", "queues", false, "queues:List gpucloud:queue/*"},
      {"PUT", "queues/gold", false, "queues:Update gpucloud:queue/gold"},
      {"POST", "nodepools", false, "nodepools:Create gpucloud:nodepool/*"},
      {"DELETE", "nodepools/spot", false, "nodepools:Delete gpucloud:nodepool/spot"},
      {"POST", "pools/spot/prepull", false, "nodepools:PrePull gpucloud:nodepool/spot"},
      {"POST", "pools/spot/reclaim", false, "nodepools:Reclaim gpucloud:nodepool/spot"},
      {"GET", "nodes", false, "nodes:List gpucloud:node/*"},
      {"PUT", "nodes/n1", false, "nodes:Register gpucloud:node/n1"},
      {"DELETE", "nodes/n1", false, "nodes:Delete gpucloud:node/n1"},
      {"POST", "nodes/n1/heartbeat", false, "nodes:Heartbeat gpucloud:node/n1"},
      {"GET", "nodes/n1/assignments", true, "nodes:GetAssignments gpucloud:node/n1"},
      {"GET", "nodes/n1/assignments/team-a.train.0/secrets", false,
       "nodes:GetTaskSecrets gpucloud:node/n1"},
      {"POST", "nodes/n1/cordon", false, "nodes:Cordon gpucloud:node/n1"},
      {"POST", "nodes/n1/reclaim", false, "nodes:Drain gpucloud:node/n1"},
      {"GET", "runtimeclasses", false, "runtimeclasses:List gpucloud:runtimeclass/*"},
      {"GET", "runtimeclasses", true, "runtimeclasses:Watch gpucloud:runtimeclass/*"},
      {"POST", "runtimeclasses", false, "runtimeclasses:Create gpucloud:runtimeclass/*"},
      {"GET", "runtimeclasses/gpu", false, "runtimeclasses:Get gpucloud:runtimeclass/gpu"},
      {"PUT", "runtimeclasses/gpu", false, "runtimeclasses:Update gpucloud:runtimeclass/gpu"},
      {"PATCH", "runtimeclasses/gpu", false, "runtimeclasses:Update gpucloud:runtimeclass/gpu"},
      {"DELETE", "runtimeclasses/gpu", false, "runtimeclasses:Delete gpucloud:runtimeclass/gpu"},
      {"GET", "cluster", false, "cluster:GetSummary gpucloud:cluster/summary"},
      {"GET", "audit/records", false, "audit:Read gpucloud:audit/records"},
      {"GET", "audit/verify", false, "audit:Verify gpucloud:audit/verify"},
      {"GET", "namespaces/team-a/secrets", false, "secrets:List gpucloud:secret/team-a/*"},
      {"GET", "namespaces/team-a/secrets/hf", false, "secrets:Get gpucloud:secret/team-a/hf"},
      {"POST", "namespaces/team-a/secrets", false, "secrets:Create gpucloud:secret/team-a/*"},
      {"PUT", "namespaces/team-a/secrets/hf", false, "secrets:Update gpucloud:secret/team-a/hf"},
      {"DELETE", "namespaces/team-a/secrets/hf", false, "secrets:Delete gpucloud:secret/team-a/hf"},
      {"GET", "namespaces/team-a/secrets", true, "none"},
      {"POST", "namespaces/team-a/secrets/hf", false, "none"},
      // Paths with rules of their own, or none: the API answers them.
      {"POST", "nodes/n1/certificate", false, "none"},
      {"PATCH", "namespaces/team-a/jobs/train", false, "jobs:Update gpucloud:job/team-a/train"},
      {"PATCH", "queues/gold", false, "queues:Update gpucloud:queue/gold"},
      {"GET", "namespaces/team-a/jobs/train/status", false, "jobs:Get gpucloud:job/team-a/train"},
      {"PUT", "namespaces/team-a/jobs/train/status", false,
       "jobs:Update gpucloud:job/team-a/train"},
      {"PATCH", "namespaces/team-a/jobs/train/status", false,
       "jobs:Update gpucloud:job/team-a/train"},
      {"POST", "namespaces/team-a/jobs/train/status", false, "none"},
      {"PATCH", "namespaces/team-a/jobs", false, "none"},
      {"POST", "namespaces/team-a/jobs/train", false, "none"},
      {"GET", "namespaces/team-a/jobs/train/nope", false, "none"},
      {"GET", "nothing", false, "none"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ActionText(c.method, c.path, c.watch), c.want) << c.method << " " << c.path;
  }
}

Job JobOf(const std::string& yaml) {
  manifest::ParseResult p = manifest::ParseManifests(yaml, "test");
  EXPECT_TRUE(p.ok()) << (p.errors.empty() ? "" : p.errors[0].ToString());
  return std::get<Job>(p.manifests.at(0).object);
}

TEST(JobContextsTest, OneContextPerGpuTypeTheJobCouldGetWithItsCost) {
  Job job = JobOf(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: big, namespace: team-a}
spec:
  queue: research
  tasks:
  - name: w
    replicas: 2
    resources: {gpu: {count: 4, types: [H100-80GB, A100-80GB]}}
)");
  std::vector<authz::RequestContext> contexts = JobContexts(job, GpuCatalog::Default());
  ASSERT_EQ(contexts.size(), 2u);
  const GpuType* h100 = GpuCatalog::Default().Find("H100-80GB");
  ASSERT_NE(h100, nullptr);
  const authz::RequestContext& c = contexts[0];
  EXPECT_EQ(c.Get(ConditionKeyId::kGpuType)->at(0).text, "H100-80GB");
  EXPECT_EQ(c.Get(ConditionKeyId::kGpuCount)->at(0).number, 8);
  EXPECT_EQ(c.Get(ConditionKeyId::kQueue)->at(0).text, "research");
  EXPECT_EQ(c.Get(ConditionKeyId::kNamespace)->at(0).text, "team-a");
  EXPECT_EQ(c.Get(ConditionKeyId::kBillingClass)->at(0).text, "on-demand");
  EXPECT_NEAR(c.Get(ConditionKeyId::kEstimatedHourlyCost)->at(0).number,
              8 * h100->on_demand_price_per_hour.raw() / 1e6, 1e-6);
  EXPECT_EQ(contexts[1].Get(ConditionKeyId::kGpuType)->at(0).text, "A100-80GB");
}

TEST(JobContextsTest, AJobThatNamesNoTypeIsDecidedForEveryType) {
  Job any = JobOf(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: any}
spec:
  tasks:
  - {name: w, resources: {gpu: {count: 1}}}
)");
  EXPECT_EQ(JobContexts(any, GpuCatalog::Default()).size(), GpuCatalog::Default().types().size());
  Job cpu = JobOf(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: cpu}
spec:
  tasks:
  - {name: w, command: [echo]}
)");
  std::vector<authz::RequestContext> one = JobContexts(cpu, GpuCatalog::Default());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].Get(ConditionKeyId::kGpuType), nullptr);
  EXPECT_EQ(one[0].Get(ConditionKeyId::kGpuCount)->at(0).number, 0);
}

PolicyDocument Parse(const std::string& text) {
  manifest::PolicyDocumentResult p = manifest::ParsePolicyDocument(text, "test");
  EXPECT_TRUE(p.ok()) << (p.errors.empty() ? "" : p.errors[0].ToString());
  return p.document;
}

TEST(AuthorizerTest, RolesKeepTheirBuiltInPoliciesAndStoredOnesAreAttachedByName) {
  FakeClock clock(
      absl::ToUnixMillis(absl::FromCivil(absl::CivilHour(2026, 12, 1, 22), absl::UTCTimeZone())));
  Authorizer authorizer(clock);
  const RequestedAction get{"jobs:Get", "gpucloud:job/team-a/train"};
  Identity admin{"root", "", true}, alice{"alice", "team-a", false}, bob{"bob", "team-b", false};
  EXPECT_TRUE(authorizer.Decide(admin, get, {}).allowed());
  EXPECT_TRUE(authorizer.Decide(alice, get, {}).allowed());
  authz::Decision d = authorizer.Decide(bob, get, {});
  EXPECT_EQ(d.effect, authz::Effect::kImplicitDeny);
  // A night-time Deny attached to alice, with the tenant policy: the clock decides.
  authorizer.SetPolicies({{"no-nights", Parse(R"({"Version": "2012-10-17", "Statement": [
      {"Sid": "Night", "Effect": "Deny", "Action": "jobs:*", "Resource": "*",
       "Condition": {"NumericGreaterThanEquals": {"gpucloud:HourOfDay": "20"}}}]})")}});
  alice.policies = {"gpucloud:tenant", "no-nights", "no-such-policy"};
  d = authorizer.Decide(alice, get, {});
  EXPECT_EQ(d.effect, authz::Effect::kExplicitDeny);
  EXPECT_EQ(d.policy, "no-nights");
  EXPECT_EQ(d.sid, "Night");
  Response r = Denied(alice, get, d);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("user alice may not jobs:Get on gpucloud:job/team-a/train: denied by "
                        "policy no-nights, statement 0 (Sid Night)"),
            std::string::npos)
      << r.body;
  clock.Set(
      absl::ToUnixMillis(absl::FromCivil(absl::CivilHour(2026, 12, 2, 9), absl::UTCTimeZone())));
  EXPECT_TRUE(authorizer.Decide(alice, get, {}).allowed());
  // Replacing the stored policies takes effect at once.
  authorizer.SetPolicies({});
  clock.Set(
      absl::ToUnixMillis(absl::FromCivil(absl::CivilHour(2026, 12, 2, 23), absl::UTCTimeZone())));
  EXPECT_TRUE(authorizer.Decide(alice, get, {}).allowed());
}

TEST(ActionOfTest, DiscoveryPathsAreEveryAuthenticatedIdentitysAndNothingElseIs) {
  for (const char* path : {"/api", "/api/", "/apis", "/apis/", "/apis/gpucloud",
                           "/apis/gpucloud/v1", "/apis/gpucloud/v1/", "/version", "/version/"}) {
    EXPECT_TRUE(IsDiscoveryPath(path)) << path;
  }
  for (const char* path : {"/", "/apis/gpucloud/v1/jobs", "/apis/other", "/api/v1", "/versions",
                           "/apis/gpucloud/v2", "/apis//", "/apisx"}) {
    EXPECT_FALSE(IsDiscoveryPath(path)) << path;
  }
}

TEST(AuthorizerTest, ANodeActsOnItselfAlone) {
  FakeClock clock(0);
  Authorizer authorizer(clock);
  Identity node;
  node.user = "node:n1";
  node.node = true;
  node.node_name = "n1";
  EXPECT_TRUE(authorizer.Decide(node, {"nodes:Heartbeat", "gpucloud:node/n1"}, {}).allowed());
  EXPECT_FALSE(authorizer.Decide(node, {"nodes:Heartbeat", "gpucloud:node/n2"}, {}).allowed());
  EXPECT_FALSE(authorizer.Decide(node, {"jobs:Get", "gpucloud:job/team-a/train"}, {}).allowed());
}

}  // namespace
}  // namespace gpucloud::server
