#include "sched/plugins/filters.h"

#include <gtest/gtest.h>

#include "sched/registry.h"

namespace gpucloud::sched {
namespace {

JobRequest GpuJob(std::vector<std::string> types = {}) {
  JobRequest j;
  j.key = "ns/j";
  j.tasks.push_back(
      {"t", 1, ReplicaRequest{.gpu = {.mode = GpuMode::kWhole, .count = 1, .types = types}}});
  return j;
}

Node OneGpuNode(const std::string& type = "H100-80GB") {
  Node n;
  n.name = "n";
  n.gpus.push_back(Gpu{.uuid = "GPU-0", .type = type, .memory = GiB(80)});
  return n;
}

TEST(NodeHealthFilter, CordonedAndBrokenNodes) {
  auto f = NewNodeHealthFilter();
  Node n = OneGpuNode();
  EXPECT_EQ(f->Filter(GpuJob(), n), std::nullopt);
  n.gpus[0].healthy = false;
  EXPECT_EQ(f->Filter(GpuJob(), n), "every GPU of the node is unhealthy");
  JobRequest cpu_only = GpuJob();
  cpu_only.tasks[0].per_replica.gpu = {};
  EXPECT_EQ(f->Filter(cpu_only, n), std::nullopt);
  n.cordoned = true;
  EXPECT_EQ(f->Filter(cpu_only, n), "node is cordoned");
}

TEST(NodeSelectorFilter, LabelsMustMatch) {
  auto f = NewNodeSelectorFilter();
  JobRequest j = GpuJob();
  j.node_selector = {{"accelerator", "nvidia-a100"}};
  Node n = OneGpuNode();
  EXPECT_EQ(f->Filter(j, n), "node has no label accelerator (the job needs nvidia-a100)");
  n.labels["accelerator"] = "nvidia-h100";
  EXPECT_EQ(f->Filter(j, n), "node label accelerator is nvidia-h100, the job needs nvidia-a100");
  n.labels["accelerator"] = "nvidia-a100";
  EXPECT_EQ(f->Filter(j, n), std::nullopt);
}

TEST(TaintTolerationFilter, Semantics) {
  auto f = NewTaintTolerationFilter();
  Node n = OneGpuNode();
  n.taints = {{"gpucloud.io/spot", "true", "NoSchedule"}, {"soft", "", "PreferNoSchedule"}};
  JobRequest j = GpuJob();
  EXPECT_EQ(f->Filter(j, n),
            "node has taint gpucloud.io/spot=true:NoSchedule that the job does not tolerate");
  j.tolerations = {{.key = "gpucloud.io/spot", .exists = false, .value = "false"}};
  EXPECT_NE(f->Filter(j, n), std::nullopt);  // wrong value
  j.tolerations = {{.key = "gpucloud.io/spot", .exists = true, .effect = "NoExecute"}};
  EXPECT_NE(f->Filter(j, n), std::nullopt);  // wrong effect
  j.tolerations = {{.key = "gpucloud.io/spot", .exists = true}};
  EXPECT_EQ(f->Filter(j, n), std::nullopt);
  j.tolerations = {{.key = "gpucloud.io/spot", .value = "true", .effect = "NoSchedule"}};
  EXPECT_EQ(f->Filter(j, n), std::nullopt);
}

TEST(CudaVersionFilter, OlderDriversAreSkipped) {
  auto f = NewCudaVersionFilter();
  JobRequest j = GpuJob();
  j.min_cuda_version = 12040;
  Node n = OneGpuNode();
  n.cuda_version = 12020;
  EXPECT_EQ(f->Filter(j, n), "node's driver supports CUDA 12.2, the job needs 12.4");
  n.cuda_version = 12040;
  EXPECT_EQ(f->Filter(j, n), std::nullopt);
}

TEST(GpuTypeFilter, NodeMustHaveAnAcceptedType) {
  auto f = NewGpuTypeFilter();
  EXPECT_EQ(f->Filter(GpuJob({"A100-80GB", "A100-40GB"}), OneGpuNode()),
            "node has no A100-80GB or A100-40GB GPU");
  EXPECT_EQ(f->Filter(GpuJob({"H100-80GB"}), OneGpuNode()), std::nullopt);
  EXPECT_EQ(f->Filter(GpuJob(), OneGpuNode("T4")), std::nullopt);
}

TEST(Registry, ByName) {
  EXPECT_EQ(FilterPluginNames().size(), DefaultFilters().size());
  for (const std::string& name : FilterPluginNames()) {
    absl::StatusOr<std::unique_ptr<FilterPlugin>> f = MakeFilterPlugin(name);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ((*f)->Name(), name);
  }
  EXPECT_EQ(MakeFilterPlugin("Nope").status().message(),
            "unknown filter plugin \"Nope\" (known: NodeHealth, GpuType, NodeSelector, "
            "TaintToleration, CudaVersion)");
}

}  // namespace
}  // namespace gpucloud::sched
