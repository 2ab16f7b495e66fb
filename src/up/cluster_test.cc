// A real cluster on this machine (CTest label `integration`): the `gpucloud server` process,
// `gpucloud agent run` processes with simulated GPUs, and `gpuctl` as a user runs it. Jobs run
// real processes; what they print comes back through the server's logs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/text.h"
#include "testing/proc.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace gpucloud {
namespace {

using testing_util::Shell;
using Json = nlohmann::json;

// A child process with its output in a file; killed (SIGKILL) when dropped.
class Process {
 public:
  Process(std::vector<std::string> args, const std::string& log, const std::string& cwd = "") {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Process() { Stop(SIGKILL); }
  void Stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
};

// Polls `ok` until it holds or `seconds` pass (the cluster moves on its own; the test watches).
bool Eventually(const std::function<bool()>& ok, int seconds = 30) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok();
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = (dir_.path() / "server").string();
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUCLOUD_BINARY, "server", "--data-dir", data_, "--listen",
                                 "127.0.0.1:0", "--grace", "3", "--heartbeat-timeout", "2"},
        (dir_.path() / "server.log").string());
    ASSERT_TRUE(Eventually([&] {
      return Slurp(Log("server")).find("serving https://") != std::string::npos;
    })) << Slurp(Log("server"));
    std::string text = Slurp(Log("server"));
    size_t at = text.find("serving https://");
    url_ = text.substr(at + 8, text.find(' ', at + 8) - at - 8);
    setenv("GPUCLOUD_CONFIG", (data_ + "/admin.config").c_str(), 1);
  }

  // Agents are killed when their Process goes, but their tasks outlive them by design (a new
  // agent re-adopts them): stop every task of this test's agents, and each shim (an agent's
  // fork that leads its task's process group), so that no test leaves processes behind.
  void TearDown() override {
    const std::string state_dir = "--state-dir" + std::string(1, '\0') + dir_.path().string();
    const std::string task_env = "GPUCLOUD_CHECKPOINT_DIR=" + dir_.path().string();
    auto left = [&] {
      std::vector<pid_t> pids;
      for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        pid_t pid = std::atoi(e.path().filename().c_str());
        if (pid <= 0 || pid == getpid()) continue;
        if (testing_util::ReadProcFile(e.path() / "cmdline").find(state_dir) != std::string::npos ||
            testing_util::ReadProcFile(e.path() / "environ").find(task_env) != std::string::npos) {
          pids.push_back(pid);
        }
      }
      return pids;
    };
    for (pid_t pid : left()) {
      if (pid_t group = getpgid(pid); group > 0) kill(-group, SIGKILL);
      kill(pid, SIGKILL);
    }
    EXPECT_TRUE(Eventually([&] { return left().empty(); }, 10)) << "tasks outlived the test";
  }

  std::string Log(const std::string& name) { return (dir_.path() / (name + ".log")).string(); }

  // The server again on the same data directory, with `extra` flags.
  void RestartServer(const std::vector<std::string>& extra) {
    server_->Stop(SIGTERM);
    std::filesystem::remove(Log("server"));
    std::vector<std::string> args{
        GPUCLOUD_BINARY, "server", "--data-dir",          data_, "--listen", "127.0.0.1:0",
        "--grace",       "3",      "--heartbeat-timeout", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<Process>(args, Log("server"));
    ASSERT_TRUE(Eventually([&] {
      return Slurp(Log("server")).find("serving https://") != std::string::npos;
    })) << Slurp(Log("server"));
  }

  std::unique_ptr<Process> Agent(const std::string& node, const std::string& address,
                                 std::vector<std::string> extra = {}) {
    std::vector<std::string> args{GPUCLOUD_BINARY,
                                  "agent",
                                  "run",
                                  "--server",
                                  url_,
                                  "--ca",
                                  data_ + "/ca.crt",
                                  "--token-file",
                                  data_ + "/bootstrap.token",
                                  "--node-name",
                                  node,
                                  "--address",
                                  address,
                                  "--state-dir",
                                  (dir_.path() / node).string(),
                                  "--allow-host-processes",
                                  "--workdir",
                                  GPUCLOUD_SOURCE_DIR};
    if (std::find(extra.begin(), extra.end(), "--simulate") == extra.end()) {
      extra.insert(extra.end(), {"--simulate", "4xH100"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(args, Log(node), GPUCLOUD_SOURCE_DIR);
  }

  testing_util::ShellResult Gpuctl(const std::string& args) {
    return Shell(Cat(GPUCTL_BINARY, " ", args));
  }

  Json Job(const std::string& name) {
    testing_util::ShellResult r = Gpuctl("get jobs " + name + " -o json");
    Json j = Json::parse(r.output, nullptr, false);
    return j.is_discarded() ? Json::object() : j;
  }
  std::string Phase(const std::string& name) {
    Json j = Job(name);
    return j.contains("status") ? j["status"].value("phase", "?") : "?";
  }
  bool NodesReady(int n) {
    testing_util::ShellResult r = Gpuctl("get nodes");
    size_t count = 0, at = 0;
    while ((at = r.output.find(" Ready", at)) != std::string::npos) ++count, ++at;
    return static_cast<int>(count) == n;
  }
  // The agent's metrics server ("http://HOST:PORT"), from its log line.
  std::string MetricsUrl(const std::string& node) {
    std::string log = Slurp(Log(node));
    size_t at = log.find("metrics at http://");
    EXPECT_NE(at, std::string::npos) << log;
    return at == std::string::npos ? "" : log.substr(at + 11, log.find("/metrics", at) - at - 11);
  }
  // POST /inject?QUERY on the agent's metrics server (simulated GPUs' faults).
  testing_util::ShellResult Inject(const std::string& url, const std::string& query) {
    return Shell(Cat(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen(urllib.request.Request('",
        url, "/inject?", query, "', method='POST')).read().decode())\""));
  }
  // Waits until `job` runs its second attempt.
  bool RunningAgain(const std::string& job) {
    return Eventually([&] {
      Json j = Job(job);
      return j["status"].value("attempt", 0) == 2 && j["status"].value("phase", "") == "Running";
    });
  }

  std::string Describe(const std::string& job) {
    return Gpuctl("describe job " + job).output + "\n--- server\n" + Slurp(Log("server"));
  }

  testing_util::TempDir dir_;
  std::string data_, url_;
  std::unique_ptr<Process> server_;
};

TEST_F(ClusterTest, AGangOfTwoNodesTimesFourGpusGetsConsistentRanks) {
  auto a = Agent("node-a", "127.0.0.1");
  auto b = Agent("node-b", "127.0.0.2");
  ASSERT_TRUE(Eventually([&] { return NodesReady(2); })) << Gpuctl("get nodes").output;
  testing_util::ShellResult run = Gpuctl(
      "run --name gang --gpus 4 --replicas 2 --type h100 -- sh -c "
      "'echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT "
      "NODE_RANK=$NODE_RANK LOCAL_RANK=$LOCAL_RANK GPUS=$CUDA_VISIBLE_DEVICES; cat "
      "$GPUCLOUD_HOSTFILE'");
  ASSERT_EQ(run.code, 0) << run.output;
  ASSERT_TRUE(Eventually([&] { return Phase("gang") == "Succeeded"; })) << Describe("gang");
  Json job = Job("gang");
  std::string port = "";
  std::map<std::string, std::string> by_node;  // node -> its rank's output
  for (const Json& p : job["status"]["placement"]) {
    int rank = p["rank"];
    std::string out = Gpuctl(Cat("logs gang --rank ", rank)).output;
    by_node[p["node"]] = out;
    EXPECT_NE(out.find(Cat("RANK=", rank, " WORLD_SIZE=2 ")), std::string::npos) << out;
    EXPECT_NE(out.find(Cat("NODE_RANK=", rank, " LOCAL_RANK=0")), std::string::npos) << out;
    EXPECT_NE(out.find(Cat("GPUS=GPU-sim-", p["node"].get<std::string>(), "-")), std::string::npos)
        << out;
  }
  ASSERT_EQ(by_node.size(), 2u);
  // Both see the same master: rank 0's node address, and the same port and hostfile.
  std::string rank0_node = job["status"]["placement"][0]["node"];
  std::string master = rank0_node == "node-a" ? "127.0.0.1" : "127.0.0.2";
  std::string other = rank0_node == "node-a" ? "127.0.0.2" : "127.0.0.1";
  std::string first = by_node["node-a"], second = by_node["node-b"];
  size_t at = first.find("MASTER=");
  ASSERT_NE(at, std::string::npos);
  std::string master_field = first.substr(at, first.find(' ', at) - at);
  EXPECT_TRUE(master_field.starts_with("MASTER=" + master + ":")) << master_field;
  EXPECT_NE(second.find(master_field + " "), std::string::npos) << second;
  std::string hostfile = Cat(master, " slots=1\n", other, " slots=1\n");
  EXPECT_NE(first.find(hostfile), std::string::npos) << first;
  EXPECT_NE(second.find(hostfile), std::string::npos) << second;
}

TEST_F(ClusterTest, TheTrainerRestartsFromItsCheckpointAndFinishes) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  testing_util::ShellResult r =
      Gpuctl(Cat("apply -f ", GPUCLOUD_SOURCE_DIR, "/examples/trainer/job.yaml"));
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(Eventually([&] { return Phase("trainer") == "Succeeded"; }, 60))
      << Describe("trainer");
  Json job = Job("trainer");
  EXPECT_EQ(job["status"]["attempt"], 2);
  EXPECT_EQ(job["status"]["restarts"], 1);
  // The first rank to reach step 50 failed; the other was stopped (and checkpointed on SIGTERM).
  std::string first = Gpuctl("logs trainer --rank 0 --attempt 1").output +
                      Gpuctl("logs trainer --rank 1 --attempt 1").output;
  EXPECT_NE(first.find("failing at step 50"), std::string::npos) << first;
  int resumed = 0;
  for (int rank = 0; rank < 2; ++rank) {
    // The failed rank resumes from its checkpoint at step 40; the other from where SIGTERM
    // stopped it (or from 0 when it had not started yet, on a slow machine). Both end exactly
    // where a run without the failure ends.
    std::string second = Gpuctl(Cat("logs trainer --rank ", rank)).output;
    EXPECT_NE(second.find("(restart 1)"), std::string::npos) << second;
    if (second.find("starting at step 0 ") == std::string::npos) ++resumed;
    std::string clean =
        Shell(Cat("cd ", dir_.path().string(), " && mkdir -p clean", rank, " && RANK=", rank,
                  " WORLD_SIZE=2 GPUCLOUD_CHECKPOINT_DIR=clean", rank, " python3 ",
                  GPUCLOUD_SOURCE_DIR, "/examples/trainer/train.py --steps 200 | tail -1"))
            .output;
    ASSERT_NE(clean.find("final loss"), std::string::npos) << clean;
    EXPECT_NE(second.find(clean), std::string::npos) << second << "\nexpected: " << clean;
  }
  EXPECT_GE(resumed, 1);
  std::string events = Gpuctl("events trainer").output;
  EXPECT_NE(events.find("TaskFailed"), std::string::npos) << events;
}

TEST_F(ClusterTest, AKilledTaskIsReportedAndFailsTheJob) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  // No restarts: the job fails with the signal named.
  std::string yaml = (dir_.path() / "job.yaml").string();
  std::ofstream(yaml) << "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: victim}\nspec:\n"
                         "  tasks:\n  - name: main\n    command: [sh, -c, 'echo $$ > "
                         "$GPUCLOUD_CHECKPOINT_DIR/pid; exec sleep 30']\n    resources: {gpu: 1}\n"
                         "  restartPolicy: {maxRestarts: 0}\n";
  const std::string pid_file = data_ + "/checkpoints/default/victim/pid";
  ASSERT_EQ(Gpuctl("apply -f " + yaml).code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("victim") == "Running" && !Slurp(pid_file).empty(); }))
      << Describe("victim");
  pid_t pid = std::stoi(Slurp(pid_file));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return Phase("victim") == "Failed"; })) << Describe("victim");
  std::string message = Job("victim")["status"]["message"];
  EXPECT_NE(message.find("killed by signal 9"), std::string::npos) << message;
}

