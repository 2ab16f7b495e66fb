// When a task's process ended, for its report (api::TaskReport::finished_ms). The task's shim
// writes its exit status (TaskSpecToRun::status_path) the moment the task ends, so that file's
// modification time is the process' own end, however late the agent looks (a poll, a restart
// of the agent in between), to the kernel's coarse clock (a tick, at most 10 ms, early).
// Stateless; thread-safe.
#ifndef GPUCLOUD_AGENT_TASK_TIMES_H_
#define GPUCLOUD_AGENT_TASK_TIMES_H_

#include <cstdint>
#include <string>

namespace gpucloud::agent {

// Unix ms at which the shim recorded the task's exit in `status_path`, kept within
// [started_ms, observed_ms] (the system clock stepped, or a file older than the start);
// `observed_ms` when there is no such record (the shim was killed too, or never ran).
// `started_ms` 0: no lower bound.
int64_t TaskEndedMs(const std::string& status_path, int64_t started_ms, int64_t observed_ms);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_TASK_TIMES_H_
