// The replay proof (issue 18): the controller, on a real SQLite store with agents played by the
// test, lives through a scripted day (arrivals, an array, a node lost and back, a cordon and a
// drain, preemptions, a queue change, a cancel, a job that can never run, a restart) while
// recording its scheduler
// (--record-scheduler). The simulator, fed the recording, must make the same decisions in the
// same order: binds with their nodes and GPUs, preemptions with their preemptor, rejections and
// waits with their reasons.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "server/controller_fixture.h"
#include "sim/replay.h"

namespace gpucloud::server {
namespace {

constexpr int64_t kMinute = 60'000;

class ControllerReplayTest : public ControllerTest {
 protected:
  void Record(const SchedulerConfig& config) {
    config_ = config;
    ControllerOptions o;
    o.checkpoint_root = "/ckpt";
    o.stop_grace_ms = 10'000;
    o.scheduler = config;
    o.record_scheduler = &recording_;
    controller_ = std::make_unique<Controller>(*store_, nodes_, clock_, GpuCatalog::Default(), o);
  }

  void PutQueue(const std::string& name, int weight, bool create) {
    std::string yaml = Cat("apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: ", name,
                           "}\nspec: {weight: ", weight, "}\n");
    Response r = create ? Call("POST", "/apis/gpucloud/v1/queues", yaml)
                        : Call("PUT", Cat("/apis/gpucloud/v1/queues/", name), yaml);
    ASSERT_LT(r.status, 300) << r.body;
  }

  // A job of `replicas` x `gpus` GPUs whose tasks run `runtime_ms` once started.
  void Job(const std::string& name, int replicas, int gpus, int64_t runtime_ms,
           const std::string& extra) {
    Submit(GangJob(name, replicas, gpus, 3, extra));
    runtime_ms_[name] = runtime_ms;
  }

  // The agents of the live nodes report on what is assigned to them, then a pass.
  void Step(int64_t dt_ms) {
    clock_.Advance(dt_ms);
    const int64_t now = clock_.NowMillis();
    for (const std::string& node : nodes_up_) {
      std::vector<api::TaskReport> reports;
      std::set<std::string> assigned;
      for (const store::KeyValue& kv : Assignments(node)) {
        api::Assignment a = *api::AssignmentFromJson(kv.value);
        assigned.insert(a.name);
        std::string run = Cat(a.job, "#", a.attempt);
        auto [it, first] = started_ms_.try_emplace(run, now);
        bool done = now - it->second >= runtime_ms_.at(a.job);
        api::TaskReport r =
            Report(a.job, a.rank, done ? api::TaskState::kSucceeded : api::TaskState::kRunning,
                   done ? 0 : -1);
        r.attempt = a.attempt;
        // A checkpoint every 20 minutes of running.
        r.checkpoint_ms = it->second + (now - it->second) / (20 * kMinute) * (20 * kMinute);
        if (r.checkpoint_ms == it->second) r.checkpoint_ms = 0;
        reports.push_back(r);
      }
      // Tasks whose assignment went away (preempted, drained, cancelled) have stopped.
      for (const auto& [name, job] : running_[node]) {
        if (assigned.contains(name)) continue;
        api::TaskReport r = Report(job.first, job.second, api::TaskState::kStopped, 0);
        reports.push_back(r);
      }
      running_[node].clear();
      for (const store::KeyValue& kv : Assignments(node)) {
        api::Assignment a = *api::AssignmentFromJson(kv.value);
        running_[node][a.name] = {a.job, a.rank};
      }
      Heartbeat(node, std::move(reports));
    }
    Pass();
  }

  // One scripted day, every `step` ms.
  void Day() {
    for (const char* n : {"node-a", "node-b", "node-c"}) {
      Register(n, std::string(n) == "node-c" ? 8 : 4);
      nodes_up_.insert(n);
    }
    PutQueue("research", 2, true);
    PutQueue("prod", 1, true);
    uint64_t x = 12345;  // a fixed LCG: the same day every run
    auto next = [&x](uint64_t n) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      return (x >> 33) % n;
    };
    const int kGpus[] = {1, 1, 2, 4, 4, 8};
    int jobs = 0;
    for (int64_t t = 0; t < 24 * 60 * kMinute; t += 10 * kMinute) {
      if (t % (40 * kMinute) == 0 && jobs < 34) {
        const int gpus = kGpus[next(6)];
        const bool gang = next(5) == 0;
        std::string extra = Cat("  queue: ", next(3) == 0 ? "prod" : "research", "\n");
        if (next(4) == 0) extra += "  priority: 10\n";
        if (next(4) == 0) extra += "  billing: spot\n";
        const int64_t runtime = (10 + static_cast<int64_t>(next(300))) * kMinute;
        if (next(2) == 0) extra += Cat("  runtimeEstimate: ", runtime / kMinute + 5, "m\n");
        Job(Cat("job-", jobs++), gang ? 2 : 1, gang ? 4 : gpus, runtime, extra);
      }
      if (t == 2 * 60 * kMinute) Job("too-big", 1, 16, kMinute, "");  // no node has 16 GPUs
      if (t == 3 * 60 * kMinute) {  // an array: 6 elements, 2 at a time
        Submit(Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: sweep}\nspec:\n",
                   "  tasks:\n  - name: worker\n    command: [python3, train.py]\n",
                   "    resources: {gpu: {count: 1}}\n  array: {count: 6, parallelism: 2}\n"));
        for (int i = 0; i < 6; ++i) runtime_ms_[Cat("sweep-", i)] = (30 + 10 * i) * kMinute;
      }
      if (t == 6 * 60 * kMinute) nodes_up_.erase("node-b");   // its agent dies
      if (t == 9 * 60 * kMinute) nodes_up_.insert("node-b");  // and comes back
      if (t == 10 * 60 * kMinute) {
        ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodes/node-c/cordon").status, 200);
      }
      if (t == 11 * 60 * kMinute) {
        ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodes/node-c/drain").status, 200);
      }
      if (t == 12 * 60 * kMinute) PutQueue("prod", 3, false);
      if (t == 13 * 60 * kMinute) {
        (void)Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs/job-20/cancel");
      }
      if (t == 14 * 60 * kMinute) {
        ASSERT_EQ(Call("POST", "/apis/gpucloud/v1/nodes/node-c/uncordon").status, 200);
      }
      if (t == 16 * 60 * kMinute) Record(config_);  // the server restarts: a new header
      Step(5 * kMinute);
      Step(5 * kMinute);
    }
  }

  // Replays the recording with its own configuration: it must decide as the server did.
  sim::ReplayResult ExpectSameDecisions() {
    if (const char* dump = std::getenv("GPUCLOUD_REPLAY_DUMP")) {  // to look at it by hand
      std::ofstream(dump) << recording_.str();
    }
    absl::StatusOr<sim::ReplayResult> r = sim::Replay(recording_.str(), {});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_FALSE(r->first.has_value()) << sim::DescribeDivergence(*r->first);
    EXPECT_EQ(r->holding_conflicts, 0);
    return *r;
  }

  std::stringstream recording_;
  SchedulerConfig config_;
  std::map<std::string, int64_t> runtime_ms_;
  std::map<std::string, int64_t> started_ms_;  // "job#attempt" -> first seen assigned
  std::set<std::string> nodes_up_;
  // Node -> assignment name -> (job, rank) as last seen.
  std::map<std::string, std::map<std::string, std::pair<std::string, int>>> running_;
};

