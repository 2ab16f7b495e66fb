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
// Not thread-safe: the agent's main loop owns it.
#ifndef GPUCLOUD_AGENT_HEALTH_H_
#define GPUCLOUD_AGENT_HEALTH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_backend.h"

namespace gpucloud::agent {

enum class XidClass { kDrain, kApplication, kWatch, kUnknown };
XidClass ClassifyXid(int xid);
std::string DescribeXid(int xid);  // "Xid 79 (GPU fell off the bus)"

struct HealthThresholds {
  int max_temperature_c = 90;
  int hot_samples = 3;  // in a row
};

struct GpuCondition {
  bool healthy = true;
  std::string reason;  // why not (the first cause)
  bool operator==(const GpuCondition&) const = default;
};

class HealthMonitor {
 public:
  explicit HealthMonitor(HealthThresholds t = {}) : t_(t) {}
  // Each returns true when some GPU's health changed.
  bool OnXid(int gpu, int xid);
  bool OnSamples(const std::vector<GpuSample>& samples, int gpu_count);
  bool ResetAll();  // the operator says the GPUs are fine again
  // GPU index -> condition, for every GPU seen.
  const std::map<int, GpuCondition>& conditions() const { return gpus_; }

 private:
  bool MarkUnhealthy(int gpu, std::string reason);
  HealthThresholds t_;
  std::map<int, GpuCondition> gpus_;
  std::map<int, int> hot_;             // consecutive hot samples
  std::map<int, uint64_t> energy_mj_;  // last energy reading, for reset detection
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_HEALTH_H_
