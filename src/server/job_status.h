// JobStatus: the server-owned `status` of a stored Job document, and where its replicas run.
//
// Phases (design.md): Pending -> Scheduled -> Running -> Succeeded | Failed | Cancelled, with
// the stopping phases Preempting, Restarting, Cancelling and Stopping in between: the job's
// assignments are gone, its tasks are being stopped (SIGTERM, grace, SIGKILL) and its GPUs stay
// reserved until every task reported that it ended, its node is lost, or the deadline passed;
// then the job moves to `next` (Pending again for a restart or a preemption, or a final phase).
// Only the controller loop writes phases; the REST API sets cancel/delete requests.
// Value type; thread-compatible.
#ifndef GPUCLOUD_SERVER_JOB_STATUS_H_
#define GPUCLOUD_SERVER_JOB_STATUS_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/job_status.h"
#include "sched/cluster_state.h"
#include "sched/snapshot.h"

namespace gpucloud::server {

struct PlacedReplica {
  std::string name;  // the assignment's name: "{ns}.{job}.{rank}"
  std::string node;
  int rank = 0;
  sched::ReplicaPlacement placement;  // `node` index is meaningless here; see `node`
  bool operator==(const PlacedReplica&) const = default;
};

// GPU time of a job (GPU equivalents x seconds): `allocated` while it held GPUs, `productive`
// the running time whose work was kept (up to the newest surviving checkpoint of an interrupted
// attempt; all of a completed one), `lost` the running time redone after an interruption.
// allocated - productive - lost is overhead: start-up, stopping, waiting for stragglers.
struct GpuSeconds {
  double allocated = 0;
  double productive = 0;
  double lost = 0;
  double goodput() const { return allocated > 0 ? productive / allocated : 1.0; }
  GpuSeconds& operator+=(const GpuSeconds& o) {
    allocated += o.allocated;
    productive += o.productive;
    lost += o.lost;
    return *this;
  }
  bool operator==(const GpuSeconds&) const = default;
};

// GPU time of an ended attempt on one GPU type, for the fair-share window's history
// (sched::UsageWindow): it counts for the job's queue from `end_ms` until the window passes.
using UsageRecord = sched::UsageSpan;
// A job keeps the records of its last attempts only (older ones are out of any useful window).
inline constexpr size_t kMaxUsageRecords = 16;

struct JobStatus {
  api::JobPhase phase = api::JobPhase::kPending;
  std::optional<api::JobPhase> next;  // stopping phases: the phase after the tasks stopped
  int attempt = 0;                    // attempts started so far; the current one when scheduled
  int restarts = 0;           // restarts after a task failed (counted against restartPolicy)
  int interruptions = 0;      // restarts after a preemption, a drain or a lost node (not counted)
  std::string reason;         // machine-readable: Unschedulable, Waiting, TaskFailed, NodeLost, ...
  std::string message;        // for people
  int64_t submitted_ms = 0;   // when the API accepted it (ms precision, unlike metadata)
  int64_t not_before_ms = 0;  // back-off: not scheduled before
  int64_t scheduled_ms = 0;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  int64_t stop_deadline_ms = 0;
  int64_t interrupted_ms = 0;    // when the current interruption began (0: none)
  int64_t last_recovery_ms = 0;  // the last interruption's time to running again
  int recoveries = 0;
  bool cancel_requested = false;
  bool idle_warned = false;  // an interactive job's IdleWarning is out for its idle stretch
  bool delete_requested = false;
  std::string checkpoint_dir;
  // Availability accounting (see Settle). `gpus`: GPU equivalents of the current placement.
  double gpus = 0;
  int64_t attempt_started_ms = 0;  // when the current attempt's first task ran
  int64_t run_ended_ms = 0;        // when it stopped doing useful work (its stop began)
  int64_t last_checkpoint_ms = 0;  // the newest complete checkpoint the agents saw
  int64_t last_replicated_ms = 0;  // the newest one copied to the replica location
  // Ordering dlas: the attained GPU-time (GPU x ms) the current attempt's band counts from, as
  // the scheduler bound it (sched::Allocation::las_service_gpu_ms).
  int64_t las_service_gpu_ms = 0;
  // The current placement's GPU equivalents by GPU type (set when bound), and the GPU time of
  // the last attempts that ended, by type (SettleAttempt; at most kMaxUsageRecords).
  std::map<std::string, double> gpus_by_type;
  std::vector<UsageRecord> usage;
  // Billing (server/billing.h): the current placement's price per hour by billing class (its
  // GPU equivalents at their nodes' pools' prices; set when bound, cleared when settled), and
  // what the attempts that ended cost, by class: from binding to the end of the attempt.
  std::map<std::string, double> usd_per_hour;
  std::map<std::string, double> cost_usd;
  std::map<std::string, double> usd_per_hour_by_pool;  // the same rate by node pool
  // Since when usd_per_hour holds: the binding, or the last price change (a pool's
  // priceSchedule) that re-rated the attempt; 0: scheduled_ms.
  int64_t billed_from_ms = 0;
  int64_t BilledFrom() const { return billed_from_ms > 0 ? billed_from_ms : scheduled_ms; }
  // GPU energy (joules, the agents' measure): of the attempts that ended, and of the current one
  // as its tasks last reported it (written with the job's other changes, not every heartbeat).
  double energy_j = 0;
  double attempt_energy_j = 0;
  // Carbon: the current placement's grams of CO2e per kWh of GPU energy (its pools' grid
  // intensity, GPU-weighted, times the PUE; set when bound), and the grams of the ended attempts.
  double co2e_g_per_kwh = 0;
  double co2e_g = 0;
  // Node-local checkpoints: where the last attempt's ranks ran (rank -> node), and its GPUs.
  std::vector<std::string> checkpoint_nodes;
  double checkpoint_gpus = 0;
  GpuSeconds gpu_seconds;  // over the attempts that ended
  std::vector<PlacedReplica> placement;
  int master_port = 0;  // the current attempt's rendezvous port on rank 0's node; 0: none
  std::map<std::string, std::string> tasks;  // assignment name -> last reported state
  bool operator==(const JobStatus&) const = default;

