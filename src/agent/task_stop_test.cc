// NextStopAction and KillDeadline, table by table.
#include "agent/task_stop.h"

#include <gtest/gtest.h>

namespace gpucloud::agent {
namespace {

const absl::Time kT0 = absl::FromUnixMillis(1'764'600'000'000);

TEST(NextStopAction, Table) {
  const absl::Time kill_at = kT0 + absl::Seconds(30);
  struct Case {
    const char* name;
    StopView t;
    absl::Time now;
    StopAction want;
  };
  const Case cases[] = {
      {"wanted and running: left alone", {true, false, false}, kT0, StopAction::kNone},
      {"unwanted and running: SIGTERM", {false, false, false}, kT0, StopAction::kTerminate},
      {"unwanted, already ended: nothing", {false, true, false}, kT0, StopAction::kNone},
      {"stopping, 1 ms before its deadline: nothing yet",
       {false, false, true, kill_at},
       kill_at - absl::Milliseconds(1),
       StopAction::kNone},
      {"stopping, at its deadline: SIGKILL",
       {false, false, true, kill_at},
       kill_at,
       StopAction::kKill},
      {"stopping, past its deadline: SIGKILL again",
       {false, false, true, kill_at},
       kill_at + absl::Minutes(1),
       StopAction::kKill},
      {"stopping and ended: nothing", {false, true, true, kill_at}, kill_at, StopAction::kNone},
      // Stopped by the agent's own stop (kill_tasks_on_stop) while still assigned.
      {"wanted but stopping, at its deadline: SIGKILL",
       {true, false, true, kill_at},
       kill_at,
       StopAction::kKill},
      {"wanted but stopping, before: nothing",
       {true, false, true, kill_at},
       kT0,
       StopAction::kNone},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NextStopAction(c.t, c.now), c.want) << c.name;
  }
}

TEST(KillDeadline, Table) {
  struct Case {
    int64_t grace_seconds;
    absl::Time want;
  };
  const Case cases[] = {
      {30, kT0 + absl::Seconds(30)},
      {0, kT0},
      {-5, kT0},  // a negative grace is no grace
      {int64_t{1} << 40, kT0 + absl::Seconds(int64_t{1} << 40)},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KillDeadline(kT0, c.grace_seconds), c.want) << c.grace_seconds;
  }
}

}  // namespace
}  // namespace gpucloud::agent
