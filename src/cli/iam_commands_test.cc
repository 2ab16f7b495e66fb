#include "cli/iam_commands.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/gpuctl.h"
#include "core/policy.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

using nlohmann::json;

std::string Src(const std::string& rel) { return std::string(GPUCLOUD_SOURCE_DIR) + "/" + rel; }

// A server that answers from a script, in order, and keeps what it was asked.
struct FakeServer {
  struct Sent {
    std::string method, target, body;
  };
  std::deque<api::HttpResponse> answers;
  std::vector<Sent> sent;
  CallFn Call() {
    return [this](std::string_view method, const std::string& target,
                  const std::string& body) -> absl::StatusOr<api::HttpResponse> {
      sent.push_back({std::string(method), target, body});
      if (answers.empty()) return absl::UnavailableError("no answer scripted");
      api::HttpResponse r = answers.front();
      answers.pop_front();
      return r;
    };
  }
};

struct Ran {
  int code;
  std::string out, err;
};

// Parses `args` with only IamCommands declared and runs them against `server`.
Ran RunIam(std::vector<std::string> args, FakeServer& server) {
  CLI::App app{"test", "gpuctl"};
  app.require_subcommand(1);
  IamCommands iam(app);
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return {kExitUsage, "", e.what()};
  }
  EXPECT_TRUE(iam.parsed());
  std::ostringstream out, err;
  int code = iam.Run([&]() -> std::optional<CallFn> { return server.Call(); }, out, err);
  return {code, out.str(), err.str()};
}

Ran Gpuctl(std::vector<std::string> args) {
  args.insert(args.begin(), "gpuctl");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::istringstream in;
  std::ostringstream out, err;
  int code = RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
  return {code, out.str(), err.str()};
}

