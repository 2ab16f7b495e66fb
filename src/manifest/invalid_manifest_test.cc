// A table of invalid manifests and the exact errors gpuctl prints for them. Each error names
// the file, the field path, and the line and column of the offending key or value.
#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

struct Case {
  const char* name;
  const char* yaml;
  const char* want;  // every error, one per line
};

std::string Errors(const std::string& yaml) {
  ParseResult r = ParseManifests(yaml, "job.yaml");
  std::string out;
  for (const Diagnostic& d : r.errors) out += d.ToString() + "\n";
  if (!r.errors.empty()) {
    EXPECT_TRUE(r.manifests.empty());
  }
  return out;
}

const Case kCases[] = {
    {"sched_config_bad_fields", R"(apiVersion: gpucloud/v1
kind: SchedulerConfiguration
metadata:
  name: p
spec:
  ordering: random
  fairShare: {enabled: yes, window: 0s}
  preemption: {gracePeriod: soon}
  plugins:
    filter: [GpuType, node-health]
    score:
    - name: BinPack
      weight: 101
    - name: Fragmentation
      workload:
      - {gpus: 0, weight: 1}
      - {gpus: 1}
    scroe: []
)",
     "job.yaml:6:13: spec.ordering: must be fifo, sjf, las or dlas, got \"random\"\n"
     "job.yaml:7:24: spec.fairShare.enabled: must be true or false, got string \"yes\"\n"
     "job.yaml:7:37: spec.fairShare.window: must be longer than 0s\n"
     "job.yaml:8:29: spec.preemption.gracePeriod: not a valid duration: \"soon\" (use e.g. "
     "90s, 10m, 1h30m, 2d)\n"
     "job.yaml:10:23: spec.plugins.filter[1]: must be a plugin name such as BinPack (letters "
     "and digits, starting with a capital), got \"node-health\"\n"
     "job.yaml:13:15: spec.plugins.score[0].weight: must be <= 100, got 101\n"
     "job.yaml:16:16: spec.plugins.score[1].workload[0].gpus: must be more than 0\n"
     "job.yaml:17:9: spec.plugins.score[1].workload[1].weight: is required\n"
     "job.yaml:18:5: spec.plugins.scroe: unknown field\n"},
    {"sched_config_bad_namespace_budget", R"(apiVersion: gpucloud/v1
kind: SchedulerConfiguration
metadata: {name: p}
spec:
  namespaceBudget: {maxWaiting: -1, maxSearches: 2000000, maxBinds: 5}
)",
     "job.yaml:5:33: spec.namespaceBudget.maxWaiting: must be >= 0, got -1\n"
     "job.yaml:5:50: spec.namespaceBudget.maxSearches: must be <= 1000000, got 2000000\n"
     "job.yaml:5:59: spec.namespaceBudget.maxBinds: unknown field\n"},
    {"sched_config_las_bands", R"(apiVersion: gpucloud/v1
kind: SchedulerConfiguration
metadata: {name: p}
spec:
  ordering: dlas
  las: {thresholds: [1h, 30m, 0s], starvationFactor: -2, quanta: 3}
)",
     "job.yaml:6:26: spec.las.thresholds[1]: must be longer than 0s and than the threshold "
     "before it\n"
     "job.yaml:6:31: spec.las.thresholds[2]: must be longer than 0s and than the threshold "
     "before it\n"
     "job.yaml:6:54: spec.las.starvationFactor: must be a number such as 2 or 0.5 (0: off), got "
     "-2\n"
     "job.yaml:6:58: spec.las.quanta: unknown field\n"},
    {"sched_config_namespace_budget_not_a_map", R"(apiVersion: gpucloud/v1
kind: SchedulerConfiguration
metadata: {name: p}
spec:
  namespaceBudget: 100
)",
     "job.yaml:5:20: spec.namespaceBudget: must be a mapping, got integer 100\n"},
    {"replicas_zero", R"(apiVersion: gpucloud/v1
kind: Job
metadata:
  name: train
spec:
  tasks:
  - name: worker
    replicas: 0
)",
     "job.yaml:8:15: spec.tasks[0].replicas: must be >= 1, got 0\n"},
    {"unknown_top_level_field", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
sepc: {}
spec:
  tasks: [{name: w}]
)",
     "job.yaml:4:1: sepc: unknown field\n"},
    {"unknown_task_field", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    replica: 2
)",
     "job.yaml:7:5: spec.tasks[0].replica: unknown field\n"},
    {"replicas_wrong_type", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    replicas: "2"
)",
     "job.yaml:7:15: spec.tasks[0].replicas: must be an integer, got string \"2\"\n"},
    {"negative_gpu_count", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {count: -1}
)",
     "job.yaml:8:20: spec.tasks[0].resources.gpu.count: must be >= 0, got -1\n"},
    {"fractional_whole_gpu_count", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: 1.5
)",
     "job.yaml:8:12: spec.tasks[0].resources.gpu: must be a whole number of GPUs, got 1.5 (for "
     "part of one GPU ask for a fraction)\n"},
    {"mig_profile_not_on_type", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {mig: 3g.40gb, type: A100-40GB}
)",
     "job.yaml:8:18: spec.tasks[0].resources.gpu.mig: MIG profile 3g.40gb does not exist on "
     "A100-40GB (its profiles: 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, "
     "7g.40gb)\n"},
    {"mig_on_type_without_mig", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {mig: 1g.5gb, type: T4}
)",
     "job.yaml:8:18: spec.tasks[0].resources.gpu.mig: MIG profile 1g.5gb requested, but T4 does "
     "not support MIG\n"},
    {"mig_profile_unknown_everywhere", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {mig: 1g.7gb}
)",
     "job.yaml:8:18: spec.tasks[0].resources.gpu.mig: no GPU type has MIG profile \"1g.7gb\"\n"},
    {"fraction_above_one", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {fraction: 1.5}
)",
     "job.yaml:8:23: spec.tasks[0].resources.gpu.fraction: must be at most 1 (a fraction of one "
     "GPU), got 1.5\n"},
    {"fraction_zero", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {fraction: 0}
)",
     "job.yaml:8:23: spec.tasks[0].resources.gpu.fraction: must be > 0, got 0\n"},
    {"fraction_too_fine", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {fraction: 0.0001}
)",
     "job.yaml:8:23: spec.tasks[0].resources.gpu.fraction: must be a fraction of one GPU such as "
     "0.25, got 0.0001 (quantity has more than 3 decimals: 0.0001)\n"},
    {"min_available_above_replicas", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 5
  tasks:
  - name: w
    replicas: 4
)",
     "job.yaml:5:17: spec.minAvailable: must be <= the total replicas (4), got 5\n"},
    {"missing_api_version", R"(kind: Job
metadata: {name: train}
spec: {tasks: [{name: w}]}
)",
     "job.yaml:1:1: apiVersion: is required\n"},
    {"missing_kind", R"(apiVersion: gpucloud/v1
metadata: {name: train}
)",
     "job.yaml:1:1: kind: is required\n"},
    {"unknown_kind", R"(apiVersion: gpucloud/v1
kind: Deployment
metadata: {name: train}
)",
     "job.yaml:2:7: kind: unknown kind \"Deployment\" for apiVersion gpucloud/v1 (known: Job, "
     "Queue, NodePool, RuntimeClass, SchedulerConfiguration, InferenceService)\n"},
    {"unsupported_api_version", R"(apiVersion: apps/v1
kind: Deployment
)",
     "job.yaml:1:13: apiVersion: unsupported apiVersion \"apps/v1\" (supported: gpucloud/v1, v1, "
     "batch.volcano.sh/v1alpha1, kubeflow.org/v1, kubeflow.org/v2beta1, node.k8s.io/v1)\n"},
    {"missing_name", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {namespace: team-a}
spec: {tasks: [{name: w}]}
)",
     "job.yaml:3:11: metadata.name: is required\n"},
    {"invalid_name", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: Train_1}