TEST_F(ClusterTest, ALostNodesJobMovesToAnotherNode) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  ASSERT_EQ(Gpuctl("run --name mover --gpus 4 -- sleep 30").code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("mover") == "Running"; })) << Describe("mover");
  auto b = Agent("node-b", "127.0.0.2");
  ASSERT_TRUE(Eventually([&] { return NodesReady(2); }));
  a->Stop(SIGKILL);  // the machine dies (its task lives on here, as on a partitioned node)
  ASSERT_TRUE(RunningAgain("mover")) << Describe("mover");
  Json job = Job("mover");
  EXPECT_EQ(job["status"]["placement"][0]["node"], "node-b");
  EXPECT_EQ(job["status"]["interruptions"], 1);
  EXPECT_EQ(job["status"]["restarts"], 0);
  EXPECT_NE(Gpuctl("get nodes").output.find("node-a               NotReady"), std::string::npos)
      << Gpuctl("get nodes").output;
  // node-a comes back: its agent learns the task is not wanted any more and kills it (fencing).
  std::string marker = (dir_.path() / "node-a").string();
  auto again = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] {
    return Slurp(Log("node-a")).find("stopping default.mover.0 (attempt 1)") != std::string::npos;
  })) << Slurp(Log("node-a"));
  ASSERT_TRUE(Eventually([&] {
    return Slurp(Log("node-a")).find("ended: Stopped") != std::string::npos;
  })) << Slurp(Log("node-a"));
  EXPECT_EQ(Phase("mover"), "Running");
}

