// Inference services replayed beside a training trace: the load curve, and a service that
// scales up on a step of load, preempts training for its GPUs and gives them back.
#include "sim/service_replay.h"

#include <gtest/gtest.h>

#include "sim/simulator.h"

namespace gpucloud::sim {
namespace {

TEST(LoadCurve, ParsesSecondsAndDurationsAndInterpolates) {
  absl::StatusOr<std::vector<LoadPoint>> c = ParseLoadCurve("time,rps\n0,0\n1h,100\n7200,50.5\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (std::vector<LoadPoint>{{0, 0}, {3600, 100}, {7200, 50.5}}));
  EXPECT_DOUBLE_EQ(RpsAt(*c, 1800), 50);
  EXPECT_DOUBLE_EQ(RpsAt(*c, 3600), 100);
  EXPECT_DOUBLE_EQ(RpsAt(*c, 7200), 50.5);
  EXPECT_DOUBLE_EQ(RpsAt(*c, 7201), 0);  // the service is gone
  EXPECT_DOUBLE_EQ(RpsAt(*c, -1), 0);
}

TEST(LoadCurve, BadCurvesNameTheLine) {
  auto error = [](const char* text) {
    absl::StatusOr<std::vector<LoadPoint>> c = ParseLoadCurve(text);
    return c.ok() ? std::string("ok") : std::string(c.status().message());
  };
  EXPECT_EQ(error("t,load\n0,1\n5,1\n"), "a load curve starts with the header \"time,rps\"");
  EXPECT_EQ(error("time,rps\n0,1\n"), "a load curve needs at least two points");
  EXPECT_EQ(error("time,rps\n0,1\n0,2\n"), "line 3: time 0s is not after the previous point's");
  EXPECT_EQ(error("time,rps\n0,1\n5,-2\n"), "line 3: rps \"-2\" is not a number >= 0");
  EXPECT_EQ(error("time,rps\n0,1\n5,lots\n"), "line 3: rps \"lots\" is not a number >= 0");
  EXPECT_NE(error("time,rps\n0,1\nlater,2\n").find("line 3: time \"later\": "), std::string::npos);
  EXPECT_EQ(error("time,rps\n0,1,2\n5,2\n"), "line 2: expected 2 fields (time,rps)");
}

SimCluster Nodes(int nodes, int gpus) {
  NodePool p;
  p.metadata.name = "p";
  p.spec.gpu_type = "V100-16GB";
  p.spec.gpus_per_node = gpus;
  p.spec.max_nodes = nodes;
  return ClusterFromPools("test", {p});
}

// One GPU a replica, 10 requests per second each, priority over training.
SimService Service(std::vector<LoadPoint> load, int32_t gpus = 1) {
  SimService s;
  s.service.metadata.name = "ranker";
  s.service.metadata.namespace_ = "shop";
  InferenceServiceSpec& spec = s.service.spec;
  spec.task.name = "server";
  spec.task.command = {"serve"};
  spec.task.resources.gpu.mode = GpuMode::kWhole;
  spec.task.resources.gpu.count = gpus;
  spec.min_replicas = 0;
  spec.max_replicas = 4;
  spec.autoscaling.metric = ServiceMetric::kRps;
  spec.autoscaling.target = 10;
  spec.priority = 100;
  s.load = std::move(load);
  s.latency_s = 0.1;
  s.startup_s = 30;
  return s;
}

Trace OneTrainingJob(int64_t duration_s, int gpus) {
  Trace t;
  TraceJob j;
  j.id = "train";
  j.duration_s = duration_s;
  j.tasks = {{.name = "worker", .replicas = 1, .gpus_per_replica = MilliGpu(gpus * 1000)}};
  t.jobs = {j};
  return t;
}

SimResult Replay(const Trace& t, const SimCluster& c, const SimOptions& o) {
  absl::StatusOr<SimResult> r = Simulate(t, c, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

// A 4-GPU node runs a 4-GPU training job for 10 h. From 1 h to 2 h the service gets 30
// requests per second: it scales from zero to 3 replicas, which preempts the training job
// (30 s of grace, its work kept); after the step it scales back to zero and training resumes,
// finishing about an hour late with exactly its 40 GPU-hours of work.
TEST(ServiceReplay, AStepOfLoadTakesGpusFromTrainingAndGivesThemBack) {
  SimOptions o;
  o.services = {Service({{0, 0}, {3600, 0}, {3601, 30}, {7200, 30}, {7201, 0}, {10800, 0}})};
  SimResult r = Replay(OneTrainingJob(36000, 4), Nodes(1, 4), o);
  ASSERT_EQ(r.services.size(), 1u);
  const ServiceOutcome& s = r.services[0];
  EXPECT_EQ(s.name, "shop/ranker");
  EXPECT_EQ(s.peak_ready, 3);
  EXPECT_EQ(s.replicas_started, 3);
  EXPECT_EQ(s.preempted, 0);
  EXPECT_TRUE(s.rejected.empty());
  EXPECT_NEAR(s.requests, 30.0 * 3600, 60);
  // About an hour of 3 GPUs, and a few minutes while load rose and fell.
  EXPECT_GT(s.gpu_hours, 3.0);
  EXPECT_LT(s.gpu_hours, 3.4);
  EXPECT_GT(s.ready_replica_hours, 2.9);
  EXPECT_LT(s.ready_replica_hours, s.gpu_hours);  // replicas start before they are ready
  EXPECT_GT(s.shortfall_replica_hours, 0);        // waiting for training's grace period
  ASSERT_EQ(r.jobs.size(), 1u);
  const JobOutcome& train = r.jobs[0];
  EXPECT_EQ(train.state, JobState::kFinished);
  EXPECT_EQ(train.preemptions, 1);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_GT(*train.end_s, 36000 + 3600);
  EXPECT_LT(*train.end_s, 36000 + 3600 + 600);
  EXPECT_NEAR(r.gpu_hours_training, 40.0, 1e-6);
  // The timeline: zero, three at the step, zero again at the end.
  ASSERT_FALSE(s.timeline.empty());
  EXPECT_EQ(s.timeline.front().desired, 0);
  int32_t most = 0;
  for (const ServicePoint& p : s.timeline) most = std::max(most, p.desired);
  EXPECT_EQ(most, 3);
  EXPECT_EQ(s.timeline.back().t_s, 10800);
  EXPECT_EQ(s.timeline.back().ready, 0);
  // Deterministic: the same inputs, the same replay.
  SimResult again = Replay(OneTrainingJob(36000, 4), Nodes(1, 4), o);
  ASSERT_EQ(again.services.size(), 1u);
  EXPECT_EQ(again.services[0].timeline.size(), s.timeline.size());
  EXPECT_EQ(again.services[0].gpu_hours, s.gpu_hours);
  EXPECT_EQ(again.jobs[0].end_s, train.end_s);
}

// Without load a min-0 service holds nothing; with min 1 it holds a GPU the whole time, and
// training gets the other three.
TEST(ServiceReplay, MinReplicasHoldTheirGpusForTheCurve) {
  SimOptions o;
  o.services = {Service({{0, 0}, {7200, 0}})};
  SimResult r = Replay(OneTrainingJob(3600, 3), Nodes(1, 4), o);
  EXPECT_EQ(r.services[0].gpu_hours, 0);
  EXPECT_EQ(r.services[0].replicas_started, 0);
  o.services[0].service.spec.min_replicas = 1;
  r = Replay(OneTrainingJob(3600, 3), Nodes(1, 4), o);
  EXPECT_NEAR(r.services[0].gpu_hours, 2.0, 0.01);
  EXPECT_EQ(r.services[0].peak_ready, 1);
  EXPECT_EQ(r.jobs[0].preemptions, 0);
  EXPECT_EQ(*r.jobs[0].end_s, 3600);
  EXPECT_EQ(r.end_s, 7200);  // the replay runs to the curve's end
}

// A replica that can never fit ends the service's replay with the scheduler's reason; the
// training trace goes on.
TEST(ServiceReplay, AReplicaThatCanNeverFitStopsTheServiceWithTheReason) {
  SimOptions o;
  o.services = {Service({{0, 5}, {3600, 5}}, /*gpus=*/8)};
  SimResult r = Replay(OneTrainingJob(600, 2), Nodes(1, 4), o);
  EXPECT_FALSE(r.services[0].rejected.empty());
  EXPECT_EQ(r.services[0].gpu_hours, 0);
  EXPECT_EQ(r.jobs[0].state, JobState::kFinished);
  EXPECT_LT(r.end_s, 3600);
}

TEST(ServiceReplay, BadOptionsAreRefused) {
  SimOptions o;
  o.services = {Service({{0, 5}})};
  EXPECT_FALSE(Simulate(OneTrainingJob(60, 1), Nodes(1, 4), o).ok());
  o.services = {Service({{0, 5}, {60, 5}})};
  o.service_tick_s = 0;
  EXPECT_FALSE(Simulate(OneTrainingJob(60, 1), Nodes(1, 4), o).ok());
}

}  // namespace
}  // namespace gpucloud::sim
