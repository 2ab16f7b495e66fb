// A job's ssh keys (JobSpec::ssh): Volcano's ssh plugin and its arguments, a Kubeflow MPIJob's
// sshAuthMountPath, gpucloud/v1's spec.ssh and its round trip, and the errors of jobs whose
// keys would not fit (field, line and column).
#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string Diagnostics(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const Diagnostic& d : ds) out += d.ToString() + "\n";
  return out;
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

void ExpectRoundTrip(const Job& job) {
  for (bool json : {false, true}) {
    std::string text = json ? ToJson(job) : ToYaml(job);
    ParseResult r = ParseManifests(text, "rt");
    ASSERT_TRUE(r.ok()) << Diagnostics(r.errors) << text;
    EXPECT_TRUE(std::get<Job>(r.manifests[0].object) == job) << text;
  }
}

std::string VolcanoJob(const std::string& plugins) {
  return R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: lm-mpi}
spec:
  minAvailable: 3
  plugins:
)" + plugins +
         R"(
  tasks:
  - name: mpimaster
    replicas: 1
    template: {spec: {containers: [{name: m, image: mpi:1, command: [mpirun, ./app]}]}}
  - name: mpiworker
    replicas: 2
    template: {spec: {containers: [{name: w, image: mpi:1, command: [/usr/sbin/sshd, -D]}]}}
)";
}

TEST(VolcanoSsh, TheSshPluginAsksForKeysAtRootsSshDirectory) {
  ParseResult r = ParseManifests(VolcanoJob("    ssh: []\n    svc: []\n    env: []"), "v.yaml");
  const Job& job = OnlyJob(r);
  ASSERT_TRUE(job.spec.ssh.has_value());
  EXPECT_EQ(job.spec.ssh->mount_path, "/root/.ssh");
  EXPECT_EQ(Diagnostics(r.warnings), "");  // env and svc are what the agent always gives
  ExpectRoundTrip(job);
}

TEST(VolcanoSsh, KeyFilePathInEitherSpelling) {
  for (const char* args : {R"(    ssh: ["--ssh-key-file-path=/home/mpi/.ssh"])",
                           R"(    ssh: ["--ssh-key-file-path", "/home/mpi/.ssh"])"}) {
    ParseResult r = ParseManifests(VolcanoJob(args), "v.yaml");
    const Job& job = OnlyJob(r);
    ASSERT_TRUE(job.spec.ssh.has_value()) << args;
    EXPECT_EQ(job.spec.ssh->mount_path, "/home/mpi/.ssh") << args;
  }
}

TEST(VolcanoSsh, WithoutTheSshPluginThereAreNoKeysAndOtherPluginsAreWarned) {
  ParseResult r =
      ParseManifests(VolcanoJob("    svc: []\n    pytorch: [\"--port=23456\"]"), "v.yaml");
  const Job& job = OnlyJob(r);
  EXPECT_FALSE(job.spec.ssh.has_value());
  EXPECT_EQ(Diagnostics(r.warnings),
            "v.yaml:8:5: warning: spec.plugins.pytorch: ignored: gpucloud sets the "
            "distributed-training environment itself\n");
}

TEST(GpucloudSsh, SpecSshDefaultsItsMountPathAndRoundTrips) {
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: mpi, namespace: team-a}
spec:
  ssh: {}
  tasks:
  - {name: worker, replicas: 2, image: mpi:1, command: [sshd]}
)",
                                 "g.yaml");
  const Job& job = OnlyJob(r);
  ASSERT_TRUE(job.spec.ssh.has_value());
  EXPECT_EQ(job.spec.ssh->mount_path, "/root/.ssh");
  ExpectRoundTrip(job);
  Job moved = job;
  moved.spec.ssh->mount_path = "/home/u/.ssh";
  ExpectRoundTrip(moved);
  EXPECT_NE(ToYaml(job).find("ssh:"), std::string::npos);
}

