#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/command.h"
#include "sim/report.h"

namespace gpucloud::sim {
namespace {

using Json = nlohmann::ordered_json;

SimCluster Nodes(int nodes, int gpus) {
  NodePool p;
  p.metadata.name = "p";
  p.spec.gpu_type = "V100-16GB";
  p.spec.gpus_per_node = gpus;
  p.spec.max_nodes = nodes;
  return ClusterFromPools("test", {p});
}

Trace Csv(const std::string& text) {
  absl::StatusOr<Trace> t = ReadTrace(text, "csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

SimResult Replay(const Trace& t, const SimCluster& c, SimOptions o = {}) {
  absl::StatusOr<SimResult> r = Simulate(t, c, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

std::map<std::string, int64_t> Jct(const SimResult& r) {
  std::map<std::string, int64_t> out;
  for (const JobOutcome& j : r.jobs) {
    if (j.end_s) out[j.id] = *j.end_s - j.submit_s;
  }
  return out;
}

// One node of 2 GPUs; three 2-GPU jobs: a (0, 100 s), b (10, 50 s), c (20, 10 s).
// FIFO: a 0-100, b 100-150, c 150-160: JCTs 100, 140, 140.
// SJF (on the exact durations): at 100 c goes first: c 100-110, b 110-160: 100, 150, 90.
const char* kThree = "id,submit,duration,gpus\na,0,100,2\nb,10,50,2\nc,20,10,2\n";

TEST(Simulator, HandComputedFifoAndSjf) {
  SimCluster c = Nodes(1, 2);
  SimOptions fifo;
  SimResult r = Replay(Csv(kThree), c, fifo);
  EXPECT_EQ(Jct(r), (std::map<std::string, int64_t>{{"a", 100}, {"b", 140}, {"c", 140}}));
  SimOptions sjf;
  sjf.policy.ordering = QueueOrdering::kSjf;
  r = Replay(Csv(kThree), c, sjf);
  EXPECT_EQ(Jct(r), (std::map<std::string, int64_t>{{"a", 100}, {"b", 150}, {"c", 90}}));
  EXPECT_EQ(r.end_s, 160);
  // Utilization: 2 of 2 GPUs for 160 s, from 0.
  ASSERT_FALSE(r.allocated.empty());
  EXPECT_EQ(r.allocated.front(), (std::pair<int64_t, double>{0, 2.0}));
  EXPECT_EQ(r.allocated.back(), (std::pair<int64_t, double>{160, 0.0}));
}

// Ordering dlas, one node of 2 GPUs, a band at 100 GPU-seconds, 10 s of grace: "long" (0,
// 1,000 s) crosses into band 1 at t=50 with no other event then; "short" (10, 20 s), waiting in
// band 0, preempts it: long checkpoints until 60, short runs 60-80, long resumes its last 940 s
// at 80 and ends at 1,020. JCTs 1,020 and 70 (FIFO: 1,000 and 1,010).
TEST(Simulator, DlasPreemptsAJobWhenItsServiceCrossesABand) {
  const char* trace = "id,submit,duration,gpus\nlong,0,1000,2\nshort,10,20,2\n";
  SimOptions dlas;
  dlas.policy.ordering = QueueOrdering::kDlas;
  dlas.policy.las.thresholds_gpu_s = {100};
  dlas.policy.preemption_grace_s = 10;
  SimResult r = Replay(Csv(trace), Nodes(1, 2), dlas);
  EXPECT_EQ(Jct(r), (std::map<std::string, int64_t>{{"long", 1020}, {"short", 70}}));
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.jobs[0].preemptions, 1);
  r = Replay(Csv(trace), Nodes(1, 2), SimOptions{});
  EXPECT_EQ(Jct(r), (std::map<std::string, int64_t>{{"long", 1000}, {"short", 1010}}));
}

// Fair share remembers the window's GPU-hours: one GPU; a1 (queue a) runs 0-1,000, c1 (c)
// 5,000-10,000; a2 (a, submitted at 5,010) and b1 (b, at 5,020) wait for it, both queues holding
// nothing then. With the default window (7 days) queue a has used 1,000 GPU-seconds, b none, so
// b1 goes first; with a window of an hour a1 is forgotten by 10,000 and the tie goes to a (by
// name).
TEST(Simulator, FairShareCountsTheWindowsHistory) {
  const char* trace =
      "id,submit,duration,gpus,queue\na1,0,1000,1,a\nc1,5000,5000,1,c\na2,5010,100,1,a\n"
      "b1,5020,100,1,b\n";
  SimResult r = Replay(Csv(trace), Nodes(1, 1));
  EXPECT_EQ(Jct(r).at("b1"), 10100 - 5020);
  EXPECT_EQ(Jct(r).at("a2"), 10200 - 5010);
  SimOptions hour;
  hour.policy.fair_share_window_s = 3600;
  r = Replay(Csv(trace), Nodes(1, 1), hour);
  EXPECT_EQ(Jct(r).at("a2"), 10100 - 5010);
  EXPECT_EQ(Jct(r).at("b1"), 10200 - 5020);
}

// A failed node is no capacity until it is repaired, as in the server (which leaves a node that
// is not Ready out of its view): two nodes of 8, node 1 down from 0 to 3,600 s; queue a is
// guaranteed 8 GPUs and does not lend them, so b's 8-GPU job may not borrow the one node left
// and starts after the repair. (Kept as capacity behind a placeholder, the failed node made 8
// GPUs look idle, and b took a's guarantee at once.)
TEST(Simulator, AFailedNodeIsNoCapacity) {
  SimOptions o;
  o.node_failures = {{0, 1}};
  o.repair_s = 3600;
  QueueSpec a;
  a.may_lend = false;
  a.quota = {{.gpu_type = "*", .guaranteed = WholeGpus(8)}};
  o.queues = {{"a", a}};
  SimResult r = Replay(Csv("id,submit,duration,gpus,queue\nb1,0,100,8,b\n"), Nodes(2, 8), o);
  EXPECT_EQ(Jct(r).at("b1"), 3700);
  EXPECT_EQ(r.failures, 1);
  o.node_failures.clear();
  r = Replay(Csv("id,submit,duration,gpus,queue\nb1,0,100,8,b\n"), Nodes(2, 8), o);
  EXPECT_EQ(Jct(r).at("b1"), 100);  // both nodes up: 8 idle GPUs beyond a's guarantee
}

TEST(Simulator, SpreadJobsRunSlower) {
  // Two nodes of 2 GPUs under one leaf; a 4-GPU job runs as 2 x 2 at 1.1x: 110 s.
  SimResult r = Replay(Csv("id,submit,duration,gpus\nwide,0,100,4\n"), Nodes(2, 2));
  EXPECT_EQ(Jct(r).at("wide"), 110);
  // A 2-GPU job on one node runs at full speed.
  r = Replay(Csv("id,submit,duration,gpus\nnarrow,0,100,2\n"), Nodes(2, 2));
  EXPECT_EQ(Jct(r).at("narrow"), 100);
}

TEST(Simulator, InfeasibleJobsAreRejectedAndEveryJobIsAccounted) {
  SimResult r = Replay(Csv("id,submit,duration,gpus\nbig,0,10,16\nok,5,10,1\nlate,1000,10,1\n"),
                       Nodes(1, 8), SimOptions{.until_s = 100});
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.jobs[0].state, JobState::kRejected);
  // 16 GPUs run as two 8-GPU replicas; the cluster has one 8-GPU node.
  EXPECT_EQ(r.jobs[0].reason,
            "the gang needs 2 replicas together; the eligible nodes hold at most 1");
  EXPECT_EQ(r.jobs[1].state, JobState::kFinished);
  EXPECT_EQ(r.jobs[2].state, JobState::kNotSubmitted);
}

TEST(Simulator, PreemptedJobsResumeWithTheirWork) {
  // low (priority 0) takes the node for 1000 s; high (priority 5, same queue) arrives at 100:
  // low is preempted, stops at 130 (30 s grace) having done 130 s of work; high runs 130-230;
  // low resumes at 230 with 870 s left and ends at 1100.
  SimResult r = Replay(Csv("id,submit,duration,gpus,priority\nlow,0,1000,2,0\nhigh,100,100,2,5\n"),
                       Nodes(1, 2));
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(Jct(r), (std::map<std::string, int64_t>{{"low", 1100}, {"high", 130}}));
  EXPECT_EQ(r.jobs[0].preemptions, 1);
}

TEST(Simulator, FailuresRestartFromCheckpointsAndAreDeterministic) {
  std::string text = "id,submit,duration,gpus\n";
  for (int i = 0; i < 40; ++i)
    text += "j" + std::to_string(i) + "," + std::to_string(i * 60) + ",7200,1\n";
  Trace t = Csv(text);
  SimOptions o;
  o.mtbf_hours = 2;
  o.repair_s = 600;
  o.checkpoint_interval_s = 900;
  o.seed = 7;
  SimResult a = Replay(t, Nodes(4, 4), o);
  EXPECT_GT(a.failures, 0);
  EXPECT_GT(a.restarts, 0);
  EXPECT_GT(a.gpu_hours_lost, 0);
  // Lost work is less than one checkpoint interval per restart.
  EXPECT_LE(a.gpu_hours_lost, a.restarts * 900 / 3600.0 + 1e-9);
  for (const JobOutcome& j : a.jobs) EXPECT_EQ(j.state, JobState::kFinished) << j.id;
  SimResult b = Replay(t, Nodes(4, 4), o);
  ReportInput ra{"t.csv", &t, nullptr, {}}, rb = ra;
  SimCluster cluster = Nodes(4, 4);
  ra.cluster = rb.cluster = &cluster;
  ra.runs.push_back(a);
  rb.runs.push_back(b);
  EXPECT_EQ(ReportJson(ra), ReportJson(rb));  // same seed: the same bytes
  o.seed = 8;
  SimResult c = Replay(t, Nodes(4, 4), o);
  ReportInput rc = ra;
  rc.runs = {c};
  EXPECT_NE(ReportJson(ra), ReportJson(rc));
}

TEST(Simulator, MtbfPerGpuType) {
  Trace t = Csv("id,submit,duration,gpus\na,0,36000,1\n");
  SimOptions o;
  o.mtbf_hours_by_type = {{"T4", 1.0}};  // the cluster has V100s only: nothing fails
  EXPECT_EQ(Replay(t, Nodes(4, 4), o).failures, 0);
  o.mtbf_hours_by_type = {{"V100-16GB", 1.0}};
  EXPECT_GT(Replay(t, Nodes(4, 4), o).failures, 0);
}

// A busy 8-node cluster for a week, a node failure every ~3 days per node, precursors before
// every failure that has them, little noise.
struct PredictionCase {
  Trace trace;
  SimCluster cluster = Nodes(8, 4);
  SimOptions o;
  PredictionCase() {
    std::string text = "id,submit,duration,gpus\n";
    for (int i = 0; i < 200; ++i) {
      text += "j" + std::to_string(i) + "," + std::to_string(i * 3000) + ",86400," +
              std::to_string(1 + i % 4) + "\n";
    }
    trace = Csv(text);
    o.mtbf_hours = 72;
    o.repair_s = 3600;
    o.checkpoint_interval_s = 3600;
    o.seed = 3;
    o.until_s = 7 * 86400;
    o.prediction.precursor_share = 1.0;
    o.prediction.lead_hours = 12;
    o.prediction.precursors_per_hour = 1.0;
    o.prediction.noise_per_gpu_day = 0.2;
  }
};

TEST(FailurePrediction, ActingOnFlagsSavesWorkAndLeavesTheFailuresAsTheyWere) {
  PredictionCase c;
  c.o.prediction.mode = PredictionMode::kOff;
  SimResult off = Replay(c.trace, c.cluster, c.o);
  c.o.prediction.mode = PredictionMode::kObserve;
  SimResult observe = Replay(c.trace, c.cluster, c.o);
  c.o.prediction.mode = PredictionMode::kAct;
  SimResult act = Replay(c.trace, c.cluster, c.o);
  // The signals have their own random stream: the same failures, and watching changes nothing.
  EXPECT_EQ(off.failures, observe.failures);
  EXPECT_EQ(off.failures, act.failures);
  EXPECT_DOUBLE_EQ(off.gpu_hours_lost, observe.gpu_hours_lost);
  EXPECT_EQ(off.prediction.flags, 0);
  ASSERT_GT(observe.prediction.failures, 5);
  EXPECT_EQ(observe.prediction.failures, observe.failures);
  EXPECT_GT(observe.prediction.recall(), 0.7);
  EXPECT_GT(observe.prediction.precision(), 0.7);
  EXPECT_GT(observe.prediction.median_lead_hours, 1.0);
  EXPECT_EQ(observe.prediction.migrations, 0);
  // Acting: jobs leave flagged nodes before they fail; less work is lost, migrations included.
  EXPECT_GT(act.prediction.migrations, 0);
  EXPECT_GT(act.prediction.gpu_hours_cordoned, 0);
  EXPECT_LT(act.gpu_hours_lost + act.prediction.gpu_hours_migration, 0.7 * observe.gpu_hours_lost);
  ReportInput in{"t.csv", &c.trace, &c.cluster, {observe, act}};
  std::string table = SummaryTable(in);
  EXPECT_NE(table.find("precision"), std::string::npos) << table;
  EXPECT_NE(ReportJson(in).find("\"failure_prediction\""), std::string::npos);
}

TEST(FailurePrediction, WithoutPrecursorsFlagsAreNoBetterThanChance) {
  PredictionCase c;
  c.o.prediction.mode = PredictionMode::kObserve;
  c.o.prediction.precursor_share = 0;
  c.o.prediction.noise_per_gpu_day = 4;  // benign signals only: few flags, none right
  SimResult quiet = Replay(c.trace, c.cluster, c.o);
  EXPECT_GT(quiet.prediction.failures, 5);
  EXPECT_LT(quiet.prediction.recall(), 0.2);
  // A very noisy fleet: many flags, right only as often as a failure happens to follow within
  // the horizon by chance (MTBF 72 h, horizon 48 h: about half).
  c.o.prediction.noise_per_gpu_day = 40;
  SimResult noisy = Replay(c.trace, c.cluster, c.o);
  EXPECT_GT(noisy.prediction.flags, 10 * quiet.prediction.flags);
  EXPECT_LT(noisy.prediction.precision(), 0.6);
}

// The Fragmentation score and the report protect the trace's own request mix: each task's GPUs
// per replica as the scheduler sees them (16 GPUs on 8-GPU nodes are two replicas of 8).
TEST(Simulator, TheRequestMixIsTheTraces) {
  Trace t = Csv("id,submit,duration,gpus\na,0,10,0.5\nb,0,10,0.5\nc,0,10,1\nd,0,10,16\n");
  std::vector<WorkloadShare> mix = WorkloadOfTrace(t, 8);
  EXPECT_EQ(mix, (std::vector<WorkloadShare>{
                     {MilliGpu(500), 2.0}, {WholeGpus(1), 1.0}, {WholeGpus(8), 1.0}}));
}

// Fragmentation is sampled at every multiple of the interval, also where no event happens: one
// job from 0 to 10 h gives samples at 0, 1, ..., 10 h.
TEST(Simulator, FragmentationIsSampledEveryIntervalEventsOrNot) {
  SimOptions o;
  o.fragmentation_sample_s = 3600;
  SimResult r = Replay(Csv("id,submit,duration,gpus\nlong,0,36000,1\n"), Nodes(1, 2), o);
  ASSERT_EQ(r.fragmentation.size(), 11u);
  for (size_t i = 0; i < r.fragmentation.size(); ++i) {
    EXPECT_EQ(r.fragmentation[i].first, static_cast<int64_t>(i) * 3600);
  }
}

// The best-fit preset is the defaults without scoring: presets differ in one thing each.
TEST(Simulator, PresetsDifferFromTheDefaultsInOneThing) {
  SchedulerConfig defaults = *BuiltinPolicy("default");
  SchedulerConfig best_fit = *BuiltinPolicy("best-fit");
  EXPECT_TRUE(best_fit.scores.empty());
  best_fit.scores = defaults.scores;
  EXPECT_EQ(best_fit, defaults);
  SchedulerConfig dlas = *BuiltinPolicy("dlas");
  EXPECT_EQ(dlas.ordering, QueueOrdering::kDlas);
  dlas.ordering = defaults.ordering;
  EXPECT_EQ(dlas, defaults);
}

// A short busy stretch in a long run shows in the utilization series as its span's peak.
TEST(Report, UtilizationSpansKeepTheirPeak) {
  Trace t = Csv("id,submit,duration,gpus\nfirst,0,10,1\nburst,5000,100,2\nlate,999990,10,1\n");
  SimCluster c = Nodes(1, 2);
  ReportInput in{"burst.csv", &t, &c, {Replay(t, c)}};
  Json json = Json::parse(ReportJson(in));
  const Json& series = json["runs"][0]["utilization"]["series"];
  ASSERT_EQ(series.size(), 200u);
  // Spans of 5,000 s: the burst (5,000-5,100) lies in the second, busy 2% of it at 100%.
  EXPECT_EQ(series[1][0], 5000);
  EXPECT_EQ(series[1][1], 0.02);
  EXPECT_EQ(series[1][2], 1.0);
  EXPECT_EQ(series[0][1], 0.001);  // the first job: 1 of 2 GPUs for 10 s of 5,000
  EXPECT_EQ(series[0][2], 0.5);
  EXPECT_EQ(series[2][2], 0.0);
}

// With nothing finished, the summary says "-", not 0s, and how many jobs are left.
TEST(Report, NothingFinishedIsNotZeroSeconds) {
  Trace t = Csv("id,submit,duration,gpus\nlong,0,1000,1\nwait,0,1000,2\n");
  SimCluster c = Nodes(1, 2);
  ReportInput in{"t.csv", &t, &c, {Replay(t, c, SimOptions{.until_s = 10})}};
  std::string table = SummaryTable(in);
  EXPECT_NE(table.find("unfinished"), std::string::npos) << table;
  const size_t first = table.find('\n') + 1;
  std::istringstream row(table.substr(first, table.find('\n', first) - first));
  std::vector<std::string> cells{std::istream_iterator<std::string>(row), {}};
  // policy, finished, unfinished, mean JCT, median, p95, p99, mean wait, util, makespan
  ASSERT_EQ(cells.size(), 10u) << table;
  EXPECT_EQ(cells[1], "0");
  EXPECT_EQ(cells[2], "2");
  for (int i : {3, 4, 5, 6, 9}) EXPECT_EQ(cells[i], "-") << i << ": " << table;
  EXPECT_EQ(cells[7], "0s");  // "long" started at once: a real wait of 0 s
  EXPECT_TRUE(Json::parse(ReportJson(in))["runs"][0]["makespan_s"].is_null());
}

// Every skipped row is counted under its reason, values taken out.
TEST(Report, SkippedRowsAreCountedByReason) {
  Trace t = Csv("id,submit,duration,gpus\na,0,x,1\nb,0,y,1\nc,0,10,0\nd,0,10,1\n");
  SimCluster c = Nodes(1, 2);
  ReportInput in{"t.csv", &t, &c, {Replay(t, c)}};
  Json trace = Json::parse(ReportJson(in))["trace"];
  EXPECT_EQ(trace["skipped_rows"], 3);
  EXPECT_EQ(trace["skipped_by_reason"],
            (Json{{"duration \"\u2026\" is not a number of seconds", 2}, {"uses no GPU", 1}}));
}

TEST(Report, PercentilesByNearestRank) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({5, 1, 3, 2, 4}, 50), 3);
  EXPECT_EQ(Percentile({5, 1, 3, 2, 4}, 95), 5);
  EXPECT_EQ(Percentile({5, 1, 3, 2, 4}, 0), 1);
}

TEST(Report, JsonHasTheFiguresTheIssueAsksFor) {
  Trace t = Csv(kThree);
  SimCluster c = Nodes(1, 2);
  ReportInput in{"three.csv", &t, &c, {Replay(t, c)}};
  std::string json = ReportJson(in);
  for (const char* key : {"\"jct_s\"", "\"queueing_delay_s\"", "\"by_size_gpus\"", "\"by_queue\"",
                          "\"makespan_s\": 160", "\"utilization\"", "\"fragmentation\"",
                          "\"preemptions\"", "\"restarts\"", "\"cost_usd\"", "\"lower_bounds\"",
                          "\"mean_jct_s\": 53.333", "\"finished\": 3"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
  // The JCT CDF (the console's chart): every finished job once, then the last at 1.
  Json cdf = Json::parse(json)["runs"][0]["jct_cdf"];
  ASSERT_EQ(cdf.size(), 4u);
  EXPECT_DOUBLE_EQ(cdf[0][1].get<double>(), 0.333);
  for (size_t i = 1; i < cdf.size(); ++i) {
    EXPECT_GE(cdf[i][0].get<double>(), cdf[i - 1][0].get<double>());
    EXPECT_GE(cdf[i][1].get<double>(), cdf[i - 1][1].get<double>());
  }
  EXPECT_DOUBLE_EQ(cdf.back()[1].get<double>(), 1.0);
  std::string html = ReportHtml(in);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("CC-BY-4.0"), std::string::npos);
}

}  // namespace
}  // namespace gpucloud::sim
