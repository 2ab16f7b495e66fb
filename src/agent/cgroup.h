// Cgroup limits for one task: CPU (quota per period) and memory, on cgroup v2 where it is
// mounted (/sys/fs/cgroup/cgroup.controllers) and v1 otherwise (memory and cpu hierarchies),
// under a "gpucloud" parent. Where neither is writable the task runs without limits and the
// caller gets a warning to log. Not thread-safe; one per task, owned by its executor entry.
#ifndef GPUCLOUD_AGENT_CGROUP_H_
#define GPUCLOUD_AGENT_CGROUP_H_

#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

#include "absl/status/statusor.h"
#include "core/quantity.h"

namespace gpucloud::agent {

class TaskCgroup {
 public:
  // Creates the group `name` (e.g. "ns.job.task.attempt") with the limits given (unset: none).
  // FailedPrecondition, with the reason, when cgroups cannot be used here.
  static absl::StatusOr<std::unique_ptr<TaskCgroup>> Create(const std::string& name,
                                                            std::optional<MilliCpu> cpu,
                                                            std::optional<MiB> memory,
                                                            const std::string& root = "/sys/fs/cgroup");
  ~TaskCgroup();  // removes the group (it must be empty: the task has ended)

  absl::Status Attach(pid_t pid);
  // How many processes of the group the kernel's OOM killer has killed so far.
  int64_t OomKills() const;
  bool v2() const { return v2_; }

 private:
  TaskCgroup() = default;
  bool v2_ = false;
  std::string memory_dir_;  // v2: the one group dir
  std::string cpu_dir_;     // v1 only
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_CGROUP_H_
