#include "manifest/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpucloud::manifest {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Source(const std::string& rel) { return std::string(GPUCLOUD_SOURCE_DIR) + "/" + rel; }

ParseResult ParseFile(const std::string& rel) { return ParseManifests(ReadFile(Source(rel)), rel); }

std::string AllErrors(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.errors) out += d.ToString() + "\n";
  return out;
}

TEST(Examples, EveryExampleValidates) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(Source("examples"))) {
    std::string ext = entry.path().extension().string();
    if (ext != ".yaml" && ext != ".json") continue;
    ++files;
    std::string rel = "examples/" + entry.path().filename().string();
    ParseResult r = ParseFile(rel);
    EXPECT_TRUE(r.ok()) << AllErrors(r);
    EXPECT_FALSE(r.manifests.empty()) << rel;
  }
  EXPECT_GE(files, 10);
}

TEST(Seeds, Seed000PodAsksForFourGpus) {
  ParseResult r = ParseFile("examples/seed-000-pod.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ASSERT_EQ(r.manifests.size(), 1u);
  EXPECT_EQ(r.manifests[0].source_api_version, "v1");
  EXPECT_EQ(r.manifests[0].source_kind, "Pod");
  const Job& job = std::get<Job>(r.manifests[0].object);
  EXPECT_EQ(job.metadata.name, "ml-training");
  EXPECT_EQ(job.metadata.namespace_, "default");
  ASSERT_EQ(job.spec.tasks.size(), 1u);
  EXPECT_EQ(job.spec.tasks[0].name, "pytorch");
  EXPECT_EQ(job.spec.tasks[0].image, "pytorch/pytorch:latest");
  EXPECT_EQ(job.spec.tasks[0].resources.gpu.mode, GpuMode::kWhole);
  EXPECT_EQ(job.spec.tasks[0].resources.gpu.count, 4);
  EXPECT_EQ(job.spec.GangSize(), 1);
  // It names an image and no command: it runs the image's entrypoint, without a warning.
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(job.spec.tasks[0].image_pull_policy, PullPolicy::kDefault);
}

TEST(Seeds, Seed000AsPublishedIsRejectedByYaml) {
  ParseResult r = ParseFile("testdata/manifests/seed-000-verbatim.yaml");
  EXPECT_EQ(AllErrors(r),
            "testdata/manifests/seed-000-verbatim.yaml:8:5: invalid YAML: end of sequence not "
            "found (check the indentation of this line and the lines above it)\n");
}

TEST(Seeds, Seed001RuntimeClass) {
  ParseResult r = ParseFile("examples/seed-001-runtimeclass.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const RuntimeClass& rc = std::get<RuntimeClass>(r.manifests[0].object);
  EXPECT_EQ(rc.metadata.name, "gpu-runtime");
  EXPECT_EQ(rc.spec.handler, "nvidia");
  EXPECT_EQ(rc.spec.node_selector.at("accelerator"), "nvidia-a100");
}

TEST(Seeds, Seed003VolcanoGangOfFour) {
  ParseResult r = ParseFile("examples/seed-003-volcano-pytorch.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const Job& job = std::get<Job>(r.manifests[0].object);
  EXPECT_EQ(job.metadata.name, "pytorch-job");
  ASSERT_EQ(job.spec.tasks.size(), 1u);
  const TaskSpec& t = job.spec.tasks[0];
  EXPECT_EQ(t.name, "worker");
  EXPECT_EQ(t.replicas, 4);
  EXPECT_EQ(t.command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(t.image, "pytorch/pytorch:2.0-cuda11.7-cudnn8-runtime");
  EXPECT_EQ(t.resources.gpu.count, 1);
  EXPECT_EQ(job.spec.min_available, 4);
  EXPECT_EQ(job.spec.TotalGpus(), WholeGpus(4));
}

TEST(RuntimeClass, SelectorAndGpuTypesApplyToPod) {
  ParseResult r = ParseFile("examples/pod-with-runtimeclass.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const Job& job = std::get<Job>(r.manifests[1].object);
  EXPECT_EQ(job.spec.node_selector.at("accelerator"), "nvidia-a100");
  EXPECT_EQ(job.spec.tasks[0].resources.gpu.types,
            (std::vector<std::string>{"A100-40GB", "A100-80GB"}));
  EXPECT_EQ(job.spec.tasks[0].resources.cpu, Cores(16));
  EXPECT_EQ(job.spec.tasks[0].resources.memory, GiB(64));
}

TEST(RuntimeClass, ConflictingSelectorIsAnError) {
  ParseResult r = ParseManifests(R"(apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: rc}
handler: nvidia
scheduling: {nodeSelector: {accelerator: nvidia-a100}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  runtimeClassName: rc
  nodeSelector: {accelerator: nvidia-h100}
  containers: [{name: c}]
)",
                                 "rc.yaml");
  EXPECT_EQ(AllErrors(r),
            "rc.yaml: spec.nodeSelector.accelerator: is nvidia-h100, but RuntimeClass rc requires "
            "nvidia-a100\n");
}

TEST(Kubernetes, SharedGpuUsesAnnotations) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata:
  name: nb
  annotations:
    gpucloud.io/gpu-fraction: "0.5"
    gpucloud.io/gpu-memory: 12Gi
    gpucloud.io/gpu-sharing: mps
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu.shared: 1}
)",
                                 "nb.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const GpuRequest& g = std::get<Job>(r.manifests[0].object).spec.tasks[0].resources.gpu;
  EXPECT_EQ(g.mode, GpuMode::kShared);
  EXPECT_EQ(g.fraction, MilliGpu(500));
  EXPECT_EQ(g.memory, GiB(12));
  EXPECT_EQ(g.sharing, GpuSharing::kMps);
}

TEST(Kubernetes, MigResourceNameWithMediaExtensions) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/mig-1g.10gb.me: 1}
)",
                                 "p.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const GpuRequest& g = std::get<Job>(r.manifests[0].object).spec.tasks[0].resources.gpu;
  EXPECT_EQ(g.mode, GpuMode::kMig);
  EXPECT_EQ(g.mig_profile, "1g.10gb+me");
  EXPECT_EQ(g.types, (std::vector<std::string>{"A100-80GB", "H100-80GB"}));
}