TEST_F(ClusterTest, AgentMetricsLabelATasksGpusAndSumItsEnergy) {
  auto a = Agent("node-a", "127.0.0.1", {"--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  std::string url = MetricsUrl("node-a") + "/metrics";
  auto scrape = [&] {
    return Shell(Cat("python3 -c \"import urllib.request,sys; "
                     "sys.stdout.write(urllib.request.urlopen('",
                     url, "').read().decode())\""))
        .output;
  };
  ASSERT_EQ(Gpuctl("run --name lit --gpus 2 -- sleep 4").code, 0);
  ASSERT_TRUE(Eventually([&] { return scrape().find("job_name=\"lit\"") != std::string::npos; }))
      << scrape();
  std::string text = scrape();
  // Two GPUs carry the task's labels, the others none.
  size_t labelled = 0;
  for (size_t p = 0; (p = text.find("DCGM_FI_DEV_GPU_TEMP{", p)) != std::string::npos; ++p) {
    if (text.substr(p, text.find('\n', p) - p)
            .find(",namespace=\"default\",job_name=\"lit\",task=\"main-0\"") != std::string::npos) {
      ++labelled;
    }
  }
  EXPECT_EQ(labelled, 2u) << text;
  // Its energy grows while it runs (simulated GPUs draw 60 W).
  ASSERT_TRUE(Eventually([&] {
    std::string t = scrape();
    size_t e = t.find("gpucloud_task_energy_joules_total{namespace=\"default\",job_name=\"lit\"");
    if (e == std::string::npos) return false;
    std::string line = t.substr(e, t.find('\n', e) - e);
    return std::stod(line.substr(line.rfind(' ') + 1)) >= 120;  // 2 GPUs x 60 J, at least once
  })) << scrape();
  // The server has it too, once the job ended: in its status and in its attempt's usage record.
  ASSERT_TRUE(Eventually([&] { return Phase("lit") == "Succeeded"; })) << Describe("lit");
  EXPECT_GE(Job("lit")["status"].value("energyJ", 0.0), 120.0) << Describe("lit");
  EXPECT_NE(Describe("lit").find("kWh GPU energy"), std::string::npos) << Describe("lit");
  Json cost = Json::parse(Gpuctl("cost --by job -o json").output, nullptr, false);
  ASSERT_TRUE(cost.is_array() && cost.size() == 1) << cost;
  EXPECT_EQ(cost[0].value("job", ""), "default/lit");
  EXPECT_GE(cost[0].value("energyKwh", 0.0), 120.0 / 3.6e6);
}

TEST_F(ClusterTest, AnInjectedXidMovesTheJobOffTheGpuUntilTheOperatorUncordons) {
  auto a =
      Agent("node-a", "127.0.0.1", {"--metrics-listen", "127.0.0.1:0", "--allow-fault-injection"});
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  std::string base = MetricsUrl("node-a");
  ASSERT_FALSE(base.empty());
  ASSERT_EQ(Gpuctl("run --name hit --gpus 2 -- sleep 30").code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("hit") == "Running"; })) << Describe("hit");
  int gpu = Job("hit")["status"]["placement"][0]["gpus"][0]["index"];
  testing_util::ShellResult inject = Inject(base, Cat("gpu=", gpu, "&xid=79"));
  ASSERT_EQ(inject.code, 0) << inject.output;
  ASSERT_TRUE(RunningAgain("hit")) << Describe("hit");
  Json job = Job("hit");
  for (const Json& g : job["status"]["placement"][0]["gpus"]) EXPECT_NE(g["index"].get<int>(), gpu);
  EXPECT_EQ(job["status"]["interruptions"], 1);
  std::string events = Gpuctl("events hit").output;
  EXPECT_NE(events.find("GpuFailed"), std::string::npos) << events;
  EXPECT_NE(events.find(Cat("GPU ", gpu, " on node-a: Xid 79 (GPU has fallen off the bus)")),
            std::string::npos)
      << events;
  // The GPU stays out until the operator says otherwise.
  ASSERT_EQ(Gpuctl("cancel hit").code, 0);
  ASSERT_EQ(Gpuctl("run --name big --gpus 4 -- sleep 1").code, 0);
  ASSERT_TRUE(Eventually([&] { return Job("big")["status"].value("reason", "") == "Waiting"; }))
      << Describe("big");  // three healthy GPUs: it waits
  ASSERT_EQ(Gpuctl("uncordon node-a").code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("big") == "Succeeded"; })) << Describe("big");
}