TEST(MapVerbAndResource, KubectlWordsToActionsAndResources) {
  struct Case {
    CanIRequest in;
    std::string action, resource;
  };
  const std::vector<Case> cases = {
      {{"create", "jobs", "", "team-a"}, "jobs:Create", "gpucloud:job/team-a/*"},
      {{"get", "job", "train", "team-a"}, "jobs:Get", "gpucloud:job/team-a/train"},
      {{"list", "jobs", "", ""}, "jobs:List", "gpucloud:job/default/*"},
      {{"logs", "jobs", "train", "ml"}, "jobs:Logs", "gpucloud:job/ml/train"},
      {{"cancel", "jobs", "x", "ml"}, "jobs:Cancel", "gpucloud:job/ml/x"},
      {{"drain", "nodes", "gpu-01", "team-a"}, "nodes:Drain", "gpucloud:node/gpu-01"},
      {{"get-assignments", "node", "n1", ""}, "nodes:GetAssignments", "gpucloud:node/n1"},
      {{"update", "queues", "", ""}, "queues:Update", "gpucloud:queue/*"},
      {{"reclaim", "nodepools", "spot", ""}, "nodepools:Reclaim", "gpucloud:nodepool/spot"},
      {{"revoke", "tokens", "laptop", ""}, "tokens:Revoke", "gpucloud:token/laptop"},
      {{"attach", "policies", "", ""}, "policies:Attach", "gpucloud:policy/*"},
      {{"create", "serviceaccounts", "ci", "team-a"},
       "serviceaccounts:Create",
       "gpucloud:serviceaccount/team-a/ci"},
      {{"read", "audit", "", ""}, "audit:Read", "gpucloud:audit/default"},
      {{"GetSummary", "cluster", "", ""}, "cluster:GetSummary", "gpucloud:cluster/default"},
      {{"CREATE", "Jobs", "", "t"}, "jobs:Create", "gpucloud:job/t/*"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ActionAndResource> got = MapVerbAndResource(c.in);
    ASSERT_TRUE(got.ok()) << c.in.verb << " " << c.in.resource << ": " << got.status();
    EXPECT_EQ(got->action, c.action) << c.in.verb << " " << c.in.resource;
    EXPECT_EQ(got->resource, c.resource) << c.in.verb << " " << c.in.resource;
  }
}

// Every action of the catalog is reachable as `can-i VERB RESOURCE`.
TEST(MapVerbAndResource, EveryActionHasItsWords) {
  for (std::string_view action : PolicyActions()) {
    size_t colon = action.find(':');
    CanIRequest r{ToLower(action.substr(colon + 1)), std::string(action.substr(0, colon)), "", ""};
    absl::StatusOr<ActionAndResource> got = MapVerbAndResource(r);
    ASSERT_TRUE(got.ok()) << action << ": " << got.status();
    EXPECT_EQ(got->action, action);
    EXPECT_TRUE(ValidateResourcePattern(got->resource).ok()) << got->resource;
  }
}

TEST(MapVerbAndResource, UnknownWordsAreErrorsThatSayWhatIsKnown) {
  absl::StatusOr<ActionAndResource> verb = MapVerbAndResource({"frobnicate", "nodes", "", ""});
  ASSERT_TRUE(absl::IsInvalidArgument(verb.status()));
  EXPECT_NE(verb.status().message().find("no action for \"frobnicate nodes\""), std::string::npos);
  EXPECT_NE(verb.status().message().find("drain"), std::string::npos) << verb.status();
  absl::StatusOr<ActionAndResource> res = MapVerbAndResource({"get", "widgets", "", ""});
  ASSERT_TRUE(absl::IsInvalidArgument(res.status()));
  EXPECT_NE(res.status().message().find("unknown resource \"widgets\""), std::string::npos);
  EXPECT_FALSE(MapVerbAndResource({"", "jobs", "", ""}).ok());
  EXPECT_FALSE(MapVerbAndResource({"jobs:create", "jobs", "", ""}).ok());
}

TEST(IamPure, Ttl) {
  for (const char* ok : {"90m", "12h", "30d", "1d", "365d"})
    EXPECT_TRUE(ValidateTtl(ok).ok()) << ok;
  for (const char* bad : {"", "30", "0d", "3w", "-1d", "1.5h", "d", "30D", "99999999d"}) {
    EXPECT_FALSE(ValidateTtl(bad).ok()) << bad;
  }
}

TEST(IamPure, RequestBodies) {
  EXPECT_EQ(UserBody("alice", {"ml-team"}, {"ml-gpus"}, "team-a"),
            json::parse(R"({"apiVersion":"gpucloud/v1","kind":"User","metadata":{"name":"alice"},
                 "spec":{"groups":["ml-team"],"policies":["ml-gpus"],"namespace":"team-a"}})"));
  EXPECT_EQ(UserBody("bob", {}, {}, ""),
            json::parse(R"({"apiVersion":"gpucloud/v1","kind":"User","metadata":{"name":"bob"},
                 "spec":{"groups":[],"policies":[]}})"));
  EXPECT_EQ(GroupBody("ml-team", {"p1"}), json::parse(R"({"apiVersion":"gpucloud/v1","kind":"Group",
                 "metadata":{"name":"ml-team"},"spec":{"policies":["p1"]}})"));
  EXPECT_EQ(TokenRequestBody("user", "alice", "30d", "laptop"),
            json::parse(R"({"user":"alice","ttl":"30d","name":"laptop"})"));
  EXPECT_EQ(TokenRequestBody("serviceAccount", "team-a/ci", "12h", ""),
            json::parse(R"({"serviceAccount":"team-a/ci","ttl":"12h"})"));
}

TEST(IamPure, NewTokenIsShownOnceWithAWarning) {
  absl::StatusOr<std::string> text = FormatNewToken(json::parse(
      R"({"kind":"Token","metadata":{"name":"laptop"},"spec":{"user":"alice",
          "expiresAt":"2027-01-01T00:00:00Z"},"status":{"token":"s3cr3t"}})"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "token laptop created for user alice, expires 2027-01-01T00:00:00Z:\ns3cr3t\n"
            "Keep it now: the token is not shown again (the server keeps only its hash).\n");
  EXPECT_FALSE(FormatNewToken(json::parse(R"({"kind":"Token","status":{}})")).ok());
  EXPECT_FALSE(FormatNewToken(json::parse(R"({"status":{"token":7}})")).ok());
}

TEST(IamPure, ChangePolicies) {
  json user = json::parse(R"({"metadata":{"name":"a"},"spec":{"policies":["p1"]}})");
  EXPECT_FALSE(ChangePolicies(user, "p1", true));
  EXPECT_TRUE(ChangePolicies(user, "p2", true));
  EXPECT_EQ(user["spec"]["policies"], json::parse(R"(["p1","p2"])"));
  EXPECT_TRUE(ChangePolicies(user, "p1", false));
  EXPECT_FALSE(ChangePolicies(user, "p1", false));
  EXPECT_EQ(user["spec"]["policies"], json::parse(R"(["p2"])"));
  json bare = json::parse(R"({"metadata":{"name":"g"}})");
  EXPECT_TRUE(ChangePolicies(bare, "p", true));
  EXPECT_EQ(bare["spec"]["policies"], json::parse(R"(["p"])"));
}

