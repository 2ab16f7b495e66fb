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

// Each built-in filter by name, in the default order, written out here (not read back from the
// registry's own table): each name makes a filter of that name, and of the default filters only
// it turns away the job from the node its case spoils.
TEST(Registry, EachNameMakesTheFilterThatRejectsItsCase) {
  struct Case {
    std::string name;
    void (*spoil)(JobRequest& job, Node& node);
  };
  const std::vector<Case> cases = {
      {"NodeHealth", [](JobRequest&, Node& n) { n.gpus[0].healthy = false; }},
      {"GpuType", [](JobRequest&, Node& n) { n.gpus[0].type = "A100-80GB"; }},
      {"NodeSelector",
       [](JobRequest& j, Node&) {
         j.node_selector = {{"accelerator", "a100"}};
       }},
      {"TaintToleration",
       [](JobRequest&, Node& n) {
         n.taints = {{"gpucloud.io/spot", "true", "NoSchedule"}};
       }},
      {"CudaVersion",
       [](JobRequest& j, Node& n) {
         j.min_cuda_version = 12040;
         n.cuda_version = 12020;
       }},
  };
  std::vector<std::string> names;
  for (const Case& c : cases) names.push_back(c.name);
  EXPECT_EQ(FilterPluginNames(), names);
  std::vector<std::unique_ptr<FilterPlugin>> defaults = DefaultFilters();
  ASSERT_EQ(defaults.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(defaults[i]->Name(), cases[i].name);
    absl::StatusOr<std::unique_ptr<FilterPlugin>> made = MakeFilterPlugin(cases[i].name);
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_EQ((*made)->Name(), cases[i].name);
    JobRequest job = GpuJob({"H100-80GB"});
    Node node = OneGpuNode();
    EXPECT_EQ((*made)->Filter(job, node), std::nullopt) << cases[i].name;
    cases[i].spoil(job, node);
    EXPECT_NE((*made)->Filter(job, node), std::nullopt) << cases[i].name;
    for (size_t k = 0; k < defaults.size(); ++k) {
      if (k == i) continue;
      EXPECT_EQ(defaults[k]->Filter(job, node), std::nullopt)
          << defaults[k]->Name() << " rejects the case of " << cases[i].name;
    }
  }
  EXPECT_EQ(MakeFilterPlugin("Nope").status().message(),
            "unknown filter plugin \"Nope\" (known: NodeHealth, GpuType, NodeSelector, "
            "TaintToleration, CudaVersion)");
}

}  // namespace
}  // namespace gpucloud::sched
