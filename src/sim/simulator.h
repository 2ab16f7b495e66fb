// The discrete-event simulator: replays a trace on a simulated cluster through the production
// scheduler (sched::Scheduler), on a virtual clock. Deterministic: the same inputs and seed give
// the same result. No I/O, no wall clock (progress is reported through a callback).
// Inference services may be replayed beside the trace (SimOptions::services): their replicas
// are jobs of the same scheduler (not in SimResult::jobs; SimResult::services has them).
//
// Events: arrivals, completions, preempted jobs stopping after their grace period and, when an
// MTBF is set, node failures and repairs. The scheduler runs once per distinct event time. (The
// server also runs it periodically; in the simulator a periodic cycle with nothing changed
// since the last one would decide exactly the same, so there is none.) A multi-node job runs slower
// the wider it is spread (PlacementModel). Jobs checkpoint every checkpoint interval; a failure
// loses the work since the last checkpoint, a preemption none (the grace period is for
// checkpointing). Not thread-safe; one Simulator per run.
#ifndef GPUCLOUD_SIM_SIMULATOR_H_
#define GPUCLOUD_SIM_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/failure_risk.h"
#include "core/gpu_catalog.h"
#include "core/queue.h"
#include "core/sched_config.h"
#include "sim/cluster.h"
#include "sim/elastic.h"
#include "sim/service_replay.h"
#include "sim/trace.h"