TEST(IamPure, Tables) {
  std::ostringstream users;
  PrintIamTable("users",
                {json::parse(R"({"metadata":{"name":"alice"},"spec":{"groups":["ml","ops"],
                     "policies":["p"],"namespace":"team-a"}})"),
                 json::parse(R"({"metadata":{"name":"bob"},"spec":{}})")},
                users);
  EXPECT_EQ(
      users.str(),
      "NAME                     GROUPS                   POLICIES                         "
      "NAMESPACE\n"
      "alice                    ml,ops                   p                                "
      "team-a\n"
      "bob                      -                        -                                -\n");
  std::ostringstream tokens;
  PrintIamTable("token",
                {json::parse(R"({"metadata":{"name":"laptop"},"spec":{"user":"alice",
                     "expiresAt":"2027-01-01T00:00:00Z"}})"),
                 json::parse(R"({"metadata":{"name":"ci"},"spec":{"serviceAccount":"team-a/ci",
                     "expiresAt":"2026-12-02T00:00:00Z"}})")},
                tokens);
  EXPECT_EQ(tokens.str(),
            "NAME                     FOR                              EXPIRES\n"
            "laptop                   user alice                       2027-01-01T00:00:00Z\n"
            "ci                       serviceaccount team-a/ci         2026-12-02T00:00:00Z\n");
  std::ostringstream policies;
  PrintIamTable("policies",
                {json::parse(R"({"metadata":{"name":"ml-gpus"},"spec":{"Version":"2012-10-17",
                     "Statement":[{"Sid":"A","Effect":"Allow"},{"Effect":"Deny"}]}})")},
                policies);
  EXPECT_EQ(policies.str(),
            "NAME                             STATEMENTS  SIDS\n"
            "ml-gpus                                   2  A\n");
  EXPECT_TRUE(IsIamResource("policy"));
  EXPECT_TRUE(IsIamResource("groups"));
  EXPECT_FALSE(IsIamResource("jobs"));
}

TEST(IamPure, DecisionLines) {
  EXPECT_EQ(DecisionLine(false, "ml-gpus", "DenyBigGpus", 0),
            "denied by policy ml-gpus, statement 0 (Sid DenyBigGpus)");
  EXPECT_EQ(DecisionLine(true, "team", "", 2), "allowed by policy team, statement 2");
  EXPECT_EQ(DecisionLine(false, "", "", -1), "denied: no statement allows it (implicit deny)");
}

TEST(IamCommands, CreateUserAndGroupPost) {
  FakeServer s;
  s.answers = {{201, "{}"}, {201, "{}"}};
  Ran u = RunIam({"create", "user", "alice", "--group", "ml-team", "--group", "ops", "--policy",
                  "ml-gpus", "-n", "team-a"},
                 s);
  ASSERT_EQ(u.code, 0) << u.err;
  EXPECT_EQ(u.out, "user alice created\n");
  ASSERT_EQ(s.sent.size(), 1u);
  EXPECT_EQ(s.sent[0].method, "POST");
  EXPECT_EQ(s.sent[0].target, "/apis/gpucloud/v1/users");
  EXPECT_EQ(json::parse(s.sent[0].body),
            UserBody("alice", {"ml-team", "ops"}, {"ml-gpus"}, "team-a"));
  Ran g = RunIam({"create", "group", "ml-team", "--policy", "p1"}, s);
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out, "group ml-team created\n");
  EXPECT_EQ(s.sent[1].target, "/apis/gpucloud/v1/groups");
  EXPECT_EQ(json::parse(s.sent[1].body), GroupBody("ml-team", {"p1"}));
}