TEST(MpiJobSsh, EveryMpiJobHasKeysAtSshAuthMountPath) {
  const char* kMpiJob = R"(apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  slotsPerWorker: 2
%s  mpiReplicaSpecs:
    Launcher:
      template: {spec: {containers: [{name: l, image: mpi:1, command: [mpirun, ./pi]}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: w, image: mpi:1, command: [/usr/sbin/sshd, -De]}]}}
)";
  char text[2048];
  std::snprintf(text, sizeof text, kMpiJob, "");
  ParseResult plain = ParseManifests(text, "m.yaml");
  const Job& job = OnlyJob(plain);
  ASSERT_TRUE(job.spec.ssh.has_value());
  EXPECT_EQ(job.spec.ssh->mount_path, "/root/.ssh");
  EXPECT_EQ(Diagnostics(plain.warnings), "");  // sshAuthMountPath is no longer ignored
  // The launcher's hostfile is the agent's MPI hostfile (one line a host), in Open MPI's form.
  const TaskSpec& launcher = job.spec.tasks[0];
  EXPECT_EQ(EnvOf(launcher, "OMPI_MCA_orte_default_hostfile"), "/etc/volcano/worker.hostfile");
  EXPECT_EQ(EnvOf(launcher, "GPUCLOUD_MPI_IMPLEMENTATION"), "OpenMPI");
  EXPECT_EQ(EnvOf(launcher, "GPUCLOUD_MPI_SLOTS_PER_WORKER"), "2");
  EXPECT_EQ(EnvOf(job.spec.tasks[1], "GPUCLOUD_MPI_IMPLEMENTATION"), "<unset>");
  ExpectRoundTrip(job);

  std::snprintf(text, sizeof text, kMpiJob, "  sshAuthMountPath: /home/mpiuser/.ssh\n");
  ParseResult with_path = ParseManifests(text, "m.yaml");
  const Job& moved = OnlyJob(with_path);
  ASSERT_TRUE(moved.spec.ssh.has_value());
  EXPECT_EQ(moved.spec.ssh->mount_path, "/home/mpiuser/.ssh");
}

struct InvalidSshCase {
  const char* name;
  std::string yaml;
  const char* want;
};

class InvalidSsh : public ::testing::TestWithParam<InvalidSshCase> {};

TEST_P(InvalidSsh, NamesTheFieldAndTheLine) {
  ParseResult r = ParseManifests(GetParam().yaml, "s.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Diagnostics(r.errors), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidSsh,
    ::testing::Values(
        InvalidSshCase{"own_private_key", VolcanoJob(R"(    ssh: ["--ssh-private-key=x"])"),
                       "s.yaml:7:11: spec.plugins.ssh[0]: \"--ssh-private-key=x\" is not "
                       "supported: gpucloud makes every job a fresh key pair (give your own keys "
                       "as a secret volume instead)\n"},
        InvalidSshCase{"relative_key_path", VolcanoJob(R"(    ssh: ["--ssh-key-file-path=.ssh"])"),
                       "s.yaml:7:11: spec.plugins.ssh[0]: must be an absolute path, got "
                       "\".ssh\"\n"},
        InvalidSshCase{"key_path_without_value", VolcanoJob(R"(    ssh: ["--ssh-key-file-path"])"),
                       "s.yaml:7:11: spec.plugins.ssh[0]: --ssh-key-file-path needs a path\n"},
        InvalidSshCase{"unknown_argument", VolcanoJob(R"(    ssh: ["--port=2222"])"),
                       "s.yaml:7:11: spec.plugins.ssh[0]: unknown ssh plugin argument "
                       "\"--port=2222\" (known: --ssh-key-file-path=PATH)\n"},
        InvalidSshCase{"reserved_mount_path", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  ssh: {mountPath: /etc/volcano/ssh}
  tasks: [{name: w, image: i, command: [x]}]
)",
                       "s.yaml:5:20: spec.ssh.mountPath: must not be in /etc/volcano (the "
                       "platform's or the kernel's), got \"/etc/volcano/ssh\"\n"},
        InvalidSshCase{"volume_on_the_keys", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  ssh: {}
  tasks:
  - name: w
    image: i
    command: [x]
    volumes: [{name: keys, mountPath: /root/.ssh/extra, secret: {secretName: mine}}]
)",
                       "s.yaml:5:8: spec.ssh: the job's ssh keys are mounted at /root/.ssh, in "
                       "or on volume \"keys\" of task w at /root/.ssh/extra\n"},
        InvalidSshCase{"name_too_long", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: a23456789012345678901234567890123456789012345678901234567890}
spec:
  ssh: {}
  tasks: [{name: w, image: i, command: [x]}]
)",
                       "s.yaml:5:8: spec.ssh: a job with ssh keys has a name of at most 59 "
                       "characters (its Secret \"<name>-ssh\" is a DNS label), got 60\n"},
        InvalidSshCase{"array", R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: j}
spec:
  ssh: {}
  array: {count: 2}
  tasks: [{name: w, image: i, command: [x]}]
)",
                       "s.yaml:5:8: spec.ssh: ssh keys are not supported for a job array\n"},
        InvalidSshCase{"mpijob_bad_mount_path", R"(apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: m}
spec:
  sshAuthMountPath: /
  mpiReplicaSpecs:
    Launcher:
      template: {spec: {containers: [{name: c, command: [x]}]}}
)",
                       "s.yaml:5:21: spec.sshAuthMountPath: must not be / (the container's "
                       "root), got \"/\"\n"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gpucloud::manifest
