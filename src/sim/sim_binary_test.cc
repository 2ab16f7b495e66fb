// The real `gpucloud sim` binary, run as a user runs it (CTest label `integration`): the
// reports it writes, byte-identical reruns, and clear errors with exit code 1 (2 for usage).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "manifest/manifest.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"
#include "sched/test_util.h"
#include "sim/recording.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace {

using gpucloud::testing_util::Shell;

const std::string kGpucloud = GPUCLOUD_BINARY;
const std::string kSrc = GPUCLOUD_SOURCE_DIR;

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class SimBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = (dir_ / "trace.csv").string();
    std::ofstream(trace_) << "id,submit,duration,gpus,queue\n"
                             "a,0,100,2,x\nb,10,50,2,y\nc,20,10,2,x\nbad,30,ten,1,x\n";
  }
  gpucloud::testing_util::TempDir tmp_{"gpucloud-sim-test"};
  const std::filesystem::path& dir_ = tmp_.path();
  std::string trace_;
};

TEST_F(SimBinary, ComparesPoliciesAndWritesReports) {
  std::string cmd = kGpucloud + " sim --trace " + trace_ + " --cluster " + kSrc +
                    "/examples/sim/cluster-16gpu.yaml --compare fifo sjf " + kSrc +
                    "/examples/scheduler/fgd.yaml --out ";
  auto r = Shell(cmd + (dir_ / "one").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped 1 of 4 rows (first: line 5: duration \"ten\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("fgd "), std::string::npos) << r.output;
  for (const char* f : {"report.json", "report.html", "jobs.csv"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / "one" / f)) << f;
  }
  ASSERT_EQ(Shell(cmd + (dir_ / "two").string()).code, 0);
  EXPECT_EQ(Slurp(dir_ / "one" / "report.json"), Slurp(dir_ / "two" / "report.json"));
  EXPECT_EQ(Slurp(dir_ / "one" / "report.html"), Slurp(dir_ / "two" / "report.html"));
}

TEST_F(SimBinary, PredictFailuresBothRunsObserveAndActAndTabulatesThem) {
  auto r =
      Shell(kGpucloud + " sim --trace " + trace_ + " --cluster tiresias --mtbf-hours 1 --seed 4 " +
            "--predict-failures both --out " + (dir_ / "p").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("default+observe"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("default+predictive-drain"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("precision"), std::string::npos) << r.output;
  EXPECT_NE(Slurp(dir_ / "p" / "report.json").find("\"failure_prediction\""), std::string::npos);
}

TEST_F(SimBinary, TcoPricesEachRunFourWays) {
  auto r = Shell(kGpucloud + " sim --trace " + trace_ + " --cluster tiresias --tco --out " +
                 (dir_ / "t").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tco (default):"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("<- cheapest"), std::string::npos) << r.output;
  // a: 2 GPUs for 100 s, b: 2 for 50 s, c: 2 for 10 s (an empty cluster runs them at once).
  std::string tco = Slurp(dir_ / "t" / "tco.json");
  EXPECT_NE(tco.find("\"gpuHours\": " + std::to_string(320.0 / 3600).substr(0, 6)),
            std::string::npos)
      << tco;
  for (const char* s : {"on-demand", "reserved+on-demand", "reserved+spot", "owned"}) {
    EXPECT_NE(tco.find(std::string("\"name\": \"") + s + "\""), std::string::npos) << s;
  }
}

// An inference service replayed beside the trace: the summary's services table and
// report.json's services; a curve missing or malformed is named.
TEST_F(SimBinary, ReplaysAServiceLoadCurveBesideTheTrace) {
  const std::string svc = kSrc + "/examples/sim/inference-service.yaml";
  const std::string curve = kSrc + "/examples/sim/service-load-diurnal.csv";
  std::string base = kGpucloud + " sim --trace " + trace_ + " --cluster " + kSrc +
                     "/examples/sim/cluster-16gpu.yaml --service " + svc;
  auto r = Shell(base + " --service-load " + curve + " --out " + (dir_ / "s").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("(training)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("shop/ranker"), std::string::npos) << r.output;
  const std::string report = Slurp(dir_ / "s" / "report.json");
  for (const char* key : {"\"services\"", "\"gpu_hours_training\"", "\"shortfall_replica_hours\"",
                          "\"timeline\"", "\"name\": \"shop/ranker\""}) {
    EXPECT_NE(report.find(key), std::string::npos) << key;
  }
  r = Shell(base + " --out " + (dir_ / "x").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--service-load: 0 curves for 1 services"), std::string::npos)
      << r.output;
  std::ofstream(dir_ / "bad.csv") << "time,rps\n0,5\n1h,many\n";
  r = Shell(base + " --service-load " + (dir_ / "bad.csv").string() + " --out " +
            (dir_ / "x").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("bad.csv: line 3: rps \"many\" is not a number >= 0"), std::string::npos)
      << r.output;
  r = Shell(kGpucloud + " sim --trace " + trace_ + " --cluster tiresias --service " + trace_ +
            " --service-load " + curve + " --out " + (dir_ / "x").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "x"));  // nothing written
}

TEST_F(SimBinary, BadInputExitsOneAndSaysWhy) {
  std::string base = kGpucloud + " sim --out " + (dir_ / "o").string();
  auto r = Shell(base + " --trace /nonexistent.csv --cluster tiresias");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("/nonexistent.csv: cannot open"), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --policy fastest");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("unknown policy \"fastest\""), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster huge");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("unknown cluster preset \"huge\""), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --until soon");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--until: "), std::string::npos) << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --mtbf-hours tpu=3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--mtbf-hours: \"tpu=3\" is not GPU-TYPE=HOURS"), std::string::npos)
      << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --slowdown 1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--slowdown: \"1,2\" is not three factors"), std::string::npos)
      << r.output;
  r = Shell(base + " --trace " + trace_ + " --cluster tiresias --predict-failures act");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--predict-failures: needs failures to predict (--mtbf-hours)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(Shell(base + " --trace " + trace_ +
                  " --cluster tiresias --mtbf-hours 9 --predict-failures maybe")
                .code,
            2);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "o"));               // nothing written
  EXPECT_EQ(Shell(kGpucloud + " sim --trace " + trace_).code, 2);  // usage
}

