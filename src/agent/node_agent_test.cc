// NodeAgent driven by a fake clock against a fake control plane (fake_control_plane.h): real
// task processes on this machine, every deadline moved by the test. A test moves the clock,
// then awaits one whole pass of the agent's loop (AwaitPassForTest), so "not before" and "at
// once after" are exact rather than timed.
#include "agent/node_agent.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "agent/fake_control_plane.h"
#include "agent/heartbeat_reports.h"
#include "agent/simulated_backend.h"
#include "api/client.h"
#include "api/paths.h"
#include "api/wire.h"
#include "core/clock.h"
#include "core/text.h"
#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Well before any real clock this runs under, so that a file's real modification time is never
// inside [start, fake now] (TaskEndedMs then takes the clock's time).
constexpr int64_t kT0 = 1'600'000'000'000;

// core/clock.h's FakeClock, readable from the agent's threads while the test moves it.
class ThreadSafeFakeClock final : public Clock {
 public:
  explicit ThreadSafeFakeClock(int64_t start_millis) : now_(start_millis) {}
  int64_t NowMillis() const override { return now_.load(); }
  void Advance(int64_t millis) { now_ += millis; }

 private:
  std::atomic<int64_t> now_;
};

// Until `pred` holds or 10 s pass, looking every millisecond: for what a task process does
// (a file it writes), which no event of the agent's announces.
bool Eventually(const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// The process runs (is not gone, nor a zombie).
bool Running(pid_t pid) {
  std::string stat = ReadFile(Cat("/proc/", pid, "/stat"));
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Tasks run as their namespace's user (the agent is root) and pass through to the sandbox.
    fs::permissions(tmp_.path(),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    absl::StatusOr<std::unique_ptr<GpuBackend>> b = MakeSimulatedBackend("1xT4");
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (run_.joinable()) run_.join();
  }

  void StartAgent(absl::Duration heartbeat = absl::Seconds(1),
                  std::optional<api::ClientConfig> server = std::nullopt) {
    NodeAgentOptions o;
    o.heartbeat = heartbeat;
    o.node_name = "node-a";
    o.address = "127.0.0.1";
    o.state_dir = tmp_ / "state";
    o.allow_host_processes = true;
    o.kill_tasks_on_stop = true;
    o.cdi_spec_dir = "";
    agent_ = std::make_unique<NodeAgent>(server ? *server : plane_.client_config(), *backend_,
                                         clock_, o);
    run_ = std::thread([this] { run_status_ = agent_->Run(); });
    ASSERT_TRUE(plane_.AwaitHeartbeats([](const auto& hs) { return !hs.empty(); }))
        << "the agent never heartbeat";
  }

  static api::Assignment Task(const std::string& job, const std::string& script,
                              int64_t grace_seconds = 30) {
    api::Assignment a;
    a.namespace_ = "team-a";
    // The pid keeps two runs of this test on one machine apart: a task's cgroup is named by its
    // exec id, machine-wide.
    a.job = Cat(job, "-", getpid());
    a.name = Cat("team-a.", a.job, ".0");
    a.job_uid = Cat("uid-", job);
    a.attempt = 1;
    a.task = "worker";
    a.master_addr = "127.0.0.1";
    a.hosts = {{"127.0.0.1", 1}};
    a.command = {"/bin/sh", "-c", script};
    a.grace_seconds = grace_seconds;
    return a;
  }

  // The task's sandbox (its working directory) and its record.
  std::string Sandbox(const api::Assignment& a) const {
    return tmp_ / Cat("state/sandbox/", a.name, ".", a.attempt);
  }
  std::string Record(const api::Assignment& a) const {
    return tmp_ / Cat("state/tasks/", a.name, ".", a.attempt, ".json");
  }

  bool AwaitState(const api::Assignment& a, api::TaskState s) {
    return plane_.AwaitReport(a.name, [s](const api::TaskReport& r) { return r.state == s; });
  }

  // Assigns a task and awaits its report: the watch delivers events in order, so once the agent
  // reports it, it has applied every change made before.
  void AwaitChangesApplied() {
    const api::Assignment marker = Task(Cat("marker-", ++markers_), "true");
    plane_.PutAssignment(marker);
    ASSERT_TRUE(AwaitState(marker, api::TaskState::kSucceeded));
  }

  testing_util::TempDir tmp_{"node-agent"};
  ThreadSafeFakeClock clock_{kT0};
  FakeControlPlane plane_{tmp_.path().string()};
  std::unique_ptr<GpuBackend> backend_;
  std::unique_ptr<NodeAgent> agent_;
  std::thread run_;
  absl::Status run_status_;
  int markers_ = 0;
};

TEST_F(NodeAgentTest, SigkillsATaskThatIgnoresSigtermExactlyWhenTheClockPassesItsGrace) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  // Catches SIGTERM (and writes `term`), so only SIGKILL ends it; its pid file appears whole.
  const api::Assignment a = Task(
      "stubborn",
      "trap 'echo > term' TERM; echo $$ > pid.new; mv pid.new pid; while :; do sleep 1; done", 30);
  plane_.PutAssignment(a);
  ASSERT_TRUE(AwaitState(a, api::TaskState::kRunning));
  ASSERT_TRUE(Eventually([&] { return fs::exists(Sandbox(a) + "/pid"); }));
  const pid_t pid = std::stoi(ReadFile(Sandbox(a) + "/pid"));
  struct KillAtEnd {  // should the agent not, so that no stubborn process outlives the test
    pid_t pid;
    ~KillAtEnd() { kill(pid, SIGKILL); }
  } kill_at_end{pid};

  plane_.DeleteAssignment(a.name);  // at kT0: SIGTERM now, SIGKILL at kT0 + 30 s
  ASSERT_TRUE(Eventually([&] { return fs::exists(Sandbox(a) + "/term"); }))
      << "the agent never sent SIGTERM";

  clock_.Advance(30'000 - 1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_TRUE(Running(pid)) << "killed before its grace period was over";
  EXPECT_EQ(plane_.LatestReport(a.name)->state, api::TaskState::kRunning);

  clock_.Advance(1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  ASSERT_TRUE(AwaitState(a, api::TaskState::kStopped)) << "not killed at the end of its grace";
  const api::TaskReport r = *plane_.LatestReport(a.name);
  EXPECT_EQ(r.signal, SIGKILL) << r.message;
  EXPECT_EQ(r.started_ms, kT0);
  EXPECT_EQ(r.finished_ms, kT0 + 30'000);  // the clock's time, not the machine's
  EXPECT_FALSE(Running(pid));
}

TEST_F(NodeAgentTest, AGraceOfZeroKillsInThePassThatStopsTheTask) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const api::Assignment a = Task("no-grace", "trap '' TERM; while :; do sleep 1; done", 0);
  plane_.PutAssignment(a);
  ASSERT_TRUE(AwaitState(a, api::TaskState::kRunning));
  plane_.DeleteAssignment(a.name);
  // The clock never moves: SIGKILL follows SIGTERM at once.
  ASSERT_TRUE(AwaitState(a, api::TaskState::kStopped));
  EXPECT_EQ(plane_.LatestReport(a.name)->signal, SIGKILL);
}

TEST_F(NodeAgentTest, RetriesAFailedSecretsFetchOnlyAfterItsBackoff) {
  plane_.SetSecretsAnswer([](int n) -> std::pair<int, std::string> {
    if (n == 0) return {409, R"({"message": "secret \"db\" not found in namespace team-a"})"};
    api::TaskSecrets s;
    s.env["DB_PASSWORD"] = "s3cret";
    return {200, api::TaskSecretsToJson(s)};
  });
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  api::Assignment a = Task("with-secret", R"(test "$DB_PASSWORD" = s3cret)");
  a.secret_env = {{"DB_PASSWORD", {"db", "password"}}};
  plane_.PutAssignment(a);
  ASSERT_TRUE(plane_.AwaitReport(a.name, [](const api::TaskReport& r) {
    return r.state == api::TaskState::kStarting && r.message.ends_with("; next try in 5s");
  }));
  EXPECT_EQ(plane_.secrets_requests(), 1);

  clock_.Advance(5'000 - 1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_EQ(plane_.secrets_requests(), 1) << "asked again before its back-off";

  clock_.Advance(1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_EQ(plane_.secrets_requests(), 2) << "not asked again once its back-off was over";
  ASSERT_TRUE(AwaitState(a, api::TaskState::kSucceeded)) << plane_.LatestReport(a.name)->message;
  EXPECT_EQ(plane_.LatestReport(a.name)->started_ms, kT0 + 5'000);
}

TEST_F(NodeAgentTest, ALogOverQuotaShipsItsMarkerOnlyAfterRetryAfterByTheClock) {
  plane_.SetLogAnswer([](int n) -> std::optional<std::pair<int, std::string>> {
    if (n > 0) return std::nullopt;  // stored
    return std::pair<int, std::string>{
        429, R"({"reason": "QuotaExceeded", "message": "namespace team-a is at its log quota",
                 "details": {"size": 0, "retryAfterSeconds": 30}})"};
  });
  // Logs go out with every heartbeat: one each time the clock moves 1 ms.
  ASSERT_NO_FATAL_FAILURE(StartAgent(absl::Milliseconds(1)));
  const api::Assignment a = Task("chatty", "echo hello");
  plane_.PutAssignment(a);
  ASSERT_TRUE(AwaitState(a, api::TaskState::kSucceeded));
  ASSERT_TRUE(agent_->AwaitPassForTest());
  ASSERT_EQ(plane_.log_requests(), 1);  // at kT0: refused, "hello\n" given up

  clock_.Advance(30'000 - 1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_EQ(plane_.log_requests(), 1) << "tried again before its Retry-After";

  clock_.Advance(1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_EQ(plane_.log_requests(), 2) << "not tried again once its Retry-After was over";
  const std::string log = plane_.Log(a.namespace_, a.job, a.rank, a.attempt);
  EXPECT_NE(log.find("[gpucloud: 6 bytes of this task's output were not shipped"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("at their quota"), std::string::npos) << log;
}

TEST_F(NodeAgentTest, ForgetsAnUnacknowledgedEndedTaskOnceItsRetentionPassesByTheClock) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const api::Assignment a = Task("done", "true");
  plane_.PutAssignment(a);
  ASSERT_TRUE(AwaitState(a, api::TaskState::kSucceeded));  // ended at kT0
  EXPECT_EQ(plane_.LatestReport(a.name)->finished_ms, kT0);
  plane_.DeleteAssignment(a.name);
  ASSERT_NO_FATAL_FAILURE(AwaitChangesApplied());

  const int64_t retention = absl::ToInt64Milliseconds(kEndedReportRetention);
  clock_.Advance(retention);  // ended exactly `retention` ago: still reported
  ASSERT_TRUE(agent_->AwaitPassForTest());
  ASSERT_FALSE(plane_.heartbeats().empty());
  auto carries = [&](const api::Heartbeat& h) {
    for (const api::TaskReport& r : h.tasks) {
      if (r.name == a.name) return true;
    }
    return false;
  };
  EXPECT_TRUE(carries(plane_.heartbeats().back()));
  EXPECT_TRUE(fs::exists(Record(a)));

  clock_.Advance(1);  // past it: forgotten, its record and sandbox gone
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_FALSE(fs::exists(Record(a)));
  EXPECT_FALSE(fs::exists(Sandbox(a)));

  clock_.Advance(1'000);  // the next heartbeat is due: without it
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_FALSE(carries(plane_.heartbeats().back()));
}

TEST_F(NodeAgentTest, ForgetsAnAcknowledgedEndedTaskOnceUnassignedWithoutWaiting) {
  plane_.AcknowledgeEnded(true);
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  const api::Assignment a = Task("acked", "true");
  plane_.PutAssignment(a);
  ASSERT_TRUE(AwaitState(a, api::TaskState::kSucceeded));
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_TRUE(fs::exists(Record(a))) << "forgotten while still assigned";
  plane_.DeleteAssignment(a.name);
  ASSERT_NO_FATAL_FAILURE(AwaitChangesApplied());
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_FALSE(fs::exists(Record(a)));  // the clock never moved
}

TEST_F(NodeAgentTest, HeartbeatsByTheClockWhenNothingChanges) {
  ASSERT_NO_FATAL_FAILURE(StartAgent());
  ASSERT_TRUE(agent_->AwaitPassForTest());
  const size_t before = plane_.heartbeats().size();
  clock_.Advance(999);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_EQ(plane_.heartbeats().size(), before) << "a heartbeat before its period";
  clock_.Advance(1);
  ASSERT_TRUE(agent_->AwaitPassForTest());
  EXPECT_EQ(plane_.heartbeats().size(), before + 1);
}

// Several servers (an HA control plane): `first`, then `second` (fakes made in one directory,
// so that they share a certificate).
api::ClientConfig TwoServers(const FakeControlPlane& first, const FakeControlPlane& second) {
  api::ClientConfig c = first.client_config();
  c.more_servers = {{"127.0.0.1", second.client_config().port}};
  return c;
}

TEST_F(NodeAgentTest, TheClientFailsOverFromAStandbyAndStaysWithTheServerThatAnswered) {
  std::unique_ptr<FakeControlPlane> standby =
      std::make_unique<FakeControlPlane>(tmp_.path().string());
  standby->SetStandby(true);
  api::Client client(TwoServers(*standby, plane_));
  const std::string path = api::AssignmentsPath("node-a");
  absl::StatusOr<api::HttpResponse> r = client.Call("GET", path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(standby->refused(), 1);
  ASSERT_TRUE(client.Call("GET", path).ok());
  EXPECT_EQ(standby->refused(), 1) << "went back to the standby";
  // The other way round: the server in use turns standby, the first answers again.
  standby->SetStandby(false);
  plane_.SetStandby(true);
  r = client.Call("PUT", api::NodePath("node-a"), "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(standby->registrations(), 1);
  EXPECT_EQ(plane_.refused(), 1);
  // Both standby: the last 503 comes back, after each was asked once.
  standby->SetStandby(true);
  r = client.Call("GET", path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(standby->refused(), 2);
  EXPECT_EQ(plane_.refused(), 2);
}

TEST_F(NodeAgentTest, TheClientFailsOverFromAnUnreachableServer) {
  api::ClientConfig c;
  {
    std::unique_ptr<FakeControlPlane> gone =
        std::make_unique<FakeControlPlane>(tmp_.path().string());
    c = TwoServers(*gone, plane_);
  }  // its port is closed now
  api::Client client(c);
  absl::StatusOr<api::HttpResponse> r =
      client.Call("POST", api::NodeVerbPath("node-a", "heartbeat"), api::HeartbeatToJson({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(plane_.heartbeats().size(), 1u);
  // A watch fails over too.
  api::Client watcher(c);
  std::atomic<bool> cancel{true};
  r = watcher.Stream(
      api::AssignmentsPath("node-a") + "?watch=true&resourceVersion=1", [](const std::string&) {},
      5, &cancel);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  // With one server only, the error names it.
  api::ClientConfig alone = c;
  alone.more_servers.clear();
  r = api::Client(alone).Call("GET", api::AssignmentsPath("node-a"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find(Cat("cannot reach 127.0.0.1:", c.port)), std::string::npos)
      << r.status();
}

// The server in use dies with the client's connection open: a POST that may have reached it is
// not sent elsewhere (Unavailable), the next request goes to the next server.
TEST_F(NodeAgentTest, TheClientMovesOnWhenTheServerItUsesDies) {
  auto first = std::make_unique<FakeControlPlane>(tmp_.path().string());
  api::Client client(TwoServers(*first, plane_));
  const std::string heartbeat = api::NodeVerbPath("node-a", "heartbeat");
  ASSERT_EQ(client.Call("POST", heartbeat, api::HeartbeatToJson({}))->status, 200);
  first.reset();
  absl::StatusOr<api::HttpResponse> r = client.Call("POST", heartbeat, api::HeartbeatToJson({}));
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << (r.ok() ? r->body : r.status().ToString());
  EXPECT_TRUE(plane_.heartbeats().empty());
  r = client.Call("POST", heartbeat, api::HeartbeatToJson({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(plane_.heartbeats().size(), 1u);
  // An idempotent request is sent to the next server at once.
  auto third = std::make_unique<FakeControlPlane>(tmp_.path().string());
  api::ClientConfig c = TwoServers(plane_, *third);
  api::Client reader(c);
  ASSERT_EQ(reader.Call("GET", api::AssignmentsPath("node-a"))->status, 200);
}

// An agent given a standby first and the leader second registers with and heartbeats to the
// leader, and runs what it assigns.
TEST_F(NodeAgentTest, AnAgentGivenSeveralServersWorksWithTheOneThatTakesItsTraffic) {
  std::unique_ptr<FakeControlPlane> standby =
      std::make_unique<FakeControlPlane>(tmp_.path().string());
  standby->SetStandby(true);
  ASSERT_NO_FATAL_FAILURE(StartAgent(absl::Seconds(1), TwoServers(*standby, plane_)));
  EXPECT_GE(plane_.registrations(), 1);
  EXPECT_GE(standby->refused(), 1);
  const api::Assignment a = Task("runs", "true");
  plane_.PutAssignment(a);
  EXPECT_TRUE(AwaitState(a, api::TaskState::kSucceeded));
  EXPECT_EQ(standby->registrations(), 0);
}

}  // namespace
}  // namespace gpucloud::agent