TEST(Kubernetes, KnownUnsupportedFieldsWarn) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  volumes: [{name: data}]
  containers:
  - name: c
    command: [python3]
    volumeMounts: [{name: data, mountPath: /data}]
    resources:
      limits: {nvidia.com/gpu: 1, ephemeral-storage: 10Gi}
)",
                                 "p.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ASSERT_EQ(r.warnings.size(), 3u);
  EXPECT_EQ(r.warnings[0].ToString(),
            "p.yaml:5:13: warning: spec.volumes[0]: ignored: only secret volumes are supported by "
            "gpucloud");
  EXPECT_EQ(r.warnings[1].ToString(),
            "p.yaml:9:20: warning: spec.containers[0].volumeMounts[0]: ignored: volume \"data\" is "
            "not a secret volume");
  EXPECT_EQ(r.warnings[2].ToString(),
            "p.yaml:11:54: warning: spec.containers[0].resources.limits.ephemeral-storage: "
            "ignored: gpucloud does not schedule ephemeral-storage");
}

// `kubectl get -o yaml` prints every quantity as a string; Kubernetes accepts strings and
// numbers alike, and so does gpucloud.
TEST(Kubernetes, QuantitiesMayBeStrings) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    command: [python3, train.py]
    resources:
      limits: {nvidia.com/gpu: "2", cpu: "500m", memory: "16Gi"}
      requests: {nvidia.com/gpu: 2.0, cpu: "0.5", memory: 16Gi}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: v}
spec:
  tasks:
  - replicas: 2
    name: w
    template:
      spec:
        containers:
        - name: w
          command: [python3, train.py]
          resources:
            limits: {nvidia.com/mig-1g.10gb: "2000m", cpu: "1", memory: "1G"}