TEST(IamCommands, CreatePolicyChecksTheFileFirst) {
  FakeServer s;
  s.answers = {{201, "{}"}, {201, "{}"}};
  Ran r =
      RunIam({"create", "policy", "-f", Src("examples/policies/gpu-types-ml-platform.yaml")}, s);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "policy h100-a100-ml-platform-only created\n");
  ASSERT_EQ(s.sent.size(), 1u);
  EXPECT_EQ(s.sent[0].method + " " + s.sent[0].target, "POST /apis/gpucloud/v1/policies");
  json body = json::parse(s.sent[0].body);
  EXPECT_EQ(body["kind"], "Policy");
  EXPECT_EQ(body["metadata"]["name"], "h100-a100-ml-platform-only");
  EXPECT_EQ(body["spec"]["Statement"][0]["Sid"], "OnlyMlPlatformOnH100OrA100");

  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpuctl-create-policy-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "bare.json")
      << R"({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "jobs:Get",
             "Resource": "*"}]})";
  std::ofstream(dir / "bad.yaml") << "Version: \"2012-10-17\"\nStatement:\n- Effect: Maybe\n"
                                     "  Action: jobs:Get\n  Resource: \"*\"\n";
  const std::string bare = (dir / "bare.json").string(), bad = (dir / "bad.yaml").string();
  Ran unnamed = RunIam({"create", "policy", "-f", bare}, s);
  EXPECT_EQ(unnamed.code, 1);
  EXPECT_NE(unnamed.err.find("give it a --name"), std::string::npos) << unnamed.err;
  Ran invalid = RunIam({"create", "policy", "-f", bad, "--name", "p"}, s);
  EXPECT_EQ(invalid.code, 1);
  EXPECT_NE(invalid.err.find(bad + ":3:"), std::string::npos) << invalid.err;  // line:column
  EXPECT_EQ(RunIam({"create", "policy", "-f", bare, "--name", "Not/A/Label"}, s).code, 1);
  EXPECT_EQ(s.sent.size(), 1u);  // none of those was sent
  Ran named = RunIam({"create", "policy", "-f", bare, "--name", "read-jobs"}, s);
  ASSERT_EQ(named.code, 0) << named.err;
  EXPECT_EQ(json::parse(s.sent[1].body)["metadata"]["name"], "read-jobs");
  std::filesystem::remove_all(dir);
}

TEST(IamCommands, ServerErrorsPrintTheStatusMessage) {
  FakeServer s;
  s.answers = {{409, R"({"kind":"Status","message":"user alice already exists","code":409})"}};
  Ran r = RunIam({"create", "user", "alice"}, s);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "gpuctl: user alice: user alice already exists\n");
  Ran down = RunIam({"whoami"}, s);  // nothing scripted: the fake is "unreachable"
  EXPECT_EQ(down.code, 1);
  EXPECT_EQ(down.err, "gpuctl: no answer scripted\n");
}

TEST(IamCommands, CreateTokenPrintsTheSecretOnce) {
  FakeServer s;
  const std::string answer =
      R"({"kind":"Token","metadata":{"name":"laptop"},"spec":{"user":"alice",
          "expiresAt":"2027-01-01T00:00:00Z"},"status":{"token":"s3cr3t"}})";
  s.answers = {{201, answer}, {201, answer}};
  Ran r = RunIam({"create", "token", "--user", "alice", "--name", "laptop"}, s);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(s.sent[0].target, "/apis/gpucloud/v1/tokens");
  EXPECT_EQ(json::parse(s.sent[0].body), TokenRequestBody("user", "alice", "30d", "laptop"));
  EXPECT_NE(r.out.find("\ns3cr3t\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not shown again"), std::string::npos) << r.out;
  Ran j = RunIam(
      {"create", "token", "--service-account", "team-a/ci", "--ttl", "12h", "-o", "json"}, s);
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(json::parse(s.sent[1].body),
            TokenRequestBody("serviceAccount", "team-a/ci", "12h", ""));
  EXPECT_EQ(json::parse(j.out)["status"]["token"], "s3cr3t");
  EXPECT_NE(j.err.find("not shown again"), std::string::npos) << j.err;
}

TEST(IamCommands, BadTokenFlagsAreUsageErrorsAndSendNothing) {
  FakeServer s;
  EXPECT_EQ(RunIam({"create", "token"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"create", "token", "--user", "a", "--ttl", "3w"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"create", "token", "--service-account", "no-slash"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"create", "token", "--service-account", "a/b/c"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"create", "token", "--user", "a", "--service-account", "n/b"}, s).code,
            kExitUsage);
  EXPECT_EQ(RunIam({"create", "user", "Alice/x"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"revoke", "token", "../x"}, s).code, kExitUsage);
  EXPECT_TRUE(s.sent.empty());
}

