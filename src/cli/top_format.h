// The tables of `gpuctl top nodes` (plain `top` too) and `gpuctl top jobs`, from rows the
// commands read off the API (cluster_commands.cc): per node its GPUs allocated, out of service
// and free (CountGpus) with their mean utilization and memory used/total; per job the GPUs it
// holds with the same. Usage is the server's status.gpuUsage (server/gpu_usage.h); what it
// lacks (no sample, or a stale one) prints as `<unknown>`, as kubectl top prints a pod without
// metrics; a job holding no GPU prints `-`. Pure functions; thread-safe.
#ifndef GPUCLOUD_CLI_TOP_FORMAT_H_
#define GPUCLOUD_CLI_TOP_FORMAT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job_status.h"
#include "cli/cluster_commands.h"

namespace gpucloud::cli {

// An object's status.gpuUsage as read: unset fields are unknown.
struct TopUsage {
  int measured_gpus = 0;  // GPUs behind the utilization
  std::optional<int> utilization_percent;
  std::optional<int64_t> memory_used_mib;
  std::optional<int64_t> memory_total_mib;
};
// Reads a node's status.gpuUsage (anything missing or of the wrong type is unknown).
TopUsage TopUsageOf(const nlohmann::json& object);
// A job's, as api::JobStatus decoded it (nullopt: unknown).
TopUsage TopUsageOf(const std::optional<api::GpuUsage>& usage);

struct TopNodeRow {
  std::string name, status;  // status as `get nodes` shows it (Ready,SchedulingDisabled)
  GpuCounts gpus;
  TopUsage usage;
  std::vector<std::string> jobs;  // "ns/job" holding its GPUs
};
struct TopJobRow {
  std::string job;  // "ns/job"
  int gpus = 0;     // GPUs it holds
  TopUsage usage;
  std::vector<std::string> nodes;
};

// NODE STATUS GPUS USED OUT FREE UTIL MEMORY JOBS, then a TOTAL row (its utilization the mean
// over every measured GPU, its memory the sums).
std::string FormatTopNodes(const std::vector<TopNodeRow>& rows);
// JOB GPUS UTIL MEMORY NODES.
std::string FormatTopJobs(const std::vector<TopJobRow>& rows);
// "512Mi", "40Gi", "79.6Gi" (one decimal, none when whole).
std::string HumanMiB(int64_t mib);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_TOP_FORMAT_H_
