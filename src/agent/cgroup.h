// Cgroup limits for one task: CPU (quota per period), memory and the number of processes
// (pids.max), on cgroup v2 where it is mounted (/sys/fs/cgroup/cgroup.controllers) and v1
// otherwise (memory, cpu and pids hierarchies), under a "gpucloud" parent. Where they cannot be
// set the task runs without them and the caller gets a warning to log. PlanTaskCgroup is the
// pure part (which directories, which files, which values); TaskCgroup carries it out.
// Not thread-safe; one per task, owned by its executor entry.
#ifndef GPUCLOUD_AGENT_CGROUP_H_
#define GPUCLOUD_AGENT_CGROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/quantity.h"

namespace gpucloud::agent {

struct TaskLimits {
  std::optional<MilliCpu> cpu;
  std::optional<MiB> memory;
  int64_t pids_max = 0;  // 0: no limit on the number of processes
  bool any() const { return cpu || memory || pids_max > 0; }
};

// What to create and write for one task's group. `dirs` are made in order (parents first);
// `writes` must all succeed; `enable` (v2's subtree_control) is best effort.
struct CgroupPlan {
  bool v2 = false;
  std::vector<std::string> dirs;
  std::vector<std::pair<std::string, std::string>> enable;
  std::vector<std::pair<std::string, std::string>> writes;
  std::string memory_dir;  // v2: the one group dir; v1: under the memory hierarchy, or ""
  std::string cpu_dir;     // v1 only, or ""
  std::string pids_dir;    // v1 only, or ""
};

// The plan for group `name` under `root` with `limits`. In v1 only the hierarchies a limit needs
// are used (memory and cpu together, as before, for a CPU or memory limit; pids for a PID limit).
CgroupPlan PlanTaskCgroup(const std::string& root, const std::string& name,
                          const TaskLimits& limits, bool v2);

class TaskCgroup {
 public:
  // Creates the group `name` (e.g. "ns.job.task.attempt") with `limits`. FailedPrecondition,
  // with the reason, when cgroups cannot be used here; InvalidArgument when `limits` sets none.
  static absl::StatusOr<std::unique_ptr<TaskCgroup>> Create(
      const std::string& name, const TaskLimits& limits,
      const std::string& root = "/sys/fs/cgroup");
  ~TaskCgroup();  // removes the group (it must be empty: the task has ended)

  // Moves process `pid` into the group (its cgroup.procs files).
  absl::Status Attach(pid_t pid);
  // v1: the group's `tasks` files, for a freshly forked (so single-threaded) child to join by
  // writing "0" to each before exec. Moving the calling thread needs no global lock, where
  // moving a process by pid (Attach) takes the kernel's cgroup_threadgroup_rwsem for writing,
  // which waits for an RCU grace period: 0.1 against 1 to 17 ms a task start on a VM.
  // v2: empty (a process joins its group whole; use Attach).
  std::vector<std::string> SelfAttachFiles() const;
  // The files a process writes "0" to in order to join the group itself (v1: the `tasks` files,
  // as SelfAttachFiles; v2: the group's cgroup.procs): how a process exec'd into a running task
  // (session_manager.h) takes on the task's limits.
  std::vector<std::string> JoinFiles() const;
  // How many processes of the group the kernel's OOM killer has killed so far.
  int64_t OomKills() const;
  bool v2() const { return plan_.v2; }

 private:
  TaskCgroup() = default;
  CgroupPlan plan_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_CGROUP_H_
