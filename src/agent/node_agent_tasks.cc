// Reconciling the node's tasks with its assignments, and noticing their ends.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "agent/node_agent_impl.h"
#include "agent/task_stop.h"
#include "agent/task_times.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Tasks started in one reconcile pass at most (a fork each): the rest follow in the next passes.
constexpr int kMaxStartsPerPass = 32;

}  // namespace

ReportedTask NodeAgent::Impl::Reported(const Local& t, absl::Time now) {
  ReportedTask v;
  v.ended = t.ended_at.has_value();
  v.assigned = t.assigned;
  v.acknowledged = t.acknowledged && *t.acknowledged == t.report;
  v.since_end = v.ended ? now - *t.ended_at : absl::ZeroDuration();
  return v;
}

bool NodeAgent::Impl::LogShipped(const Local& t) {
  if (t.log.gone || t.log_path.empty()) return true;
  struct stat st;
  return t.log.dropped == 0 && (stat(t.log_path.c_str(), &st) != 0 || st.st_size <= t.log.read_pos);
}

void NodeAgent::Impl::StopTask(Local& t, bool hard) {
  if (t.ended_at) return;
  if (!t.stopping) {
    t.stopping = true;
    t.kill_at = KillDeadline(Now(), t.a.grace_seconds);
    Log(Cat("stopping ", t.a.name, " (attempt ", t.a.attempt, ")"));
  }
  int sig = hard ? SIGKILL : SIGTERM;
  if (hard && !t.container_name.empty() && !Waiting(t)) RemoveContainer(t);
  if (t.in_executor) {
    (void)(hard ? exec.Kill(t.exec_id) : exec.Terminate(t.exec_id));
  } else if (t.adopted_pid > 0) {
    kill(-t.adopted_pid, sig);
  }
}

bool NodeAgent::Impl::Reconcile() {
  std::map<std::string, api::Assignment> want;
  bool known;
  {
    std::lock_guard lock(mu);
    want = desired;
    known = desired_known;
    dirty = false;
  }
  if (!known) return false;
  const bool changed = StartAssigned(want);
  StopAndForget(want, Now());
  return changed;
}

bool NodeAgent::Impl::StartAssigned(const std::map<std::string, api::Assignment>& want) {
  bool changed = false;
  // A bounded number of starts per pass: between passes the agent reaps, heartbeats, sees a
  // newer assignment list (a cancelled job) and notices a stop, however much it was given.
  int starts = 0;
  bool more = false;
  for (const auto& [name, a] : want) {
    auto it = tasks.find(name);
    if (it != tasks.end()) {
      Local& t = it->second;
      if (t.a.job_uid == a.job_uid && t.a.attempt == a.attempt) continue;
      if (!t.ended_at) {
        StopTask(t, false);  // the old attempt goes first
        continue;
      }
      std::error_code ec;
      fs::remove(RecordPath(t.exec_id), ec);
      replicator.Untrack(t.exec_id);
      tasks.erase(it);
    }
    if (stop || starts == kMaxStartsPerPass) {
      more = true;
      break;
    }
    StartTask(a);
    ++starts;
    changed = true;
  }
  if (more) {
    std::lock_guard lock(mu);
    dirty = true;  // the next pass goes on at once
  }
  return changed;
}

void NodeAgent::Impl::StopAndForget(const std::map<std::string, api::Assignment>& want,
                                    absl::Time now) {
  auto view = [](const Local& t, bool wanted) {
    return StopView{wanted, t.ended_at.has_value(), t.stopping, t.kill_at};
  };
  for (auto it = tasks.begin(); it != tasks.end();) {
    Local& t = it->second;
    auto w = want.find(it->first);
    bool wanted =
        w != want.end() && w->second.job_uid == t.a.job_uid && w->second.attempt == t.a.attempt;
    StopAction act = NextStopAction(view(t, wanted), now);
    if (act == StopAction::kTerminate) {
      StopTask(t, false);
      act = NextStopAction(view(t, wanted), now);  // no grace: SIGKILL in this pass
    }
    if (act == StopAction::kKill) StopTask(t, true);
    t.assigned = wanted;
    // Ended and no longer assigned: forgotten once the server acknowledged its report and its
    // log is shipped, or after a while regardless (heartbeat_reports.h).
    ReportedTask v = Reported(t, now);
    v.log_shipped = v.ended && !v.assigned && v.acknowledged && LogShipped(t);
    if (Forgettable(v)) {
      std::error_code ec;
      fs::remove(RecordPath(t.exec_id), ec);
      janitor.RemoveTree(RunDir(t));
      janitor.RemoveTaskDir(SandboxPath(t));
      exec.Forget(t.exec_id);
      replicator.Untrack(t.exec_id);
      it = tasks.erase(it);
      continue;
    }
    ++it;
  }
}

bool NodeAgent::Impl::PollTasks() {
  bool changed = false;
  for (auto& [name, t] : tasks) {
    if (t.ended_at) continue;
    if (Waiting(t) && !t.stopping) {
      const bool moved = t.waiting_secrets ? StartWhenSecretsFetched(t) : StartWhenPulled(t);
      // It started (or could not): its record says so, for an agent that restarts.
      if (moved && !Waiting(t)) SaveRecord(t);
      changed = moved || changed;
      continue;
    }
    if (Waiting(t)) {
      t.report.state = api::TaskState::kStopped;
      t.report.message = t.waiting_secrets ? "stopped while waiting for its secrets"
                                           : "stopped while its image was not yet on the node";
    } else if (t.in_executor) {
      std::optional<TaskExit> e = exec.Poll(t.exec_id);
      if (!e) continue;
      Ended(t, *e);
    } else if (t.adopted_pid > 0) {
      if (Alive(t.adopted_pid, t.adopted_start)) continue;
      if (t.adopted_pidfd >= 0) close(t.adopted_pidfd);
      t.adopted_pidfd = -1;
      // Not this agent's child: its shim left the exit status in a file.
      if (std::optional<TaskExit> e = ReadExitStatus(StatusPath(t))) {
        Ended(t, *e);
      } else {
        t.report.state = t.stopping ? api::TaskState::kStopped : api::TaskState::kLost;
        t.report.message = "it ended after the agent restarted; its exit status is unknown";
        if (!t.container_name.empty()) RemoveContainer(t);
      }
    } else {
      continue;
    }
    t.ended_at = Now();
    if (!Waiting(t)) {  // a process ended: when its shim wrote its exit, if it could
      t.report.finished_ms =
          TaskEndedMs(StatusPath(t), t.report.started_ms, absl::ToUnixMillis(*t.ended_at));
    }
    changed = true;
    Log(Cat("task ", name, " (attempt ", t.a.attempt,
            ") ended: ", api::TaskStateName(t.report.state),
            t.report.message.empty() ? "" : ", " + t.report.message));
    SaveRecord(t);
  }
  return changed;
}

}  // namespace gpucloud::agent
