// Kubeflow PyTorchJob and MPIJob, and lifecycle policies (Volcano's and gpucloud/v1's): what they
// decode to, the errors of invalid ones (field, line and column), and printing them back.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string Diagnostics(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const Diagnostic& d : ds) out += d.ToString() + "\n";
  return out;
}

ParseResult ParseExample(const std::string& rel) {
  std::ifstream f(std::string(GPUCLOUD_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseManifests(ss.str(), rel);
}

const Job& OnlyJob(const ParseResult& r) {
  EXPECT_TRUE(r.ok()) << Diagnostics(r.errors);
  EXPECT_EQ(r.manifests.size(), 1u);
  static const Job kEmpty;
  if (r.manifests.size() != 1) return kEmpty;
  return std::get<Job>(r.manifests[0].object);
}

std::string EnvOf(const TaskSpec& t, const std::string& name) {
  for (const EnvVar& e : t.env) {
    if (e.name == name) return e.value;
  }
  return "<unset>";
}

LifecyclePolicy On(LifecycleEvent e, LifecycleAction a, std::string task = "") {
  return LifecyclePolicy{{e}, std::nullopt, a, std::move(task)};
}

// Prints `job` as YAML and JSON and parses both back to the same job.
void ExpectRoundTrip(const Job& job) {
  for (bool json : {false, true}) {
    std::string text = json ? ToJson(job) : ToYaml(job);
    ParseResult r = ParseManifests(text, "rt");
    ASSERT_TRUE(r.ok()) << Diagnostics(r.errors) << text;
    EXPECT_TRUE(std::get<Job>(r.manifests[0].object) == job) << text;
  }
}

TEST(PyTorchJob, ExampleIsMasterThenWorkersWithTheOperatorsEnvironment) {
  ParseResult r = ParseExample("examples/kubeflow/pytorchjob.yaml");
  const Job& job = OnlyJob(r);
  EXPECT_EQ(r.manifests[0].source_api_version, "kubeflow.org/v1");
  EXPECT_EQ(r.manifests[0].source_kind, "PyTorchJob");
  ASSERT_EQ(job.spec.tasks.size(), 2u);
  EXPECT_EQ(job.spec.tasks[0].name, "master");  // rank 0: MASTER_ADDR
  EXPECT_EQ(job.spec.tasks[0].replicas, 1);
  EXPECT_EQ(job.spec.tasks[1].name, "worker");
  EXPECT_EQ(job.spec.tasks[1].replicas, 2);
  EXPECT_EQ(job.spec.tasks[1].resources.gpu.count, 1);
  for (const TaskSpec& t : job.spec.tasks) EXPECT_EQ(EnvOf(t, "PET_NPROC_PER_NODE"), "2");
  EXPECT_EQ(job.spec.restart.max_restarts, 2);  // runPolicy.backoffLimit
  EXPECT_EQ(job.spec.GangSize(), 3);
  // The operator's PyTorchJob succeeds when its master does.
  EXPECT_EQ(job.spec.policies,
            (std::vector<LifecyclePolicy>{
                On(LifecycleEvent::kTaskCompleted, LifecycleAction::kCompleteJob, "master")}));
  EXPECT_TRUE(r.warnings.empty()) << Diagnostics(r.warnings);
  ExpectRoundTrip(job);
}

TEST(PyTorchJob, ElasticPolicyBoundsTheGangAndReachesTorchrun) {
  ParseResult r = ParseManifests(R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: elastic}
spec:
  elasticPolicy:
    minReplicas: 2
    maxReplicas: 4
    nProcPerNode: 8
    maxRestarts: 5
    rdzvBackend: c10d
  runPolicy: {suspend: false, ttlSecondsAfterFinished: 60}
  pytorchReplicaSpecs:
    Worker:
      replicas: 4
      restartPolicy: Never
      template:
        spec:
          containers:
          - {name: pytorch, command: [torchrun, train.py], resources: {limits: {nvidia.com/gpu: 8}}}
)",
                                 "e.yaml");
  const Job& job = OnlyJob(r);
  ASSERT_EQ(job.spec.tasks.size(), 1u);
  EXPECT_EQ(job.spec.tasks[0].name, "worker");
  EXPECT_EQ(job.spec.min_available, 2);
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "PET_NPROC_PER_NODE"), "8");
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "PET_MAX_RESTARTS"), "5");
  // restartPolicy Never: a failed worker ends the job; no master, so no CompleteJob.
  EXPECT_EQ(job.spec.policies,
            (std::vector<LifecyclePolicy>{
                On(LifecycleEvent::kPodFailed, LifecycleAction::kTerminateJob, "worker")}));
  EXPECT_EQ(
      Diagnostics(r.warnings),
      "e.yaml:10:5: warning: spec.elasticPolicy.rdzvBackend: ignored: gpucloud's torchrun "
      "rendezvous "
      "is static, at MASTER_ADDR:MASTER_PORT\n"
      "e.yaml:11:15: warning: spec.runPolicy.suspend: ignored: gpucloud queues the job at once\n"
      "e.yaml:11:31: warning: spec.runPolicy.ttlSecondsAfterFinished: ignored: gpucloud keeps "
      "finished jobs until deleted\n");
  ExpectRoundTrip(job);
}

