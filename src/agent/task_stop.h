// When the node agent stops a task, by its clock (a pure decision; node_agent applies it).
// A task whose assignment is gone (or names another attempt) gets SIGTERM at once and SIGKILL
// once its grace period has passed: at KillDeadline, again on every pass after it until the
// task has ended (a container's `podman rm -f` too). An ended task is left alone. Pure
// functions; thread-safe.
#ifndef GPUCLOUD_AGENT_TASK_STOP_H_
#define GPUCLOUD_AGENT_TASK_STOP_H_

#include <cstdint>

#include "absl/time/time.h"

namespace gpucloud::agent {

// What the decision reads of one task.
struct StopView {
  bool wanted = true;     // its assignment (job uid and attempt) is still there
  bool ended = false;     // its process (or its wait for an image or secrets) is over
  bool stopping = false;  // SIGTERM was sent
  absl::Time kill_at = absl::InfiniteFuture();  // when stopping: SIGKILL from then on
};

enum class StopAction { kNone, kTerminate, kKill };

// What to do with the task at `now`: kTerminate for a running task no longer wanted and not yet
// stopping, kKill for a stopping one at or past its kill_at, else kNone.
StopAction NextStopAction(const StopView& t, absl::Time now);

// When a task told to stop at `stopped_at` is killed: after its grace period (a negative one
// counts as 0).
absl::Time KillDeadline(absl::Time stopped_at, int64_t grace_seconds);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_TASK_STOP_H_