spec: {tasks: [{name: w}]}
)",
     "job.yaml:3:18: metadata.name: must consist of lower-case letters, digits and '-', and "
     "start and end with a letter or digit, got \"Train_1\"\n"},
    {"metadata_null", R"(apiVersion: v1
kind: Pod
metadata:
name: ml-training
spec:
containers: []
)",
     // The flattened indentation of seed 000's Pod, if YAML accepted it: every key lands at the
     // top level, and each problem is reported.
     "job.yaml:3:1: metadata: is required, got null\n"
     "job.yaml:4:1: name: unknown field\n"
     "job.yaml:5:1: spec: is required, got null\n"
     "job.yaml:6:1: containers: unknown field\n"},
    {"duplicate_key", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks: [{name: w}]
  queue: a
  queue: b
)",
     "job.yaml:7:3: spec.queue: duplicate field\n"},
    {"yaml_syntax_error", "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: train\n",
     "job.yaml:4:1: invalid YAML: end of map flow not found (check the indentation of this line "
     "and the lines above it)\n"},
    {"document_not_a_mapping", "- a\n- b\n",
     "job.yaml:1:1: the document must be a mapping, got a list\n"},
    {"unknown_gpu_type", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {count: 1, type: b200}
)",
     "job.yaml:8:29: spec.tasks[0].resources.gpu.type: unknown GPU type \"b200\" (known: "
     "V100-16GB, V100-32GB, T4, A10, L40S, A100-40GB, A100-80GB, H100-80GB, H200-141GB, "
     "RTX-4090)\n"},
    {"bad_billing_class", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  billing: preemptible
  tasks: [{name: w}]
)",
     "job.yaml:5:12: spec.billing: must be on-demand, reserved or spot, got \"preemptible\"\n"},
    {"negative_max_restarts", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  restartPolicy: {maxRestarts: -1}
  tasks: [{name: w}]
)",
     "job.yaml:5:32: spec.restartPolicy.maxRestarts: must be >= 0, got -1\n"},
    {"no_tasks", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks: []
)",
     "job.yaml:5:10: spec.tasks: must have at least one task\n"},
    {"duplicate_task_names", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
  - name: w
)",
     "job.yaml:7:11: spec.tasks[1].name: duplicate task name \"w\"\n"},
    {"bad_memory_quantity", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources: {memory: 16GB}
)",
     "job.yaml:7:25: spec.tasks[0].resources.memory: not a valid memory quantity: \"16GB\" (use "
     "e.g. 512Mi, 16Gi or 80G)\n"},
    {"bad_cpu_quantity", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources: {cpu: two}
)",
     "job.yaml:7:22: spec.tasks[0].resources.cpu: must be a CPU quantity such as 4 or 500m, got "
     "two\n"},
    {"bad_cuda_version", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  minCudaVersion: "12"
  tasks: [{name: w}]
)",
     "job.yaml:5:19: spec.minCudaVersion: not a valid CUDA version: \"12\" (use MAJOR.MINOR, e.g. "
     "12.4)\n"},
    {"bad_checkpoint_interval", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  checkpoint: {dir: /ckpt, interval: 10x}
  tasks: [{name: w}]
)",
     "job.yaml:5:38: spec.checkpoint.interval: not a valid duration: \"10x\" (use e.g. 90s, 10m, "
     "1h30m, 2d)\n"},
    {"checkpoint_replicate_without_node_local", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  checkpoint: {dir: /ckpt, replicate: true}
  tasks: [{name: w}]
)",
     "job.yaml:5:15: spec.checkpoint.replicate: replicate copies node-local checkpoints: set "
     "nodeLocal: "
     "true as well\n"},
    {"label_value_not_string", R"(apiVersion: gpucloud/v1
kind: Job
metadata:
  name: train
  labels: {version: 1.0}
spec: {tasks: [{name: w}]}
)",
     "job.yaml:5:21: metadata.labels.version: must be a string, got number 1.0 (quote it: "
     "\"1.0\")\n"},
    {"priority_out_of_range", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  priority: 2000000
  tasks: [{name: w}]
)",
     "job.yaml:5:13: spec.priority: must be <= 1000000, got 2000000\n"},
    {"mig_and_fraction", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {mig: 1g.10gb, fraction: 0.5}
)",
     "job.yaml:8:37: spec.tasks[0].resources.gpu.fraction: cannot be combined with mig: a task "
     "asks for MIG instances or a share of a GPU\n"},
    {"memory_without_fraction", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {count: 1, memory: 8Gi}
)",
     "job.yaml:8:31: spec.tasks[0].resources.gpu.memory: is only allowed with fraction (a shared "
     "GPU)\n"},
    {"shared_memory_exceeds_type", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    resources:
      gpu: {fraction: 0.5, memory: 20Gi, type: T4}
)",
     "job.yaml:8:12: spec.tasks[0].resources.gpu: shared GPU memory 20Gi exceeds the 16Gi of "
     "T4\n"},
    {"queue_max_below_guaranteed", R"(apiVersion: gpucloud/v1
kind: Queue
metadata: {name: team-a}
spec:
  quota:
  - {gpuType: H100-80GB, guaranteed: 8, max: 4}
)",
     "job.yaml:6:46: spec.quota[0].max: must be >= guaranteed (8), got 4\n"},
    {"queue_weight_zero", R"(apiVersion: gpucloud/v1
kind: Queue
metadata: {name: team-a}
spec: {weight: 0}
)",
     "job.yaml:4:16: spec.weight: must be >= 1, got 0\n"},
    {"queue_ambiguous_type", R"(apiVersion: gpucloud/v1
kind: Queue
metadata: {name: team-a}
spec:
  quota:
  - {gpuType: a100, guaranteed: 8}
)",
     "job.yaml:6:15: spec.quota[0].gpuType: \"a100\" is ambiguous here: name one of A100-40GB, "
     "A100-80GB\n"},
    {"pool_min_above_max", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec: {gpuType: H100-80GB, minNodes: 4, maxNodes: 2}
)",
     "job.yaml:4:51: spec.maxNodes: must be >= minNodes (4), got 2\n"},
    {"pool_zero_gpus_per_node", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec: {gpuType: H100-80GB, gpusPerNode: 0}
)",
     "job.yaml:4:41: spec.gpusPerNode: must be >= 1, got 0\n"},
    {"pool_negative_price", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec: {gpuType: T4, pricePerGpuHour: "-1"}
)",
     "job.yaml:4:38: spec.pricePerGpuHour: must be a price in US dollars such as 2.50, got -1\n"},
    {"pool_schedule_negative_price", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec:
  gpuType: T4
  priceSchedule:
  - {from: "2026-12-01T00:00:00Z", pricePerGpuHour: "-0.5"}
)",
     "job.yaml:7:53: spec.priceSchedule[0].pricePerGpuHour: must be a price in US dollars such as "
     "2.50, not below 0, got -0.5\n"},
    {"pool_schedule_gap", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec:
  gpuType: T4
  priceSchedule:
  - {from: "2026-12-01T00:00:00Z", until: "2026-12-02T00:00:00Z", pricePerGpuHour: "0.5"}
  - {from: "2026-12-03T00:00:00Z", pricePerGpuHour: "0.7"}
)",
     "job.yaml:8:5: spec.priceSchedule[1].from: leaves a gap after the period before it: periods "
     "must follow each other (from = the until before)\n"},
    {"pool_schedule_bad_time", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec:
  gpuType: T4
  priceSchedule: [{from: tomorrow, pricePerGpuHour: "0.5"}]
)",
     "job.yaml:6:26: spec.priceSchedule[0].from: must be an RFC 3339 time such as "
     "2026-12-01T00:00:00Z, got \"tomorrow\"\n"},
    {"pool_unknown_provider", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec: {gpuType: T4, provider: gce}
)",
     "job.yaml:4:31: spec.provider: must be static, local or exec:/path/to/script, got \"gce\"\n"},
    {"pod_gpu_not_a_number", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu: four}
)",
     "job.yaml:8:32: spec.containers[0].resources.limits.nvidia.com/gpu: must be a whole number "
     "of GPUs such as 1 or \"2\", got \"four\"\n"},
    // Kubernetes quantities may be strings (kubectl get -o yaml quotes them); a string must
    // still be a whole number of GPUs.
    {"pod_gpu_quoted_fraction_and_word", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu: "1.5"}
      requests: {nvidia.com/gpu: "abc"}
)",
     "job.yaml:8:32: spec.containers[0].resources.limits.nvidia.com/gpu: must be a whole number "
     "of GPUs, got 1.5 (for part of one GPU ask for a fraction)\n"},
    {"pod_gpu_quoted_request_word", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu: "1"}
      requests: {nvidia.com/gpu: "abc", cpu: "4x", memory: "lots"}
)",
     "job.yaml:9:34: spec.containers[0].resources.requests.nvidia.com/gpu: must be a whole number "
     "of GPUs such as 1 or \"2\", got \"abc\"\n"
     "job.yaml:9:46: spec.containers[0].resources.requests.cpu: must be a CPU quantity such as 4 "
     "or 500m, got 4x\n"
     "job.yaml:9:60: spec.containers[0].resources.requests.memory: not a valid memory quantity: "
     "\"lots\" (use e.g. 512Mi, 16Gi or 80G)\n"},
    {"pod_mig_quoted_milli_fraction", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/mig-1g.10gb: "500m"}
)",
     "job.yaml:8:40: spec.containers[0].resources.limits.nvidia.com/mig-1g.10gb: must be a whole "
     "number of GPUs, got 500m (for part of one GPU ask for a fraction)\n"},
    {"job_gpu_quoted_counts", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: a
    resources:
      gpu: "2.5"
  - name: b
    resources:
      gpu: {count: "-1"}
  - name: c
    resources:
      gpu: {count: "2000000"}
)",
     "job.yaml:8:12: spec.tasks[0].resources.gpu: must be a whole number of GPUs, got 2.5 (for "
     "part of one GPU ask for a fraction)\n"
     "job.yaml:11:20: spec.tasks[1].resources.gpu.count: must be >= 0, got -1\n"
     "job.yaml:14:20: spec.tasks[2].resources.gpu.count: must be <= 1048576, got 2000000\n"},
    {"pod_two_containers", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: a
  - name: b
)",
     "job.yaml:6:3: spec.containers: must have exactly one container (gpucloud runs one process "
     "per task), got 2\n"},
    {"pod_unknown_nvidia_resource", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpus: 1}
)",
     "job.yaml:8:33: spec.containers[0].resources.limits.nvidia.com/gpus: unknown NVIDIA resource "
     "\"nvidia.com/gpus\" (known: nvidia.com/gpu, nvidia.com/gpu.shared, "
     "nvidia.com/mig-<profile>)\n"},
    {"pod_gpu_request_differs_from_limit", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu: 2}
      requests: {nvidia.com/gpu: 1}
)",
     "job.yaml:9:34: spec.containers[0].resources.requests.nvidia.com/gpu: must equal the limit "
     "(2) for nvidia.com/gpu\n"},
    {"pod_mig_profile_not_on_selected_type", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeSelector: {accelerator: nvidia-h100}
  containers:
  - name: c
    resources:
      limits: {nvidia.com/mig-1g.5gb: 1}
)",
     "job.yaml:9:39: spec.containers[0].resources.limits.nvidia.com/mig-1g.5gb: MIG profile 1g.5gb "
     "does not exist on H100-80GB (its profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, "
     "4g.40gb, 7g.80gb)\n"},
    {"pod_bad_restart_policy", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  restartPolicy: Sometimes
  containers: [{name: c}]
)",
     "job.yaml:5:18: spec.restartPolicy: must be Always, OnFailure or Never, got \"Sometimes\"\n"},
    {"volcano_min_available_above_replicas", R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: pytorch-job}