---
apiVersion: gpucloud/v1
kind: Job
metadata: {name: g}
spec:
  tasks:
  - name: a
    command: [python3, train.py]
    resources: {gpu: "1", cpu: "4", memory: "8Gi"}
  - name: b
    command: [python3, train.py]
    resources: {gpu: {count: "3", type: H100-80GB}}
)",
                                 "q.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ASSERT_EQ(r.manifests.size(), 3u);
  const TaskSpec& pod = std::get<Job>(r.manifests[0].object).spec.tasks[0];
  EXPECT_EQ(pod.resources.gpu.mode, GpuMode::kWhole);
  EXPECT_EQ(pod.resources.gpu.count, 2);
  EXPECT_EQ(pod.resources.cpu, MilliCpu(500));
  EXPECT_EQ(pod.resources.memory, MiB(16 * 1024));
  const TaskSpec& vc = std::get<Job>(r.manifests[1].object).spec.tasks[0];
  EXPECT_EQ(vc.resources.gpu.mode, GpuMode::kMig);
  EXPECT_EQ(vc.resources.gpu.count, 2);
  EXPECT_EQ(vc.resources.cpu, MilliCpu(1000));
  const JobSpec& g = std::get<Job>(r.manifests[2].object).spec;
  EXPECT_EQ(g.tasks[0].resources.gpu.count, 1);
  EXPECT_EQ(g.tasks[0].resources.cpu, MilliCpu(4000));
  EXPECT_EQ(g.tasks[1].resources.gpu.count, 3);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Kubernetes, ImageWithoutCommandRunsTheEntrypointSilently) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: trainer:1
    args: [--epochs, "3"]
---
apiVersion: gpucloud/v1
kind: Job
metadata: {name: g}
spec:
  tasks:
  - name: a
    image: trainer:1
  - name: b
    image: trainer:1
    command: [python3, train.py]
)",
                                 "img.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0].ToString();
  EXPECT_TRUE(std::get<Job>(r.manifests[0].object).spec.tasks[0].command.empty());
  EXPECT_EQ(std::get<Job>(r.manifests[0].object).spec.tasks[0].args,
            (std::vector<std::string>{"--epochs", "3"}));
}

TEST(Images, PullPolicyAndSecurityContextInAGpucloudJob) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: g}
spec:
  tasks:
  - name: a
    image: registry.local:5000/team/trainer:1
    imagePullPolicy: Never
    securityContext: {runAsUser: 1000, runAsGroup: 100, runAsNonRoot: true}
  - name: b
    image: trainer
)",
                                 "img.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_TRUE(r.warnings.empty());
  const Job& job = std::get<Job>(r.manifests[0].object);
  const TaskSpec& a = job.spec.tasks[0];
  EXPECT_EQ(a.image, "registry.local:5000/team/trainer:1");
  EXPECT_EQ(a.image_pull_policy, PullPolicy::kNever);
  EXPECT_EQ(a.security_context.run_as_user, 1000);
  EXPECT_EQ(a.security_context.run_as_group, 100);
  EXPECT_TRUE(a.security_context.run_as_non_root);
  const TaskSpec& b = job.spec.tasks[1];
  EXPECT_EQ(b.image_pull_policy, PullPolicy::kDefault);
  EXPECT_TRUE(b.security_context.empty());
  // The normalized form says what was written, and reads back the same.
  std::string yaml = ToYaml(job);
  EXPECT_NE(yaml.find("imagePullPolicy: Never"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("runAsUser: 1000"), std::string::npos) << yaml;
  ParseResult again = ParseManifests(yaml, "again.yaml");
  ASSERT_TRUE(again.ok()) << AllErrors(again);
  EXPECT_EQ(std::get<Job>(again.manifests[0].object), job);
}

TEST(Images, PodSecurityContextUnderTheContainers) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 2000, runAsNonRoot: true, fsGroup: 3}
  containers:
  - name: c
    image: trainer:1
    imagePullPolicy: IfNotPresent
    securityContext: {runAsUser: 1001, allowPrivilegeEscalation: false}
)",
                                 "pod.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TaskSpec& t = std::get<Job>(r.manifests[0].object).spec.tasks[0];
  EXPECT_EQ(t.image_pull_policy, PullPolicy::kIfNotPresent);
  EXPECT_EQ(t.security_context.run_as_user, 1001);  // the container's wins
  EXPECT_EQ(t.security_context.run_as_group, 2000);
  EXPECT_TRUE(t.security_context.run_as_non_root);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0].ToString(),
            "pod.yaml:5:76: warning: spec.securityContext.fsGroup: ignored: not supported by "
            "gpucloud yet");
}

TEST(Images, VolcanoTaskSecurityContext) {
  ParseResult r = ParseManifests(R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: v}
spec:
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        securityContext: {runAsUser: 1000}
        containers:
        - name: pytorch
          image: pytorch/pytorch:2.0-cuda11.7-cudnn8-runtime
          imagePullPolicy: Always
          securityContext: {runAsNonRoot: true}
)",
                                 "vc.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TaskSpec& t = std::get<Job>(r.manifests[0].object).spec.tasks[0];
  EXPECT_EQ(t.image_pull_policy, PullPolicy::kAlways);
  EXPECT_EQ(t.security_context.run_as_user, 1000);
  EXPECT_TRUE(t.security_context.run_as_non_root);
}