TEST(MPIJob, ExampleGivesTheLauncherTheWorkersHostFileAndSlots) {
  ParseResult r = ParseExample("examples/kubeflow/mpijob.yaml");
  const Job& job = OnlyJob(r);
  EXPECT_EQ(r.manifests[0].source_api_version, "kubeflow.org/v2beta1");
  EXPECT_EQ(r.manifests[0].source_kind, "MPIJob");
  ASSERT_EQ(job.spec.tasks.size(), 2u);
  const TaskSpec& launcher = job.spec.tasks[0];
  const TaskSpec& worker = job.spec.tasks[1];
  EXPECT_EQ(launcher.name, "launcher");
  EXPECT_EQ(launcher.resources.gpu.mode, GpuMode::kNone);
  EXPECT_EQ(worker.name, "worker");
  EXPECT_EQ(worker.replicas, 2);
  EXPECT_EQ(worker.resources.gpu.count, 2);
  EXPECT_EQ(EnvOf(launcher, "OMPI_MCA_orte_default_hostfile"), "/etc/volcano/worker.hostfile");
  EXPECT_EQ(EnvOf(launcher, "OMPI_MCA_orte_set_default_slots"), "2");
  EXPECT_EQ(EnvOf(launcher, "OMPI_MCA_orte_keep_fqdn_hostnames"), "true");
  EXPECT_EQ(EnvOf(launcher, "K_MPI_JOB_ROLE"), "launcher");
  EXPECT_EQ(EnvOf(worker, "K_MPI_JOB_ROLE"), "worker");
  EXPECT_EQ(EnvOf(worker, "OMPI_MCA_orte_default_hostfile"), "<unset>");
  EXPECT_EQ(job.spec.restart.max_restarts, 1);
  EXPECT_EQ(job.spec.GangSize(), 3);
  EXPECT_EQ(job.spec.policies,
            (std::vector<LifecyclePolicy>{
                On(LifecycleEvent::kTaskCompleted, LifecycleAction::kCompleteJob, "launcher")}));
  ExpectRoundTrip(job);
}

TEST(MPIJob, IntelMpiAndASchedulingPolicy) {
  ParseResult r = ParseManifests(R"(apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: intel}
spec:
  slotsPerWorker: 4
  mpiImplementation: Intel
  runPolicy: {schedulingPolicy: {minAvailable: 3, queue: research}}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template: {spec: {containers: [{name: l, command: [mpirun, ./app]}]}}
    Worker:
      replicas: 4
      template: {spec: {containers: [{name: w, command: [sleep, "3600"]}]}}
)",
                                 "i.yaml");
  const Job& job = OnlyJob(r);
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "I_MPI_HYDRA_HOST_FILE"), "/etc/volcano/worker.hostfile");
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "GPUCLOUD_MPI_IMPLEMENTATION"), "Intel");
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "I_MPI_PERHOST"), "4");
  EXPECT_EQ(job.spec.min_available, 3);
  EXPECT_EQ(job.spec.queue, "research");
}

TEST(MPIJob, ALauncherAloneAndAnExitCodeRestartPolicy) {
  ParseResult r = ParseManifests(R"(apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: alone}
spec:
  mpiReplicaSpecs:
    Launcher:
      restartPolicy: ExitCode
      template: {spec: {containers: [{name: l, command: [mpirun, -np, "2", ./app]}]}}
    Worker:
      replicas: 0
      template: {spec: {containers: [{name: w, command: [sleep, "3600"]}]}}
)",
                                 "a.yaml");
  const Job& job = OnlyJob(r);
  ASSERT_EQ(job.spec.tasks.size(), 1u);  // no worker task
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "OMPI_MCA_orte_default_hostfile"), "<unset>");
  EXPECT_EQ(EnvOf(job.spec.tasks[0], "OMPI_MCA_orte_set_default_slots"), "1");
  EXPECT_EQ(Diagnostics(r.warnings),
            "a.yaml:7:22: warning: spec.mpiReplicaSpecs.Launcher.restartPolicy: read as "
            "OnFailure: gpucloud restarts the job after any failure while "
            "runPolicy.backoffLimit allows (exit codes 1-127 too)\n");
}