TEST_F(ControllerReplayTest, TheSimulatorDecidesAsTheServerDidOnAScriptedDay) {
  SchedulerConfig config;
  config.estimate_start_times = true;
  config.fair_share_window_s = 6 * 3600;
  Record(config);
  Day();
  sim::ReplayResult r = ExpectSameDecisions();
  // The day exercised what it is meant to.
  EXPECT_GT(r.passes, 100);
  EXPECT_GE(r.jobs, 41);  // 34 jobs, the impossible one and the array's 6 elements
  EXPECT_GE(r.binds, 30);
  EXPECT_GE(r.preemptions, 1);
  EXPECT_GE(r.rejections, 1);
  EXPECT_GE(r.waits, 10);
  EXPECT_GE(r.node_changes, 4);  // node-b lost and back, node-c cordoned and uncordoned
  // Another policy on the same inputs, pass by pass: a what-if that decides differently.
  sim::ReplayOptions what_if;
  what_if.policy = SchedulerConfig();
  what_if.policy->ordering = QueueOrdering::kSjf;
  what_if.policy->preemption = false;
  absl::StatusOr<sim::ReplayResult> other = sim::Replay(recording_.str(), what_if);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_GT(other->differing_passes, 0);
  EXPECT_EQ(other->passes, r.passes);
}

// The orderings that read the job's history: attained service, bands, the starvation guard.
TEST_F(ControllerReplayTest, DlasReplaysTheSame) {
  SchedulerConfig config;
  config.ordering = QueueOrdering::kDlas;
  config.las.thresholds_gpu_s = {3600};
  config.las.starvation_factor = 4;
  Record(config);
  Day();
  EXPECT_GE(ExpectSameDecisions().binds, 30);
}

TEST_F(ControllerReplayTest, LasReplaysTheSame) {
  SchedulerConfig config;
  config.ordering = QueueOrdering::kLas;
  Record(config);
  Day();
  EXPECT_GE(ExpectSameDecisions().binds, 30);
}

TEST_F(ControllerReplayTest, ADifferentDecisionIsReportedWithItsPass) {
  Record(SchedulerConfig());
  Register("node-a", 4);
  Register("node-b", 4);
  runtime_ms_["one"] = 60 * kMinute;
  Submit(GangJob("one", 1, 2));
  nodes_up_ = {"node-a", "node-b"};
  Step(kMinute);
  Step(kMinute);
  // The recorded bind, moved to the other node: the replay says where it differs.
  std::string text = recording_.str();
  std::string bound = Status("one").placement.at(0).node;
  std::string other = bound == "node-a" ? "node-b" : "node-a";
  size_t at = text.find(Cat("\"node\":\"", bound, "\""), text.find("\"kind\":\"bind\""));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, bound.size() + 9, Cat("\"node\":\"", other, "\""));
  absl::StatusOr<sim::ReplayResult> r = sim::Replay(text, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->first.has_value());
  EXPECT_EQ(r->first->pass, 1);
  EXPECT_EQ(r->first->index, 0);
  EXPECT_NE(r->first->server.find(other), std::string::npos);
  EXPECT_NE(r->first->replay.find(bound), std::string::npos);
  EXPECT_NE(sim::DescribeDivergence(*r->first).find("pass 1"), std::string::npos);
}

TEST_F(ControllerReplayTest, ARecordingThatIsNotOneIsRefusedNamingTheLine) {
  absl::StatusOr<sim::ReplayResult> r = sim::Replay("{\"kind\":\"pass\",\"t\":1}\n", {});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 1"), std::string::npos) << r.status();
  r = sim::Replay("{\"kind\":\"header\",\"version\":99}\n", {});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace gpucloud::server