spec:
  minAvailable: 8
  tasks:
  - replicas: 4
    name: worker
    template:
      spec:
        containers: [{name: pytorch, resources: {limits: {nvidia.com/gpu: 1}}}]
)",
     "job.yaml:5:17: spec.minAvailable: must be <= the total replicas (4), got 8\n"},
    {"volcano_replicas_zero", R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: pytorch-job}
spec:
  tasks:
  - replicas: 0
    name: worker
    template:
      spec:
        containers: [{name: pytorch}]
)",
     "job.yaml:6:15: spec.tasks[0].replicas: must be >= 1, got 0\n"},
    {"volcano_missing_template", R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: pytorch-job}
spec:
  tasks:
  - replicas: 1
    name: worker
)",
     "job.yaml:6:5: spec.tasks[0].template: is required\n"},
    {"errors_in_every_document", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: a}
spec: {tasks: [{name: w, replicas: 0}]}
---
apiVersion: gpucloud/v1
kind: Job
metadata: {name: b}
spec: {tasks: [{name: w}], minAvailable: 2}
)",
     "job.yaml:4:36: [doc 1] spec.tasks[0].replicas: must be >= 1, got 0\n"
     "job.yaml:9:42: [doc 2] spec.minAvailable: must be <= the total replicas (1), got 2\n"},
    {"duplicate_object", R"(apiVersion: gpucloud/v1
kind: Queue
metadata: {name: q}
spec: {}
---
apiVersion: gpucloud/v1
kind: Queue
metadata: {name: q}
spec: {weight: 2}
)",
     "job.yaml:6:1: [doc 2] metadata.name: duplicate Queue q with different content (also "
     "document 1)\n"},
    {"toleration_exists_with_value", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tolerations:
  - {key: spot, operator: Exists, value: "yes"}
  tasks: [{name: w}]
)",
     "job.yaml:6:5: spec.tolerations[0].value: must be empty when operator is Exists\n"},
    {"taint_bad_effect", R"(apiVersion: gpucloud/v1
kind: NodePool
metadata: {name: p}
spec:
  gpuType: T4
  taints: [{key: spot, effect: NoRun}]
)",
     "job.yaml:6:32: spec.taints[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute, "
     "got \"NoRun\"\n"},
    {"env_value_from", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    env:
    - name: TOKEN
      valueFrom: {configMapKeyRef: {name: s, key: k}}
)",
     "job.yaml:9:36: spec.tasks[0].env[0].valueFrom.configMapKeyRef: is not supported: give the "
     "value itself, or a secretKeyRef\n"},
    {"nul_in_command_yaml", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: w
    command: [sh, "-c\0rm -rf /"]
    env: [{name: A, value: "x\0y"}]
    workingDir: "/tmp\0/etc"
)",
     "job.yaml:7:19: spec.tasks[0].command[1]: contains a NUL character\n"
     "job.yaml:8:28: spec.tasks[0].env[0].value: contains a NUL character\n"
     "job.yaml:9:17: spec.tasks[0].workingDir: contains a NUL character\n"},
    {"nul_in_json_body", R"({"apiVersion": "gpucloud/v1", "kind": "Job",
 "metadata": {"name": "train", "annotations": {"a\u0000b": "c"}},
 "spec": {"tasks": [{"name": "w",
   "command": ["python", "train.py\u0000--evil"],
   "args": ["\u0000"],
   "env": [{"name": "A", "value": "1\u0000"}],
   "workingDir": "/w\u0000"}]}}
)",
     "job.yaml:2:60: metadata.annotations: a key contains a NUL character\n"
     "job.yaml:4:26: spec.tasks[0].command[1]: contains a NUL character\n"
     "job.yaml:5:13: spec.tasks[0].args[0]: contains a NUL character\n"
     "job.yaml:6:35: spec.tasks[0].env[0].value: contains a NUL character\n"
     "job.yaml:7:18: spec.tasks[0].workingDir: contains a NUL character\n"},
    {"nul_in_pod_container_args", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    args: ["ok", "bad\0"]
)",
     "job.yaml:7:18: spec.containers[0].args[1]: contains a NUL character\n"},
    {"replicas_above_job_limit", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: bomb}
