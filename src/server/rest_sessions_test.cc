// Where an exec or port-forward goes (RestApi::SessionTarget), who may open the agents' session
// WebSockets (RestApi::AgentSession), and interactive jobs through the controller.
#include <gtest/gtest.h>

#include "api/paths.h"
#include "api/session_wire.h"
#include "server/controller_fixture.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

class SessionsTest : public ControllerTest {
 protected:
  // GET `target` as `who`, its query parsed as the HTTPS front parses it.
  Response As(const Identity& who, const std::string& target) {
    Request r{"GET", "", {}, "", who};
    ParseTarget(target, &r);
    return api_->Handle(r);
  }
  Identity admin_{"root", "", true};
};

TEST_F(SessionsTest, AnExecOfARunningTaskNamesItsNodeAssignmentAndAttempt) {
  auto [node, other] = RunOnOneOfTwo("train", 1);
  Response r = As(admin_, api::ExecPath("default", "train", 0, {"nvidia-smi", "-L"}, true, true));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["node"], node);
  absl::StatusOr<api::SessionRequest> req = api::ParseSessionRequest(j["request"].dump());
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->kind, "exec");
  EXPECT_EQ(req->assignment, "default.train.0");
  EXPECT_EQ(req->attempt, 1);
  EXPECT_EQ(req->command, (std::vector<std::string>{"nvidia-smi", "-L"}));
  EXPECT_TRUE(req->tty);
  EXPECT_TRUE(req->stdin);
  EXPECT_EQ(req->user, "root");
  r = As(admin_, api::PortForwardPath("default", "train", 0, 8888));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["request"]["port"], 8888);
  r = As(admin_, api::AttachPath("default", "train", 0));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["request"]["kind"], "attach");
}

TEST_F(SessionsTest, BadRequestsAreRefusedNamingWhatIsWrong) {
  RunOnOneOfTwo("train", 1);
  const std::string exec = api::JobSubresourcePath("default", "train", "exec");
  const std::string forward = api::JobSubresourcePath("default", "train", "portforward");
  struct Case {
    std::string path;
    int status;
    const char* says;
  };
  const Case cases[] = {
      {exec, 400, "command: required"},
      {exec + "?command=%5B%5D", 400, "command: must be a JSON array"},
      {exec + "?command=ls", 400, "command: must be a JSON array"},
      {exec + "?command=%5B1%5D", 400, "every element is a string"},
      {exec + "?command=%5B%22%22%5D", 400, "program's name is empty"},
      {exec + "?command=%5B%22ls%22%5D&rank=x", 400, "rank"},
      {exec + "?command=%5B%22ls%22%5D&rank=-1", 400, "rank"},
      {exec + "?command=%5B%22ls%22%5D&rank=3", 404, "has no rank 3 (its ranks are 0 to 0)"},
      {exec + "?command=%5B%22ls%22%5D&shell=yes", 400, "shell"},
      {forward, 400, "port: required"},
      {forward + "?port=70000", 400, "port"},
      {api::AttachPath("default", "train", 0) + "&command=%5B%22ls%22%5D", 400, "command"},
      {api::AttachPath("default", "train", 5), 404, "has no rank 5"},
      {api::JobSubresourcePath("default", "nope", "exec") + "?command=%5B%22ls%22%5D", 404,
       "not found"},
  };
  for (const Case& c : cases) {
    Response r = As(admin_, c.path);
    EXPECT_EQ(r.status, c.status) << c.path << ": " << r.body;
    EXPECT_NE(r.body.find(c.says), std::string::npos) << c.path << ": " << r.body;
  }
}

TEST_F(SessionsTest, ATaskThatIsNotRunningHasNoSession) {
  Register("node-a", 1);
  Submit(GangJob("big", 1, 4));  // never fits: stays Pending
  Pass();
  Response r = As(admin_, api::ExecPath("default", "big", 0, {"ls"}, false, false));
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("is Pending: a session needs a running task"), std::string::npos);
}