TEST_F(ClusterTest, FailurePrecursorsMoveTheJobBeforeTheGpuFails) {
  auto a =
      Agent("node-a", "127.0.0.1", {"--metrics-listen", "127.0.0.1:0", "--allow-fault-injection"});
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  std::string base = MetricsUrl("node-a");
  ASSERT_FALSE(base.empty());
  ASSERT_EQ(Gpuctl("run --name warned --gpus 2 -- sleep 60").code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("warned") == "Running"; })) << Describe("warned");
  int gpu = Job("warned")["status"]["placement"][0]["gpus"][0]["index"];
  // Three rows remapped (4.5 >= 4): the model flags the GPU; it is still healthy.
  testing_util::ShellResult inject = Inject(base, Cat("gpu=", gpu, "&remap=3"));
  ASSERT_EQ(inject.code, 0) << inject.output;
  ASSERT_TRUE(RunningAgain("warned")) << Describe("warned");
  Json job = Job("warned");
  for (const Json& g : job["status"]["placement"][0]["gpus"]) EXPECT_NE(g["index"].get<int>(), gpu);
  EXPECT_EQ(job["status"]["restarts"], 0);
  std::string events = Gpuctl("events warned").output;
  EXPECT_NE(events.find("PredictedFailure"), std::string::npos) << events;
  EXPECT_NE(events.find(
                Cat("GPU ", gpu, " on node-a is likely to fail (score 4.5 >= 4: 3 rows remapped")),
            std::string::npos)
      << events;
  EXPECT_NE(Slurp(Log("node-a")).find(Cat("GPU ", gpu, ": likely to fail")), std::string::npos);
  // The cluster's figures: availability (the GPU has not failed) and the job's GPU time.
  testing_util::ShellResult cluster = Gpuctl("describe cluster");
  ASSERT_EQ(cluster.code, 0) << cluster.output;
  EXPECT_NE(cluster.output.find("Availability:  100.0000%"), std::string::npos) << cluster.output;
  EXPECT_NE(cluster.output.find("Job GPU time:"), std::string::npos) << cluster.output;
  EXPECT_NE(Gpuctl("describe job warned").output.find("GPU time:      allocated"),
            std::string::npos);
}