TEST(IamCommands, RevokeAndWhoami) {
  FakeServer s;
  s.answers = {{200, "{}"}, {200, R"({"user":"alice","type":"user","groups":["ml-team","ops"],
                        "namespace":"team-a","policies":["builtin-tenant"],"token":"laptop"})"}};
  Ran r = RunIam({"revoke", "token", "laptop"}, s);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "token laptop revoked\n");
  EXPECT_EQ(s.sent[0].method, "DELETE");
  EXPECT_EQ(s.sent[0].target, "/apis/gpucloud/v1/tokens/laptop");
  Ran w = RunIam({"whoami"}, s);
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(s.sent[1].target, "/apis/gpucloud/v1/whoami");
  EXPECT_EQ(w.out,
            "user: alice\ntype: user\ngroups: ml-team, ops\nnamespace: team-a\n"
            "policies: builtin-tenant\ntoken: laptop\n");
}

TEST(IamCommands, AttachIsACompareAndSwapRedoneOnConflict) {
  FakeServer s;
  s.answers = {
      {200, R"({"metadata":{"name":"alice","resourceVersion":"7"},"spec":{"policies":["a"]}})"},
      {409, R"({"message":"conflict"})"},
      {200, R"({"metadata":{"name":"alice","resourceVersion":"9"},"spec":{"policies":["a","b"]}})"},
      {200, "{}"}};
  Ran r = RunIam({"attach", "policy", "ml-gpus", "--user", "alice"}, s);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "policy ml-gpus attached to user alice\n");
  ASSERT_EQ(s.sent.size(), 4u);
  for (int i : {0, 2})
    EXPECT_EQ(s.sent[i].method + " " + s.sent[i].target, "GET /apis/gpucloud/v1/users/alice");
  EXPECT_EQ(s.sent[3].method, "PUT");
  json put = json::parse(s.sent[3].body);
  EXPECT_EQ(put["metadata"]["resourceVersion"], "9");  // the version read last
  EXPECT_EQ(put["spec"]["policies"], json::parse(R"(["a","b","ml-gpus"])"));  // b kept
}

TEST(IamCommands, AttachAndDetachNoOpsAndGivingUp) {
  FakeServer s;
  s.answers = {{200, R"({"metadata":{"name":"g","resourceVersion":"1"},"spec":{"policies":[]}})"}};
  Ran none = RunIam({"detach", "policy", "p", "--group", "g"}, s);
  EXPECT_EQ(none.code, 0);
  EXPECT_EQ(none.out, "policy p is not attached to group g\n");
  EXPECT_EQ(s.sent.size(), 1u);  // no PUT
  s.sent.clear();
  for (int i = 0; i < 5; ++i) {
    s.answers.push_back(
        {200, R"({"metadata":{"name":"g","resourceVersion":"1"},"spec":{"policies":["p"]}})"});
    s.answers.push_back({409, R"({"message":"conflict"})"});
  }
  Ran busy = RunIam({"detach", "policy", "p", "--group", "g"}, s);
  EXPECT_EQ(busy.code, 1);
  EXPECT_NE(busy.err.find("kept changing"), std::string::npos) << busy.err;
  EXPECT_EQ(s.sent.size(), 10u);
  EXPECT_EQ(json::parse(s.sent[1].body)["spec"]["policies"], json::array());
  EXPECT_EQ(RunIam({"attach", "policy", "p"}, s).code, kExitUsage);  // neither --user nor --group
  EXPECT_EQ(RunIam({"attach", "policy", "a/b", "--user", "u"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"attach", "policy", "gpucloud:a/b", "--user", "u"}, s).code, kExitUsage);
  // A built-in policy's name is not a DNS label, and may be attached.
  s.sent.clear();
  s.answers = {{200, R"({"metadata":{"name":"u","resourceVersion":"3"},"spec":{}})"}, {200, "{}"}};
  Ran builtin = RunIam({"attach", "policy", "gpucloud:tenant", "--user", "u"}, s);
  EXPECT_EQ(builtin.code, 0) << builtin.err;
  ASSERT_EQ(s.sent.size(), 2u);
  EXPECT_EQ(json::parse(s.sent[1].body)["spec"]["policies"], json::parse(R"(["gpucloud:tenant"])"));
}

