// The pure parts of gpuctl's kubectl parity: JSONPath, unified diffs, resource arguments,
// "did you mean" and the logs request's query.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cluster_commands.h"
#include "cli/jsonpath.h"
#include "cli/resources.h"
#include "cli/unified_diff.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

const Json kList = Json::parse(R"({"kind": "JobList", "items": [
  {"metadata": {"name": "a", "labels": {"team": "x"}}, "status": {"phase": "Running"}},
  {"metadata": {"name": "b"}, "status": {"phase": "Pending", "attempt": 2}}]})");

std::string Eval(std::string_view tmpl, const Json& data = kList) {
  absl::StatusOr<JsonPath> p = JsonPath::Parse(tmpl);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? p->Execute(data) : "";
}

TEST(JsonPath, FieldsIndexesWildcardsAndRanges) {
  EXPECT_EQ(Eval("{.items[*].metadata.name}"), "a b");
  EXPECT_EQ(Eval("{.items[0].status.phase}"), "Running");
  EXPECT_EQ(Eval("{.items[-1].metadata.name}"), "b");
  EXPECT_EQ(Eval("{$.kind}"), "JobList");
  EXPECT_EQ(Eval("{.items[0].metadata.labels['team']}"), "x");
  EXPECT_EQ(Eval("{.items[1].status.attempt}"), "2");  // numbers as JSON
  EXPECT_EQ(Eval("{.items[0].metadata.labels}"), R"({"team":"x"})");
  EXPECT_EQ(Eval("{range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}"),
            "a=Running\nb=Pending\n");
  EXPECT_EQ(Eval("name: {.metadata.name}!", kList["items"][0]), "name: a!");
  EXPECT_EQ(Eval("{.items[5].metadata.name}{.nothing.here}"), "");  // missing: nothing
}

TEST(JsonPath, RefusesWhatItDoesNotSupport) {
  for (const char* bad : {"{.items[?(@.x==1)]}", "{..name}", "{.items[0:2]}", "{.items[0,1]}",
                          "{.items", "{range .items[*]}{.x}", "{end}", "{.a b}"}) {
    absl::StatusOr<JsonPath> p = JsonPath::Parse(bad);
    EXPECT_FALSE(p.ok()) << bad;
  }
  EXPECT_EQ(JsonPath::Parse("{..name}").status().message(),
            "jsonpath: {..name}: recursive descent (..) is not supported (fields, [N], [*], "
            "range/end and string literals are)");
}

TEST(UnifiedDiff, HunksWithContext) {
  EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "x", "y"), "");
  EXPECT_EQ(
      UnifiedDiff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nfive\n6\n7\n8\n", "live/j", "file/j"),
      "--- live/j\n+++ file/j\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  EXPECT_EQ(UnifiedDiff("", "a\nb\n", "/dev/null", "file/j"),
            "--- /dev/null\n+++ file/j\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  // Changes far apart: two hunks.
  std::string from, to;
  for (int i = 1; i <= 20; ++i) {
    from += std::to_string(i) + "\n";
    to += (i == 2 || i == 18 ? "x" : std::to_string(i)) + "\n";
  }
  EXPECT_EQ(UnifiedDiff(from, to, "a", "b"),
            "--- a\n+++ b\n@@ -1,5 +1,5 @@\n 1\n-2\n+x\n 3\n 4\n 5\n"
            "@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+x\n 19\n 20\n");
}

TEST(Resources, TypesAndNamesAsKubectlTakesThem) {
  absl::StatusOr<std::vector<ResourceRequest>> r = ParseResourceArgs({"jobs,nodes"}, "gpuctl get");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].type->plural, "jobs");
  EXPECT_EQ((*r)[1].type->plural, "nodes");
  r = ParseResourceArgs({"job/a", "node/n1", "jobs/b"}, "gpuctl get");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*r)[1].names, (std::vector<std::string>{"n1"}));
  r = ParseResourceArgs({"Job.gpucloud", "a", "b"}, "gpuctl get");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ParseResourceArgs({"jbos"}, "gpuctl get").status().message(),
            "unknown resource type \"jbos\" for \"gpuctl get\"; did you mean \"jobs\"?");
  EXPECT_EQ(ParseResourceArgs({"widgets"}, "gpuctl get").status().message(),
            "unknown resource type \"widgets\" for \"gpuctl get\"");
  EXPECT_FALSE(ParseResourceArgs({"jobs,nodes", "a"}, "gpuctl get").ok());
  EXPECT_FALSE(ParseResourceArgs({"job/a", "b"}, "gpuctl get").ok());
  EXPECT_FALSE(ParseResourceArgs({"job/"}, "gpuctl get").ok());
  // A type known elsewhere (users) as TYPE/NAME: how to name it, not "did you mean users".
  const std::vector<std::string> iam = {"users", "tokens"};
  EXPECT_EQ(ParseResourceArgs({"users/alice"}, "gpuctl get", iam).status().message(),
            "gpuctl get: users are named after the type alone (gpuctl get users [NAME...])");
  EXPECT_EQ(ParseResourceArgs({"usres/alice"}, "gpuctl get", iam).status().message(),
            "unknown resource type \"usres\" for \"gpuctl get\"; did you mean \"users\"?");
}