TEST_F(ClusterTest, NodeLocalCheckpointsAreReplicatedAndRestoredOnTheNextNode) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  // The task checkpoints once, then works on; restarted where its checkpoint is, it finishes.
  std::string replica = data_ + "/checkpoints/default/replica";
  std::string yaml = (dir_.path() / "local.yaml").string();
  std::ofstream(yaml)
      << "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: local}\nspec:\n"
         "  checkpoint: {dir: "
      << replica
      << ", nodeLocal: true, replicate: true}\n"
         "  tasks:\n  - name: main\n    resources: {gpu: 1}\n    command: [sh, -c, 'cd "
         "$GPUCLOUD_CHECKPOINT_DIR && if [ -e step-1 ]; then echo resumed in $PWD; exit 0; fi; "
         "echo w > step-1.tmp && mv step-1.tmp step-1 && exec sleep 20']\n";
  ASSERT_EQ(Gpuctl("apply -f " + yaml).code, 0);
  ASSERT_TRUE(Eventually([&] { return Job("local")["status"].value("lastReplicatedMs", 0) > 0; }))
      << Describe("local");
  std::string local_a =
      (dir_.path() / "node-a" / "checkpoints" / "default" / "local" / "step-1").string();
  EXPECT_TRUE(std::filesystem::exists(local_a));
  EXPECT_TRUE(std::filesystem::exists(replica + "/step-1"));
  auto b = Agent("node-b", "127.0.0.2");
  ASSERT_TRUE(Eventually([&] { return NodesReady(2); }));
  a->Stop(SIGKILL);  // node-a and its disk are gone
  ASSERT_TRUE(Eventually([&] { return Phase("local") == "Succeeded"; })) << Describe("local");
  std::string logs = Gpuctl("logs local").output;
  EXPECT_NE(logs.find("resumed in " +
                      (dir_.path() / "node-b" / "checkpoints" / "default" / "local").string()),
            std::string::npos)
      << logs;
  std::string events = Gpuctl("events local").output;
  EXPECT_NE(events.find("resuming from the replica in " + replica), std::string::npos) << events;
  EXPECT_NE(Slurp(Log("node-b")).find("restored 1 checkpoints from " + replica), std::string::npos)
      << Slurp(Log("node-b"));
}