TEST(IamCommands, CanIAsksAuthorizeAndExitsLikeKubectl) {
  FakeServer s;
  s.answers = {{200, R"({"allowed":false,"effect":"ExplicitDeny","policy":"ml-gpus",
                         "sid":"DenyBigGpus","statementIndex":0,"reason":"..."})"},
               {200, R"({"allowed":true,"effect":"Allow","policy":"builtin-tenant",
                         "sid":"OwnNamespaceJobs","statementIndex":0})"},
               {200, R"({"allowed":false,"effect":"ImplicitDeny","statementIndex":-1})"}};
  Ran no = RunIam({"auth", "can-i", "create", "jobs", "-n", "team-a", "--gpu-type", "h100",
                   "--gpus", "8", "--as", "alice"},
                  s);
  EXPECT_EQ(no.code, 1) << no.err;
  EXPECT_EQ(no.out, "no\ndenied by policy ml-gpus, statement 0 (Sid DenyBigGpus)\n");
  EXPECT_EQ(s.sent[0].method + " " + s.sent[0].target, "POST /apis/gpucloud/v1/authorize");
  EXPECT_EQ(json::parse(s.sent[0].body), json::parse(R"({"user":"alice","action":"jobs:Create",
                 "resource":"gpucloud:job/team-a/*","context":{"gpucloud:GpuType":"H100-80GB",
                 "gpucloud:GpuCount":"8"}})"));
  Ran yes = RunIam({"auth", "can-i", "get", "jobs", "train", "--queue", "q"}, s);
  EXPECT_EQ(yes.code, 0) << yes.err;
  EXPECT_EQ(yes.out, "yes\nallowed by policy builtin-tenant, statement 0 (Sid OwnNamespaceJobs)\n");
  EXPECT_EQ(json::parse(s.sent[1].body),
            json::parse(R"({"action":"jobs:Get","resource":"gpucloud:job/default/train",
                 "context":{"gpucloud:Queue":"q"}})"));
  Ran implicit = RunIam({"auth", "can-i", "drain", "nodes"}, s);
  EXPECT_EQ(implicit.code, 1);
  EXPECT_EQ(implicit.out, "no\ndenied: no statement allows it (implicit deny)\n");
}

TEST(IamCommands, CanIBadWordsAreUsageErrors) {
  FakeServer s;
  EXPECT_EQ(RunIam({"auth", "can-i", "fly", "jobs"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"auth", "can-i", "create", "widgets"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"auth", "can-i", "create", "jobs", "--gpu-type", "tpu"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"auth", "can-i", "create", "jobs", "--gpus", "many"}, s).code, kExitUsage);
  EXPECT_EQ(RunIam({"auth", "can-i", "create"}, s).code, kExitUsage);
  EXPECT_TRUE(s.sent.empty());
}

TEST(IamCommands, GetUsersTableAndJson) {
  FakeServer s;
  const std::string list =
      R"({"kind":"UserList","items":[{"metadata":{"name":"alice"},"spec":{"groups":["ml"]}}]})";
  s.answers = {{200, list}, {200, list}, {404, R"({"message":"user bob not found"})"}};
  std::ostringstream out, err;
  EXPECT_EQ(GetIamObjects(s.Call(), "users", "", "table", out, err), 0) << err.str();
  EXPECT_EQ(s.sent[0].target, "/apis/gpucloud/v1/users");
  EXPECT_NE(out.str().find("\nalice                    ml  "), std::string::npos) << out.str();
  std::ostringstream json_out;
  EXPECT_EQ(GetIamObjects(s.Call(), "user", "alice", "json", json_out, err), 0);
  EXPECT_EQ(s.sent[1].target, "/apis/gpucloud/v1/users/alice");
  EXPECT_EQ(json::parse(json_out.str()), json::parse(list));
  std::ostringstream missing, missing_err;
  EXPECT_EQ(GetIamObjects(s.Call(), "users", "bob", "table", missing, missing_err), 1);
  EXPECT_EQ(missing_err.str(), "gpuctl: user bob not found\n");
}

