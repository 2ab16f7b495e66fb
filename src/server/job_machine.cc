#include "server/job_machine.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <string_view>
#include <utility>

#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

// The event of a Starting task's message: "Pulling: ..." is Normal, a failed pull
// ("ImagePullBackOff: ...", "ErrImageNeverPull: ...") a Warning with that reason.
std::pair<std::string, std::string> StartingEvent(const std::string& message) {
  if (message.starts_with("Pulling")) return {"Normal", "Pulling"};
  for (const char* reason : {"ImagePullBackOff", "ErrImageNeverPull"}) {
    if (message.starts_with(reason)) return {"Warning", reason};
  }
  return {"Normal", "Starting"};
}

bool Matches(const LifecyclePolicy& p, LifecycleEvent event, std::optional<int> exit_code) {
  if (p.exit_code) {
    bool failure = event == LifecycleEvent::kPodFailed || event == LifecycleEvent::kTaskFailed;
    return failure && exit_code == p.exit_code;
  }
  for (LifecycleEvent e : p.events) {
    if (e == event) return true;
    // "*" stands for the events that interrupt or fail a job, not for a task's completion.
    if (e == LifecycleEvent::kAny && event != LifecycleEvent::kTaskCompleted) return true;
  }
  return false;
}

// The first of `events` that `p` matches (for the message that names the policy).
LifecycleEvent MatchedEvent(const LifecyclePolicy& p, std::initializer_list<LifecycleEvent> events,
                            std::optional<int> exit_code) {
  for (LifecycleEvent e : events) {
    if (Matches(p, e, exit_code)) return e;
  }
  return *events.begin();
}

const std::string& TaskOf(const ReplicaView& v) { return v.replica->placement.task; }

// What the replicas' observations add up to.
struct Observed {
  struct Where {
    std::string what;  // for the message: a node, a GPU's problem, "rank R on N: ..."
    std::string task;
    std::optional<int> exit_code;  // failures only
  };
  std::vector<Where> lost, broken, retry, failed, reclaimed, drained, risky;
  int64_t reclaim_at = 0;
  int succeeded = 0, running = 0;
  // Replicas whose task has run (it runs, or ended after running) and when, by their agents'
  // clocks: the earliest start, the earliest end of a failed one, the latest end (0: none said).
  int started = 0;
  int64_t first_start_ms = 0, first_failure_end_ms = 0, last_end_ms = 0;
  std::map<std::string, std::pair<int, int>> per_task;  // task -> (succeeded, replicas)
};

class Stepper {
 public:
  Stepper(const JobStatus& old, const JobRules& rules, int64_t now) : rules_(rules), now_(now) {
    out_.status = old;
  }

  JobStep Take() { return std::move(out_); }
  JobStatus& s() { return out_.status; }

  void Event(std::string type, std::string reason, std::string message) {
    out_.events.push_back({std::move(type), std::move(reason), std::move(message)});
  }

  // Stops the job's tasks; its GPUs stay reserved until they have stopped.
  void Stop(api::JobPhase phase, api::JobPhase next, std::string reason, std::string message,
            int64_t grace_ms) {
    JobStatus& st = s();
    out_.delete_assignments = true;
    st.phase = phase;
    st.next = next;
    st.reason = reason;
    st.message = message;
    st.stop_deadline_ms = now_ + grace_ms + 5000;
    st.EndRun(run_end_);
    // A restart: its time to recovery is measured from here.
    if (st.next == api::JobPhase::kPending && st.interrupted_ms == 0) st.interrupted_ms = now_;
    bool normal = reason == "Succeeded" || reason == "Completed";
    Event(normal ? "Normal" : "Warning", std::move(reason), std::move(message));
  }

  // A restart that is not the job's fault (a node or GPU went): not counted; the message is
  // `what` happened, then what the restart does (`then`, "" for none). An interactive job ends
  // instead: its session is gone, and a new one elsewhere is the user's to start.
  void Interrupt(api::JobPhase phase, std::string reason, const std::string& what,
                 std::string_view then) {
    if (rules_.interactive) return EndInteractive(phase, std::move(reason), what);
    ++s().interruptions;
    Stop(phase, api::JobPhase::kPending, std::move(reason),
         then.empty() ? what : Cat(what, "; ", then), rules_.stop_grace_ms);
  }

