// GPU health: what makes the agent report a GPU unhealthy, so that the scheduler stops using it
// and the jobs on it restart elsewhere from their checkpoints.
//   - Xid events, classified as NVIDIA's catalog does (reference/nvidia.md, after NVSentinel):
//     drain-class Xids (48 double-bit ECC, 79 fell off the bus, 74 NVLink, ...) mark the GPU
//     unhealthy; application faults (13, 31, 43, 45) and the watch-only ones (63, 92, 94, 121)
//     do not; an Xid in neither list does, as NVIDIA's device plugin does;
//   - samples: uncorrectable ECC errors, a temperature at or above the limit for 3 samples in a
//     row, a GPU that stopped answering (lost);
// Unhealthy is sticky: a GPU comes back only by an explicit reset (the operator's uncordon) or
// when NVML shows that the GPU was reset (its energy counter started again from a lower value).
// Besides, each GPU has a FailureRiskModel (core/failure_risk.h) fed with the precursors seen
// here — corrected ECC errors and remapped rows (counter increases), thermal excursions (the
// temperature rising to within `thermal_margin_c` of the limit) and watch-class Xids: a healthy
// GPU whose score crosses the threshold is "at risk", and the server moves its jobs off it.
// Not thread-safe: the agent's main loop owns it.
#ifndef GPUCLOUD_AGENT_HEALTH_H_
#define GPUCLOUD_AGENT_HEALTH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_backend.h"
#include "core/failure_risk.h"

namespace gpucloud::agent {

enum class XidClass { kDrain, kApplication, kWatch, kUnknown };
XidClass ClassifyXid(int xid);
std::string DescribeXid(int xid);  // "Xid 79 (GPU fell off the bus)"

struct HealthThresholds {
  int max_temperature_c = 90;
  int hot_samples = 3;       // in a row
  int thermal_margin_c = 5;  // an excursion: rising to limit - margin or above
  RiskModelParams risk;
};

struct GpuCondition {
  bool healthy = true;
  std::string reason;    // why not (the first cause)
  bool at_risk = false;  // healthy, but the risk model expects it to fail
  std::string risk;      // the model's evidence, when at risk
  bool operator==(const GpuCondition&) const = default;
};

class HealthMonitor {
 public:
  explicit HealthMonitor(HealthThresholds t = {}) : t_(t) {}
  // Each returns true when some GPU's health (or risk) changed. `now_ms`: unix ms.
  bool OnXid(int gpu, int xid, int64_t now_ms);
  bool OnSamples(const std::vector<GpuSample>& samples, int gpu_count, int64_t now_ms);
  bool ResetAll();  // the operator says the GPUs are fine again
  // GPU index -> condition, for every GPU seen.
  const std::map<int, GpuCondition>& conditions() const { return gpus_; }

 private:
  bool MarkUnhealthy(int gpu, std::string reason);
  bool UpdateRisk(int gpu, int64_t now_ms);  // true when at_risk flipped
  struct Counters {  // the last readings of cumulative counters, for their increases
    std::optional<uint64_t> ecc_corrected, remapped_rows;
    bool warm = false;  // within the thermal margin at the last sample
  };
  HealthThresholds t_;
  std::map<int, FailureRiskModel> risk_;
  std::map<int, Counters> counters_;
  std::map<int, GpuCondition> gpus_;
  std::map<int, int> hot_;             // consecutive hot samples
  std::map<int, uint64_t> energy_mj_;  // last energy reading, for reset detection
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_HEALTH_H_