spec:
  tasks:
  - name: w
    replicas: 100000
)",
     "job.yaml:7:15: spec.tasks[0].replicas: must be <= 10000, got 100000\n"},
    {"replicas_of_all_tasks_above_job_limit", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: bomb}
spec:
  tasks:
  - {name: a, replicas: 6000}
  - {name: b, replicas: 4001}
)",
     "job.yaml:6:3: spec.tasks: must have at most 10000 replicas in all, got 10001\n"},
    {"volcano_replicas_of_all_tasks_above_job_limit", R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: bomb}
spec:
  tasks:
  - {name: a, replicas: 10000, template: {spec: {containers: [{name: c}]}}}
  - {name: b, replicas: 10000, template: {spec: {containers: [{name: c}]}}}
)",
     "job.yaml:6:3: spec.tasks: must have at most 10000 replicas in all, got 20000\n"},
    {"bad_image_pull_policy", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, image: trainer:1, imagePullPolicy: Sometimes}
)",
     "job.yaml:6:50: spec.tasks[0].imagePullPolicy: must be Always, IfNotPresent or Never, got "
     "\"Sometimes\"\n"},
    {"pod_bad_image_pull_policy", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: trainer:1, imagePullPolicy: always}]
)",
     "job.yaml:5:61: spec.containers[0].imagePullPolicy: must be Always, IfNotPresent or Never, "
     "got \"always\"\n"},
    {"image_uppercase_repository", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, image: registry.local/Team/Trainer:1}
)",
     "job.yaml:6:22: spec.tasks[0].image: must be an image reference such as "
     "registry.local:5000/team/trainer:1, got \"registry.local/Team/Trainer:1\" (repository must "
     "be lowercase)\n"},
    {"image_with_space", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, image: "trainer 1"}
)",
     "job.yaml:6:22: spec.tasks[0].image: must be an image reference such as "
     "registry.local:5000/team/trainer:1, got \"trainer 1\" (must not contain spaces or control "
     "characters)\n"},
    {"image_empty_component", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a}
  - {name: b, image: "team//trainer:1"}
)",
     "job.yaml:7:22: spec.tasks[1].image: must be an image reference such as "
     "registry.local:5000/team/trainer:1, got \"team//trainer:1\" (empty path component)\n"},
    {"image_empty", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, image: ""}
)",
     "job.yaml:6:22: spec.tasks[0].image: must be an image reference such as "
     "registry.local:5000/team/trainer:1, got \"\" (must not be empty)\n"},
    {"image_bad_tag", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, image: "trainer:-1"}
)",
     "job.yaml:6:22: spec.tasks[0].image: must be an image reference such as "
     "registry.local:5000/team/trainer:1, got \"trainer:-1\" (the tag must be 1 to 128 letters, "
     "digits, '_', '.' or '-', not starting with '.' or '-')\n"},
    {"image_bad_digest", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: "trainer@sha256:abc"}]
)",
     "job.yaml:5:33: spec.containers[0].image: must be an image reference such as "
     "registry.local:5000/team/trainer:1, got \"trainer@sha256:abc\" (the digest must be "
     "algorithm:hex, such as sha256:<64 hex>)\n"},
    {"run_as_user_negative", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, securityContext: {runAsUser: -1}}
)",
     "job.yaml:6:44: spec.tasks[0].securityContext.runAsUser: must be >= 0, got -1\n"},
    {"run_as_group_too_large", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - {name: a, securityContext: {runAsGroup: 2147483648}}
)",
     "job.yaml:6:45: spec.tasks[0].securityContext.runAsGroup: must be <= 2147483647, got "
     "2147483648\n"},
    {"run_as_non_root_with_uid_0", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - name: a
    securityContext: {runAsUser: 0, runAsNonRoot: true}
)",
     "job.yaml:7:22: spec.tasks[0].securityContext.runAsUser: must not be 0 (root) with "
     "runAsNonRoot: true\n"},
    {"security_context_unknown_field_in_gpucloud_job", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - name: a
    securityContext: {fsGroup: 3}
)",
     "job.yaml:7:23: spec.tasks[0].securityContext.fsGroup: unknown field\n"},
    {"pod_non_root_with_container_uid_0", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - name: c
    securityContext: {runAsUser: 0}
)",
     "job.yaml:7:5: spec.containers[0].securityContext.runAsUser: must not be 0 (root) with "
     "runAsNonRoot: true\n"},
    {"pod_uid_0_with_container_non_root", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  securityContext: {runAsUser: 0}
  containers:
  - name: c
    securityContext: {runAsNonRoot: true}
)",
     "job.yaml:7:5: spec.containers[0].securityContext.runAsUser: must not be 0 (root) with "
     "runAsNonRoot: true\n"},
    {"pod_privileged_container", R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    securityContext: {privileged: true}
)",
     "job.yaml:7:35: spec.containers[0].securityContext.privileged: privileged tasks are not "
     "allowed\n"},
    {"volcano_run_as_user_not_an_int", R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: v}
