// The GPU usage the API shows, made from the node table's latest samples (node_table.h) when an
// object is read, never stored:
//   - a node: status.gpus[i].utilization (%), memoryUsedMiB, memoryTotalMiB and sampledAtMs
//     (when the heartbeat carrying them arrived, the server's clock) for each GPU with a fresh
//     sample, and status.gpuUsage, its GPUs' summary;
//   - a job that holds GPUs (not HoldsNothing): status.gpuUsage, the summary of the whole GPUs
//     its placement holds. A shared GPU's readings are all its tenants' and a MIG instance's
//     are not read per instance, so neither counts: a job on them alone has no utilization
//     (unknown), though `gpus` counts them.
// A summary is {gpus, measuredGpus, utilization, memoryUsedMiB, memoryTotalMiB, sampledAtMs}:
// `gpus` those counted, `measuredGpus` those with a fresh utilization; utilization their mean
// (rounded), memory the sums over GPUs with both memory readings, sampledAtMs the oldest
// sample's time. A field without a reading behind it is absent: unknown, as a stale sample is.
// Computing it costs one node-table lookup per node of the object (in memory), and a job read
// through a watch shows the usage when the event is sent. Pure functions; thread-safe.
#ifndef GPUCLOUD_SERVER_GPU_USAGE_H_
#define GPUCLOUD_SERVER_GPU_USAGE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "server/node_table.h"

namespace gpucloud::server {

struct UsageSummary {
  int gpus = 0;           // the GPUs it is about
  int measured_gpus = 0;  // of them, those with a fresh utilization
  std::optional<int> utilization_percent;
  std::optional<int64_t> memory_used_mib;
  std::optional<int64_t> memory_total_mib;
  int64_t sampled_ms = 0;  // the oldest sample's time; 0 when none
  bool operator==(const UsageSummary&) const = default;
};

// The summary of `gpus` GPUs, of which `samples` are those with a sample (fresh ones only).
UsageSummary Summarize(int gpus, const std::vector<GpuUsage>& samples);

// A node object `doc` (as stored) with its GPUs' fresh usage at `now_ms`, as described above.
// A node without a fresh sample is left as it is.
void ApplyLiveNodeUsage(const NodeTable& nodes, int64_t now_ms, nlohmann::ordered_json& doc);
// A job object `doc` with status.gpuUsage at `now_ms`; a job that holds nothing is left.
void ApplyLiveJobUsage(const NodeTable& nodes, int64_t now_ms, nlohmann::ordered_json& doc);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_GPU_USAGE_H_
