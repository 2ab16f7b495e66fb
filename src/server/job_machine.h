// The job's lifecycle as a pure state machine: given a job's status, what this controller pass
// observes of its replicas (their nodes, GPUs and task reports) and the job's rules (restart
// policy, lifecycle policies), the next status, the events to record and whether the job's
// assignments go. The controller gathers the observations and writes the result; everything
// decided in between is here, testable table by table without a store, a clock or nodes.
//
// Phases: Pending -> (scheduler) Scheduled -> Running -> Succeeded, or a stopping phase
// (Restarting, Preempting, Stopping, Cancelling) whose `next` phase (Pending, Succeeded,
// Failed, Cancelled) follows once every task has stopped or the grace period is over. Steps
// that happened between two passes are all recorded, in order: a task that started and ended
// since the last pass still starts the job (startedMs, a Started event, its running time) before
// it ends it, at the times its agent reported (TaskReport::started_ms, finished_ms) if it did.
//
// What an observation means, in Volcano's event names (LifecyclePolicy):
//   JobUnknown  a replica's node stopped heartbeating       default: restart, not counted
//   PodEvicted  a replica's GPU failed, its node drains, is   default: restart, not counted
//               reclaimed (spot), a GPU is expected to fail,
//               or the scheduler preempts the job (Preempt)
//   PodFailed   a replica exited non-zero, was lost or        default: restart while restarts
//   TaskFailed  stopped (both events; exit codes match too)   are left, then Failed
//   TaskCompleted every replica of one task exited 0 while    default: nothing
//               others run ("*" does not match it)
// A task that exits 75 (EX_TEMPFAIL) is retried in a second without using a restart. A policy's
// action (RestartJob, CompleteJob, AbortJob, TerminateJob) replaces the default; the first
// matching policy (task-level ones first) decides. Pure functions; thread-safe.
#ifndef GPUCLOUD_SERVER_JOB_MACHINE_H_
#define GPUCLOUD_SERVER_JOB_MACHINE_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "api/wire.h"
#include "core/job.h"
#include "server/events.h"
#include "server/job_status.h"

namespace gpucloud::server {

// sysexits.h's EX_TEMPFAIL: "temporary failure, the user is invited to retry".
inline constexpr int kExitTempFail = 75;

// One replica of the job's current placement as this pass sees it. The pointers are the
// caller's and must outlive the call.
struct ReplicaView {
  const PlacedReplica* replica = nullptr;  // never null
  bool node_ready = true;                  // its node heartbeats
  bool draining = false;
  int64_t reclaim_at_ms = 0;                // its node is reclaimed then (spot); 0: not
  std::string gpu_problem;                  // why one of its GPUs is unhealthy; "" = healthy
  std::string gpu_risk;                     // why one is expected to fail; "" = not
  const api::TaskReport* report = nullptr;  // its task's report for this attempt, if any
};

// What the job's spec says about its lifecycle.
struct JobRules {
  RestartPolicy restart;
  std::vector<LifecyclePolicy> policies;
  bool node_local_checkpoints = false;
  int64_t stop_grace_ms = 30'000;
  // An interactive job (InteractiveSpec): stopped (Cancelled) once every running replica has
  // been idle for the timeout (their agents' TaskReport::idle_ms), with an IdleWarning event
  // when kIdleWarningFraction of it has passed; stopped after maxDuration of running; and
  // ended (Failed, saying why) where a batch job would restart: a lost node, a failed GPU, a
  // failed task, a drain, a spot reclamation or a preemption.
  std::optional<InteractiveSpec> interactive;
};

struct JobStep {
  JobStatus status;
  std::vector<JobEvent> events;
  bool delete_assignments = false;         // stop the tasks: the job's assignments go
  GpuSeconds settled;                      // GPU time of the attempt that ended in this step
  std::optional<double> recovery_seconds;  // the job runs again after an interruption
};

// The first policy that matches one of `events` raised together by a replica of `task` (which
// exited with `exit_code`, for failures), or null: the policies' order decides, not the
// events'. Task-level policies match only their task.
const LifecyclePolicy* MatchPolicy(const std::vector<LifecyclePolicy>& policies,
                                   std::initializer_list<LifecycleEvent> events,
                                   const std::string& task, std::optional<int> exit_code);
const LifecyclePolicy* MatchPolicy(const std::vector<LifecyclePolicy>& policies,
                                   LifecycleEvent event, const std::string& task,
                                   std::optional<int> exit_code);

// The scheduler preempts the job (`why` says for whom): its tasks stop within `grace_ms` to
// checkpoint and it waits for capacity again (an interruption), unless a PodEvicted policy of
// one of its tasks takes another action (then within the same grace). An interactive job ends
// (Failed) instead.
JobStep Preempt(const JobStatus& old, const JobRules& rules, const std::string& why,
                int64_t grace_ms, int64_t now_ms);

// One step of a job that is not Pending (or Pending and cancelled). `replicas`: one per entry
// of old.placement, in the same order. Terminal jobs come back unchanged.
JobStep NextStatus(const JobStatus& old, const std::vector<ReplicaView>& replicas,
                   const JobRules& rules, int64_t now_ms);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_JOB_MACHINE_H_
