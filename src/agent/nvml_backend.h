// The NVML GPU backend: libnvidia-ml.so.1 loaded with dlopen at run time, as NVIDIA's go-nvml
// does, with the few NVML types declared here. A machine without the driver gets a clear error
// (and the agent falls back with one log line); a library without a required symbol is refused
// naming the symbol; optional metrics the driver lacks are left unset.
#ifndef GPUCLOUD_AGENT_NVML_BACKEND_H_
#define GPUCLOUD_AGENT_NVML_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/gpu_backend.h"
#include "core/gpu_catalog.h"

namespace gpucloud::agent {

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

// Loads `library` and initializes NVML. Unavailable when the library cannot be loaded or the
// driver is not loaded; FailedPrecondition naming a missing required symbol; Internal for other
// NVML errors (with nvmlErrorString's text). The backend shuts NVML down and unloads the
// library when destroyed. `catalog` must outlive it.
absl::StatusOr<std::unique_ptr<GpuBackend>> OpenNvml(
    const std::string& library = kNvmlLibrary, const GpuCatalog& catalog = GpuCatalog::Default());

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_NVML_BACKEND_H_
