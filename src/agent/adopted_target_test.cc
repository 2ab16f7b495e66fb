#include "agent/adopted_target.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace gpucloud::agent {
namespace {

using namespace std::string_literals;

// What /proc shows of a shim the executor started for a task of user 1001 (ShimArgs).
ShimProcess Shim() {
  ShimProcess p;
  p.exe = "/usr/lib/gpucloud/gpucloud-shim";
  p.uid = 0;
  p.cmdline =
      "/usr/lib/gpucloud/gpucloud-shim\0--workdir\0/srv/work\0--uid\0001001\0--gid\0001002\0"
      "--status\0/var/lib/a/run/t/exit\0--status-tmp\0/var/lib/a/run/t/exit.tmp\0"
      "--stdin\0/var/lib/a/run/t/stdin\0--join\0/sys/fs/cgroup/memory/gpucloud/t/tasks\0"
      "--join\0/sys/fs/cgroup/cpu/gpucloud/t/tasks\0--sweep\0001024\0--\0python3\0train.py\0"s;
  p.environ = "PATH=/opt/conda/bin:/usr/bin\0WANDB_API_KEY=s3cret\0EMPTY=\0A=b=c\0"s;
  p.cgroup = "12:memory:/gpucloud/t\n0::/user.slice\n";
  return p;
}

TEST(SessionTargetOfShim, ReadsTheTasksEnvironmentDirectoryUserStdinAndGroups) {
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(Shim(), 0, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->env, (std::map<std::string, std::string>{{"PATH", "/opt/conda/bin:/usr/bin"},
                                                        {"WANDB_API_KEY", "s3cret"},
                                                        {"EMPTY", ""},
                                                        {"A", "b=c"}}));
  EXPECT_EQ(t->workdir, "/srv/work");
  ASSERT_TRUE(t->uid.has_value());
  EXPECT_EQ(*t->uid, 1001u);
  EXPECT_EQ(t->gid, 1002u);
  EXPECT_EQ(t->stdin_path, "/var/lib/a/run/t/stdin");
  EXPECT_EQ(t->cgroup_join, (std::vector<std::string>{"/sys/fs/cgroup/memory/gpucloud/t/tasks",
                                                      "/sys/fs/cgroup/cpu/gpucloud/t/tasks"}));
  EXPECT_TRUE(t->container.empty());
}

TEST(SessionTargetOfShim, ATaskOfTheAgentsOwnUserHasNoUserToBecome) {
  ShimProcess p = Shim();
  p.cmdline = "/x/gpucloud-shim\0--workdir\0/w\0--status\0/s\0--status-tmp\0/s.tmp\0--\0sh\0"s;
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, 0, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->uid.has_value());
  EXPECT_EQ(t->workdir, "/w");
  EXPECT_TRUE(t->stdin_path.empty());
  EXPECT_TRUE(t->cgroup_join.empty());
}

TEST(SessionTargetOfShim, OnCgroupV2JoinsTheTasksGroupFromProc) {
  ShimProcess p = Shim();
  p.cgroup = "0::/gpucloud/default.train.main.0\n";
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, 0, "/sys/fs/cgroup");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(
      t->cgroup_join,
      (std::vector<std::string>{"/sys/fs/cgroup/gpucloud/default.train.main.0/cgroup.procs"}));
  // A group outside gpucloud's (the task was never placed) is not joined.
  p.cgroup = "0::/user.slice/user-0.slice\n";
  EXPECT_TRUE(SessionTargetOfShim(p, 0, "/sys/fs/cgroup")->cgroup_join.empty());
}

TEST(SessionTargetOfShim, TheShimOfAnUpgradedAgentStillCounts) {
  ShimProcess p = Shim();
  p.exe = "/usr/lib/gpucloud/gpucloud-shim (deleted)";
  EXPECT_TRUE(SessionTargetOfShim(p, 0, "").ok());
}

TEST(SessionTargetOfShim, RefusesWhatATenantCouldHaveWritten) {
  // The task itself (no shim between: a fork of the agent, or a task that exec'd).
  ShimProcess p = Shim();
  p.exe = "/usr/bin/python3.11";
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, 0, "");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.status().message(),
            "its first process is not a gpucloud-shim (it is /usr/bin/python3.11)");
  // A shim not of the agent's user: its memory, so its command line, is the tenant's to write.
  p = Shim();
  p.uid = 1001;
  EXPECT_EQ(SessionTargetOfShim(p, 0, "").status().message(),
            "its first process is not a gpucloud-shim of the agent's user (it runs as 1001)");
  // Command lines the executor does not write.
  for (std::string cmdline : {"/x/gpucloud-shim\0--workdir\0/w\0--uid\0005\0--\0sh\0"s,
                              "/x/gpucloud-shim\0--workdir\0/w\0--uid\0-1\0--gid\0001\0--\0sh\0"s,
                              "/x/gpucloud-shim\0--workdir\0/w\0--evil\0x\0--\0sh\0"s,
                              "/x/gpucloud-shim\0--workdir\0/w\0sh\0"s, "/x/gpucloud-shim\0"s,
                              "/x/gpucloud-shim\0--\0sh\0"s}) {
    p.cmdline = cmdline;
    EXPECT_EQ(SessionTargetOfShim(p, 0, "").status().code(), absl::StatusCode::kFailedPrecondition)
        << cmdline;
  }
}

TEST(ReadAdoptedSessionTarget, ReadsAProcessFromProc) {
  // This test program is no shim: refused, with its name; a process that is gone: NotFound.
  absl::StatusOr<SessionTarget> self = ReadAdoptedSessionTarget(getpid());
  EXPECT_EQ(self.status().code(), absl::StatusCode::kFailedPrecondition) << self.status();
  EXPECT_NE(self.status().message().find("agent_test"), std::string::npos) << self.status();
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(ReadAdoptedSessionTarget(child).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucloud::agent