  // An interactive job's end where a batch job would restart; `what` says what happened.
  void EndInteractive(api::JobPhase phase, std::string reason, const std::string& what) {
    Stop(phase == api::JobPhase::kRestarting ? api::JobPhase::kStopping : phase,
         api::JobPhase::kFailed, std::move(reason),
         Cat(what,
             "; the interactive session ended (interactive jobs are not restarted "
             "elsewhere: start a new one)"),
         rules_.stop_grace_ms);
  }

  // A restart the restart policy counts, or the end when none are left.
  void RestartCounted(const std::string& reason, const std::string& what) {
    if (rules_.interactive) return EndInteractive(api::JobPhase::kStopping, reason, what);
    JobStatus& st = s();
    const RestartPolicy& policy = rules_.restart;
    if (st.restarts < policy.max_restarts) {
      int64_t backoff_s = policy.backoff_seconds << std::min(st.restarts, 10);
      ++st.restarts;
      st.not_before_ms = now_ + backoff_s * 1000;
      Stop(api::JobPhase::kRestarting, api::JobPhase::kPending, reason,
           Cat(what, "; restart ", st.restarts, " of ", policy.max_restarts, " in ", backoff_s,
               " s, from the last checkpoint"),
           rules_.stop_grace_ms);
    } else {
      Stop(api::JobPhase::kStopping, api::JobPhase::kFailed, reason,
           Cat(what, "; no restarts left (", policy.max_restarts, ")"), rules_.stop_grace_ms);
    }
  }

  // A lifecycle policy's action on `what`; false when the default applies (RestartJob on an
  // event whose default restart is the same, or no policy).
  bool Apply(const LifecyclePolicy* p, LifecycleEvent event, const std::string& what,
             bool restart_is_default) {
    if (p == nullptr) return false;
    std::string why = Cat(what, " (policy: ", LifecycleEventName(event), " -> ",
                          LifecycleActionName(p->action), ")");
    switch (p->action) {
      case LifecycleAction::kRestartJob:
        if (restart_is_default) return false;
        RestartCounted("RestartJob", why);
        return true;
      case LifecycleAction::kCompleteJob:
        Stop(api::JobPhase::kStopping, api::JobPhase::kSucceeded, "Completed",
             Cat(why, "; completing the job"), rules_.stop_grace_ms);
        return true;
      case LifecycleAction::kAbortJob:
        Stop(api::JobPhase::kStopping, api::JobPhase::kFailed, "Aborted",
             Cat(why, "; aborting the job"), rules_.stop_grace_ms);
        return true;
      case LifecycleAction::kTerminateJob:
        Stop(api::JobPhase::kStopping, api::JobPhase::kFailed, "Terminated",
             Cat(why, "; terminating the job"), rules_.stop_grace_ms);
        return true;
    }
    return false;
  }

  const JobRules& rules() const { return rules_; }
  int64_t now() const { return now_; }
  JobStep& out() { return out_; }
  // When the attempt's useful work ended, if before now (a task that failed earlier).
  void SetRunEnd(int64_t ms) { run_end_ = ms; }

 private:
  JobStep out_;
  const JobRules& rules_;
  const int64_t now_;
  int64_t run_end_ = now_;
};