  bool Terminal() const { return api::IsTerminal(phase); }
  bool Stopping() const { return api::IsStopping(phase); }
  bool Active() const { return api::IsActive(phase); }
  // The attempt stops doing useful work now (its stop began): the end of its running time.
  void EndRun(int64_t now_ms) {
    if (attempt_started_ms > 0 && run_ended_ms == 0) run_ended_ms = now_ms;
  }
  // A task reported its newest checkpoint and the newest replicated one.
  void NoteCheckpoints(int64_t checkpoint_ms, int64_t replicated_ms) {
    last_checkpoint_ms = std::max(last_checkpoint_ms, checkpoint_ms);
    last_replicated_ms = std::max(last_replicated_ms, replicated_ms);
  }
};

// The job as the scheduler's input is built from it (sched/snapshot.h), for a job created at
// `creation_ms` (its submission when the status does not say).
sched::JobView ViewOf(const JobStatus& s, int64_t creation_ms);

// GPU equivalents of a placement (sched::GpuShareOf: a whole GPU 1, a share its fraction, a MIG
// instance its compute slices out of the GPU's, read from the profile name).
double GpuEquivalents(const std::vector<PlacedReplica>& placement);

// Ends the current attempt's accounting at `now_ms`: adds its GPU time to `s.gpu_seconds` (and,
// split by s.gpus_by_type, to s.usage) and its cost to `s.cost_usd`, and returns the GPU time
// it added. `completed`: its work counts in
// full (it succeeded, or the user stopped it); otherwise the work after `checkpoint_ms` (the newest
// checkpoint that survived; 0: none) is lost. Clears the attempt's marks.
GpuSeconds SettleAttempt(JobStatus& s, int64_t now_ms, bool completed, int64_t checkpoint_ms);

// For a job with node-local checkpoints, bound to `placement` after an earlier attempt ran on
// s.checkpoint_nodes: where its checkpoints come from ("from the replica in DIR", "from
// scratch: ...", or the local disks when every rank is back on its node), with the work that
// did not survive moved from productive to lost. "" for other jobs. Clears checkpoint_nodes.
std::string ResumeFrom(JobStatus& s, const CheckpointSpec& spec,
                       const std::vector<PlacedReplica>& placement);

// The job's GPU time so far, the current attempt included (its running time counted as
// productive until something interrupts it).
GpuSeconds LiveGpuSeconds(const JobStatus& s, int64_t now_ms);

// Reads doc["status"] (absent: a new Pending job). Unknown fields are ignored, and a field of
// the wrong type keeps its default, but a phase (status.phase, status.next) that is not a string
// naming one is InvalidArgument naming the field: a job is never silently Pending.
absl::StatusOr<JobStatus> JobStatusFromJson(const nlohmann::ordered_json& doc);
// Only doc["status"]["phase"] (absent: Pending), with JobStatusFromJson's error for a bad one.
absl::StatusOr<api::JobPhase> JobPhaseOf(const nlohmann::ordered_json& doc);
void JobStatusToJson(const JobStatus& s, nlohmann::ordered_json& doc);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_JOB_STATUS_H_
