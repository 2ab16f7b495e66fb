// The simulated GPU backend: GPUs described by a spec such as "8xH100" or "4xA100-80GB,2xT4"
// (catalog names or aliases), with deterministic readings. For tests and for running an agent on
// a machine without GPUs. An idle GPU reads 0% utilization and no memory used; a busy one (a
// task holds it: SetBusyGpus) reads 90% utilization (kSimulatedBusyUtilization), 40% memory
// copy, half its memory used, the graphics engine 0.9 and the tensor pipes 0.5 active, and its
// MIG instances half their memory used. Power and energy do not change with load. Not
// thread-safe.
#ifndef GPUCLOUD_AGENT_SIMULATED_BACKEND_H_
#define GPUCLOUD_AGENT_SIMULATED_BACKEND_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "agent/gpu_backend.h"
#include "core/gpu_catalog.h"

namespace gpucloud::agent {

inline constexpr int kSimulatedBusyUtilization = 90;

// `spec` is "8xH100" or "4xA100-80GB,2xT4", or a YAML file (*.yaml) giving groups of GPUs:
//   gpus:
//   - {type: H100, count: 8, nvlinkIsland: 0}
//   - {type: A100-80GB, count: 2, mig: [3g.40gb@0, 3g.40gb@4]}   # MIG layout of each GPU
// InvalidArgument naming the bad part of `spec` ("3xB300: unknown GPU type"). With `node`, the
// GPUs' UUIDs name it ("GPU-sim-node-a-0"), so that simulated nodes of one cluster differ.
absl::StatusOr<std::unique_ptr<GpuBackend>> MakeSimulatedBackend(
    std::string_view spec, const GpuCatalog& catalog = GpuCatalog::Default(),
    const std::string& node = "");

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_SIMULATED_BACKEND_H_
