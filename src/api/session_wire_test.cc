#include "api/session_wire.h"

#include <gtest/gtest.h>

#include "api/paths.h"

namespace gpucloud::api {
namespace {

TEST(SessionWire, ExecMessagesCarryTheirChannel) {
  std::string m = ExecMessage(ExecChannel::kStderr, std::string("a\0b", 3));
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0], 2);
  EXPECT_EQ(m.substr(1), std::string("a\0b", 3));
  EXPECT_EQ(ExecMessage(ExecChannel::kStdin, ""), std::string(1, '\0'));
}

TEST(SessionWire, ExecStatusRoundTrips) {
  ExecStatus s{137, 9, ""};
  absl::StatusOr<ExecStatus> back = ParseExecStatus(ExecStatusJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->exit_code, 137);
  EXPECT_EQ(back->signal, 9);
  ExecStatus failed{127, 0, "command not found: x"};
  back = ParseExecStatus(ExecStatusJson(failed));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->error, "command not found: x");
  EXPECT_FALSE(ParseExecStatus("{}").ok());
  EXPECT_FALSE(ParseExecStatus("not json").ok());
}

TEST(SessionWire, TerminalSizesOutOfRangeOrGarbageAreRefused) {
  absl::StatusOr<TerminalSize> ok = ParseTerminalSize(TerminalSizeJson({132, 50}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->width, 132);
  EXPECT_EQ(ok->height, 50);
  for (const char* bad : {"{\"width\":0,\"height\":10}", "{\"width\":70000,\"height\":10}",
                          "{\"width\":-1,\"height\":10}", "{\"width\":\"80\",\"height\":24}",
                          "{\"width\":80}", "\x1b[8;50;132t", "[]", ""}) {
    absl::StatusOr<TerminalSize> s = ParseTerminalSize(bad);
    EXPECT_FALSE(s.ok()) << bad;
  }
  EXPECT_NE(ParseTerminalSize("{\"width\":0,\"height\":1}").status().message().find("width"),
            std::string::npos);
}

TEST(SessionWire, ForwardFramesRoundTripAndShortOrUnknownOnesAreNone) {
  std::string m = EncodeForward(ForwardFrame::kData, 0x01020304, "payload");
  std::optional<ForwardMessage> d = DecodeForward(m);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->type, ForwardFrame::kData);
  EXPECT_EQ(d->connection, 0x01020304u);
  EXPECT_EQ(d->payload, "payload");
  d = DecodeForward(EncodeForward(ForwardFrame::kOpen, 0xffffffff));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->connection, 0xffffffffu);
  EXPECT_TRUE(d->payload.empty());
  EXPECT_FALSE(DecodeForward("").has_value());
  EXPECT_FALSE(DecodeForward(std::string("\x02\x00\x00\x01", 4)).has_value());
  EXPECT_FALSE(DecodeForward(std::string("\x09\x00\x00\x00\x01", 5)).has_value());
  EXPECT_FALSE(DecodeForward(std::string("\x00\x00\x00\x00\x01", 5)).has_value());
}

TEST(SessionWire, SessionRequestsRoundTripAndBadOnesNameTheField) {
  SessionRequest r;
  r.id = "abc";
  r.kind = "exec";
  r.assignment = "team-a.train.0";
  r.attempt = 2;
  r.command = {"sh", "-c", "echo \"hi\""};
  r.tty = true;
  r.stdin = true;
  r.user = "alice";
  absl::StatusOr<SessionRequest> back = ParseSessionRequest(SessionRequestJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->command, r.command);
  EXPECT_TRUE(back->tty);
  EXPECT_TRUE(back->stdin);
  EXPECT_EQ(back->attempt, 2);
  EXPECT_EQ(back->user, "alice");
  SessionRequest f{"id", "portforward", "a.b.0", 1, {}, false, false, 8888, "bob"};
  back = ParseSessionRequest(SessionRequestJson(f));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->port, 8888);
  SessionRequest a{"id", "attach", "a.b.0", 1, {}, false, false, 0, "carol"};
  back = ParseSessionRequest(SessionRequestJson(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, "attach");
  EXPECT_TRUE(back->stdin);  // an attach carries stdin by definition
  EXPECT_EQ(api::AttachPath("team-a", "nb", 2),
            JobSubresourcePath("team-a", "nb", "attach") + "?rank=2");
  struct Bad {
    const char* json;
    const char* field;
  };
  for (const Bad& b : {
           Bad{R"({"kind":"exec","assignment":"a","attempt":1,"command":["x"]})", "id"},
           Bad{R"({"id":"i","kind":"shell","assignment":"a","attempt":1})", "kind"},
           Bad{R"({"id":"i","kind":"exec","assignment":"a","attempt":1,"command":[]})", "command"},
           Bad{R"({"id":"i","kind":"exec","assignment":"a","attempt":1,"command":[1]})", "command"},
           Bad{R"({"id":"i","kind":"portforward","assignment":"a","attempt":1,"port":0})", "port"},
           Bad{R"({"id":"i","kind":"portforward","assignment":"a","attempt":"1","port":80})",
               "attempt"},
       }) {
    absl::StatusOr<SessionRequest> s = ParseSessionRequest(b.json);
    ASSERT_FALSE(s.ok()) << b.json;
    EXPECT_NE(s.status().message().find(b.field), std::string::npos) << s.status();
  }
}

TEST(SessionWire, PathsEncodeTheCommandAsOneJsonArray) {
  EXPECT_EQ(ExecPath("team-a", "train", 1, {"ls", "-l /x"}, true, false),
            "/apis/gpucloud/v1/namespaces/team-a/jobs/train/exec?rank=1&command="
            "%5B%22ls%22%2C%22-l%20%2Fx%22%5D&tty=true");
  EXPECT_EQ(PortForwardPath("team-a", "nb", 0, 8888),
            "/apis/gpucloud/v1/namespaces/team-a/jobs/nb/portforward?rank=0&port=8888");
  EXPECT_EQ(TunnelPath("n1"), "/apis/gpucloud/v1/nodes/n1/tunnel");
  EXPECT_EQ(SessionPath("n1", "ff"), "/apis/gpucloud/v1/nodes/n1/sessions/ff");
  EXPECT_EQ(PercentEncode("a-Z_0.~ /%"), "a-Z_0.~%20%2F%25");
}

}  // namespace
}  // namespace gpucloud::api
