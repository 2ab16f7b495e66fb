#include "server/service_replicas.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpucloud::server {
namespace {

using State = ReplicaView::State;

ReplicaView R(std::string job, State state, bool current = true, int64_t in_flight = 0) {
  return ReplicaView{
      .job = std::move(job), .current = current, .state = state, .in_flight = in_flight};
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ServiceReplicasTest, ScaleUpCreatesAndEndedOnesAreReplaced) {
  InferenceServiceSpec spec;
  ReplicaPlan p = PlanReplicas(spec, 3, {R("a", State::kReady), R("b", State::kEnded)});
  EXPECT_EQ(p.create, 2);
  EXPECT_EQ(p.clear, std::vector<std::string>{"b"});
  EXPECT_TRUE(p.stop.empty());
  // Stopping ones do not count: they are on their way out.
  p = PlanReplicas(spec, 1, {R("a", State::kStopping)});
  EXPECT_EQ(p.create, 1);
}

TEST(ServiceReplicasTest, ScaleDownStopsWhatServesNothingFirstAndNeverABusyReplica) {
  InferenceServiceSpec spec;
  std::vector<ReplicaView> r = {R("busy", State::kReady, true, 4), R("idle", State::kReady),
                                R("starting", State::kStarting), R("pending", State::kPending)};
  ReplicaPlan p = PlanReplicas(spec, 2, r);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"pending", "starting"}));
  p = PlanReplicas(spec, 1, r);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"pending", "starting", "idle"}));
  EXPECT_FALSE(p.waiting_for_idle);
  p = PlanReplicas(spec, 0, r);
  EXPECT_FALSE(Has(p.stop, "busy"));
  EXPECT_TRUE(p.waiting_for_idle);
}

TEST(ServiceReplicasTest, RollingUpdateSurgesThenStopsOldOnesAsNewOnesAreReady) {
  InferenceServiceSpec spec;
  spec.max_surge = 1;
  spec.max_unavailable = 0;
  // Two old replicas, ready: one new one (the surge), no old one stopped yet.
  ReplicaPlan p =
      PlanReplicas(spec, 2, {R("o1", State::kReady, false), R("o2", State::kReady, false)});
  EXPECT_EQ(p.create, 1);
  EXPECT_TRUE(p.stop.empty());
  // The new one is starting: nothing more happens.
  p = PlanReplicas(
      spec, 2,
      {R("o1", State::kReady, false), R("o2", State::kReady, false), R("n1", State::kStarting)});
  EXPECT_EQ(p.create, 0);
  EXPECT_TRUE(p.stop.empty());
  // It is ready: one old one goes (three ready, two needed).
  p = PlanReplicas(
      spec, 2,
      {R("o1", State::kReady, false, 2), R("o2", State::kReady, false), R("n1", State::kReady)});
  EXPECT_EQ(p.stop, std::vector<std::string>{"o2"});
  // With one old left and one new ready: the second new one starts.
  p = PlanReplicas(spec, 2, {R("o1", State::kReady, false), R("n1", State::kReady)});
  EXPECT_EQ(p.create, 1);
  EXPECT_TRUE(p.stop.empty());
}

TEST(ServiceReplicasTest, RollingWithUnavailabilityAndNoSurge) {
  InferenceServiceSpec spec;
  spec.max_surge = 0;
  spec.max_unavailable = 1;
  ReplicaPlan p =
      PlanReplicas(spec, 2, {R("o1", State::kReady, false), R("o2", State::kReady, false)});
  EXPECT_EQ(p.create, 0);
  EXPECT_EQ(p.stop.size(), 1u);
  // An old replica that serves nothing goes at once.
  p = PlanReplicas(spec, 2, {R("o1", State::kPending, false), R("n1", State::kReady)});
  EXPECT_EQ(p.stop, std::vector<std::string>{"o1"});
}

TEST(ServiceReplicasTest, ReplicaJobAndNames) {
  InferenceService svc;
  svc.metadata.name = "resnet";
  svc.metadata.namespace_ = "team-a";
  svc.spec.task.name = "server";
  svc.spec.task.command = {"python3", "serve.py"};
  svc.spec.task.env = {{"PORT", "1"}, {"MODEL", "r50"}};
  svc.spec.priority = 500;
  svc.spec.queue = "inference";
  Job j = ReplicaJob(svc, ReplicaName("resnet", 37), 12345, TemplateHash(svc));
  EXPECT_EQ(j.metadata.name, "resnet-00011");
  EXPECT_EQ(j.metadata.namespace_, "team-a");
  EXPECT_EQ(j.metadata.labels.at(std::string(kServiceLabel)), "resnet");
  EXPECT_EQ(j.metadata.labels.at(std::string(kServiceTemplateLabel)), TemplateHash(svc));
  ASSERT_EQ(j.spec.tasks.size(), 1u);
  const auto& env = j.spec.tasks[0].env;
  auto value = [&](const std::string& name) {
    for (const EnvVar& e : env) {
      if (e.name == name) return e.value;
    }
    return std::string();
  };
  EXPECT_EQ(value("PORT"), "12345");
  EXPECT_EQ(value("GPUCLOUD_SERVICE_PORT"), "12345");
  EXPECT_EQ(value("MODEL"), "r50");
  EXPECT_EQ(j.spec.priority, 500);
  EXPECT_EQ(j.spec.queue, "inference");
  // The template hash follows what replicas are made of, not the scaler's settings.
  InferenceService other = svc;
  other.spec.autoscaling.target = 99;
  other.spec.max_replicas = 7;
  EXPECT_EQ(TemplateHash(other), TemplateHash(svc));
  other.spec.task.command = {"python3", "serve2.py"};
  EXPECT_NE(TemplateHash(other), TemplateHash(svc));
}

TEST(ServiceReplicasTest, FreePortsAreUniqueAndInRange) {
  std::set<int> used;
  for (int i = 0; i < 500; ++i) {
    int p = FreeServicePort(used, ReplicaName("svc", i));
    ASSERT_GE(p, kServicePortBase);
    ASSERT_LT(p, kServicePortBase + kServicePortCount);
    ASSERT_TRUE(used.insert(p).second);
  }
}

}  // namespace
}  // namespace gpucloud::server
