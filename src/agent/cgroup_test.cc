// The cgroup plan: which groups a task's limits need and what is written to them (pure; the real
// groups are exercised by executor_test).
#include "agent/cgroup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

using Writes = std::vector<std::pair<std::string, std::string>>;

TEST(CgroupPlan, V1UsesOnlyTheHierarchiesItsLimitsNeed) {
  CgroupPlan pids = PlanTaskCgroup("/cg", "ns.job.w-0.1", {.pids_max = 4096}, false);
  EXPECT_EQ(pids.dirs,
            (std::vector<std::string>{"/cg/pids/gpucloud", "/cg/pids/gpucloud/ns.job.w-0.1"}));
  EXPECT_EQ(pids.writes, (Writes{{"/cg/pids/gpucloud/ns.job.w-0.1/pids.max", "4096"}}));
  EXPECT_EQ(pids.memory_dir, "");
  EXPECT_EQ(pids.cpu_dir, "");
  EXPECT_EQ(pids.pids_dir, "/cg/pids/gpucloud/ns.job.w-0.1");

  CgroupPlan all = PlanTaskCgroup("/cg", "t", {MilliCpu(1500), MiB(64), 20}, false);
  EXPECT_EQ(all.dirs, (std::vector<std::string>{"/cg/memory/gpucloud", "/cg/memory/gpucloud/t",
                                                "/cg/cpu/gpucloud", "/cg/cpu/gpucloud/t",
                                                "/cg/pids/gpucloud", "/cg/pids/gpucloud/t"}));
  EXPECT_EQ(all.writes, (Writes{{"/cg/memory/gpucloud/t/memory.limit_in_bytes", "67108864"},
                                {"/cg/cpu/gpucloud/t/cpu.cfs_period_us", "100000"},
                                {"/cg/cpu/gpucloud/t/cpu.cfs_quota_us", "150000"},
                                {"/cg/pids/gpucloud/t/pids.max", "20"}}));
  EXPECT_TRUE(all.enable.empty());
  // No PID limit (0): no pids group.
  EXPECT_EQ(PlanTaskCgroup("/cg", "t", {.memory = MiB(1)}, false).pids_dir, "");
}

TEST(CgroupPlan, V2IsOneGroupWithEveryControllerEnabled) {
  CgroupPlan p = PlanTaskCgroup("/cg", "t", {MilliCpu(500), std::nullopt, 4096}, true);
  EXPECT_EQ(p.dirs, (std::vector<std::string>{"/cg/gpucloud", "/cg/gpucloud/t"}));
  EXPECT_EQ(p.memory_dir, "/cg/gpucloud/t");
  EXPECT_EQ(p.writes, (Writes{{"/cg/gpucloud/t/cpu.max", "50000 100000"},
                              {"/cg/gpucloud/t/pids.max", "4096"}}));
  EXPECT_EQ(p.enable, (Writes{{"/cg/cgroup.subtree_control", "+cpu"},
                              {"/cg/cgroup.subtree_control", "+memory"},
                              {"/cg/cgroup.subtree_control", "+pids"},
                              {"/cg/gpucloud/cgroup.subtree_control", "+cpu"},
                              {"/cg/gpucloud/cgroup.subtree_control", "+memory"},
                              {"/cg/gpucloud/cgroup.subtree_control", "+pids"}}));
}

TEST(TaskCgroup, RefusesAGroupWithoutLimitsAndSaysWhyItCannotMakeOne) {
  EXPECT_TRUE(absl::IsInvalidArgument(TaskCgroup::Create("t", {}).status()));
  absl::StatusOr<std::unique_ptr<TaskCgroup>> g =
      TaskCgroup::Create("t", {.pids_max = 10}, "/nonexistent-cgroup-root");
  EXPECT_TRUE(absl::IsFailedPrecondition(g.status()));
  EXPECT_EQ(g.status().message(), "no cgroup v2 or v1 pids under /nonexistent-cgroup-root");
}

// On v1 a task's child joins its groups itself through their `tasks` files (cgroup.h says why);
// on v2 there are none and the executor moves the process with Attach.
TEST(TaskCgroup, V1ChildrenJoinThroughTheTasksFilesAndV2ThroughAttach) {
  // Stand-ins for the kernel's files (a real group has them the moment it is made).
  testing_util::TempDir v1;
  std::filesystem::create_directories(v1.path() / "pids/gpucloud/ns.job.w-0.1");
  std::ofstream(v1.path() / "pids/gpucloud/ns.job.w-0.1/pids.max") << "max\n";
  absl::StatusOr<std::unique_ptr<TaskCgroup>> g =
      TaskCgroup::Create("ns.job.w-0.1", {.pids_max = 10}, v1.path().string());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->SelfAttachFiles(),
            (std::vector<std::string>{(v1.path() / "pids/gpucloud/ns.job.w-0.1/tasks").string()}));

  testing_util::TempDir v2;
  std::ofstream(v2.path() / "cgroup.controllers") << "cpu memory pids\n";
  std::filesystem::create_directories(v2.path() / "gpucloud/t");
  std::ofstream(v2.path() / "gpucloud/t/pids.max") << "max\n";
  g = TaskCgroup::Create("t", {.pids_max = 10}, v2.path().string());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE((*g)->v2());
  EXPECT_TRUE((*g)->SelfAttachFiles().empty());
}

}  // namespace
}  // namespace gpucloud::agent