spec:
  tasks:
  - name: worker
    template:
      spec:
        securityContext: {runAsUser: root}
        containers: [{name: c}]
)",
     "job.yaml:9:38: spec.tasks[0].template.spec.securityContext.runAsUser: must be an integer, "
     "got string \"root\"\n"},
};

class InvalidManifest : public testing::TestWithParam<Case> {};

TEST_P(InvalidManifest, GivesTheExactError) { EXPECT_EQ(Errors(GetParam().yaml), GetParam().want); }

// The table's size is known when it compiles: checked then, not as a test that cannot fail.
static_assert(std::size(kCases) >= 30, "the table of invalid manifests has at least 30 cases");

INSTANTIATE_TEST_SUITE_P(Table, InvalidManifest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

// Limits too large to write out in the table: the manifests are generated.
std::string JobWithTasks(const std::string& tasks, const std::string& metadata = "") {
  return "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: big" + metadata +
         "}\nspec:\n  tasks:\n" + tasks;
}

TEST(ManifestLimits, AtMostAHundredTasks) {
  std::string tasks;
  for (int i = 0; i < 100; ++i) tasks += "  - {name: t" + std::to_string(i) + "}\n";
  EXPECT_EQ(Errors(JobWithTasks(tasks)), "");
  tasks += "  - {name: t100}\n";
  EXPECT_EQ(Errors(JobWithTasks(tasks)),
            "job.yaml:6:3: spec.tasks: must have at most 100 tasks, got 101\n");
}

TEST(ManifestLimits, TenThousandReplicasInAllAreAccepted) {
  EXPECT_EQ(Errors(JobWithTasks("  - {name: a, replicas: 9999}\n  - {name: b}\n")), "");
}

TEST(ManifestLimits, OneArgumentAtMostLinuxsMaxArgStrlen) {
  std::string fits(kMaxExecStringBytes, 'x');
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    args: [" + fits + "]\n")), "");
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    args: [" + fits + "y]\n")),
            "job.yaml:7:12: spec.tasks[0].args[0]: must be at most 131072 bytes, got 131073\n");
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    env: [{name: A, value: " + fits + "}]\n")),
            "job.yaml:7:11: spec.tasks[0].env[0].value: NAME=value must be at most 131072 bytes, "
            "got 131074\n");
}

