#include "agent/adopted_target.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "agent/proc_stat.h"

namespace gpucloud::agent {
namespace {

using namespace std::string_literals;

const std::string kShim = "/usr/lib/gpucloud/gpucloud-shim";  // the record's

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
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(Shim(), kShim, 0, "");
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
  p.cmdline = kShim + "\0--workdir\0/w\0--status\0/s\0--status-tmp\0/s.tmp\0--\0sh\0"s;
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, kShim, 0, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->uid.has_value());
  EXPECT_EQ(t->workdir, "/w");
  EXPECT_TRUE(t->stdin_path.empty());
  EXPECT_TRUE(t->cgroup_join.empty());
}

TEST(SessionTargetOfShim, OnCgroupV2JoinsTheTasksGroupFromProc) {
  ShimProcess p = Shim();
  p.cgroup = "0::/gpucloud/default.train.main.0\n";
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, kShim, 0, "/sys/fs/cgroup");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(
      t->cgroup_join,
      (std::vector<std::string>{"/sys/fs/cgroup/gpucloud/default.train.main.0/cgroup.procs"}));
  // A group outside gpucloud's (the task was never placed) is not joined.
  p.cgroup = "0::/user.slice/user-0.slice\n";
  EXPECT_TRUE(SessionTargetOfShim(p, kShim, 0, "/sys/fs/cgroup")->cgroup_join.empty());
}

TEST(SessionTargetOfShim, TheShimOfAnUpgradedAgentStillCounts) {
  ShimProcess p = Shim();
  p.exe = "/usr/lib/gpucloud/gpucloud-shim (deleted)";
  EXPECT_TRUE(SessionTargetOfShim(p, kShim, 0, "").ok());
}

TEST(SessionTargetOfShim, RefusesWhatATenantCouldHaveWritten) {
  // The task itself (no shim between: a fork of the agent, or a task that exec'd).
  ShimProcess p = Shim();
  p.exe = "/usr/bin/python3.11";
  absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, kShim, 0, "");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.status().message(),
            "its first process is not a gpucloud-shim (it is /usr/bin/python3.11)");
  // A program of that name elsewhere (a task can make one), or a task its record says a fork of
  // the agent started.
  p = Shim();
  p.exe = "/tmp/work/gpucloud-shim";
  EXPECT_EQ(SessionTargetOfShim(p, kShim, 0, "").status().message(),
            "its first process is not a gpucloud-shim (it is /tmp/work/gpucloud-shim)");
  EXPECT_EQ(SessionTargetOfShim(Shim(), "", 0, "").status().message(),
            "it was started without a gpucloud-shim (a fork)");
  // A shim not of the agent's user: its memory, so its command line, is the tenant's to write.
  p = Shim();
  p.uid = 1001;
  EXPECT_EQ(SessionTargetOfShim(p, kShim, 0, "").status().message(),
            "its first process is not a gpucloud-shim of the agent's user (it runs as 1001)");
  // Command lines the executor does not write (from a shim otherwise believed).
  p = Shim();
  for (std::string cmdline : {"/x/gpucloud-shim\0--workdir\0/w\0--uid\0005\0--\0sh\0"s,
                              "/x/gpucloud-shim\0--workdir\0/w\0--uid\0-1\0--gid\0001\0--\0sh\0"s,
                              "/x/gpucloud-shim\0--workdir\0/w\0--evil\0x\0--\0sh\0"s,
                              "/x/gpucloud-shim\0--workdir\0/w\0sh\0"s, "/x/gpucloud-shim\0"s,
                              "/x/gpucloud-shim\0--\0sh\0"s}) {
    p.cmdline = cmdline;
    absl::StatusOr<SessionTarget> t = SessionTargetOfShim(p, kShim, 0, "");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << cmdline;
    const std::string message(t.status().message());
    EXPECT_TRUE(message.starts_with("its first process is not a gpucloud-shim (") &&
                message.find("(it is") == std::string::npos)
        << message;
  }
}

TEST(ReadAdoptedSessionTarget, ReadsAProcessFromProcAndOnlyTheOneRecorded) {
  // This test program is no shim: refused, with its name.
  std::optional<ProcStat> me = ReadProcStat(getpid());
  ASSERT_TRUE(me.has_value());
  const uint64_t start = me->start_time;
  absl::StatusOr<SessionTarget> self = ReadAdoptedSessionTarget(getpid(), start, kShim);
  EXPECT_EQ(self.status().code(), absl::StatusCode::kFailedPrecondition) << self.status();
  EXPECT_NE(self.status().message().find("agent_test"), std::string::npos) << self.status();
  // Another start time: another process that got the pid; a process that is gone: NotFound.
  EXPECT_EQ(ReadAdoptedSessionTarget(getpid(), start + 1, kShim).status().code(),
            absl::StatusCode::kNotFound);
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(ReadAdoptedSessionTarget(child, start, kShim).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpucloud::agent