TEST(PolicySimulate, TheSourceDocumentsPolicyAgainstTheTenantPolicy) {
  const std::vector<std::string> files = {Src("examples/policies/builtin-tenant.yaml"),
                                          Src("examples/policies/gpu-types-ml-platform.yaml")};
  SimulateOptions o{.policy_files = files,
                    .action = "jobs:Create",
                    .resource = "gpucloud:job/team-a/*",
                    .user = "alice",
                    .context = {"gpucloud:GpuType=H100-80GB", "gpucloud:PrincipalNamespace=team-a"},
                    .groups = {"ml-team"}};
  std::ostringstream out, err;
  EXPECT_EQ(SimulatePolicies(o, out, err), 1) << err.str();
  EXPECT_EQ(out.str(),
            "ExplicitDeny\ndenied by policy h100-a100-ml-platform-only, statement 0 (Sid "
            "OnlyMlPlatformOnH100OrA100)\n");
  o.groups = {"ml-team", "ml-platform"};
  std::ostringstream allowed;
  EXPECT_EQ(SimulatePolicies(o, allowed, err), 0) << err.str();
  EXPECT_EQ(allowed.str(),
            "Allow\nallowed by policy builtin-tenant, statement 0 (Sid OwnNamespaceJobs)\n");
  o.groups = {"ml-team"};
  o.context = {"gpucloud:GpuType=L4", "gpucloud:PrincipalNamespace=team-b"};
  std::ostringstream implicit;
  EXPECT_EQ(SimulatePolicies(o, implicit, err), 1);
  EXPECT_EQ(implicit.str(), "ImplicitDeny\ndenied: no statement allows it (implicit deny)\n");
}

TEST(PolicySimulate, BadInput) {
  std::filesystem::path bad =
      std::filesystem::temp_directory_path() / ("gpuctl-bad-policy-" + std::to_string(getpid()));
  std::ofstream(bad) << "apiVersion: gpucloud/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n"
                        "  Version: \"2012-10-17\"\n  Statement:\n  - Effect: Allow\n"
                        "    Action: jobs:Fly\n    Resource: \"*\"\n";
  SimulateOptions o{.policy_files = {bad.string()}, .action = "jobs:Create", .resource = "*"};
  std::ostringstream out, err;
  EXPECT_EQ(SimulatePolicies(o, out, err), 1);
  EXPECT_NE(err.str().find(bad.string() + ":8:"), std::string::npos) << err.str();  // line:col
  EXPECT_NE(err.str().find("jobs:Fly"), std::string::npos) << err.str();
  EXPECT_EQ(out.str(), "");
  std::filesystem::remove(bad);
  o.policy_files = {Src("examples/policies/builtin-tenant.yaml")};
  o.action = "jobs:Fly";
  EXPECT_EQ(SimulatePolicies(o, out, err), kExitUsage);
  o.action = "jobs:Create";
  o.resource = "job/team-a";
  EXPECT_EQ(SimulatePolicies(o, out, err), kExitUsage);
  o.resource = "gpucloud:job/team-a/x";
  o.context = {"gpucloud:GpuCount=eight"};
  EXPECT_EQ(SimulatePolicies(o, out, err), kExitUsage);
  o.context = {"gpucloud:Colour=red"};
  EXPECT_EQ(SimulatePolicies(o, out, err), kExitUsage);
  o.context = {"no-equals-sign"};
  EXPECT_EQ(SimulatePolicies(o, out, err), kExitUsage);
  o.context = {};
  o.policy_files = {"/nonexistent/p.yaml"};
  EXPECT_EQ(SimulatePolicies(o, out, err), 1);
  EXPECT_NE(err.str().find("/nonexistent/p.yaml: cannot read"), std::string::npos) << err.str();
}

// The commands are wired into gpuctl itself.
TEST(GpuctlIam, WiredIntoGpuctl) {
  Ran sim = Gpuctl({"policy", "simulate", "--policy",
                    Src("examples/policies/gpu-types-ml-platform.yaml"), "--action", "jobs:Create",
                    "--resource", "gpucloud:job/a/b", "--context", "gpucloud:GpuType=A100-80GB"});
  EXPECT_EQ(sim.code, 1) << sim.err;
  EXPECT_TRUE(sim.out.starts_with("ExplicitDeny\n")) << sim.out;
  EXPECT_EQ(Gpuctl({"create", "token", "--user", "a", "--ttl", "soon"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"get", "users", "-w"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"auth", "can-i", "fly", "jobs"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"create", "widget", "x"}).code, kExitUsage);
}

}  // namespace
}  // namespace gpucloud::cli
