// How a task is launched (pure): host process or container, as whom, where, with what.
#include "agent/task_launch.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

bool Has(const std::vector<std::string>& argv, const std::string& flag, const std::string& v) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag && argv[i + 1] == v) return true;
  }
  return false;
}

LaunchInput Input() {
  LaunchInput in;
  in.a.name = "team-a.train.0";
  in.a.namespace_ = "team-a";
  in.a.job = "train";
  in.a.command = {"python3", "train.py"};
  in.a.env = {{"LR", "0.1"}, {"HOME", "/custom"}};
  in.a.cpu_milli = 2000;
  in.a.memory_mib = 1024;
  in.env.gpu_uuids = {"GPU-1"};
  in.exec_id = "team-a.train.0.1";
  in.log_path = "/s/logs/x.log";
  in.status_path = "/s/run/team-a.train.0.1/exit";
  in.sandbox = "/s/sandbox/team-a.train.0.1";
  in.checkpoint_dir = "/ckpt/team-a/train";
  in.host_env = {{"PATH", "/usr/bin:/bin"}, {"USER", "root"}, {"LANG", "C.UTF-8"}};
  in.cdi_devices = {"nvidia.com/gpu=GPU-1"};
  in.node_name = "node-a";
  return in;
}

LaunchPolicy Policy() {
  LaunchPolicy p;
  p.allow_host_processes = true;
  p.operator_workdir = "/srv/repo";
  p.pids_max = 4096;
  return p;
}

TEST(PlanLaunch, AHostProcessRunsAsItsNamespacesUserInItsOwnDirectories) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Input(), Policy());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->container);
  EXPECT_EQ(plan->spec.argv, (std::vector<std::string>{"python3", "train.py"}));
  ASSERT_TRUE(plan->spec.uid.has_value());
  EXPECT_EQ(*plan->spec.uid, NamespaceUid("team-a"));
  EXPECT_EQ(plan->spec.gid, NamespaceUid("team-a"));
  EXPECT_EQ(plan->identity.uid, NamespaceUid("team-a"));
  EXPECT_EQ(plan->spec.workdir, "/srv/repo");
  const auto& env = plan->spec.env;
  EXPECT_EQ(env.at("HOME"), "/custom");  // the job's own wins
  EXPECT_EQ(env.at("TMPDIR"), "/s/sandbox/team-a.train.0.1");
  EXPECT_EQ(env.at("PATH"), "/usr/bin:/bin");
  EXPECT_FALSE(env.contains("USER"));  // the agent's
  EXPECT_EQ(env.at("GPUCLOUD_CHECKPOINT_DIR"), "/ckpt/team-a/train");
  EXPECT_EQ(env.at("GPUCLOUD_HOSTFILE"), "/s/sandbox/team-a.train.0.1/hostfile");
  EXPECT_EQ(plan->hostfile, "/s/sandbox/team-a.train.0.1/hostfile");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "GPU-1");
  EXPECT_EQ(plan->spec.cpu->raw(), 2000);
  EXPECT_EQ(plan->spec.pids_max, 4096);
  EXPECT_EQ(plan->spec.status_path, "/s/run/team-a.train.0.1/exit");
}

// An MPIJob's launcher as a host process: the job's /etc/volcano/... values name the host files
// the agent wrote in the task's sandbox, since a host process has no /etc/volcano mount.
TEST(PlanLaunch, AHostProcessFindsVolcanosHostFilesInItsSandbox) {
  LaunchInput in = Input();
  in.a.env["OMPI_MCA_orte_default_hostfile"] = "/etc/volcano/worker.host";
  in.volcano_dir = in.sandbox + "/volcano";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(in, Policy());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spec.env.at("OMPI_MCA_orte_default_hostfile"),
            in.sandbox + "/volcano/worker.host");
  // In a container the path stays: the files are mounted there.
  in.a.image = "registry.local/mpi:1";
  plan = PlanLaunch(in, Policy());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(
      Has(plan->spec.argv, "--env", "OMPI_MCA_orte_default_hostfile=/etc/volcano/worker.host"));
}

TEST(PlanLaunch, HostProcessRefusals) {
  LaunchPolicy p = Policy();
  p.allow_host_processes = false;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Input(), p);
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.status()));
  EXPECT_TRUE(std::string(plan.status().message()).starts_with("HostProcessNotAllowed: "));
  LaunchInput in = Input();
  in.a.working_dir = "/etc";
  plan = PlanLaunch(in, Policy());
  EXPECT_TRUE(std::string(plan.status().message())
                  .starts_with("InvalidWorkingDir: spec.tasks[].workingDir: /etc is outside"))
      << plan.status();
  in = Input();
  in.a.run_as_user = 1000;  // another user than its namespace's, on the host
  plan = PlanLaunch(in, Policy());
  EXPECT_TRUE(std::string(plan.status().message()).starts_with("InvalidSecurityContext: "));
  in = Input();
  in.a.command.clear();
  EXPECT_EQ(PlanLaunch(in, Policy()).status(), NoCommandError());
}

TEST(PlanLaunch, AnAgentThatIsNotRootRunsTasksAsItself) {
  LaunchPolicy p = Policy();
  p.switch_users = false;
  p.agent_uid = 1000;
  p.agent_gid = 1001;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Input(), p);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->spec.uid.has_value());
  EXPECT_EQ(plan->identity.uid, 1000u);
  EXPECT_EQ(plan->identity.gid, 1001u);
}

