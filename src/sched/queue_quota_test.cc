#include "sched/queue_quota.h"

#include <gtest/gtest.h>

namespace gpucloud::sched {
namespace {

Node MigNode() {
  Node n;
  n.name = "m";
  n.cpu = Cores(64);
  n.memory = GiB(512);
  n.gpus.push_back(Gpu{.uuid = "g0", .type = "A100-80GB", .memory = GiB(80), .mig_enabled = true});
  n.gpus.push_back(Gpu{.uuid = "g1", .index = 1, .type = "A100-80GB", .memory = GiB(80)});
  return n;
}

TEST(QueueQuota, MigAndSharesCountTheirPartOfAGpu) {
  ClusterState s({MigNode()}, GpuCatalog::Default());
  std::map<std::string, QueueSpec> queues;
  QueueQuota q(queues, s);
  Allocation a{
      "ns/x",
      {{.task = "w",
        .node = 0,
        .gpus = {
            {.gpu = 0, .mode = GpuMode::kMig, .mig = {"3g.40gb", 4}},
            {.gpu = 1, .mode = GpuMode::kShared, .fraction = MilliGpu(250), .memory = GiB(10)}}}}};
  std::map<std::string, MilliGpu> use = q.Usage(a);
  EXPECT_EQ(use.at("A100-80GB"), MilliGpu(429 + 250));  // 3/7 rounded up, plus a quarter
  EXPECT_EQ(use.at("*"), MilliGpu(679));
  EXPECT_EQ(q.CheckMax("unlisted", a), std::nullopt);
}

TEST(QueueQuota, ReadsUsageFromCommittedAllocations) {
  ClusterState s({MigNode()}, GpuCatalog::Default());
  Allocation running{"ns/run", {{.task = "w", .node = 0, .gpus = {{.gpu = 1}}}}};
  running.queue = "q";
  ASSERT_TRUE(s.Commit(running).ok());
  QueueSpec spec;
  spec.quota = {{.gpu_type = "A100-80GB", .max = MilliGpu(1500)}};
  std::map<std::string, QueueSpec> queues = {{"q", spec}};
  QueueQuota q(queues, s);
  Allocation more{"ns/more",
                  {{.task = "w",
                    .node = 0,
                    .gpus = {{.gpu = 0, .mode = GpuMode::kMig, .mig = {"4g.40gb", 0}}}}}};
  EXPECT_EQ(q.CheckMax("q", more),
            "queue q is at its maximum of 1.5 A100-80GB GPUs (1 in use, the job needs 0.572)");
  Allocation small{"ns/small",
                   {{.task = "w",
                     .node = 0,
                     .gpus = {{.gpu = 0, .mode = GpuMode::kMig, .mig = {"3g.40gb", 4}}}}}};
  EXPECT_EQ(q.CheckMax("q", small), std::nullopt);
}

}  // namespace
}  // namespace gpucloud::sched
