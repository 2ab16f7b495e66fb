// How a session enters a host-process task that an earlier agent started and this one
// re-adopted (docs/interactive.md). The agent keeps a task's environment in memory only (it
// holds the tenant's secrets), so after a restart it has none to give an exec. The task's
// gpucloud-shim still has it: the shim was spawned with the task's environment and the
// executor's own command line (--workdir, --uid/--gid, --stdin, --join; executor.cc ShimArgs),
// and stays, as the agent's user, the task's waiting parent. That is read back from /proc.
//
// Trust: a process whose memory a tenant could write (one running as the tenant's user) could
// claim any --uid, so only the very gpucloud-shim program that started the task (its path, kept
// in the task's record) running as the agent's own user is believed; a task started by a fork
// of the agent (GPUCLOUD_SHIM=none) or without a shim is not entered.
// Pure functions and one reader of /proc; thread-safe.
#ifndef GPUCLOUD_AGENT_ADOPTED_TARGET_H_
#define GPUCLOUD_AGENT_ADOPTED_TARGET_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "agent/session_manager.h"

namespace gpucloud::agent {

// What /proc says of one process, as read (NUL-separated lists left as they are).
struct ShimProcess {
  std::string exe;      // /proc/PID/exe's target (" (deleted)" once the binary was replaced)
  uid_t uid = 0;        // its real user
  std::string cmdline;  // /proc/PID/cmdline
  std::string environ;  // /proc/PID/environ
  std::string cgroup;   // /proc/PID/cgroup
};

// The session target of the task whose shim `p` is. `shim` is the program that started the
// task (its record's; "" when none did); `agent_uid` is this agent's user; `cgroup2_root` where
// cgroup v2 is mounted when the agent uses it ("" on v1, where the shim's --join files are the
// task's groups). FailedPrecondition with the reason when `p` is not that program run by the
// agent's user, or its command line is not one the executor writes.
absl::StatusOr<SessionTarget> SessionTargetOfShim(const ShimProcess& p, const std::string& shim,
                                                  uid_t agent_uid, const std::string& cgroup2_root);

// SessionTargetOfShim for process `pid` started at `start_time` (/proc/PID/stat's clock ticks;
// checked again after the reads, so that a pid reused meanwhile is never read as the task's),
// with this process' user and cgroup mode. NotFound when the process is gone or a file of it
// cannot be read.
absl::StatusOr<SessionTarget> ReadAdoptedSessionTarget(pid_t pid, uint64_t start_time,
                                                       const std::string& shim);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_ADOPTED_TARGET_H_