TEST(Images, DefaultPullPolicyFollowsKubernetes) {
  EXPECT_EQ(ResolvePullPolicy(PullPolicy::kDefault, "trainer"), PullPolicy::kAlways);
  EXPECT_EQ(ResolvePullPolicy(PullPolicy::kDefault, "trainer:latest"), PullPolicy::kAlways);
  EXPECT_EQ(ResolvePullPolicy(PullPolicy::kDefault, "localhost:5000/trainer"), PullPolicy::kAlways);
  EXPECT_EQ(ResolvePullPolicy(PullPolicy::kDefault, "localhost:5000/trainer:1"),
            PullPolicy::kIfNotPresent);
  EXPECT_EQ(ResolvePullPolicy(PullPolicy::kDefault, "trainer@sha256:" + std::string(64, 'a')),
            PullPolicy::kIfNotPresent);
  EXPECT_EQ(ResolvePullPolicy(PullPolicy::kNever, "trainer:latest"), PullPolicy::kNever);
}

TEST(Json, ListOfObjectsAndLocatedErrors) {
  ParseResult r = ParseManifests(R"({"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "gpucloud/v1", "kind": "Queue", "metadata": {"name": "a"}, "spec": {}},
  {"apiVersion": "gpucloud/v1", "kind": "Queue", "metadata": {"name": "b"},
   "spec": {"weight": "2"}}
]})",
                                 "list.json");
  EXPECT_EQ(AllErrors(r),
            "list.json:4:23: items[1].spec.weight: must be an integer, got string \"2\"\n");
  ParseResult ok = ParseManifests(
      R"({"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "gpucloud/v1", "kind": "Queue", "metadata": {"name": "a"}, "spec": {}}]})",
      "list.json");
  ASSERT_TRUE(ok.ok()) << AllErrors(ok);
  EXPECT_EQ(ok.manifests.size(), 1u);
}

TEST(Parse, EmptyDocumentsAreSkipped) {
  ParseResult r = ParseManifests(
      "---\n---\napiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\n"
      "spec: {}\n---\n",
      "q.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ASSERT_EQ(r.manifests.size(), 1u);
  EXPECT_EQ(r.manifests[0].document, 1);  // empty documents are not counted
}

TEST(Parse, OneBadDocumentRejectsTheFileButReportsOnlyItsOwnErrors) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Queue
metadata: {name: good}
spec: {}
---
apiVersion: gpucloud/v1
kind: Queue
metadata: {name: bad}
spec: {weight: -3}
)",
                                 "q.yaml");
  EXPECT_TRUE(r.manifests.empty());
  EXPECT_EQ(AllErrors(r), "q.yaml:9:16: [doc 2] spec.weight: must be >= 1, got -3\n");
}

TEST(Parse, SyntaxErrorInOneDocumentDoesNotHideTheOthers) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Queue
metadata: {name: a
---
apiVersion: gpucloud/v1
kind: Queue
metadata: {name: b}
spec: {weight: 0}
--- # a marker line may carry a comment
apiVersion: gpucloud/v1
kind: Queue
metadata: {name: c}
spec: {}
...
)",
                                 "q.yaml");
  EXPECT_EQ(AllErrors(r),
            "q.yaml:4:1: [doc 1] invalid YAML: end of map flow not found (check the indentation "
            "of this line and the lines above it)\n"
            "q.yaml:8:16: [doc 2] spec.weight: must be >= 1, got 0\n");
}

TEST(Parse, TooLargeIsRefused) {
  std::string big(kMaxManifestBytes + 1, '#');
  ParseResult r = ParseManifests(big, "big.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].message, "file is too large: 8388609 bytes (the limit is 8388608)");
}

TEST(Parse, InvalidUtf8IsLocated) {
  ParseResult r = ParseManifests(
      "apiVersion: v1\nkind: P\xC3"
      "(d\n",
      "u.yaml");
  EXPECT_EQ(AllErrors(r), "u.yaml:2:8: invalid UTF-8 (byte 0xC3): manifests must be UTF-8 text\n");
  EXPECT_TRUE(ParseManifests("# \xE7\x94\xB3\xE8\xAF\xB7\n", "ok.yaml").ok());
}

TEST(Parse, EscapesThatYamlCppDecodesToLatin1AreRejected) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec: {tasks: [{name: w, command: ["train\_resnet.py"]}]}
)",
                                 "e.yaml");
  EXPECT_EQ(AllErrors(r),
            "e.yaml:4:36: spec.tasks[0].command[0]: must be valid UTF-8 (yaml-cpp 0.7 decodes the "
            "escapes \\_ and \\N to Latin-1; write the characters themselves)\n");
}