TEST_F(ClusterTest, APoolNoticeFromGpuctlMovesTheSpotPoolsJobs) {
  auto a = Agent("spot-a", "127.0.0.1", {"--pool", "spot"});
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  ASSERT_EQ(Gpuctl("run --name evicted --gpus 1 -- sleep 30").code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("evicted") == "Running"; })) << Describe("evicted");
  EXPECT_EQ(Gpuctl("reclaim").code, 2);
  testing_util::ShellResult none = Gpuctl("reclaim --pool nope --in 60");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.output.find("no node is in pool \"nope\""), std::string::npos) << none.output;
  testing_util::ShellResult r = Gpuctl("reclaim --pool spot --in 60");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("pool spot (spot-a) is reclaimed in 60 s"), std::string::npos)
      << r.output;
  // Nowhere else to go: checkpointed, stopped, and waiting.
  ASSERT_TRUE(Eventually([&] { return Phase("evicted") == "Pending"; })) << Describe("evicted");
  EXPECT_NE(Gpuctl("events evicted").output.find("SpotReclaim"), std::string::npos);
}

TEST_F(ClusterTest, AMigTaskSeesItsMigDeviceOnly) {
  auto a =
      Agent("node-a", "127.0.0.1",
            {"--simulate", Cat(GPUCLOUD_SOURCE_DIR, "/examples/agent/simulated-a100-mig.yaml")});
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  std::string yaml = (dir_.path() / "mig.yaml").string();
  std::ofstream(yaml)
      << "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: slice}\nspec:\n  tasks:\n"
         "  - name: main\n    resources: {gpu: {count: 1, mig: 2g.20gb}}\n"
         "    command: [sh, -c, 'echo visible=$CUDA_VISIBLE_DEVICES']\n";
  ASSERT_EQ(Gpuctl("apply -f " + yaml).code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("slice") == "Succeeded"; })) << Describe("slice");
  Json g = Job("slice")["status"]["placement"][0]["gpus"][0];
  int gpu = g["index"], start = g["migStart"];
  EXPECT_EQ(g["migProfile"], "2g.20gb");
  std::string logs = Gpuctl("logs slice").output;
  EXPECT_NE(logs.find(Cat("visible=MIG-sim-node-a-", gpu, "-", start, "\n")), std::string::npos)
      << logs;
  // The node's wiring as registered: four NVLink-connected A100s, two on their own.
  std::string node = Gpuctl("describe node node-a").output;
  EXPECT_NE(node.find("GPU topology:"), std::string::npos) << node;
  EXPECT_NE(node.find("  GPU0   X      NV18   NV18   NV18   SYS    SYS"), std::string::npos)
      << node;
  EXPECT_NE(node.find("  GPU5   SYS    SYS    SYS    SYS    SYS    X"), std::string::npos) << node;
}

TEST_F(ClusterTest, ATaskThatEndsWhileItsAgentIsAwayKeepsItsExitStatus) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  // Two tasks wait for a gate, then one exits 7 and the other 0.
  std::string gate = (dir_.path() / "gate").string();
  std::string yaml = (dir_.path() / "gated.yaml").string();
  for (const char* name : {"seven", "zero"}) {
    std::ofstream(yaml) << "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: " << name
                        << "}\nspec:\n  restartPolicy: {maxRestarts: 0}\n  tasks:\n  - name: main\n"
                           "    resources: {gpu: 1}\n    command: [sh, -c, 'while [ ! -e "
                        << gate << "-" << name << " ]; do sleep 0.05; done; exit "
                        << (std::string(name) == "seven" ? 7 : 0) << "']\n";
    ASSERT_EQ(Gpuctl("apply -f " + yaml).code, 0);
  }
  ASSERT_TRUE(Eventually([&] { return Phase("seven") == "Running" && Phase("zero") == "Running"; }))
      << Describe("seven");
  a->Stop(SIGKILL);  // the agent dies; its tasks run on
  const int64_t zero_gate_ms = UnixMillisNow();
  std::ofstream(gate + "-zero") << "go\n";  // ends while no agent watches
  // Its shim writes down how it ended; the agent comes back after that (not too late: the
  // server declares the node lost after 2 s) and reads it.
  const std::string zero_exit = (dir_.path() / "node-a/run/default.zero.0.1/exit").string();
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(zero_exit); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // to tell the times apart
  const int64_t agent_back_ms = UnixMillisNow();
  auto again = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] {
    return Slurp(Log("node-a")).find("re-adopted task default.seven.0") != std::string::npos;
  })) << Slurp(Log("node-a"));
  std::ofstream(gate + "-seven") << "go\n";  // ends under the new agent, not its child
  ASSERT_TRUE(Eventually([&] { return Phase("seven") == "Failed"; })) << Describe("seven");
  std::string message = Job("seven")["status"]["message"];
  EXPECT_NE(message.find("exit code 7"), std::string::npos) << message;
  ASSERT_TRUE(Eventually([&] { return Phase("zero") == "Succeeded"; })) << Describe("zero");
  // Its run is the task's own, from the start its record kept to the end its shim wrote down,
  // not the new agent's view of it.
  Json zero = Job("zero")["status"];
  EXPECT_GT(zero.value("startedMs", int64_t{0}), 0) << zero;
  EXPECT_LE(zero.value("startedMs", int64_t{0}), zero_gate_ms) << zero;
  // (a file's time is the kernel's coarse clock: up to a tick, 10 ms at most, behind)
  EXPECT_GE(zero.value("finishedMs", int64_t{0}), zero_gate_ms - 10) << zero;
  EXPECT_LT(zero.value("finishedMs", int64_t{0}), agent_back_ms) << zero;
}