namespace gpucloud::sim {

// Slowdown of a job spread over several nodes, by the widest topology level it spans
// (defaults after the Tiresias and Gandiva measurements of communication-bound models).
struct PlacementModel {
  double same_leaf = 1.1;   // several nodes under one leaf switch
  double same_spine = 1.3;  // several leaf switches under one spine
  double cross_spine = 1.5;
};

// Predictive drain in the simulator (node failures need an MTBF). Each failure is preceded, with
// probability `precursor_share`, by precursor signals on one GPU of the node (corrected-ECC
// bursts, remapped rows, watch-class Xids) starting `lead_hours` (x U[0.5, 1.5]) before it, at
// `precursors_per_hour`; every GPU also sees benign noise (small corrected-ECC bursts, thermal
// excursions, the odd remapped row) at `noise_per_gpu_day`. The signals feed the agent's
// FailureRiskModel, one per GPU.
//   kObserve: the model only watches: its flags are counted (precision, recall, lead time).
//   kAct: a flag checkpoints and moves the node's jobs (their work kept, `migration_cost_s` of
//         GPU time each for the checkpoint and restart) and cordons the node until it fails or,
//         after `inspection_s`, is found healthy (its models reset).
// A flag is right when its node fails within `horizon_s` after it; a failure was predicted
// when a flag on its node came within `horizon_s` before it. The signals have their own random
// stream: the failures are the same with prediction off, observing or acting.
enum class PredictionMode { kOff, kObserve, kAct };
struct FailurePredictionOptions {
  PredictionMode mode = PredictionMode::kOff;
  double precursor_share = 0.7;
  double lead_hours = 24;
  double precursors_per_hour = 0.5;
  double noise_per_gpu_day = 0.5;
  int64_t inspection_s = 24 * 3600;
  int64_t migration_cost_s = 120;
  int64_t horizon_s = 48 * 3600;
  RiskModelParams model;
};

struct PredictionResult {
  int64_t flags = 0;
  int64_t true_flags = 0;  // followed by the node's failure within the horizon
  int64_t failures = 0;
  int64_t predicted_failures = 0;  // a flag came within the horizon before
  double precision() const { return flags ? static_cast<double>(true_flags) / flags : 0; }
  double recall() const {
    return failures ? static_cast<double>(predicted_failures) / failures : 0;
  }
  double median_lead_hours = 0;    // first flag to failure, predicted failures
  int64_t migrations = 0;          // jobs moved off flagged nodes (kAct)
  double gpu_hours_migration = 0;  // their checkpoint and restart cost
  double gpu_hours_cordoned = 0;   // capacity held on flagged nodes that had not failed yet
};

struct SimOptions {
  std::string policy_name = "default";
  SchedulerConfig policy;
  std::map<std::string, QueueSpec> queues;  // by trace queue name; others get weight 1
  std::optional<int64_t> until_s;           // stop the clock here
  uint64_t seed = 1;
  PlacementModel placement;
  int64_t checkpoint_interval_s = 1800;
  double mtbf_hours = 0;  // per node; 0 = no failures
  // Per GPU type (a node's first GPU decides), overriding mtbf_hours for those nodes.
  std::map<std::string, double> mtbf_hours_by_type;
  int64_t repair_s = 3600;
  // Failures at given times besides the random ones: (seconds, node index); each is repaired
  // after repair_s. For what-if runs and tests.
  std::vector<std::pair<int64_t, int32_t>> node_failures;
  FailurePredictionOptions prediction;
  // Give jobs without an estimate in the trace their real duration as estimate (a perfect
  // user), so SJF and backfill have something to work with.
  bool oracle_estimates = true;
  int64_t fragmentation_sample_s = 3600;
  // Autoscaled node pools (ElasticOptions::enabled; not with failure prediction).
  ElasticOptions elastic;
  // Inference services replayed beside the trace (sim/service_replay.h), their autoscaler run
  // every `service_tick_s`.
  std::vector<SimService> services;
  int64_t service_tick_s = 10;
  // Called every `progress_every` completed jobs and at the end.
  std::function<void(int64_t done, int64_t total, int64_t sim_time_s)> progress;
  int64_t progress_every = 10000;
};

// kNotSubmitted: the clock stopped (--until) before the job's submit time.
enum class JobState { kFinished, kRejected, kPending, kRunning, kNotSubmitted };
// "finished", "rejected", "pending", "running", "not-submitted"
std::string_view JobStateName(JobState s);

struct JobOutcome {
  std::string id;
  std::string queue;
  MilliGpu gpus;
  int64_t submit_s = 0;
  int64_t duration_s = 0;  // ideal run time
  std::optional<int64_t> first_start_s;
  std::optional<int64_t> end_s;
  JobState state = JobState::kPending;
  int32_t restarts = 0;     // after failures
  int32_t preemptions = 0;  // times preempted
  double gpu_seconds_lost = 0;
  std::string reason;          // rejected: why
  bool spot_tolerant = false;  // drawn for --spot-share: it may run on spot machines
};

struct SimResult {
  std::string policy_name;
  std::vector<JobOutcome> jobs;  // in trace order
  // Allocated GPUs over time: (time, GPUs) at every change.
  std::vector<std::pair<int64_t, double>> allocated;
  // Fraction of free GPUs that are fragmented (FGD's measure, for the trace's request mix), at
  // every multiple of SimOptions::fragmentation_sample_s.
  std::vector<std::pair<int64_t, double>> fragmentation;
  int64_t end_s = 0;  // when the clock stopped
  int64_t total_gpus = 0;
  int64_t cycles = 0;
  int64_t preemptions = 0;
  int64_t failures = 0;
  int64_t restarts = 0;
  double gpu_hours_lost = 0;               // work redone after failures
  PredictionResult prediction;             // when SimOptions::prediction.mode is not kOff
  std::map<std::string, double> cost_usd;  // billing class -> dollars for jobs' GPU time
  // Machines: what they cost while they existed (all of a fixed cluster for the whole run) and,
  // when autoscaled, what the autoscaler did. Their cost less the jobs' is idle cost.
  ElasticResult capacity;
  bool autoscaled = false;
  // GPU time the trace's jobs held (GPU equivalents), and what each service got.
  double gpu_hours_training = 0;
  std::vector<ServiceOutcome> services;
};

// The trace's request mix, as the Fragmentation score and the report's fragmentation measure
// take it: each task's GPUs per replica as the scheduler sees them (whole GPUs split into
// replicas of at most `max_gpus_per_node`, shares as their fraction), weighted by how many
// tasks ask for that size; sorted by size.
std::vector<WorkloadShare> WorkloadOfTrace(const Trace& trace, int32_t max_gpus_per_node);

// Runs the whole replay. A Fragmentation score without a workload of its own protects the
// trace's request mix (WorkloadOfTrace), and the report's fragmentation is measured against it.
// InvalidArgument when the policy names an unknown plugin.
absl::StatusOr<SimResult> Simulate(const Trace& trace, const SimCluster& cluster,
                                   const SimOptions& options,
                                   const GpuCatalog& catalog = GpuCatalog::Default());

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_SIMULATOR_H_
