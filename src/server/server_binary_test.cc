// The real `gpucloud server` process (CTest label `integration`): killed with SIGKILL after N
// acknowledged creates and started again on the same data directory, it has all N, three times
// over, on SQLite and on etcd (`--store etcd://`, skipped without /usr/bin/etcd); SIGTERM stops
// it cleanly. Two servers on one etcd: one leads, the other takes over after kill -9 of the
// leader. And `gpucloud up` stopping when its agent cannot run.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/test_client.h"
#include "store/etcd_test_certs.h"
#include "store/etcd_test_server.h"

extern char** environ;

namespace gpucloud::server {
namespace {

namespace http = boost::beast::http;

struct Running {
  pid_t pid = 0;
  uint16_t port = 0;  // 0: it did not start serving (first_lines says why)
  std::string first_lines;
  int output = -1;  // the rest of its stdout and stderr, when asked to keep them
};

// Starts the server (`prefix` runs it, e.g. prlimit) and reads its output until it says where
// it serves, or until it exits.
Running Start(const std::string& dir, std::vector<std::string> extra = {},
              std::vector<std::string> prefix = {}, bool keep_output = false) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<std::string> args = prefix;
  for (std::string a : {std::string(GPUCLOUD_BINARY), std::string("server"), "--data-dir=" + dir}) {
    args.push_back(a);
  }
  if (std::find(extra.begin(), extra.end(), "--listen") == extra.end()) {
    extra.insert(extra.begin(), {"--listen", "127.0.0.1:0"});
  }
  for (std::string& a : extra) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Running r;
  EXPECT_EQ(posix_spawn(&r.pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  std::string text;
  char c;
  while (read(out[0], &c, 1) == 1) {
    text += c;
    size_t at = text.find("serving https://127.0.0.1:");
    if (at != std::string::npos && text.back() == ' ') {
      r.port = static_cast<uint16_t>(std::stoi(text.substr(at + 26)));
      break;
    }
  }
  if (keep_output) {
    r.output = out[0];
  } else {
    close(out[0]);  // the server's later lines go to a closed pipe
  }
  r.first_lines = text;
  return r;
}

// The exit status of a server that ended (or was ended).
int Wait(const Running& r) {
  int status = 0;
  waitpid(r.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string TempDir(const char* what) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     (std::string("gpucloud-") + what + "-" + std::to_string(::getpid())))
                        .string();
  std::filesystem::remove_all(dir);
  return dir;
}

// A whole file ("" when it cannot be read).
std::string ReadWhole(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::string ReadToken(const std::string& dir) {
  std::ifstream f(dir + "/admin.config");
  std::string line;
  while (std::getline(f, line)) {
    if (line.starts_with("token: ")) return line.substr(7);
  }
  return "";
}

// Three rounds of: start the server on `dir` (with `extra` flags), see every job acknowledged
// before, create 20 more, kill -9. Then a start and a clean SIGTERM stop.
void CreateKillNineRestart(const std::string& dir, const std::vector<std::string>& extra) {
  int created = 0;
  for (int round = 0; round < 3; ++round) {
    Running s = Start(dir, extra);
    ASSERT_GT(s.port, 0) << s.first_lines;
    if (round == 0) {
      EXPECT_NE(s.first_lines.find("first start: admin token written to"), std::string::npos);
    }
    std::string token = ReadToken(dir);
    ASSERT_EQ(token.size(), 64u);
    std::string ca = dir + "/ca.crt";
    auto list = testing_util::HttpsCall(s.port, ca, http::verb::get,
                                        "/apis/gpucloud/v1/namespaces/default/jobs", token);
    ASSERT_EQ(list.result_int(), 200) << list.body();
    // Everything acknowledged before the last kill is there.
    size_t items = 0;
    for (size_t at = 0; (at = list.body().find("\"kind\": \"Job\"", at)) != std::string::npos;
         ++at) {
      ++items;
    }
    EXPECT_EQ(items, static_cast<size_t>(created)) << "round " << round;
    for (int i = 0; i < 20; ++i, ++created) {
      std::string body =
          "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"j" +
          std::to_string(created) +
          "\"},\"spec\":{\"tasks\":[{\"name\":\"w\",\"resources\":{\"gpu\":{\"count\":1}}}]}}";
      auto r = testing_util::HttpsCall(s.port, ca, http::verb::post,
                                       "/apis/gpucloud/v1/namespaces/default/jobs", token, body);
      ASSERT_EQ(r.result_int(), 201) << r.body();
    }
    kill(s.pid, SIGKILL);
    waitpid(s.pid, nullptr, 0);
  }
  Running last = Start(dir, extra);
  ASSERT_GT(last.port, 0);
  kill(last.pid, SIGTERM);
  int status = 0;
  waitpid(last.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ServerBinary, AcknowledgedCreatesSurviveKillNine) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("gpucloud-server-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  CreateKillNineRestart(dir, {});
  std::filesystem::remove_all(dir);
}

#define SKIP_WITHOUT_ETCD()                                          \
  if (!store::EtcdTestServer::Available()) {                         \
    GTEST_SKIP() << store::EtcdTestServer::kBinary                   \
                 << " is absent (scripts/install-deps installs it)"; \
  }

// Issue 21: the same on the etcd backend (`--store etcd://`): the server killed with SIGKILL
// and started again on the same etcd has every acknowledged create; no store.db is made.
TEST(ServerBinary, OnEtcdAcknowledgedCreatesSurviveKillNine) {
  SKIP_WITHOUT_ETCD();
  const std::string dir = TempDir("server-etcd");
  store::EtcdTestServer etcd(dir + "/etcd");
  absl::Status started = etcd.Start();
  ASSERT_TRUE(started.ok()) << started;
  const std::string url = "etcd://" + etcd.endpoint();
  ASSERT_NO_FATAL_FAILURE(CreateKillNineRestart(dir + "/data", {"--store", url}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/data/store.db"));
  // The start-up line names the store.
  Running s = Start(dir + "/data", {"--store", url}, {}, /*keep_output=*/true);
  ASSERT_GT(s.port, 0) << s.first_lines;
  std::string line = s.first_lines;
  for (char c; !line.ends_with('\n') && read(s.output, &c, 1) == 1;) line += c;
  EXPECT_NE(line.find("store " + url + ", revision "), std::string::npos) << line;
  kill(s.pid, SIGTERM);
  close(s.output);
  EXPECT_EQ(Wait(s), 0);
  etcd.Stop();
  std::filesystem::remove_all(dir);
}

// An etcd that lost its data (here: another, empty one) next to an earlier server's
// credentials is refused, naming the store and --init; with --init it starts. Under another
// key prefix of the same etcd, the store is empty too.
TEST(ServerBinary, AWipedEtcdIsRefusedWithoutInit) {
  SKIP_WITHOUT_ETCD();
  const std::string dir = TempDir("server-etcd-wiped");
  store::EtcdTestServer etcd(dir + "/etcd");
  absl::Status started = etcd.Start();
  ASSERT_TRUE(started.ok()) << started;
  const std::string url = "etcd://" + etcd.endpoint();
  Running first = Start(dir + "/data", {"--store", url});
  ASSERT_GT(first.port, 0) << first.first_lines;
  kill(first.pid, SIGTERM);
  ASSERT_EQ(Wait(first), 0);
  Running again = Start(dir + "/data", {"--store", url});  // the same etcd: it starts
  ASSERT_GT(again.port, 0) << again.first_lines;
  kill(again.pid, SIGTERM);
  ASSERT_EQ(Wait(again), 0);

  store::EtcdTestServer wiped(dir + "/wiped");
  started = wiped.Start();
  ASSERT_TRUE(started.ok()) << started;
  for (const std::string& empty :
       {"etcd://" + wiped.endpoint(), "etcd://" + etcd.endpoint() + "/elsewhere"}) {
    Running refused = Start(dir + "/data", {"--store", empty});
    EXPECT_EQ(refused.port, 0) << refused.first_lines;
    if (refused.port != 0) kill(refused.pid, SIGKILL);  // it must not serve: fail, never hang
    EXPECT_EQ(Wait(refused), 1) << refused.first_lines;
    EXPECT_NE(refused.first_lines.find("the store " + empty + " is missing or empty"),
              std::string::npos)
        << refused.first_lines;
    EXPECT_NE(refused.first_lines.find("--init"), std::string::npos) << refused.first_lines;
  }
  Running init = Start(dir + "/data", {"--store", "etcd://" + wiped.endpoint(), "--init"});
  ASSERT_GT(init.port, 0) << init.first_lines;
  kill(init.pid, SIGTERM);
  EXPECT_EQ(Wait(init), 0);
  wiped.Stop();
  etcd.Stop();
  std::filesystem::remove_all(dir);
}

// Issue 21: several servers on one etcd. Helpers for the test below.
// A `gpucloud agent run` with simulated GPUs, joined to the server on `port` with the
// credentials in `dir`; its output goes to `log`.
// `servers`: the --server flag, "https://127.0.0.1:PORT[,...]".
pid_t StartAgent(const std::string& dir, const std::string& servers, const std::string& node,
                 const std::string& state, const std::string& log) {
  std::vector<std::string> args = {GPUCLOUD_BINARY,
                                   "agent",
                                   "run",
                                   "--server",
                                   servers,
                                   "--ca",
                                   dir + "/ca.crt",
                                   "--token-file",
                                   dir + "/bootstrap.token",
                                   "--node-name",
                                   node,
                                   "--simulate",
                                   "4xH100",
                                   "--state-dir",
                                   state,
                                   "--allow-host-processes"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// The server's gpucloud_leader gauge: 1, 0, or -1 when it does not answer.
int LeaderGauge(uint16_t port, const std::string& ca, const std::string& token) {
  auto r = testing_util::HttpsCall(port, ca, http::verb::get, "/metrics", token);
  if (r.result_int() != 200) return -1;
  const size_t at = r.body().find("\ngpucloud_leader ");
  return at == std::string::npos ? -1 : r.body()[at + 17] - '0';
}

// Creates a one-GPU job that sleeps, through the server on `port`.
void SubmitJob(uint16_t port, const std::string& ca, const std::string& token,
               const std::string& name) {
  const std::string body =
      "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"" + name +
      "\"},\"spec\":{\"tasks\":[{\"name\":\"w\",\"command\":[\"sleep\","
      "\"600\"],\"resources\":{\"gpu\":{\"count\":1}}}]}}";
  auto r = testing_util::HttpsCall(port, ca, http::verb::post,
                                   "/apis/gpucloud/v1/namespaces/default/jobs", token, body);
  ASSERT_EQ(r.result_int(), 201) << r.body();
}

// The node the job is placed on, once its phase is past Pending; "" while it is not.
std::string PlacedOn(uint16_t port, const std::string& ca, const std::string& token,
                     const std::string& name) {
  auto r = testing_util::HttpsCall(port, ca, http::verb::get,
                                   "/apis/gpucloud/v1/namespaces/default/jobs/" + name, token);
  nlohmann::json job = nlohmann::json::parse(r.body(), nullptr, false);
  if (r.result_int() != 200 || !job.is_object()) return "";
  const nlohmann::json status = job.value("status", nlohmann::json::object());
  const std::string phase = status.value("phase", "");
  if (phase != "Scheduled" && phase != "Running") return "";
  const nlohmann::json placement = status.value("placement", nlohmann::json::array());
  return placement.empty() ? "?" : placement[0].value("node", "?");
}

// The job as the server on `port` answers it (for failure messages).
std::string JobText(uint16_t port, const std::string& ca, const std::string& token,
                    const std::string& name) {
  return testing_util::HttpsCall(port, ca, http::verb::get,
                                 "/apis/gpucloud/v1/namespaces/default/jobs/" + name, token)
      .body();
}

// gpuctl's exit status and what it wrote (stdout and stderr), run through a shell.
std::pair<int, std::string> Gpuctl(const std::string& config, const std::string& args) {
  const std::string command =
      std::string(GPUCTL_BINARY) + " --config " + config + " " + args + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string said;
  for (char buf[256]; fgets(buf, sizeof buf, p) != nullptr;) said += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, said};
}

// Whether the node is registered and Ready in the store (the leader's node controller says so).
bool NodeReady(uint16_t port, const std::string& ca, const std::string& token,
               const std::string& name) {
  auto r =
      testing_util::HttpsCall(port, ca, http::verb::get, "/apis/gpucloud/v1/nodes/" + name, token);
  nlohmann::json node = nlohmann::json::parse(r.body(), nullptr, false);
  return r.result_int() == 200 && node.is_object() &&
         node.value("status", nlohmann::json::object()).value("ready", false);
}

// Polls `done` every 20 ms until it holds or `limit` passes: the servers act on their own
// clocks and threads; the API is the only way to see what they did.
template <class F>
bool Eventually(std::chrono::milliseconds limit, F done) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    usleep(20'000);
  }
  return true;
}

// Kills (SIGKILL) and reaps the processes still listed when it goes, so that a failed assertion
// leaves no server or agent behind.
// With `dir`, also the agents' tasks (not the test's children): every process whose command
// line or working directory is in one of the agents' state directories, DIR/agent-*.
struct Reaper {
  std::vector<pid_t> pids;
  std::string dir;
  void Forget(pid_t pid) { std::erase(pids, pid); }
  ~Reaper() {
    for (pid_t pid : pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (dir.empty()) return;
    const std::string agents = dir + "/agent-";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
      std::ifstream f(e.path() / "cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(f)), {});
      std::error_code cwd_ec;
      const std::string cwd = std::filesystem::read_symlink(e.path() / "cwd", cwd_ec).string();
      if (cmdline.find(agents) != std::string::npos || cwd.starts_with(agents)) {
        kill(std::stoi(name), SIGKILL);
      }
    }
  }
};

// The whole first line a server writes about itself ("serving ... (..., leader)").
std::string ServingLine(const Running& s) {
  std::string line = s.first_lines;
  for (char c; !line.ends_with('\n') && read(s.output, &c, 1) == 1;) line += c;
  return line;
}

// Issue 21: two servers on one etcd, each with its own data directory (the second joins with the
// first's join key: the CA, the tokens and the keys come from the store's sealed join bundle; it
// makes its own server certificate), the audit log on (one chain, both write it), and two
// agents that know both servers (one lists the standby first). Exactly one server leads; the
// agents' heartbeats reach it (a standby answers them 503, and they move on), so both nodes are
// Ready; jobs submitted to either server are scheduled, and the standby's cluster summary is
// the leader's (its /metrics leaves the controllers' families out). After kill -9 of the leader the
// other leads within about a lease and a renew interval, the agents move to it and their nodes stay
// Ready, gpuctl (its config lists the dead server first) submits a job that is scheduled, and
// the audit chain verifies with both servers' records in it.
TEST(ServerBinary, TwoServersOnOneEtcdOneLeadsTheOtherTakesOverAfterKillNine) {
  SKIP_WITHOUT_ETCD();
  const std::string dir = TempDir("server-ha");
  store::EtcdTestServer etcd(dir + "/etcd");
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  constexpr int kLeaseS = 2;
  const std::vector<std::string> flags = {"--store",
                                          "etcd://" + etcd.endpoint(),
                                          "--leader-lease",
                                          std::to_string(kLeaseS),
                                          "--log-dir",
                                          dir + "/logs",
                                          "--heartbeat-timeout",
                                          "3"};
  // Tasks run as unprivileged users: the agents' state directories must be reachable.
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all |
                                        std::filesystem::perms::others_exec |
                                        std::filesystem::perms::group_exec);
  Reaper reaper{.dir = dir};
  Running a = Start(dir + "/a", flags, {}, /*keep_output=*/true);
  reaper.pids.push_back(a.pid);
  ASSERT_GT(a.port, 0) << a.first_lines;
  EXPECT_NE(ServingLine(a).find(", leader)"), std::string::npos);
  // Another empty data directory is refused on this store without the first server's join key,
  // and with another key; the second server joins with the key: the CA, tokens and keys come
  // from the store's sealed join bundle, not from a copy of the first's directory.
  std::ofstream(dir + "/wrong.key") << std::string(64, '0') << "\n";
  for (const auto& [extra, says] :
       {std::pair<std::vector<std::string>, std::string>{
            {}, "has no credentials: join it with --join-key-file"},
        {{"--join-key-file", dir + "/wrong.key"}, "the join key does not open the bundle"}}) {
    std::vector<std::string> f = flags;
    f.insert(f.end(), extra.begin(), extra.end());
    Running refused = Start(dir + "/c", f);
    EXPECT_EQ(refused.port, 0) << refused.first_lines;
    if (refused.port != 0) kill(refused.pid, SIGKILL);  // it must not serve: fail, never hang
    EXPECT_EQ(Wait(refused), 1) << refused.first_lines;
    EXPECT_NE(refused.first_lines.find(says), std::string::npos) << refused.first_lines;
  }
  std::vector<std::string> join = flags;
  join.insert(join.end(), {"--join-key-file", dir + "/a/keys/join.key"});
  Running b = Start(dir + "/b", join, {}, /*keep_output=*/true);
  reaper.pids.push_back(b.pid);
  ASSERT_GT(b.port, 0) << b.first_lines;
  EXPECT_NE(ServingLine(b).find(", standby: another server leads)"), std::string::npos);
  for (const char* shared : {"ca.crt", "ca.key", "tokens", "bootstrap.token", "audit.key",
                             "keys/kek.json", "keys/join.key"}) {
    EXPECT_EQ(ReadWhole(dir + "/b/" + shared), ReadWhole(dir + "/a/" + shared)) << shared;
  }
  EXPECT_NE(ReadWhole(dir + "/b/server.key"), ReadWhole(dir + "/a/server.key")) << "its own";
  const std::string token = ReadToken(dir + "/a"), ca = dir + "/a/ca.crt";
  const std::string url_a = "https://127.0.0.1:" + std::to_string(a.port);
  const std::string url_b = "https://127.0.0.1:" + std::to_string(b.port);
  const pid_t agent_a =
      StartAgent(dir + "/a", url_b + "," + url_a, "node-a", dir + "/agent-a", dir + "/a.log");
  const pid_t agent_b =
      StartAgent(dir + "/a", url_a + "," + url_b, "node-b", dir + "/agent-b", dir + "/b.log");
  reaper.pids.insert(reaper.pids.end(), {agent_a, agent_b});
  EXPECT_EQ(LeaderGauge(a.port, ca, token), 1);
  EXPECT_EQ(LeaderGauge(b.port, ca, token), 0);
  for (const char* node : {"node-a", "node-b"}) {
    ASSERT_TRUE(Eventually(std::chrono::seconds(20), [&] {
      return NodeReady(b.port, ca, token, node);
    })) << node;
  }
  // Through either server, scheduled by the leader.
  SubmitJob(a.port, ca, token, "via-a");
  SubmitJob(b.port, ca, token, "via-b");
  for (const char* job : {"via-a", "via-b"}) {
    EXPECT_TRUE(Eventually(std::chrono::seconds(20), [&] {
      return !PlacedOn(b.port, ca, token, job).empty();
    })) << JobText(b.port, ca, token, job);
  }
  EXPECT_EQ(LeaderGauge(b.port, ca, token), 0);  // still the standby
  // The standby answers the cluster summary with the leader's figures (published in the
  // store), and leaves the controllers' metric families to the leader.
  EXPECT_TRUE(Eventually(std::chrono::seconds(10),
                         [&] {
                           auto r = testing_util::HttpsCall(b.port, ca, http::verb::get,
                                                            "/apis/gpucloud/v1/cluster", token);
                           nlohmann::json c = nlohmann::json::parse(r.body(), nullptr, false);
                           return c.is_object() && c["nodes"]["ready"] == 2 &&
                                  c["asOfMs"].get<int64_t>() > 0 &&
                                  c["jobs"].value("Scheduled", 0) + c["jobs"].value("Running", 0) ==
                                      2;
                         }))
      << testing_util::HttpsCall(b.port, ca, http::verb::get, "/apis/gpucloud/v1/cluster", token)
             .body();
  for (auto [port, leads] : {std::pair{a.port, true}, std::pair{b.port, false}}) {
    auto m = testing_util::HttpsCall(port, ca, http::verb::get, "/metrics", token);
    EXPECT_EQ(m.body().find("\ngpucloud_jobs{") != std::string::npos, leads) << port;
  }
  // Issue 22: an agent keeps a session tunnel to each server it knows, so `gpuctl exec` enters
  // a task through either server, each alone in gpuctl's config (as one address behind a load
  // balancer would be). Each agent lists the servers in another order: with one tunnel per agent
  // (to the first server that took it), one of the two servers could not reach each node.
  for (const std::string& url : {url_a, url_b}) {
    const std::string config = dir + "/one-server.config";
    std::ofstream(config) << "server: " << url << "\ncertificate-authority: " << ca
                          << "\ntoken: " << token << "\n";
    for (const char* job : {"via-a", "via-b"}) {
      std::pair<int, std::string> r;
      EXPECT_TRUE(Eventually(std::chrono::seconds(20),
                             [&] {
                               r = Gpuctl(config, std::string("exec ") + job + " -- echo entered");
                               return r.first == 0 && r.second == "entered\n";
                             }))
          << "through " << url << " into " << job << ": exit " << r.first << ", " << r.second;
    }
  }
  const auto killed = std::chrono::steady_clock::now();
  kill(a.pid, SIGKILL);
  Wait(a);
  reaper.Forget(a.pid);
  ASSERT_TRUE(
      Eventually(std::chrono::seconds(10), [&] { return LeaderGauge(b.port, ca, token) == 1; }));
  const auto elected = std::chrono::steady_clock::now();
  // gpuctl, whose config names the dead server first.
  {
    std::ofstream(dir + "/gpuctl.config")
        << "server: " << url_a << ", " << url_b << "\ncertificate-authority: " << ca
        << "\ntoken: " << token << "\n";
  }
  const auto [ran, said] =
      Gpuctl(dir + "/gpuctl.config", "run --name after-failover --gpus 1 -- sleep 600");
  EXPECT_EQ(ran, 0) << said;
  EXPECT_TRUE(Eventually(std::chrono::seconds(20), [&] {
    return !PlacedOn(b.port, ca, token, "after-failover").empty();
  })) << JobText(b.port, ca, token, "after-failover");
  const auto scheduled = std::chrono::steady_clock::now();
  // The agents moved to the new leader: their nodes stay Ready past the heartbeat timeout.
  std::this_thread::sleep_for(std::chrono::seconds(4));  // a span of time, not a wait for an event
  for (const char* node : {"node-a", "node-b"}) {
    std::ifstream log(dir + (node == std::string("node-a") ? "/a.log" : "/b.log"));
    EXPECT_TRUE(NodeReady(b.port, ca, token, node))
        << node << ", whose agent said:\n"
        << std::string(std::istreambuf_iterator<char>(log), {});
  }
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  std::printf(
      "failover (lease %d s): kill -9 to new leader %lld ms; to its first new job scheduled "
      "%lld ms after it was elected\n",
      kLeaseS, static_cast<long long>(ms(elected - killed)),
      static_cast<long long>(ms(scheduled - elected)));
  // A lease (counted from the last keep-alive, which was at most a renew interval before the
  // kill) plus a campaign interval, plus etcd's expiry check (every 500 ms) and slack.
  EXPECT_LT(ms(elected - killed), kLeaseS * 1000 + kLeaseS * 1000 / 3 + 1500);
  // One audit chain, written by both servers, verifies; both servers' creates are in it.
  auto verify =
      testing_util::HttpsCall(b.port, ca, http::verb::get, "/apis/gpucloud/v1/audit/verify", token);
  EXPECT_EQ(verify.result_int(), 200) << verify.body();
  EXPECT_NE(verify.body().find("\"ok\": true"), std::string::npos) << verify.body();
  auto records = testing_util::HttpsCall(b.port, ca, http::verb::get,
                                         "/apis/gpucloud/v1/audit/records", token);
  for (const char* job : {"via-a", "via-b", "after-failover"}) {
    EXPECT_NE(records.body().find(std::string("\"name\":\"") + job + "\""), std::string::npos)
        << job;
  }
  kill(b.pid, SIGTERM);
  EXPECT_EQ(Wait(b), 0);
  reaper.Forget(b.pid);
  close(a.output);
  close(b.output);
  etcd.Stop();
  std::filesystem::remove_all(dir);
}

// Issues 14 and 21: `--store etcds://` is TLS 1.3 to etcd, here one that asks for client
// certificates (--client-cert-auth). With the CA and a client certificate the server starts,
// leads and creates a job through the API (no store.db: it is in etcd); without the client
// certificate it is refused at start, saying the TLS handshake with the member failed.
TEST(ServerBinary, OnEtcdOverTlsWithAClientCertificateAJobIsCreated) {
  SKIP_WITHOUT_ETCD();
  const std::string dir = TempDir("server-etcds");
  std::filesystem::create_directories(dir + "/pki");
  const absl::Time now = absl::Now();
  absl::StatusOr<store::TestCa> ca = store::TestCa::Create(dir + "/pki", "etcd", now);
  ASSERT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<store::TestCertificate> member = ca->IssueMember("member", now);
  absl::StatusOr<store::TestCertificate> client = ca->IssueClient("client", now);
  ASSERT_TRUE(member.ok() && client.ok());
  store::EtcdTestServer etcd(dir + "/etcd");
  etcd.ServeTls({member->cert_file, member->key_file, ca->cert_file()});
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  const std::string url = "etcds://" + etcd.endpoint();

  Running s = Start(dir + "/data",
                    {"--store", url, "--etcd-ca", ca->cert_file(), "--etcd-cert", client->cert_file,
                     "--etcd-key", client->key_file},
                    {}, /*keep_output=*/true);
  ASSERT_GT(s.port, 0) << s.first_lines;
  std::string line = s.first_lines;
  for (char c; !line.ends_with('\n') && read(s.output, &c, 1) == 1;) line += c;
  EXPECT_NE(line.find("store " + url + ", revision "), std::string::npos) << line;
  EXPECT_NE(line.find(", leader)"), std::string::npos) << line;
  const std::string token = ReadToken(dir + "/data"), server_ca = dir + "/data/ca.crt";
  const std::string jobs = "/apis/gpucloud/v1/namespaces/default/jobs";
  auto created = testing_util::HttpsCall(
      s.port, server_ca, http::verb::post, jobs, token,
      R"({"apiVersion":"gpucloud/v1","kind":"Job","metadata":{"name":"over-tls"},)"
      R"("spec":{"tasks":[{"name":"w","resources":{"gpu":{"count":1}}}]}})");
  EXPECT_EQ(created.result_int(), 201) << created.body();
  auto got = testing_util::HttpsCall(s.port, server_ca, http::verb::get, jobs + "/over-tls", token);
  EXPECT_EQ(got.result_int(), 200) << got.body();
  EXPECT_FALSE(std::filesystem::exists(dir + "/data/store.db"));
  kill(s.pid, SIGTERM);
  close(s.output);
  EXPECT_EQ(Wait(s), 0);

  Running refused =
      Start(dir + "/data", {"--store", url, "--etcd-ca", ca->cert_file(), "--store-wait", "0"});
  EXPECT_EQ(refused.port, 0) << refused.first_lines;
  if (refused.port != 0) kill(refused.pid, SIGKILL);  // it must not serve: fail, never hang
  EXPECT_EQ(Wait(refused), 1) << refused.first_lines;
  EXPECT_NE(refused.first_lines.find("store " + url + ": etcd: the TLS handshake to " +
                                     etcd.endpoint() + " failed: "),
            std::string::npos)
      << refused.first_lines;
  etcd.Stop();
  std::filesystem::remove_all(dir);
}

// The --etcd-* flags are checked before anything is made or dialled: each refusal names the
// flag (exit 2), and the data directory is not created.
TEST(ServerBinary, ABadEtcdTlsFlagIsRefusedNamingTheFlag) {
  const std::string dir = TempDir("server-bad-etcd-tls");
  const std::string pki = TempDir("server-bad-etcd-tls-pki");
  std::filesystem::create_directories(pki);
  const absl::Time now = absl::Now();
  absl::StatusOr<store::TestCa> ca = store::TestCa::Create(pki, "etcd", now);
  ASSERT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<store::TestCertificate> a = ca->IssueClient("a", now);
  absl::StatusOr<store::TestCertificate> b = ca->IssueClient("b", now);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string etcds = "etcds://127.0.0.1:2379", absent = pki + "/absent.crt";
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--store", "etcd://127.0.0.1:2379", "--etcd-ca", ca->cert_file()},
       "--etcd-ca is for TLS to etcd: it needs --store etcds://HOST:PORT[,HOST:PORT...] (the "
       "store is \"etcd://127.0.0.1:2379\")"},
      {{"--etcd-cert", a->cert_file, "--etcd-key", a->key_file},
       "--etcd-cert is for TLS to etcd: it needs --store etcds://HOST:PORT[,HOST:PORT...] (the "
       "store is \"sqlite\")"},
      {{"--store", etcds},
       "--store " + etcds +
           " needs --etcd-ca (the CA file that signed the etcd members' certificates)"},
      {{"--store", etcds, "--etcd-ca", ca->cert_file(), "--etcd-cert", a->cert_file},
       "--etcd-cert needs --etcd-key (a client certificate and its key: both or neither)"},
      {{"--store", etcds, "--etcd-ca", ca->cert_file(), "--etcd-key", a->key_file},
       "--etcd-key needs --etcd-cert (a client certificate and its key: both or neither)"},
      {{"--store", etcds, "--etcd-ca", absent},
       "--etcd-ca: the CA file " + absent + ": cannot read it: No such file or directory"},
      {{"--store", etcds, "--etcd-ca", ca->cert_file(), "--etcd-cert", absent, "--etcd-key",
        a->key_file},
       "--etcd-cert: the client certificate " + absent +
           ": cannot read it: No such file or directory"},
      {{"--store", etcds, "--etcd-ca", ca->cert_file(), "--etcd-cert", a->cert_file, "--etcd-key",
        b->key_file},
       "--etcd-key: the client key " + b->key_file + ": does not match the client certificate " +
           a->cert_file},
  };
  for (const auto& [flags, why] : bad) {
    Running r = Start(dir, flags);
    EXPECT_EQ(r.port, 0) << r.first_lines;
    if (r.port != 0) kill(r.pid, SIGKILL);  // it must not serve: fail, never hang
    EXPECT_EQ(Wait(r), 2) << r.first_lines;
    EXPECT_EQ(r.first_lines, "gpucloud server: " + why + "\n");
  }
  EXPECT_FALSE(std::filesystem::exists(dir));  // nothing made
  std::filesystem::remove_all(pki);
}

// A --store value that is not a store is refused before anything is made, naming the flag and
// the value; an etcd that does not answer is refused naming the URL.
TEST(ServerBinary, ABadStoreIsRefusedNamingTheFlag) {
  const std::string dir = TempDir("server-bad-store");
  const std::string forms = " (sqlite, or etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX])\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"etcd://", "names no etcd member"},
      {"etcd:///gpucloud", "names no etcd member"},
      {"etcd://127.0.0.1:99999",
       "has a member \"127.0.0.1:99999\" that is not HOST:PORT (port 1 to 65535)"},
      {"etcd://127.0.0.1:2379,", "has a member \"\" that is not HOST:PORT (port 1 to 65535)"},
      {"etcd://:2379", "has a member \":2379\" that is not HOST:PORT (port 1 to 65535)"},
      {"etcd://127.0.0.1", "has a member \"127.0.0.1\" that is not HOST:PORT (port 1 to 65535)"},
      {"etcd://127.0.0.1:2379/", "has a bad key prefix (/NAME[/NAME...])"},
      {"http://127.0.0.1:2379", "has an unknown scheme \"http\""},
      {"etcds://", "names no etcd member"},
      {"etcds://127.0.0.1", "has a member \"127.0.0.1\" that is not HOST:PORT (port 1 to 65535)"},
      {"mysql", "is not a store"},
  };
  for (const auto& [value, why] : bad) {
    Running r = Start(dir, {"--store", value});
    EXPECT_EQ(r.port, 0) << r.first_lines;
    if (r.port != 0) kill(r.pid, SIGKILL);  // it must not serve: fail, never hang
    EXPECT_EQ(Wait(r), 2) << r.first_lines;
    EXPECT_EQ(r.first_lines, "gpucloud server: --store: \"" + value + "\" " + why + forms);
  }
  EXPECT_FALSE(std::filesystem::exists(dir));  // nothing made
  if (store::EtcdTestServer::Available()) {
    const std::string absent = "etcd://127.0.0.1:" + std::to_string(store::FreeLoopbackPort());
    Running r = Start(dir, {"--store", absent, "--store-wait", "0"});
    EXPECT_EQ(Wait(r), 1) << r.first_lines;
    EXPECT_TRUE(r.first_lines.starts_with("gpucloud server: store " + absent + ": "))
        << r.first_lines;
    EXPECT_FALSE(std::filesystem::exists(dir + "/ca.crt"));  // no credentials made
  }
  std::filesystem::remove_all(dir);
}

// Issue 21: etcd unreachable at start. The server says so and tries again with back-off for
// --store-wait, so a server and its etcd started together need no order: here etcd comes up
// about 2 s after the server, which then serves on it.
TEST(ServerBinary, AServerWaitsForAnEtcdThatComesUpLate) {
  SKIP_WITHOUT_ETCD();
  const std::string dir = TempDir("server-etcd-late");
  const int client = store::FreeLoopbackPort(), peer = store::FreeLoopbackPort();
  store::EtcdTestServer etcd(dir + "/etcd", "late", client, peer,
                             "late=http://127.0.0.1:" + std::to_string(peer));
  const auto started = std::chrono::steady_clock::now();
  // etcd is started 2 s late, on a thread that lives as long as it does (etcd dies with the
  // thread that spawned it: PR_SET_PDEATHSIG).
  absl::Status etcd_started;
  std::promise<void> up, done;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    etcd_started = etcd.Start();
    up.set_value();
    done.get_future().wait();
    etcd.Stop();
  });
  // Returns once the server serves (or exits).
  Running r = Start(dir + "/data", {"--store", "etcd://" + etcd.endpoint(), "--store-wait", "30"},
                    {}, /*keep_output=*/true);
  up.get_future().wait();
  auto finish = [&] {
    done.set_value();
    late.join();
  };
  if (!etcd_started.ok() || r.port == 0) {
    if (r.pid > 0) kill(r.pid, SIGKILL);
    finish();
    FAIL() << etcd_started << r.first_lines;
  }
  EXPECT_NE(r.first_lines.find("etcd does not answer; trying again"), std::string::npos)
      << r.first_lines;
  EXPECT_NE(ServingLine(r).find(", leader)"), std::string::npos);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  kill(r.pid, SIGTERM);
  close(r.output);
  EXPECT_EQ(Wait(r), 0);
  finish();
  std::filesystem::remove_all(dir);
}

// Issue 21: etcd gone (here stopped; a lost quorum answers the same). A write answers 503 with
// Retry-After and says the store is away, so that nothing unacknowledged looks acknowledged
// and a client moves on to another server; with etcd back the same write is created.
TEST(ServerBinary, WithEtcdGoneAWriteAnswers503AndWorksOnceItIsBack) {
  SKIP_WITHOUT_ETCD();
  const std::string dir = TempDir("server-etcd-gone");
  store::EtcdTestServer etcd(dir + "/etcd");
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  Running s = Start(dir + "/data", {"--store", "etcd://" + etcd.endpoint()});
  ASSERT_GT(s.port, 0) << s.first_lines;
  const std::string token = ReadToken(dir + "/data"), ca = dir + "/data/ca.crt";
  const std::string jobs = "/apis/gpucloud/v1/namespaces/default/jobs";
  const std::string job = R"({"apiVersion":"gpucloud/v1","kind":"Job","metadata":{"name":"later"},)"
                          R"("spec":{"tasks":[{"name":"w","resources":{"gpu":{"count":1}}}]}})";
  etcd.Stop();
  auto refused = testing_util::HttpsCall(s.port, ca, http::verb::post, jobs, token, job);
  EXPECT_EQ(refused.result_int(), 503) << refused.body();
  EXPECT_NE(refused.body().find("the store: "), std::string::npos) << refused.body();
  EXPECT_EQ(refused[http::field::retry_after], "1");
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  auto created = testing_util::HttpsCall(s.port, ca, http::verb::post, jobs, token, job);
  EXPECT_EQ(created.result_int(), 201) << created.body();
  kill(s.pid, SIGTERM);
  EXPECT_EQ(Wait(s), 0);
  etcd.Stop();
  std::filesystem::remove_all(dir);
}

TEST(ServerBinary, AFailedFirstStartLosesNoAdminToken) {
  std::string dir = TempDir("server-busy");
  // The port is taken: the first start fails before it serves.
  int busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  socklen_t len = sizeof a;
  getsockname(busy, reinterpret_cast<sockaddr*>(&a), &len);
  Running failed = Start(dir, {"--listen", "127.0.0.1:" + std::to_string(ntohs(a.sin_port))});
  EXPECT_EQ(failed.port, 0);
  EXPECT_EQ(Wait(failed), 1);
  EXPECT_NE(failed.first_lines.find("cannot listen"), std::string::npos) << failed.first_lines;
  close(busy);
  EXPECT_FALSE(std::filesystem::exists(dir + "/admin.config"));
  // The next start issues the admin token, and it works.
  Running s = Start(dir);
  ASSERT_GT(s.port, 0) << s.first_lines;
  EXPECT_NE(s.first_lines.find("first start: admin token written to"), std::string::npos);
  auto list = testing_util::HttpsCall(s.port, dir + "/ca.crt", http::verb::get,
                                      "/apis/gpucloud/v1/namespaces/default/jobs", ReadToken(dir));
  EXPECT_EQ(list.result_int(), 200) << list.body();
  // Others may pass through (to the checkpoint root), never read or write.
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  kill(s.pid, SIGTERM);
  EXPECT_EQ(Wait(s), 0);
  std::filesystem::remove_all(dir);
}

TEST(ServerBinary, AMissingStoreOrABadTokenFileIsRefusedAtStart) {
  std::string dir = TempDir("server-refuse");
  Running s = Start(dir);
  ASSERT_GT(s.port, 0) << s.first_lines;
  kill(s.pid, SIGTERM);
  ASSERT_EQ(Wait(s), 0);
  std::filesystem::remove(dir + "/store.db");
  Running refused = Start(dir);
  EXPECT_EQ(Wait(refused), 1);
  EXPECT_NE(refused.first_lines.find("--init"), std::string::npos) << refused.first_lines;
  Running init = Start(dir, {"--init"});
  ASSERT_GT(init.port, 0) << init.first_lines;
  kill(init.pid, SIGTERM);
  ASSERT_EQ(Wait(init), 0);
  // A token given twice (an appended line that would change who it is) is refused.
  std::string first;
  std::getline(std::ifstream(dir + "/tokens"), first);
  std::ofstream(dir + "/tokens", std::ios::app)
      << first.substr(0, 64) << " mallory team-a tenant\n";
  Running dup = Start(dir);
  EXPECT_EQ(Wait(dup), 1);
  EXPECT_NE(dup.first_lines.find("already on an earlier line"), std::string::npos)
      << dup.first_lines;
  std::filesystem::remove_all(dir);
}

// Issue 16: admin.config is meant to be copied (to ~/.gpucloud/config): the CA path it records
// is absolute even when --data-dir is relative, and it works from another working directory.
TEST(ServerBinary, ARelativeDataDirWritesAnAbsoluteCaPath) {
  const std::string dir = TempDir("server-relative");
  std::filesystem::create_directories(dir);
  struct RestoreCwd {
    std::filesystem::path was = std::filesystem::current_path();
    ~RestoreCwd() { std::filesystem::current_path(was); }
  } restore;
  std::filesystem::current_path(dir);
  Running s = Start("./data");
  std::filesystem::current_path("/");  // somewhere else
  ASSERT_GT(s.port, 0) << s.first_lines;
  std::ifstream f(dir + "/data/admin.config");
  std::string line, ca;
  while (std::getline(f, line)) {
    if (line.starts_with("certificate-authority: ")) ca = line.substr(23);
  }
  EXPECT_EQ(ca, dir + "/data/ca.crt");
  auto list = testing_util::HttpsCall(s.port, ca, http::verb::get,
                                      "/apis/gpucloud/v1/namespaces/default/jobs",
                                      ReadToken(dir + "/data"));
  EXPECT_EQ(list.result_int(), 200) << list.body();
  kill(s.pid, SIGTERM);
  EXPECT_EQ(Wait(s), 0);
  std::filesystem::remove_all(dir);
}

// Issue 16: the Kubernetes Python client sends watch=True; through the HTTPS front it is a
// watch (streamed, newline-delimited), and a value that is not a boolean is a 400 naming it.
TEST(ServerBinary, WatchTrueAsPythonSpellsItIsAWatch) {
  const std::string dir = TempDir("server-watch-true");
  Running s = Start(dir);
  ASSERT_GT(s.port, 0) << s.first_lines;
  const std::string jobs = "/apis/gpucloud/v1/namespaces/default/jobs";
  auto w = testing_util::HttpsCall(s.port, dir + "/ca.crt", http::verb::get,
                                   jobs + "?watch=True&timeoutSeconds=1", ReadToken(dir));
  EXPECT_EQ(w.result_int(), 200) << w.body();
  EXPECT_EQ(w[http::field::content_type], "application/x-ndjson") << w.body();
  auto bad = testing_util::HttpsCall(s.port, dir + "/ca.crt", http::verb::get, jobs + "?watch=yes",
                                     ReadToken(dir));
  EXPECT_EQ(bad.result_int(), 400) << bad.body();
  EXPECT_NE(bad.body().find("watch"), std::string::npos) << bad.body();
  kill(s.pid, SIGTERM);
  EXPECT_EQ(Wait(s), 0);
  std::filesystem::remove_all(dir);
}

TEST(ServerBinary, OutOfDescriptorsOnceItAcceptsAgain) {
  if (access("/usr/bin/prlimit", X_OK) != 0) GTEST_SKIP() << "needs prlimit (util-linux)";
  std::string dir = TempDir("server-fds");
  Running s = Start(dir, {}, {"/usr/bin/prlimit", "--nofile=64"}, /*keep_output=*/true);
  ASSERT_GT(s.port, 0) << s.first_lines;
  // More idle connections than the server has descriptors: its accept fails.
  std::vector<int> idle;
  for (int i = 0; i < 80; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(s.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) idle.push_back(fd);
  }
  std::string said;
  char c;
  while (said.find("accept failed") == std::string::npos && read(s.output, &c, 1) == 1) said += c;
  EXPECT_NE(said.find("accept failed"), std::string::npos) << said;
  for (int fd : idle) close(fd);
  // Once they are gone, it serves again (after its back-off of at most a second).
  http::response<http::string_body> ok;
  for (int i = 0; i < 100 && ok.result_int() != 200; ++i) {
    ok = testing_util::HttpsCall(s.port, dir + "/ca.crt", http::verb::get, "/healthz", "");
  }
  EXPECT_EQ(ok.result_int(), 200) << ok.body();
  kill(s.pid, SIGTERM);
  close(s.output);
  Wait(s);
  std::filesystem::remove_all(dir);
}

TEST(ServerBinary, ABadLogFlagIsRefusedNamingTheFlag) {
  std::string dir = TempDir("server-log-flag");
  Running level = Start(dir, {"--log-level", "verbose"});
  EXPECT_EQ(Wait(level), 2) << level.first_lines;
  EXPECT_EQ(level.first_lines,
            "gpucloud server: --log-level: \"verbose\" is not one of trace, debug, info, warn, "
            "error\n");
  Running format = Start(dir, {"--log-format", "xml"});
  EXPECT_EQ(Wait(format), 2) << format.first_lines;
  EXPECT_EQ(format.first_lines,
            "gpucloud server: --log-format: \"xml\" is not one of text, json\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpucloud::server

namespace gpucloud::server {
namespace {

// `gpucloud up` whose agent cannot run (its state directory is a file): up stops at once with
// the agent's reason and exit status 1, not a healthy banner over a cluster without a node.
TEST(UpBinary, AnAgentThatCannotRunStopsUpWithItsReason) {
  std::string dir = TempDir("up-agent-fails");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/agent") << "not a directory\n";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<std::string> args = {GPUCLOUD_BINARY, "up",          "--data-dir", dir,
                                   "--listen",      "127.0.0.1:0", "--simulate", "1xH100"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  // Everything it prints, until it exits (EOF) or 60 s pass.
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool ended = false;
  while (!ended && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) ended = true;
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (!ended) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(ended) << "gpucloud up kept running with a failed agent:\n" << text;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << text;
  EXPECT_NE(text.find("gpucloud up: agent: "), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

// `gpucloud up --log-format json`: its records are one JSON object per line on stderr, with
// their component and fields (the agent's node).
TEST(UpBinary, JsonLogsAreOneObjectPerLineWithFields) {
  std::string dir = TempDir("up-json-log");
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  std::vector<std::string> args = {GPUCLOUD_BINARY, "up",          "--data-dir",   dir,
                                   "--listen",      "127.0.0.1:0", "--simulate",   "1xH100",
                                   "--node-name",   "json-node",   "--log-format", "json"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  close(out[0]);  // the banner is not the log
  // Its stderr, line by line, until the agent says it registered (or 60 s pass).
  std::vector<std::string> lines;
  std::string partial;
  bool registered = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!registered && std::chrono::steady_clock::now() < deadline) {
    pollfd p{err[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    ssize_t n = read(err[0], buf, sizeof buf);
    if (n <= 0) break;
    partial.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
      lines.push_back(partial.substr(0, nl));
      registered =
          registered || lines.back().find("\"msg\":\"registered with ") != std::string::npos;
    }
  }
  kill(pid, SIGTERM);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  ASSERT_TRUE(registered) << all;
  for (const std::string& line : lines) {
    ASSERT_TRUE(nlohmann::json::accept(line)) << line;
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_TRUE(j["ts"].is_string() && j["level"].is_string() && j["msg"].is_string()) << line;
  }
  nlohmann::json last = nlohmann::json::parse(lines.back());
  EXPECT_EQ(last["component"], "agent") << all;
  EXPECT_EQ(last["level"], "info") << all;
  EXPECT_EQ(last["node"], "json-node") << all;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpucloud::server