// A host-process task that a restarted agent re-adopted is entered by `gpuctl exec` as before:
// with its own environment and working directory, read back from its shim (the new agent never
// saw its plan), not the agent's.
TEST_F(ClusterTest, ExecEntersATaskThatARestartedAgentReadopted) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  const std::string workdir = GPUCLOUD_SOURCE_DIR "/examples";  // under the node's --workdir
  const std::string yaml = (dir_.path() / "adopted.yaml").string();
  std::ofstream(yaml) << "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: adopted}\nspec:\n"
                         "  tasks:\n  - name: main\n    resources: {gpu: 1}\n"
                         "    env: [{name: GREETING, value: 'hello from the task'}]\n"
                         "    workingDir: "
                      << workdir << "\n    command: [sleep, '300']\n";
  ASSERT_EQ(Gpuctl("apply -f " + yaml).code, 0);
  ASSERT_TRUE(Eventually([&] { return Phase("adopted") == "Running"; })) << Describe("adopted");
  const std::string probe = "exec adopted -- sh -c 'echo \"$GREETING\"; pwd'";
  testing_util::ShellResult before;
  ASSERT_TRUE(Eventually([&] { return (before = Gpuctl(probe)).code == 0; })) << before.output;
  EXPECT_EQ(before.output, "hello from the task\n" + workdir + "\n");
  a->Stop(SIGKILL);  // the agent dies; its task runs on
  auto again = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] {
    return Slurp(Log("node-a")).find("re-adopted task default.adopted.0") != std::string::npos;
  })) << Slurp(Log("node-a"));
  testing_util::ShellResult after;
  ASSERT_TRUE(Eventually([&] { return (after = Gpuctl(probe)).code == 0; }))
      << after.output << Slurp(Log("node-a"));
  EXPECT_EQ(after.output, before.output);
  EXPECT_EQ(Phase("adopted"), "Running");
  EXPECT_EQ(Slurp(Log("node-a")).find("cannot be entered"), std::string::npos);
  ASSERT_EQ(Gpuctl("cancel adopted").code, 0);
}

// The heartbeat carries each GPU's utilization and memory; `gpuctl top` shows them per node and
// per job (the simulated GPUs a task holds read 90% busy, the others idle), and idle again once
// the task is gone.
TEST_F(ClusterTest, TopShowsTheUtilizationOfTheGpusATaskHolds) {
  auto a = Agent("node-a", "127.0.0.1");
  ASSERT_TRUE(Eventually([&] { return NodesReady(1); }));
  // The row of `name` in `table` (its first column).
  auto row = [](const std::string& table, const std::string& name) {
    size_t at = table.find("\n" + name + " ");
    return at == std::string::npos ? "" : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  };
  ASSERT_TRUE(Eventually([&] {
    return row(Gpuctl("top").output, "node-a").find(" 0% ") != std::string::npos;
  })) << Gpuctl("top").output;
  ASSERT_EQ(Gpuctl("run --name busy --gpus 2 -- sleep 60").code, 0);
  // Two of four GPUs at 90%: the node's mean is 45%; the job's GPUs' 90%.
  ASSERT_TRUE(Eventually([&] {
    return row(Gpuctl("top nodes").output, "node-a").find(" 45% ") != std::string::npos;
  })) << Gpuctl("top").output;
  EXPECT_NE(row(Gpuctl("top").output, "node-a").find("default/busy"), std::string::npos);
  ASSERT_TRUE(Eventually([&] {
    return row(Gpuctl("top jobs").output, "default/busy").find(" 2  90% ") != std::string::npos;
  })) << Gpuctl("top jobs").output;
  ASSERT_EQ(Gpuctl("cancel busy").code, 0);
  EXPECT_TRUE(Eventually([&] {
    return row(Gpuctl("top").output, "node-a").find(" 0% ") != std::string::npos;
  })) << Gpuctl("top").output;
}

}  // namespace
}  // namespace gpucloud