// A scheduler recording (what `gpucloud server --record-scheduler` writes) replays: the same
// decisions exit 0, a different one exits 3 naming it, another policy is a what-if.
TEST_F(SimBinary, ReplaysARecordingAndSaysWhereItDiffers) {
  using namespace gpucloud;
  std::stringstream text;
  sim::RecordingWriter w(text);
  SchedulerConfig config;
  w.Header(config);
  w.Queues(0, {});
  std::vector<Node> nodes = {sched::testing_util::MakeTestNode("a", 4),
                             sched::testing_util::MakeTestNode("b", 4)};
  w.Nodes(0, nodes);
  manifest::ParseResult parsed = manifest::ParseManifests(
      "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: one}\nspec:\n  tasks:\n"
      "  - name: w\n    command: [x]\n    resources: {gpu: {count: 3}}\n",
      "one.yaml");
  ASSERT_TRUE(parsed.ok());
  const Job& job = std::get<Job>(parsed.manifests[0].object);
  sched::JobView view;
  view.phase = sched::JobViewPhase::kWaiting;
  w.Job(1000, "default/one", job, view);
  auto scheduler = sched::Scheduler::FromConfig(config, {}, GpuCatalog::Default());
  ASSERT_TRUE(scheduler.ok());
  sched::Snapshot snap = sched::BuildSnapshot(nodes, {{"default/one", &job, &view}}, 3600'000, 1000,
                                              GpuCatalog::Default());
  std::vector<const sched::PendingJob*> pending = {&snap.pending.at(0)};
  std::vector<sched::Decision> decisions = (*scheduler)->Schedule(*snap.state, pending, 1000);
  ASSERT_EQ(decisions.at(0).kind, sched::DecisionKind::kBind);
  w.Pass(1000, true, pending, decisions, *snap.state);
  const std::string recording = (dir_ / "rec.jsonl").string();
  std::ofstream(recording) << text.str();

  auto r = Shell(kGpucloud + " sim --trace " + recording);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("1 passes, 1 jobs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the same decisions in the same order as the server"), std::string::npos)
      << r.output;

  // The server's bind, moved to the other node.
  std::string moved = text.str();
  const std::string bound = decisions[0].allocation->replicas[0].node == 0 ? "a" : "b";
  const size_t at = moved.find("\"node\":\"" + bound + "\"", moved.find("\"kind\":\"bind\""));
  ASSERT_NE(at, std::string::npos);
  moved.replace(at, 10, std::string("\"node\":\"") + (bound == "a" ? "b" : "a") + "\"");
  std::ofstream(recording) << moved;
  r = Shell(kGpucloud + " sim --trace " + recording);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("first difference at pass 1 (t=1000 ms), decision 1"), std::string::npos)
      << r.output;
  r = Shell(kGpucloud + " sim --trace " + recording + " --policy fifo --out " +
            (dir_ / "w").string());
  EXPECT_EQ(r.code, 0) << r.output;  // a what-if reports differences, it does not fail on them
  EXPECT_NE(Slurp(dir_ / "w" / "replay.json").find("\"differingPasses\": 1"), std::string::npos);
  // A trace still needs its cluster.
  r = Shell(kGpucloud + " sim --trace " + trace_ + " --out " + (dir_ / "x").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--cluster is required"), std::string::npos) << r.output;
}

}  // namespace
