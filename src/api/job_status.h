// A Job's `status` as the server writes it (server/job_status.h owns the writing), for clients to
// read: gpuctl, tests, and the server itself for the phase.
//
// Phases (design.md): Pending -> Scheduled -> Running -> Succeeded | Failed | Cancelled, with
// the stopping phases Preempting, Restarting, Cancelling and Stopping in between (the tasks are
// stopping; `next` says the phase after them). JSON carries a phase as its name ("Running").
//
// The decoder is tolerant of what is missing (a field absent or null keeps its default: a job
// without a status is Pending) and ignores fields it does not know (the server's own accounting),
// but a field of the wrong type, or a phase it does not know, is InvalidArgument naming the field
// ("status.attempt: must be an integer", "status.phase: unknown phase \"Runing\""). Value types;
// thread-compatible.
#ifndef GPUCLOUD_API_JOB_STATUS_H_
#define GPUCLOUD_API_JOB_STATUS_H_

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::api {

enum class JobPhase {
  kPending,
  kScheduled,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kPreempting,
  kRestarting,
  kCancelling,
  kStopping,
};
inline constexpr std::array<JobPhase, 10> kAllJobPhases = {
    JobPhase::kPending,    JobPhase::kScheduled, JobPhase::kRunning,    JobPhase::kSucceeded,
    JobPhase::kFailed,     JobPhase::kCancelled, JobPhase::kPreempting, JobPhase::kRestarting,
    JobPhase::kCancelling, JobPhase::kStopping};

// "Pending", "Running", ...: the name JSON carries.
std::string_view PhaseName(JobPhase p);
// The phase named `name` (exactly, as PhaseName writes it), or nullopt.
std::optional<JobPhase> ParsePhase(std::string_view name);
// gtest and streams print the name.
std::ostream& operator<<(std::ostream& os, JobPhase p);

// Succeeded, Failed or Cancelled: the job has ended and holds nothing.
bool IsTerminal(JobPhase p);
// Preempting, Restarting, Cancelling or Stopping: its tasks are being stopped, its GPUs held.
bool IsStopping(JobPhase p);
// Scheduled or Running: the current attempt holds its placement and runs (or starts).
inline bool IsActive(JobPhase p) { return p == JobPhase::kScheduled || p == JobPhase::kRunning; }

// One GPU of a replica's placement. JSON {index, mode, migProfile, migStart (mig),
// fractionMilli, memoryMiB, mps (shared)}.
struct PlacedGpu {
  int index = 0;
  std::string mode = "whole";  // "whole", "mig", "shared"
  std::string mig_profile;
  int mig_start = 0;
  int64_t fraction_milli = 0;
  int64_t memory_mib = 0;
  bool mps = false;
  bool operator==(const PlacedGpu&) const = default;
};

// Where one replica of the current attempt runs. JSON {name, node, rank, task, replica,
// cpuMilli, memoryMiB, gpus}.
struct PlacedReplica {
  std::string name;  // its assignment: "{ns}.{job}.{rank}"
  std::string node;
  int rank = 0;
  std::string task;
  int replica = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<PlacedGpu> gpus;
  bool operator==(const PlacedReplica&) const = default;
};

// GPU time (GPU equivalents x seconds) over the attempts that ended. JSON "gpuSeconds":
// {allocated, productive, lost, goodput}; goodput is derived, not stored.
struct GpuSeconds {
  double allocated = 0;
  double productive = 0;
  double lost = 0;
  double goodput() const { return allocated > 0 ? productive / allocated : 1.0; }
  bool operator==(const GpuSeconds&) const = default;
};

// The usage of the GPUs the job holds, computed when the server answers a read (never stored;
// server/gpu_usage.h). JSON "gpuUsage": {gpus, measuredGpus, utilization, memoryUsedMiB,
// memoryTotalMiB, sampledAtMs}; unset fields are unknown.
struct GpuUsage {
  int gpus = 0;           // GPUs held
  int measured_gpus = 0;  // of them, those with a fresh sample
  std::optional<int> utilization_percent;
  std::optional<int64_t> memory_used_mib;
  std::optional<int64_t> memory_total_mib;
  int64_t sampled_at_ms = 0;
  bool operator==(const GpuUsage&) const = default;
};

// The fields of a Job's status that clients read. Times are unix ms, 0 when not yet.
struct JobStatus {
  JobPhase phase = JobPhase::kPending;
  std::optional<JobPhase> next;  // stopping phases: the phase after the tasks stopped
  int attempt = 0;               // attempts started so far; the current one when scheduled
  int restarts = 0;              // restarts after a task failed
  int interruptions = 0;         // restarts after a preemption, a drain or a lost node
  std::string reason;            // machine-readable: Unschedulable, TaskFailed, NodeLost, ...
  std::string message;           // for people
  int64_t submitted_ms = 0;
  int64_t not_before_ms = 0;  // back-off: not scheduled before
  int64_t scheduled_ms = 0;   // this attempt's
  int64_t started_ms = 0;     // the first attempt's first task
  int64_t finished_ms = 0;
  int64_t stop_deadline_ms = 0;
  int64_t interrupted_ms = 0;
  int recoveries = 0;
  int64_t last_recovery_ms = 0;  // the last interruption's time to running again (ms)
  bool cancel_requested = false;
  bool delete_requested = false;
  std::string checkpoint_dir;
  double gpus = 0;                 // GPU equivalents of the current placement
  int64_t attempt_started_ms = 0;  // when the current attempt's first task ran
  int64_t last_checkpoint_ms = 0;
  int64_t last_replicated_ms = 0;
  GpuSeconds gpu_seconds;
  // Billing: the current placement's dollars per hour, and what the attempts that ended cost,
  // by billing class ("usdPerHour", "costUsd"; the server's billing.h).
  std::map<std::string, double> usd_per_hour;
  std::map<std::string, double> cost_usd;
  // The current placement's dollars per hour by node pool ("usdPerHourByPool"; "" for nodes in
  // no pool) and GPU equivalents by GPU type ("gpusByType").
  std::map<std::string, double> usd_per_hour_by_pool;
  std::map<std::string, double> gpus_by_type;
  // Since when usd_per_hour holds ("billedFromMs"; 0: scheduled_ms): a price change re-rates.
  int64_t billed_from_ms = 0;
  int64_t BilledFrom() const { return billed_from_ms > 0 ? billed_from_ms : scheduled_ms; }
  // GPU energy in joules as the agents measured it: the attempts that ended ("energyJ") and the
  // current one as last written with the job's other status changes ("attemptEnergyJ").
  double energy_j = 0;
  double attempt_energy_j = 0;
  // Carbon: grams of CO2e per kWh of the current attempt's GPU energy, PUE included
  // ("co2eGPerKwh"), and the grams of the attempts that ended ("co2eG").
  double co2e_g_per_kwh = 0;
  double co2e_g = 0;
  int master_port = 0;  // the current attempt's rendezvous port on rank 0's node; 0: none
  std::vector<PlacedReplica> placement;
  std::map<std::string, std::string> tasks;  // assignment name -> its task's last state
  std::optional<GpuUsage> gpu_usage;
  bool operator==(const JobStatus&) const = default;

  // Holds GPUs now: placed, not pending and not ended.
  bool HoldsGpus() const { return phase != JobPhase::kPending && !IsTerminal(phase); }
};

// What the job has cost so far, by billing class: its ended attempts' (cost_usd) and, while an
// attempt is active or stopping, that attempt's at usd_per_hour from its binding to `now_ms`.
std::map<std::string, double> CostSoFar(const JobStatus& s, int64_t now_ms);

// Decodes a status object (`status` null: a new Pending job). InvalidArgument naming the field,
// under "status.".
absl::StatusOr<JobStatus> JobStatusFromJson(const nlohmann::json& status);
absl::StatusOr<JobStatus> JobStatusFromJson(const nlohmann::ordered_json& status);
// The status of a Job document (its "status" member; absent or null: Pending).
absl::StatusOr<JobStatus> JobStatusOf(const nlohmann::json& job);
absl::StatusOr<JobStatus> JobStatusOf(const nlohmann::ordered_json& job);
// The status object as the server writes it (the same keys, absent when zero or empty).
std::string JobStatusToJson(const JobStatus& s);

// Reads the phase at `value` (a string naming one). `field` names it in the error: it is
// InvalidArgument for a value that is not a string or names no phase.
absl::StatusOr<JobPhase> PhaseFromJson(const nlohmann::ordered_json& value, std::string_view field);
absl::StatusOr<JobPhase> PhaseFromJson(const nlohmann::json& value, std::string_view field);

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_JOB_STATUS_H_