TEST(VolcanoPolicies, TensorFlowExampleCompletesWhenItsWorkersDo) {
  ParseResult r = ParseExample("examples/volcano/tensorflow-ps.yaml");
  const Job& job = OnlyJob(r);
  ASSERT_EQ(job.spec.tasks.size(), 2u);
  // Task-level policies first, then the job's.
  EXPECT_EQ(job.spec.policies,
            (std::vector<LifecyclePolicy>{
                On(LifecycleEvent::kTaskCompleted, LifecycleAction::kCompleteJob, "worker"),
                On(LifecycleEvent::kPodEvicted, LifecycleAction::kRestartJob)}));
  ExpectRoundTrip(job);
}

constexpr std::string_view kVolcanoHead = R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: v}
spec:
  tasks:
  - name: w
    template: {spec: {containers: [{name: c, command: [x]}]}}
)";

ParseResult ParseVolcanoPolicies(const std::string& policies) {
  return ParseManifests(std::string(kVolcanoHead) + "  policies:\n" + policies, "v.yaml");
}

TEST(VolcanoPolicies, EventsExitCodesAndVolcanoSpellings) {
  ParseResult r = ParseVolcanoPolicies(
      "  - {events: [PodFailed, Unknown], action: RestartTask}\n"
      "  - {exitCode: 137, action: AbortJob, timeout: 10m}\n"
      "  - {event: '*', action: TerminateJob}\n");
  const Job& job = OnlyJob(r);
  ASSERT_EQ(job.spec.policies.size(), 3u);
  EXPECT_EQ(job.spec.policies[0].events,
            (std::vector<LifecycleEvent>{LifecycleEvent::kPodFailed, LifecycleEvent::kJobUnknown}));
  EXPECT_EQ(job.spec.policies[0].action, LifecycleAction::kRestartJob);  // a gang restarts whole
  EXPECT_EQ(job.spec.policies[1].exit_code, 137);
  EXPECT_TRUE(job.spec.policies[1].events.empty());
  EXPECT_EQ(job.spec.policies[1].action, LifecycleAction::kAbortJob);
  EXPECT_EQ(job.spec.policies[2].events, (std::vector<LifecycleEvent>{LifecycleEvent::kAny}));
  EXPECT_EQ(Diagnostics(r.warnings),
            "v.yaml:10:39: warning: spec.policies[1].timeout: ignored: gpucloud acts on an event "
            "at once\n");
  ExpectRoundTrip(job);
  EXPECT_NE(ToYaml(job).find("- \"*\""), std::string::npos) << ToYaml(job);
}

struct InvalidCase {
  const char* name;
  std::string policies;
  const char* want;
};

class InvalidVolcanoPolicy : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidVolcanoPolicy, NamesTheFieldAndTheLine) {
  ParseResult r = ParseVolcanoPolicies(GetParam().policies);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Diagnostics(r.errors), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidVolcanoPolicy,
    ::testing::Values(
        InvalidCase{"internal_event", "  - {event: OutOfSync, action: RestartJob}\n",
                    "v.yaml:9:13: spec.policies[0].event: unsupported event \"OutOfSync\" "
                    "(supported: *, PodFailed, PodEvicted, TaskCompleted, TaskFailed or Unknown "
                    "(also JobUnknown))\n"},
        InvalidCase{"unsupported_action", "  - {event: PodFailed, action: SyncJob}\n",
                    "v.yaml:9:32: spec.policies[0].action: unsupported action \"SyncJob\" "
                    "(supported: RestartJob, RestartTask, RestartPod, CompleteJob, AbortJob or "
                    "TerminateJob)\n"},
        InvalidCase{"exit_code_with_event",
                    "  - {event: PodFailed, exitCode: 3, action: AbortJob}\n",
                    "v.yaml:9:34: spec.policies[0].exitCode: cannot be combined with event or "
                    "events: a policy matches one or the other\n"},
        InvalidCase{"exit_code_zero", "  - {exitCode: 0, action: AbortJob}\n",
                    "v.yaml:9:16: spec.policies[0].exitCode: must be >= 1, got 0\n"},
        InvalidCase{"no_action", "  - {event: PodFailed}\n",
                    "v.yaml:9:5: spec.policies[0].action: is required\n"},
        InvalidCase{"no_event", "  - {action: AbortJob}\n",
                    "v.yaml:9:5: spec.policies[0]: must name an event (event or events) or an "
                    "exitCode\n"},
        InvalidCase{"star_with_others", "  - {events: ['*', PodFailed], action: AbortJob}\n",
                    "v.yaml:9:14: spec.policies[0].events: \"*\" means every event: it cannot be "
                    "listed with others\n"},
        InvalidCase{"duplicate_event",
                    "  - {event: PodFailed, action: AbortJob}\n"
                    "  - {event: PodFailed, action: RestartJob}\n",
                    "v.yaml:10:5: spec.policies[1]: duplicate event PodFailed among the policies "
                    "of the job\n"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(GpucloudPolicies, DecodeInTaskOrderAndRoundTrip) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: g}
spec:
  tasks:
  - {name: ps, command: [x]}
  - {name: worker, replicas: 2, command: [y]}
  policies:
  - {events: [PodEvicted], action: RestartJob}
  - {events: [TaskCompleted], action: CompleteJob, task: worker}
  - {exitCode: 3, action: AbortJob, task: ps}
)",
                                 "g.yaml");
  const Job& job = OnlyJob(r);
  std::vector<LifecyclePolicy> want = {
      {{}, 3, LifecycleAction::kAbortJob, "ps"},
      On(LifecycleEvent::kTaskCompleted, LifecycleAction::kCompleteJob, "worker"),
      On(LifecycleEvent::kPodEvicted, LifecycleAction::kRestartJob)};
  EXPECT_EQ(job.spec.policies, want);
  ExpectRoundTrip(job);
}

