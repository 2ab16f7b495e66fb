#include "server/assignments.h"

#include <gtest/gtest.h>

namespace gpucloud::server {
namespace {

api::NodeInfo Node(const std::string& name, const std::string& address, int gpus) {
  api::NodeInfo n;
  n.name = name;
  n.address = address;
  n.hostname = name + ".local";
  for (int i = 0; i < gpus; ++i) {
    Gpu g;
    g.uuid = "GPU-" + name + "-" + std::to_string(i);
    n.gpus.push_back(g);
  }
  return n;
}

sched::ReplicaPlacement Replica(const std::string& task, int replica, std::vector<int> gpus) {
  sched::ReplicaPlacement r;
  r.task = task;
  r.replica = replica;
  r.node = 7;  // the scheduler's index: meaningless in the stored placement
  for (int g : gpus) r.gpus.push_back({.gpu = g});
  return r;
}

class AssignmentsTest : public ::testing::Test {
 protected:
  AssignmentsTest() : a_(Node("a", "10.0.0.1", 8)), b_(Node("b", "", 8)) {
    job_.metadata.namespace_ = "team";
    job_.metadata.name = "train";
    TaskSpec master{.name = "master", .replicas = 1, .command = {"python3", "train.py"}};
    master.args = {"--epochs", "3"};
    master.env = {{"LR", "0.1"}};
    TaskSpec worker{.name = "worker", .replicas = 3, .image = "registry.local/train:1"};
    job_.spec.tasks = {master, worker};
  }

  Binding Bind(std::vector<PlacedOn> replicas) {
    BindInput in{&job_, "uid-1", 2, "/ckpt/team/train", 23456, 45};
    return AssignmentsFor(in, std::move(replicas));
  }

  Job job_;
  api::NodeInfo a_, b_;
};

TEST_F(AssignmentsTest, RanksFollowTaskOrderThenReplicaOrder) {
  // The scheduler's order is not the ranks': worker replicas first, out of order.
  Binding b = Bind({{Replica("worker", 2, {1}), "b", &b_},
                    {Replica("worker", 0, {0}), "a", &a_},
                    {Replica("master", 0, {1}), "a", &a_},
                    {Replica("worker", 1, {0}), "b", &b_}});
  ASSERT_EQ(b.assignments.size(), 4u);
  std::vector<std::string> names, tasks;
  for (const api::Assignment& x : b.assignments) {
    names.push_back(x.name);
    tasks.push_back(x.task + std::to_string(x.replica));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"team.train.0", "team.train.1", "team.train.2",
                                             "team.train.3"}));
  EXPECT_EQ(tasks, (std::vector<std::string>{"master0", "worker0", "worker1", "worker2"}));
  // Node ranks by each node's lowest rank; local ranks within a node.
  const api::Assignment &m = b.assignments[0], &w2 = b.assignments[3];
  EXPECT_EQ(m.node_rank, 0);
  EXPECT_EQ(w2.node_rank, 1);
  EXPECT_EQ(m.local_rank, 0);
  EXPECT_EQ(b.assignments[1].local_rank, 1);
  EXPECT_EQ(b.assignments[2].local_rank, 0);
  EXPECT_EQ(w2.local_rank, 1);
  EXPECT_EQ(m.local_world_size, 2);
  EXPECT_EQ(m.world_size, 4);
  EXPECT_EQ(m.nodes, 2);
  // Rank 0's node is the master; a node without an address is reached by its host name.
  EXPECT_EQ(w2.master_addr, "10.0.0.1");
  EXPECT_EQ(w2.master_port, 23456);
  EXPECT_EQ(m.hosts, (std::vector<std::pair<std::string, int>>{{"10.0.0.1", 2}, {"b.local", 2}}));
  EXPECT_EQ(m.task_hosts.at("worker"),
            (std::vector<std::string>{"10.0.0.1", "b.local", "b.local"}));
  EXPECT_EQ(b.placement[3].node, "b");
  EXPECT_EQ(b.placement[3].rank, 3);
  EXPECT_EQ(b.placement[3].placement.node, 0);
  EXPECT_EQ(b.where[0], "a (GPU 1)");
}

TEST_F(AssignmentsTest, SpecFieldsReachTheAssignment) {
  Binding b = Bind({{Replica("master", 0, {3}), "a", &a_}, {Replica("worker", 0, {}), "b", &b_}});
  const api::Assignment &m = b.assignments[0], &w = b.assignments[1];
  EXPECT_EQ(m.command, (std::vector<std::string>{"python3", "train.py", "--epochs", "3"}));
  EXPECT_EQ(m.env.at("LR"), "0.1");
  EXPECT_FALSE(m.image_entrypoint);
  EXPECT_TRUE(w.image_entrypoint);  // an image and no command: its entrypoint runs
  EXPECT_EQ(w.image, "registry.local/train:1");
  ASSERT_EQ(m.gpus.size(), 1u);
  EXPECT_EQ(m.gpus[0].uuid, "GPU-a-3");
  EXPECT_EQ(m.gpus[0].mode, "whole");
  EXPECT_TRUE(w.gpus.empty());
  EXPECT_EQ(b.where[1], "b");
  EXPECT_EQ(m.attempt, 2);
  EXPECT_EQ(m.restart_count, 1);
  EXPECT_EQ(m.job_uid, "uid-1");
  EXPECT_EQ(m.checkpoint_dir, "/ckpt/team/train");
  EXPECT_EQ(m.grace_seconds, 45);
}

TEST_F(AssignmentsTest, SecretReferencesReachTheAssignmentNeverValues) {
  TaskSpec& w = job_.spec.tasks[1];
  w.secret_env = {{"HF_TOKEN", {"hf", "token", false}}};
  w.env_from = {{"db", "DB_", true}};
  w.secret_volumes = {{"creds", "db", "/etc/db", {}, false}};
  w.image_pull_secrets = {"regcred"};
  Binding b = Bind({{Replica("master", 0, {3}), "a", &a_}, {Replica("worker", 0, {}), "b", &b_}});
  const api::Assignment& a = b.assignments[1];
  EXPECT_EQ(a.secret_env, w.secret_env);
  EXPECT_EQ(a.env_from, w.env_from);
  EXPECT_EQ(a.secret_volumes, w.secret_volumes);
  EXPECT_EQ(a.image_pull_secrets, w.image_pull_secrets);
  EXPECT_FALSE(a.env.contains("HF_TOKEN"));
  EXPECT_FALSE(b.assignments[0].UsesSecrets());
}

TEST(MasterPort, StableAcrossRunsAndLibraries) {
  // FNV-1a 64 of "uid-1/1", modulo the range: computed independently (Python).
  EXPECT_EQ(MasterPort("uid-1", 1, {}), 23855);
  EXPECT_NE(MasterPort("uid-1", 2, {}), MasterPort("uid-1", 1, {}));
}

TEST(MasterPort, AvoidsPortsTakenOnTheNode) {
  int first = MasterPort("uid-1", 1, {});
  EXPECT_EQ(MasterPort("uid-1", 1, {first}), first + 1);
  EXPECT_EQ(MasterPort("uid-1", 1, {first, first + 1}), first + 2);
  // The range wraps around.
  std::set<int> top;
  for (int p = first; p < kMasterPortBase + kMasterPortCount; ++p) top.insert(p);
  EXPECT_EQ(MasterPort("uid-1", 1, top), kMasterPortBase);
}

}  // namespace
}  // namespace gpucloud::server