namespace gpucloud {
namespace {

// An autoscaled pool of local agents: empty at first; a gang of 2 x 2 GPUs makes it grow by
// two machines in one request, runs on them, and they go once idle for --scale-down-after.
constexpr const char* kLocalPool = R"(apiVersion: gpucloud/v1
kind: NodePool
metadata:
  name: h100
spec:
  gpuType: H100-80GB
  gpusPerNode: 2
  maxNodes: 4
  provider: local
  labels:
    gpucloud.io/boot-delay: 1s
)";

class AutoscaleTest : public ClusterTest {
 protected:
  void Start(const std::string& pool, const std::vector<std::string>& extra) {
    std::vector<std::string> flags{"--local-provider", "--local-agent-arg=--allow-host-processes",
                                   "--scale-down-after", "3s"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    RestartServer(flags);
    std::ofstream((dir_.path() / "pool.yaml").string()) << pool;
    testing_util::ShellResult r = Gpuctl("apply -f " + (dir_.path() / "pool.yaml").string());
    ASSERT_EQ(r.code, 0) << r.output;
  }
  bool NoNodes() {
    testing_util::ShellResult r = Gpuctl("get nodes");
    return r.code == 0 && r.output.find("h100-") == std::string::npos;
  }
};

TEST_F(AutoscaleTest, AnEmptyPoolGrowsForAGangAndShrinksOnceIdle) {
  Start(kLocalPool, {"--boot-timeout", "30s"});
  testing_util::ShellResult run = Gpuctl("run --name gang --gpus 2 --replicas 2 -- true");
  ASSERT_EQ(run.code, 0) << run.output;
  ASSERT_TRUE(Eventually([&] { return Phase("gang") == "Succeeded"; }, 60)) << Describe("gang");
  Json job = Job("gang");
  EXPECT_EQ(job["status"].value("attempt", 0), 1);
  std::string describe = Gpuctl("describe job gang").output;
  EXPECT_NE(describe.find("ScaleUp"), std::string::npos) << describe;
  EXPECT_NE(describe.find("scale up h100 by 2 for gang default/gang"), std::string::npos)
      << describe;
  std::string log = Slurp(Log("server"));
  EXPECT_EQ(log.find("scale up h100 by 2"), log.rfind("scale up h100 by 2")) << "asked twice";
  // Idle for 3 s, then deleted: the agents stopped and the Node objects gone.
  ASSERT_TRUE(Eventually([&] { return NoNodes(); }, 30)) << Gpuctl("get nodes").output << log;
  EXPECT_NE(Slurp(Log("server")).find("scale down h100: node h100-0 idle"), std::string::npos);
}

// The pool's first machine never comes up: the request (both machines) is cancelled at the
// boot timeout, nothing of the gang starts on the one that did, and after the back-off a new
// request brings two machines that both come up.
TEST_F(AutoscaleTest, AFailedBootCancelsTheWholeRequestAndARetrySucceeds) {
  std::string pool = kLocalPool;
  pool += "    gpucloud.io/boot-fail-first: \"1\"\n";
  Start(pool, {"--boot-timeout", "4s", "--autoscale-backoff", "1s"});
  testing_util::ShellResult run = Gpuctl("run --name gang --gpus 2 --replicas 2 -- true");
  ASSERT_EQ(run.code, 0) << run.output;
  ASSERT_TRUE(Eventually([&] { return Phase("gang") == "Succeeded"; }, 60)) << Describe("gang");
  EXPECT_EQ(Job("gang")["status"].value("attempt", 0), 1);  // one start, on the retry's machines
  std::string log = Slurp(Log("server"));
  EXPECT_NE(log.find("1 of 2 nodes Ready after"), std::string::npos) << log;
  EXPECT_NE(log.find("boot timeout"), std::string::npos) << log;
  size_t first = log.find("scale up h100 by 2");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_NE(log.find("scale up h100 by 2", first + 1), std::string::npos) << "no retry: " << log;
}

}  // namespace
}  // namespace gpucloud