TEST(GpucloudPolicies, ATaskThatIsNotThereIsAnError) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: g}
spec:
  tasks: [{name: w, command: [x]}]
  policies: [{events: [TaskCompleted], action: CompleteJob, task: chief}]
)",
                                 "g.yaml");
  EXPECT_EQ(Diagnostics(r.errors),
            "g.yaml:6:14: spec.policies[0].task: names no task of this job: \"chief\"\n");
}

struct InvalidKubeflowCase {
  const char* name;
  const char* yaml;
  const char* want;
};

class InvalidKubeflow : public ::testing::TestWithParam<InvalidKubeflowCase> {};

TEST_P(InvalidKubeflow, NamesTheFieldAndTheLine) {
  ParseResult r = ParseManifests(GetParam().yaml, "k.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Diagnostics(r.errors), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidKubeflow,
    ::testing::Values(
        InvalidKubeflowCase{"unknown_replica_type", R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p}
spec:
  pytorchReplicaSpecs:
    Chief: {replicas: 1}
)",
                            "k.yaml:6:5: spec.pytorchReplicaSpecs.Chief: unknown replica type "
                            "\"Chief\" (known: Master, Worker)\n"},
        InvalidKubeflowCase{"two_masters", R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 2
      template: {spec: {containers: [{name: c, command: [x]}]}}
)",
                            "k.yaml:7:17: spec.pytorchReplicaSpecs.Master.replicas: must be <= 1, "
                            "got 2\n"},
        InvalidKubeflowCase{"elastic_min_above_max", R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p}
spec:
  elasticPolicy: {minReplicas: 3, maxReplicas: 2}
  pytorchReplicaSpecs:
    Worker:
      replicas: 4
      template: {spec: {containers: [{name: c, command: [x]}]}}
)",
                            "k.yaml:5:32: spec.elasticPolicy.minReplicas: must be <= maxReplicas "
                            "(2), got 3\n"},
        InvalidKubeflowCase{"nproc_not_a_count", R"(apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p}
spec:
  nprocPerNode: many
  pytorchReplicaSpecs:
    Worker:
      template: {spec: {containers: [{name: c, command: [x]}]}}
)",
                            "k.yaml:5:17: spec.nprocPerNode: must be auto, cpu, gpu or a number "
                            "of processes in [1, 9999], got \"many\"\n"},
        InvalidKubeflowCase{"mpi_without_launcher", R"(apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: m}
spec:
  mpiReplicaSpecs:
    Worker:
      template: {spec: {containers: [{name: c, command: [x]}]}}
)",
                            "k.yaml:6:5: spec.mpiReplicaSpecs.Launcher: is required\n"},
        InvalidKubeflowCase{"mpi_bad_implementation", R"(apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: m}
spec:
  mpiImplementation: MVAPICH
  mpiReplicaSpecs:
    Launcher:
      template: {spec: {containers: [{name: c, command: [x]}]}}
)",
                            "k.yaml:5:22: spec.mpiImplementation: must be OpenMPI, Intel or MPICH, "
                            "got \"MVAPICH\"\n"},
        InvalidKubeflowCase{"unknown_kind", R"(apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: t}
)",
                            "k.yaml:2:7: kind: unknown kind \"TFJob\" for apiVersion "
                            "kubeflow.org/v1 (known: PyTorchJob)\n"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gpucloud::manifest
