// Trace readers: GPU cluster traces in the formats researchers publish, read into one job list
// for the simulator. Every row is either used or counted as skipped with its line number and
// the reason; nothing is dropped silently.
//
// Formats (docs/simulator.md has the columns):
//   tiresias  job_id,num_gpu,submit_time,iterations,model_name,duration,interval (seconds)
//   philly    timestamp,duration,num_gpus,gpu_time,cluster (the Pollux extraction of the
//             Microsoft Philly trace; timestamp "YYYY-MM-DD hh:mm:ss", cluster = virtual cluster)
//   helios    job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
//             duration,queue (SenseTime Helios)
//   pai       Alibaba PAI 2020: pai_job_table (job_name,inst_id,user,status,start_time,end_time)
//             with pai_task_table (job_name,task_name,inst_num,status,start_time,end_time,
//             plan_cpu,plan_mem,plan_gpu,gpu_type); headerless as published, or with a header
//   csv       generic, with a header: id,submit,duration,gpus and optionally queue, user,
//             gpu_type (one type, or several as "T4|A10"), estimate, priority (seconds; gpus may
//             be a fraction below 1 for a shared GPU; user is read, not used)
// Stateless functions; thread-safe.
#ifndef GPUCLOUD_SIM_TRACE_H_
#define GPUCLOUD_SIM_TRACE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/gpu_catalog.h"
#include "core/quantity.h"

namespace gpucloud::sim {

// One job of a trace. Times in seconds from the trace's first submission.
struct TraceTask {
  std::string name;
  int32_t replicas = 1;
  MilliGpu gpus_per_replica;  // below 1 GPU: a share of one GPU
};

struct TraceJob {
  std::string id;
  int line = 0;  // where it was read
  int64_t submit_s = 0;
  int64_t duration_s = 0;  // run time at full speed, without queueing
  std::vector<TraceTask> tasks;
  std::string queue = "default";
  std::string user;
  std::vector<std::string> gpu_types;  // catalog names; empty = any type
  std::optional<int64_t> estimate_s;   // the user's runtime estimate, when the trace has one
  int32_t priority = 0;

  MilliGpu TotalGpus() const;
};

struct SkippedRow {
  int line = 0;
  std::string reason;
};

struct Trace {
  std::string format;
  std::vector<TraceJob> jobs;  // sorted by submit time, then line
  std::vector<SkippedRow> skipped;
  int rows = 0;  // data rows read (used + skipped)
};

inline constexpr std::string_view kTraceFormats = "tiresias, philly, helios, pai, csv";

// Reads a trace. `format` is one of kTraceFormats or "auto" (from the header; a headerless
// file is taken as PAI's job table). `pai_tasks` is the text of pai_task_table for format pai
// (required there). InvalidArgument for an unknown format, a file whose header does not match
// it, malformed CSV, or a trace in which no row is usable.
absl::StatusOr<Trace> ReadTrace(std::string_view text, std::string_view format,
                                std::string_view pai_tasks = {},
                                const GpuCatalog& catalog = GpuCatalog::Default());

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_TRACE_H_