TEST(Parse, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '[');
  ParseResult r = ParseManifests(deep, "deep.yaml");
  EXPECT_FALSE(r.ok());
}

TEST(Parse, DefaultsAreFilledIn) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks: [{name: a, replicas: 2}, {name: b, replicas: 3, resources: {gpu: {count: 1, type: a100}}}]
)",
                                 "j.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const Job& job = std::get<Job>(r.manifests[0].object);
  EXPECT_EQ(job.spec.min_available, 5);
  EXPECT_EQ(job.spec.queue, "default");
  EXPECT_EQ(job.spec.billing, BillingClass::kOnDemand);
  EXPECT_EQ(job.spec.restart, RestartPolicy{});
  EXPECT_EQ(job.spec.tasks[1].resources.gpu.types,
            (std::vector<std::string>{"A100-40GB", "A100-80GB"}));
}

TEST(Parse, TolerationsAndTaints) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tolerations:
  - {key: gpucloud.io/spot, operator: Exists, effect: NoSchedule}
  - {key: team, value: nlp}
  tasks: [{name: w}]
)",
                                 "t.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const std::vector<Toleration>& t = std::get<Job>(r.manifests[0].object).spec.tolerations;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0], (Toleration{.key = "gpucloud.io/spot", .exists = true, .effect = "NoSchedule"}));
  EXPECT_EQ(t[1], (Toleration{.key = "team", .exists = false, .value = "nlp"}));
}

SchedulerConfig ParseSchedulerSpec(const std::string& spec) {
  ParseResult r = ParseManifests(
      "apiVersion: gpucloud/v1\nkind: SchedulerConfiguration\nmetadata: {name: p}\n" + spec,
      "p.yaml");
  EXPECT_TRUE(r.ok()) << AllErrors(r);
  if (!r.ok()) return {};
  return std::get<SchedulerConfiguration>(r.manifests.at(0).object).spec;
}

TEST(SchedulerConfiguration, NamespaceBudgetDefaultsToTheBuiltInLimits) {
  SchedulerConfig c = ParseSchedulerSpec("spec: {}\n");
  EXPECT_EQ(c.namespace_budget.max_waiting, 1000);
  EXPECT_EQ(c.namespace_budget.max_searches, 100);
  c = ParseSchedulerSpec("spec: {namespaceBudget: {maxSearches: 20}}\n");
  EXPECT_EQ(c.namespace_budget.max_waiting, 1000);  // an omitted limit keeps its default
  EXPECT_EQ(c.namespace_budget.max_searches, 20);
}

TEST(SchedulerConfiguration, NamespaceBudgetIsRead) {
  SchedulerConfig c =
      ParseSchedulerSpec("spec:\n  namespaceBudget: {maxWaiting: 250, maxSearches: 0}\n");
  EXPECT_EQ(c.namespace_budget, (NamespaceBudgetConfig{.max_waiting = 250, .max_searches = 0}));
  ParseResult r = ParseManifests(
      "apiVersion: gpucloud/v1\nkind: SchedulerConfiguration\nmetadata: {name: p}\n"
      "spec:\n  namespaceBudget: {maxWaiting: 250, maxSearches: 0}\n",
      "p.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(Summarize(r.manifests[0].object),
            "SchedulerConfiguration p: fifo, backfill, fair share over 7d, preemption with 30s "
            "grace; filters default; scores BinPack x1, Fragmentation x1; per namespace and cycle "
            "250 waiting, unlimited searches");
}

TEST(Summary, SaysWhatTheJobAsksFor) {
  ParseResult r = ParseFile("examples/seed-003-volcano-pytorch.yaml");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Summarize(r.manifests[0].object),
            "Job default/pytorch-job: 4 x worker (1 GPU, any type); gang of 4; 4 GPUs in all; "
            "queue default, on-demand");
}

}  // namespace
}  // namespace gpucloud::manifest
