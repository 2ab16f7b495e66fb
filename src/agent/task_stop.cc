#include "agent/task_stop.h"

#include <algorithm>

namespace gpucloud::agent {

StopAction NextStopAction(const StopView& t, absl::Time now) {
  if (t.ended) return StopAction::kNone;
  if (t.stopping) return now >= t.kill_at ? StopAction::kKill : StopAction::kNone;
  return t.wanted ? StopAction::kNone : StopAction::kTerminate;
}

absl::Time KillDeadline(absl::Time stopped_at, int64_t grace_seconds) {
  return stopped_at + absl::Seconds(std::max<int64_t>(0, grace_seconds));
}

}  // namespace gpucloud::agent