TEST_F(SessionsTest, ATenantExecsOnlyIntoItsOwnNamespace) {
  RunOnOneOfTwo("train", 1);
  Identity other{"mallory", "team-m", false};
  Response r =
      As(other, api::ExecPath("default", "train", 0, {"cat", "/etc/shadow"}, false, false));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("jobs:Exec"), std::string::npos) << r.body;
  EXPECT_EQ(As(other, api::PortForwardPath("default", "train", 0, 22)).status, 403);
  Identity owner{"alice", "default", false};
  EXPECT_EQ(As(owner, api::ExecPath("default", "train", 0, {"ls"}, false, false)).status, 200);
}

TEST_F(SessionsTest, OnlyTheNodeItselfOpensItsSessionWebSockets) {
  Register("node-a", 1);
  Identity node_a{"node:node-a", "", false, true, "node-a"};
  Identity node_b{"node:node-b", "", false, true, "node-b"};
  EXPECT_EQ(As(node_a, api::TunnelPath("node-a")).status, 200);
  EXPECT_EQ(As(node_a, api::SessionPath("node-a", "0123abcd")).status, 200);
  EXPECT_EQ(As(node_b, api::TunnelPath("node-a")).status, 403);
  EXPECT_EQ(As(node_b, api::SessionPath("node-a", "0123abcd")).status, 403);
  // An admin is no agent: it may not stand in for one.
  EXPECT_EQ(As(admin_, api::TunnelPath("node-a")).status, 403);
  EXPECT_EQ(As(Identity{"alice", "default", false}, api::TunnelPath("node-a")).status, 403);
}

TEST_F(SessionsTest, AnInteractiveJobStopsWhenIdleAndIsNotRestartedWhenItsNodeIsLost) {
  Register("node-a", 2);
  Submit(GangJob("nb", 1, 1, 3, "  interactive: {idleTimeout: 30s, maxDuration: 2h}\n"));
  Pass();
  std::vector<store::KeyValue> assigned = Assignments("node-a");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(Json::parse(assigned[0].value)["idleTimeoutSeconds"], 30);
  api::TaskReport running = Report("nb", 0, api::TaskState::kRunning);
  Heartbeat("node-a", {running});
  Pass();
  ASSERT_EQ(Status("nb").phase, api::JobPhase::kRunning);
  running.idle_ms = 25'000;
  Heartbeat("node-a", {running});
  Pass();
  EXPECT_EQ(Status("nb").phase, api::JobPhase::kRunning);
  running.idle_ms = 30'000;
  Heartbeat("node-a", {running});
  Pass();
  JobStatus s = Status("nb");
  EXPECT_EQ(s.phase, api::JobPhase::kCancelling);
  EXPECT_EQ(s.reason, "IdleTimeout");
  std::vector<std::string> reasons = EventReasons("nb");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "IdleWarning"), reasons.end());
  EXPECT_TRUE(Assignments("node-a").empty());  // its task stops, its GPU goes

  Submit(GangJob("nb2", 1, 1, 3, "  interactive: {}\n"));
  Pass();
  Heartbeat("node-a", {Report("nb2", 0, api::TaskState::kRunning)});
  Pass();
  ASSERT_EQ(Status("nb2").phase, api::JobPhase::kRunning);
  clock_.Advance(5 * 60'000);  // node-a stops heartbeating
  Pass();
  clock_.Advance(60'000);
  Pass();
  s = Status("nb2");
  EXPECT_EQ(s.phase, api::JobPhase::kFailed) << s.message;
  EXPECT_EQ(s.reason, "NodeLost");
  EXPECT_NE(s.message.find("not restarted elsewhere"), std::string::npos) << s.message;
  EXPECT_EQ(s.attempt, 1);
}

}  // namespace
}  // namespace gpucloud::server