TEST(Resources, Suggestions) {
  std::vector<std::string> commands = {"apply", "get", "describe", "delete", "logs"};
  EXPECT_EQ(Suggest("gett", commands), "get");
  EXPECT_EQ(Suggest("delet", commands), "delete");
  EXPECT_EQ(Suggest("desc", commands), "describe");  // a prefix
  EXPECT_EQ(Suggest("frobnicate", commands), "");
}

TEST(LogsTarget, KubernetesQueryNames) {
  LogsOptions o{.job = "j", .ns = "team-a"};
  EXPECT_EQ(*LogsTarget(o), "/apis/gpucloud/v1/namespaces/team-a/jobs/j/logs?rank=0");
  o.rank = 2;
  o.tail = 10;
  o.since = "1m30s";
  o.timestamps = o.previous = true;
  EXPECT_EQ(*LogsTarget(o),
            "/apis/gpucloud/v1/namespaces/team-a/jobs/j/logs?rank=2&tailLines=10&sinceSeconds=90"
            "&timestamps=true&previous=true");
  o.since = "soon";
  EXPECT_EQ(LogsTarget(o).status().message(),
            "--since \"soon\" is not a positive duration (like 30s, 5m or 2h)");
}

}  // namespace
}  // namespace gpucloud::cli

namespace gpucloud::cli {
namespace {

// After an Xid 79 the node object says the GPU is unhealthy: top counts it out, not free.
TEST(CountGpus, UnhealthyAndAtRiskGpusAreNotFree) {
  Json node = Json::parse(R"({"status": {"gpus": [
    {"index": 0, "healthy": true}, {"index": 1, "healthy": false, "reason": "Xid 79"},
    {"index": 2, "healthy": true, "atRisk": true}, {"index": 3}]}})");
  GpuCounts c = CountGpus(node, {0});
  EXPECT_EQ(c.total, 4);
  EXPECT_EQ(c.used, 1);
  EXPECT_EQ(c.out, 2);
  EXPECT_EQ(c.free, 1);
  EXPECT_EQ(CountGpus(Json::object(), {}).total, 0);
}

TEST(HumanTimes, AsKubectlPrintsAges) {
  EXPECT_EQ(HumanDuration(45), "45s");
  EXPECT_EQ(HumanDuration(330), "5m30s");
  EXPECT_EQ(HumanDuration(300), "5m");
  EXPECT_EQ(HumanDuration(15 * 60 + 7), "15m");
  EXPECT_EQ(HumanDuration(2 * 3600 + 3 * 60), "2h3m");
  EXPECT_EQ(HumanDuration(3 * 86400 + 4 * 3600 + 59), "3d4h");
  EXPECT_EQ(HumanAge(1'000'000, 1'000'000 + 300'000), "5m ago");
  EXPECT_EQ(HumanAge(0, 1'000'000), "-");
}

// A jobs list with `job` placed on `node` (Running), or an empty one.
std::string JobsOn(const std::string& node) {
  if (node.empty()) return R"({"items": []})";
  return R"({"items": [{"metadata": {"namespace": "default", "name": "j"}, "status": {"phase":
      "Running", "placement": [{"node": ")" +
         node + R"(", "gpus": [{"index": 0}]}]}}]})";
}

TEST(WaitForDrain, ReturnsOnceTheNodesJobsHaveMoved) {
  FakeClock clock(1'000'000);
  std::vector<std::string> answers = {JobsOn("n1"), JobsOn("n1"), JobsOn("n2")};
  size_t calls = 0;
  CallFn call = [&](std::string_view method, const std::string& target, const std::string&) {
    EXPECT_EQ(method, "GET");
    EXPECT_EQ(target, "/apis/gpucloud/v1/jobs");
    return absl::StatusOr<api::HttpResponse>(api::HttpResponse{200, answers[calls++]});
  };
  auto sleep = [&](absl::Duration d) { clock.Advance(absl::ToInt64Milliseconds(d)); };
  std::ostringstream out, err;
  EXPECT_EQ(WaitForDrain(call, "n1", absl::Seconds(60), clock, sleep, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "node n1 drained\n");
  EXPECT_EQ(calls, 3u);
  EXPECT_EQ(clock.NowMillis(), 1'002'000);  // two polls a second apart
}

TEST(WaitForDrain, GivesUpAtTheTimeoutNamingTheJobs) {
  FakeClock clock(0);
  int calls = 0;
  CallFn call = [&](std::string_view, const std::string&, const std::string&) {
    ++calls;
    return absl::StatusOr<api::HttpResponse>(api::HttpResponse{200, JobsOn("n1")});
  };
  auto sleep = [&](absl::Duration d) { clock.Advance(absl::ToInt64Milliseconds(d)); };
  std::ostringstream out, err;
  EXPECT_EQ(WaitForDrain(call, "n1", absl::Seconds(3), clock, sleep, out, err), 1);
  EXPECT_EQ(err.str(), "gpuctl drain: node n1 still runs default/j after 3s\n");
  EXPECT_EQ(calls, 4);  // at 0, 1, 2 and 3 s
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace gpucloud::cli