TEST(PlanLaunch, AContainerSeesOnlyItsMountsAndNothingOfTheHostsEnvironment) {
  LaunchInput in = Input();
  in.a.image = "registry.local:5000/team-a/trainer:1";
  in.a.run_as_user = 1234;
  in.a.working_dir = "app";
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(in, Policy());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->container);
  EXPECT_EQ(plan->container_name, "gpucloud-team-a.train.0.1");
  const std::vector<std::string>& argv = plan->spec.argv;
  EXPECT_EQ(argv[0], "podman");
  EXPECT_FALSE(plan->spec.uid.has_value());  // podman runs as the agent; the container as 1234
  EXPECT_TRUE(Has(argv, "--user", "1234:1234"));
  EXPECT_EQ(plan->identity.uid, 1234u);
  EXPECT_TRUE(Has(argv, "--mount",
                  "type=bind,source=/s/sandbox/team-a.train.0.1,destination=/gpucloud/scratch,"
                  "rw=true"));
  EXPECT_TRUE(Has(argv, "--mount",
                  "type=bind,source=/ckpt/team-a/train,destination=/gpucloud/checkpoints,"
                  "rw=true"));
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--mount"), 2);
  // Volcano's host files, read-only, where Volcano's examples read them.
  in.volcano_dir = "/s/run/team-a.train.0.1/volcano";
  absl::StatusOr<LaunchPlan> volcano = PlanLaunch(in, Policy());
  ASSERT_TRUE(volcano.ok());
  EXPECT_TRUE(Has(volcano->spec.argv, "--mount",
                  "type=bind,source=/s/run/team-a.train.0.1/volcano,destination=/etc/volcano,"
                  "ro=true"));
  in.volcano_dir.clear();
  EXPECT_TRUE(Has(argv, "--env", "GPUCLOUD_CHECKPOINT_DIR=/gpucloud/checkpoints"));
  EXPECT_TRUE(Has(argv, "--env", "GPUCLOUD_HOSTFILE=/gpucloud/scratch/hostfile"));
  EXPECT_TRUE(Has(argv, "--env", "HOME=/custom"));
  EXPECT_TRUE(Has(argv, "--env", "LR=0.1"));
  for (const std::string& a : argv) {
    EXPECT_FALSE(a.starts_with("PATH=") || a.starts_with("USER=") || a.starts_with("LANG=")) << a;
  }
  EXPECT_TRUE(Has(argv, "--device", "nvidia.com/gpu=GPU-1"));
  EXPECT_TRUE(Has(argv, "--workdir", "/app"));
  EXPECT_TRUE(Has(argv, "--label", "gpucloud.node=node-a"));
  EXPECT_TRUE(Has(argv, "--entrypoint", R"(["python3","train.py"])"));
  EXPECT_EQ(argv.back(), in.a.image);
  EXPECT_FALSE(plan->spec.cpu.has_value());  // the container's limits are Podman's
  EXPECT_EQ(plan->spec.workdir, in.sandbox);
  // Only args: the image's entrypoint gets them.
  in.a.image_entrypoint = true;
  in.a.command = {"--steps", "5"};
  plan = PlanLaunch(in, Policy());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(std::count(plan->spec.argv.begin(), plan->spec.argv.end(), "--entrypoint"), 0);
  EXPECT_EQ(plan->spec.argv.back(), "5");
}

TEST(PlanLaunch, ContainersOnANodeWithoutHostProcessesAndTheirRootRules) {
  LaunchInput in = Input();
  in.a.image = "busybox:1";
  LaunchPolicy p = Policy();
  p.allow_host_processes = false;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(in, p);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(
      Has(plan->spec.argv, "--user", Cat(NamespaceUid("team-a"), ":", NamespaceUid("team-a"))));
  in.a.run_as_user = 0;
  EXPECT_TRUE(
      std::string(PlanLaunch(in, p).status().message())
          .starts_with(
              "InvalidSecurityContext: securityContext.runAsUser: 0 (root) is not allowed"));
  p.allow_root = true;
  EXPECT_TRUE(PlanLaunch(in, p).ok());
  in.a.run_as_non_root = true;  // the manifest's own rule holds whatever the node allows
  EXPECT_EQ(PlanLaunch(in, p).status().message(),
            "InvalidSecurityContext: securityContext.runAsUser: 0 (root), but runAsNonRoot is "
            "true");
}

TEST(PlanLaunch, AnImageOrPathPodmanWouldMisreadIsRefused) {
  LaunchInput in = Input();
  for (const char* bad : {"--privileged", "a b", "x\ny"}) {
    in.a.image = bad;
    EXPECT_TRUE(std::string(PlanLaunch(in, Policy()).status().message())
                    .starts_with("InvalidImage: spec.tasks[].image:"))
        << bad;
  }
  in.a.image = "busybox:1";
  in.checkpoint_dir = "/ckpt/team-a/x,U=true";
  EXPECT_TRUE(std::string(PlanLaunch(in, Policy()).status().message()).starts_with("InvalidPath"));
}

TEST(ContainerExit, PodmansCodes) {
  TaskExit e;
  e.exit_code = 137;
  TaskExit c = ContainerExit(e);
  EXPECT_EQ(c.signal, SIGKILL);
  EXPECT_EQ(c.exit_code, -1);
  e.exit_code = 3;
  EXPECT_EQ(ContainerExit(e).exit_code, 3);
  EXPECT_EQ(DescribeContainerExit(ContainerExit(e)), "exit code 3");
  e.exit_code = 127;
  EXPECT_EQ(DescribeContainerExit(e), "the image has no such command (exit code 127; see the log)");
  e.exit_code = 125;
  EXPECT_NE(DescribeContainerExit(e).find("could not be started"), std::string::npos);
}

}  // namespace
}  // namespace gpucloud::agent