TEST(ManifestLimits, CommandArgsAndEnvAtMostOneMebibyteTogether) {
  std::string arg(100'000, 'x');
  std::string args;
  for (int i = 0; i < 11; ++i) args += (i ? ", " : "") + arg;
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    args: [" + args + "]\n")),
            "job.yaml:6:5: spec.tasks[0]: command, args and env must be at most 1048576 bytes "
            "together, got 1100011\n");
}

TEST(ManifestLimits, CommandAndArgsAtMost4096Entries) {
  std::string args;
  for (int i = 0; i < 4097; ++i) args += i ? ", a" : "a";
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    command: [sh]\n    args: [" + args + "]\n")),
            "job.yaml:6:5: spec.tasks[0]: command and args must have at most 4096 entries "
            "together, got 4098\n");
}

TEST(ManifestLimits, EnvAtMost4096Entries) {
  std::string env;
  for (int i = 0; i < 4097; ++i) env += (i ? ", {name: V" : "{name: V") + std::to_string(i) + "}";
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    env: [" + env + "]\n")),
            "job.yaml:7:10: spec.tasks[0].env: must have at most 4096 entries, got 4097\n");
}

TEST(ManifestLimits, WorkingDirAtMostPathMax) {
  EXPECT_EQ(Errors(JobWithTasks("  - name: w\n    workingDir: /" + std::string(4096, 'd') + "\n")),
            "job.yaml:7:17: spec.tasks[0].workingDir: must be at most 4096 bytes, got 4097\n");
}

TEST(ManifestLimits, AtMost256Labels) {
  std::string labels;
  for (int i = 0; i < 257; ++i) labels += (i ? ", l" : "l") + std::to_string(i) + ": v";
  EXPECT_EQ(Errors(JobWithTasks("  - {name: w}\n", ", labels: {" + labels + "}")),
            "job.yaml:3:31: metadata.labels: must have at most 256 entries, got 257\n");
}

TEST(ManifestLimits, Annotations256KiBInAll) {
  std::string value(100'000, 'a');
  std::string annotations = "a: " + value + ", b: " + value;
  EXPECT_EQ(Errors(JobWithTasks("  - {name: w}\n", ", annotations: {" + annotations + "}")), "");
  annotations += ", c: " + value;
  EXPECT_EQ(Errors(JobWithTasks("  - {name: w}\n", ", annotations: {" + annotations + "}")),
            "job.yaml:3:36: metadata.annotations: must be at most 262144 bytes of keys and "
            "values in all, got 300003\n");
}

}  // namespace
}  // namespace gpucloud::manifest