int64_t EarliestNonZero(int64_t a, int64_t b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

// An agent's time `t`, kept within [lo, now]: the agent's clock may be off the server's.
int64_t Within(int64_t t, int64_t lo, int64_t now) { return std::clamp(t, std::min(lo, now), now); }

// Whether a report shows that its task ran: an agent that says when it started, or an older
// one's state (a task that could not start fails without an exit code or a signal).
bool Ran(const api::TaskReport& t) {
  return t.started_ms > 0 || t.state == api::TaskState::kRunning ||
         t.state == api::TaskState::kSucceeded ||
         (t.state == api::TaskState::kFailed && (t.exit_code >= 0 || t.signal > 0));
}

// Notes when a replica's task ran, from its report, in `o`.
void ObserveTimes(const api::TaskReport& t, Observed& o) {
  if (Ran(t)) ++o.started;
  o.first_start_ms = EarliestNonZero(o.first_start_ms, t.started_ms);
  if (!api::IsTerminal(t.state) || t.finished_ms <= 0) return;
  o.last_end_ms = std::max(o.last_end_ms, t.finished_ms);
  if (t.state != api::TaskState::kSucceeded) {
    o.first_failure_end_ms = EarliestNonZero(o.first_failure_end_ms, t.finished_ms);
  }
}

// Reads every replica's view into `o`, noting reports and checkpoints in the status.
Observed Observe(Stepper& st, const std::vector<ReplicaView>& replicas) {
  Observed o;
  JobStatus& s = st.s();
  for (const ReplicaView& v : replicas) {
    const PlacedReplica& r = *v.replica;
    const std::string& task = TaskOf(v);
    auto& [task_succeeded, task_replicas] = o.per_task[task];
    ++task_replicas;
    if (!v.node_ready) {
      o.lost.push_back({r.node, task, std::nullopt});
      continue;
    }
    if (v.draining) o.drained.push_back({r.node, task, std::nullopt});
    if (v.reclaim_at_ms != 0) {
      o.reclaim_at = o.reclaim_at == 0 ? v.reclaim_at_ms : std::min(o.reclaim_at, v.reclaim_at_ms);
      o.reclaimed.push_back({r.node, task, std::nullopt});
    }
    if (!v.gpu_problem.empty()) o.broken.push_back({v.gpu_problem, task, std::nullopt});
    if (!v.gpu_risk.empty()) o.risky.push_back({v.gpu_risk, task, std::nullopt});
    const api::TaskReport* t = v.report;
    if (t == nullptr) continue;
    s.NoteCheckpoints(t->checkpoint_ms, t->replicated_ms);
    std::string said = t->message.empty() ? std::string(api::TaskStateName(t->state))
                                          : Cat(api::TaskStateName(t->state), ": ", t->message);
    if (t->state == api::TaskState::kStarting && !t->message.empty() && s.tasks[r.name] != said) {
      // Why a task is not running yet (its image being pulled, a pull that failed): once
      // each time it changes.
      auto [type, reason] = StartingEvent(t->message);
      st.Event(type, reason, Cat("rank ", r.rank, " on ", r.node, ": ", t->message));
    }
    s.tasks[r.name] = std::move(said);
    ObserveTimes(*t, o);
    if (t->state == api::TaskState::kRunning) ++o.running;
    if (t->state == api::TaskState::kSucceeded) {
      ++o.succeeded;
      ++task_succeeded;
    }
    if (t->state == api::TaskState::kFailed && t->exit_code == kExitTempFail) {
      o.retry.push_back(
          {Cat("rank ", r.rank, " on ", r.node, ": exit code 75 (try again later)"), task, 75});
    } else if (t->state == api::TaskState::kFailed || t->state == api::TaskState::kLost ||
               t->state == api::TaskState::kStopped) {
      std::optional<int> code;
      if (t->state == api::TaskState::kFailed && t->exit_code > 0) code = t->exit_code;
      o.failed.push_back({Cat("rank ", r.rank, " on ", r.node, ": ", api::TaskStateName(t->state),
                              t->message.empty() ? "" : " (" + t->message + ")"),
                          task, code});
    }
  }
  return o;
}

// The first of `where` whose policy for `events` (what one observation raises) takes an action
// other than the default: a replica whose policy is the default restart does not hide a later
// one's Abort.
bool ApplyFirst(Stepper& st, const std::vector<Observed::Where>& where,
                std::initializer_list<LifecycleEvent> events, bool restart_is_default) {
  for (const Observed::Where& w : where) {
    const LifecyclePolicy* p = MatchPolicy(st.rules().policies, events, w.task, w.exit_code);
    if (p != nullptr &&
        st.Apply(p, MatchedEvent(*p, events, w.exit_code), w.what, restart_is_default)) {
      return true;
    }
  }
  return false;
}

// Tasks whose replicas all exited 0 while others have not: Volcano's TaskCompleted.
bool ApplyTaskCompleted(Stepper& st, const Observed& o) {
  for (const auto& [task, counts] : o.per_task) {
    if (counts.first == 0 || counts.first != counts.second) continue;
    const LifecyclePolicy* p =
        MatchPolicy(st.rules().policies, LifecycleEvent::kTaskCompleted, task, std::nullopt);
    std::string what = Cat("every replica of task ", task, " exited with code 0");
    if (st.Apply(p, LifecycleEvent::kTaskCompleted, what, /*restart_is_default=*/false)) {
      return true;
    }
  }
  return false;
}

// The attempt's tasks ran, seen now: perhaps already ended (several steps between two passes).
// It started when its first task did by its agent's clock (kept within the attempt's binding
// and now), or now for older agents that do not say.
void Started(Stepper& st, const Observed& o, size_t replicas) {
  JobStatus& s = st.s();
  const int64_t now = st.now();
  const int64_t at = o.first_start_ms > 0 ? Within(o.first_start_ms, s.scheduled_ms, now) : now;
  s.phase = api::JobPhase::kRunning;
  s.reason = "Started";
  s.message = o.started == o.running ? Cat(o.running, " of ", replicas, " tasks running")
                                     : Cat(o.started, " of ", replicas, " tasks started, ",
                                           o.started - o.running, " of them already ended");
  if (s.started_ms == 0) s.started_ms = at;
  if (s.attempt_started_ms == 0) s.attempt_started_ms = at;
  if (s.interrupted_ms > 0) {
    // Running again after a failure: the time to recovery.
    s.last_recovery_ms = std::max<int64_t>(0, at - s.interrupted_ms);
    s.interrupted_ms = 0;
    ++s.recoveries;
    s.message += Cat("; recovered in ", s.last_recovery_ms / 1000.0, " s");
    st.out().recovery_seconds = s.last_recovery_ms / 1000.0;
  }
  st.Event("Normal", "Started", s.message);
}

// Every task exited 0: the job finished when the last one did (by its agent's clock; now for
// older agents), its GPUs held until now.
void Succeeded(Stepper& st, const Observed& o) {
  JobStatus& s = st.s();
  const int64_t now = st.now();
  st.out().delete_assignments = true;
  s.phase = api::JobPhase::kSucceeded;
  s.reason = "Succeeded";
  s.message = Cat("all ", o.succeeded, " tasks exited with code 0");
  s.finished_ms = o.last_end_ms > 0 ? Within(o.last_end_ms, s.attempt_started_ms, now) : now;
  s.EndRun(s.finished_ms);
  st.out().settled += SettleAttempt(s, st.now(), /*completed=*/true, s.last_checkpoint_ms);
  st.Event("Normal", "Succeeded", s.message);
}

// Interruptions the job did not cause, in order of urgency; false when there are none.
bool StepInterruptions(Stepper& st, const Observed& o) {
  if (!o.lost.empty()) {
    if (ApplyFirst(st, o.lost, {LifecycleEvent::kJobUnknown}, true)) return true;
    st.Interrupt(api::JobPhase::kRestarting, "NodeLost",
                 Cat("node ", o.lost[0].what, " stopped heartbeating"),
                 "restarting from the last checkpoint");
    return true;
  }
  if (!o.broken.empty()) {
    if (ApplyFirst(st, o.broken, {LifecycleEvent::kPodEvicted}, true)) return true;
    st.Interrupt(api::JobPhase::kRestarting, "GpuFailed", o.broken[0].what,
                 "restarting on healthy GPUs from the last checkpoint");
    return true;
  }
  if (!o.retry.empty() && o.failed.empty()) {
    // EX_TEMPFAIL: the task could not start yet (e.g. the previous attempt on a partitioned
    // node still holds the job's checkpoint lock). Retried soon, without using a restart.
    st.s().not_before_ms = st.now() + 1000;
    st.Interrupt(api::JobPhase::kRestarting, "Retrying", o.retry[0].what, "retrying in 1 s");
    return true;
  }
  return false;
}

// Evictions: the node goes (spot), drains, or a GPU is expected to fail.
bool StepEvictions(Stepper& st, const Observed& o) {
  if (!o.reclaimed.empty()) {
    if (ApplyFirst(st, o.reclaimed, {LifecycleEvent::kPodEvicted}, true)) return true;
    if (st.rules().interactive) {
      st.EndInteractive(api::JobPhase::kPreempting, "SpotReclaim",
                        Cat("node ", o.reclaimed[0].what, " is reclaimed"));
      return true;
    }
    // Checkpoint and requeue before the node goes: the grace period, but no later than
    // 5 s before the reclamation.
    ++st.s().interruptions;
    int64_t left = o.reclaim_at - st.now();
    st.Stop(api::JobPhase::kPreempting, api::JobPhase::kPending, "SpotReclaim",
            Cat("node ", o.reclaimed[0].what, " is reclaimed in ",
                std::max<int64_t>(0, left / 1000), " s; checkpointing and requeueing"),
            std::clamp<int64_t>(left - 10'000, 0, st.rules().stop_grace_ms));
    return true;
  }
  if (!o.drained.empty()) {
    if (ApplyFirst(st, o.drained, {LifecycleEvent::kPodEvicted}, true)) return true;
    st.Interrupt(api::JobPhase::kPreempting, "Drained",
                 Cat("node ", o.drained[0].what, " is being drained"),
                 "restarting elsewhere from the last checkpoint");
    return true;
  }
  if (!o.risky.empty()) {
    // Predictive drain: checkpoint and move before the GPU fails.
    if (ApplyFirst(st, o.risky, {LifecycleEvent::kPodEvicted}, true)) return true;
    st.Interrupt(api::JobPhase::kPreempting, "PredictedFailure", o.risky[0].what,
                 "checkpointing and moving to healthy GPUs");
    return true;
  }
  return false;
}

// An interactive job's limits: its maximum duration, then its idle timeout (warned first);
// true when it stops.
bool StepInteractive(Stepper& st, const std::vector<ReplicaView>& replicas) {
  const std::optional<InteractiveSpec>& spec = st.rules().interactive;
  JobStatus& s = st.s();
  if (!spec || s.phase != api::JobPhase::kRunning) return false;
  const int64_t max_ms = spec->max_duration_seconds * 1000;
  if (max_ms > 0 && s.started_ms > 0 && st.now() - s.started_ms >= max_ms) {
    st.Stop(api::JobPhase::kCancelling, api::JobPhase::kCancelled, "MaxDurationExceeded",
            Cat("ran for its maxDuration (", FormatDuration(spec->max_duration_seconds),
                "); stopped, its GPUs free again"),
            st.rules().stop_grace_ms);
    return true;
  }
  // Idle only when every running replica is: the least idle one says how long.
  std::optional<int64_t> idle_ms;
  for (const ReplicaView& v : replicas) {
    if (v.report == nullptr || v.report->state != api::TaskState::kRunning) continue;
    idle_ms = std::min(idle_ms.value_or(v.report->idle_ms), v.report->idle_ms);
  }
  const int64_t timeout_ms = spec->idle_timeout_seconds * 1000;
  if (!idle_ms || *idle_ms < timeout_ms) {
    const int64_t warn_at = std::max<int64_t>(
        static_cast<int64_t>(static_cast<double>(timeout_ms) * kIdleWarningFraction),
        timeout_ms - 60'000);
    if (idle_ms && *idle_ms >= warn_at && !s.idle_warned) {
      s.idle_warned = true;
      st.Event(
          "Warning", "IdleWarning",
          Cat("idle for ", FormatDuration(*idle_ms / 1000), " (no session traffic, GPUs under ",
              kInteractiveBusyPercent, "% busy); stopped in ",
              FormatDuration((timeout_ms - *idle_ms + 999) / 1000), " unless used"));
    } else if (!idle_ms || *idle_ms < warn_at) {
      s.idle_warned = false;
    }
    return false;
  }
  st.Stop(api::JobPhase::kCancelling, api::JobPhase::kCancelled, "IdleTimeout",
          Cat("idle for its idleTimeout (", FormatDuration(spec->idle_timeout_seconds),
              ": no session traffic, GPUs under ", kInteractiveBusyPercent,
              "% busy); stopped, its GPUs free again"),
          st.rules().stop_grace_ms);
  return true;
}

void StepActive(Stepper& st, const std::vector<ReplicaView>& replicas) {
  Observed o = Observe(st, replicas);
  JobStatus& s = st.s();
  // Every step since the last pass, in order: the tasks started before whatever came next.
  if (s.phase == api::JobPhase::kScheduled && o.started > 0) Started(st, o, replicas.size());
  if (o.first_failure_end_ms > 0 && s.attempt_started_ms > 0) {
    st.SetRunEnd(Within(o.first_failure_end_ms, s.attempt_started_ms, st.now()));
  }
  if (s.cancel_requested) {
    st.Stop(api::JobPhase::kCancelling, api::JobPhase::kCancelled, "Cancelled",
            "cancelled by the user", st.rules().stop_grace_ms);
    return;
  }
  if (StepInterruptions(st, o)) return;
  if (StepInteractive(st, replicas)) return;
  if (!o.failed.empty()) {
    // A failed replica raises PodFailed and TaskFailed at once; the policies' order decides.
    if (!ApplyFirst(st, o.failed, {LifecycleEvent::kPodFailed, LifecycleEvent::kTaskFailed},
                    /*restart_is_default=*/true)) {
      st.RestartCounted("TaskFailed", o.failed[0].what);
    }
    return;
  }
  if (o.succeeded == static_cast<int>(replicas.size()) && o.succeeded > 0) {
    Succeeded(st, o);
    return;
  }
  if (ApplyTaskCompleted(st, o)) return;
  StepEvictions(st, o);
}

// A stopping job: done once every task has stopped, or its grace period is over.
void StepStopping(Stepper& st, const std::vector<ReplicaView>& replicas) {
  JobStatus& s = st.s();
  bool any_running = false;
  for (const ReplicaView& v : replicas) {
    if (!v.node_ready || v.report == nullptr) continue;
    if (!api::IsTerminal(v.report->state)) any_running = true;
    // The checkpoint a stopping task writes on SIGTERM.
    s.NoteCheckpoints(v.report->checkpoint_ms, v.report->replicated_ms);
  }
  const int64_t now = st.now();
  if (any_running && now < s.stop_deadline_ms) return;
  if (st.rules().node_local_checkpoints) {
    s.checkpoint_nodes.clear();
    for (const PlacedReplica& r : s.placement) s.checkpoint_nodes.push_back(r.node);
    s.checkpoint_gpus = s.gpus;
  }
  bool completed = s.next == api::JobPhase::kCancelled || s.next == api::JobPhase::kSucceeded;
  st.out().settled += SettleAttempt(s, now, completed, s.last_checkpoint_ms);
  s.phase = s.next.value_or(api::JobPhase::kPending);
  s.next.reset();
  s.placement.clear();
  s.master_port = 0;
  s.stop_deadline_ms = 0;
  if (s.Terminal()) s.finished_ms = now;
}

}  // namespace

const LifecyclePolicy* MatchPolicy(const std::vector<LifecyclePolicy>& policies,
                                   std::initializer_list<LifecycleEvent> events,
                                   const std::string& task, std::optional<int> exit_code) {
  for (const LifecyclePolicy& p : policies) {
    if (!p.task.empty() && p.task != task) continue;
    for (LifecycleEvent e : events) {
      if (Matches(p, e, exit_code)) return &p;
    }
  }
  return nullptr;
}

const LifecyclePolicy* MatchPolicy(const std::vector<LifecyclePolicy>& policies,
                                   LifecycleEvent event, const std::string& task,
                                   std::optional<int> exit_code) {
  return MatchPolicy(policies, {event}, task, exit_code);
}

JobStep NextStatus(const JobStatus& old, const std::vector<ReplicaView>& replicas,
                   const JobRules& rules, int64_t now_ms) {
  Stepper st(old, rules, now_ms);
  JobStatus& s = st.s();
  if (s.Terminal()) return st.Take();
  if (s.Active()) {
    StepActive(st, replicas);
  } else if (s.phase == api::JobPhase::kPending && s.cancel_requested) {
    s.phase = api::JobPhase::kCancelled;
    s.reason = "Cancelled";
    s.message = "cancelled by the user before it started";
    s.finished_ms = now_ms;
    st.Event("Normal", "Cancelled", s.message);
  }
  if (s.Stopping()) StepStopping(st, replicas);
  return st.Take();
}

JobStep Preempt(const JobStatus& old, const JobRules& rules, const std::string& why,
                int64_t grace_ms, int64_t now_ms) {
  JobRules within = rules;
  within.stop_grace_ms = grace_ms;  // the preemptor waits for these GPUs no longer
  Stepper st(old, within, now_ms);
  std::vector<Observed::Where> evicted;
  for (const PlacedReplica& r : old.placement) evicted.push_back({why, r.placement.task, {}});
  if (ApplyFirst(st, evicted, {LifecycleEvent::kPodEvicted}, /*restart_is_default=*/true)) {
    return st.Take();
  }
  st.Interrupt(api::JobPhase::kPreempting, "Preempted", why, "");
  return st.Take();
}

}  // namespace gpucloud::server
