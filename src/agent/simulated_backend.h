// The simulated GPU backend: GPUs described by a spec such as "8xH100" or "4xA100-80GB,2xT4"
// (catalog names or aliases), with deterministic readings. For tests and for running an agent on
// a machine without GPUs. Not thread-safe.
#ifndef GPUCLOUD_AGENT_SIMULATED_BACKEND_H_
#define GPUCLOUD_AGENT_SIMULATED_BACKEND_H_

#include <memory>
#include <string_view>

#include <string>

#include "absl/status/statusor.h"
#include "agent/gpu_backend.h"
#include "core/gpu_catalog.h"

namespace gpucloud::agent {

// InvalidArgument naming the bad part of `spec` ("3xB300: unknown GPU type"). With `node`, the
// GPUs' UUIDs name it ("GPU-sim-node-a-0"), so that simulated nodes of one cluster differ.
absl::StatusOr<std::unique_ptr<GpuBackend>> MakeSimulatedBackend(
    std::string_view spec, const GpuCatalog& catalog = GpuCatalog::Default(),
    const std::string& node = "");

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_SIMULATED_BACKEND_H_
