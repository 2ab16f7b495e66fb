// GpuBackend: what the node agent knows of a machine's GPUs — discovery (for node registration)
// and health samples (for the exporter and health checks). Two implementations: NVML, loaded
// with dlopen at run time (nvml_backend.h; no build-time dependency on NVIDIA packages), and a
// simulated one for tests and for machines without GPUs (simulated_backend.h).
// Implementations are not thread-safe; the agent owns one and calls it from one thread.
#ifndef GPUCLOUD_AGENT_GPU_BACKEND_H_
#define GPUCLOUD_AGENT_GPU_BACKEND_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mig.h"
#include "core/quantity.h"

namespace gpucloud::agent {

struct GpuDevice {
  int index = 0;
  std::string uuid;        // "GPU-..."
  std::string name;        // as the driver reports it, e.g. "NVIDIA H200"
  std::string pci_bus_id;  // "00000000:19:00.0"
  MiB memory;
  bool mig_enabled = false;
  std::string catalog_type;  // GpuCatalog::FromHardware's answer, e.g. "H200-141GB"
  int nvlink_island = -1;    // GPUs with the same id are NVLink-connected; -1 = unknown/none
  std::vector<MigPlacement> mig_layout;  // the MIG instances configured (mig_enabled only)
  // The CUDA-visible MIG devices of those instances ("MIG-..."), by placement: what a task
  // given an instance gets in CUDA_VISIBLE_DEVICES.
  std::map<int, std::string> mig_uuid_by_start;
};

struct NodeGpus {
  std::string backend;          // "nvml" or "simulated"
  std::string driver_version;   // "580.159.04"
  int cuda_driver_version = 0;  // 12040 = 12.4
  std::vector<GpuDevice> gpus;
  // How each pair of GPUs is connected, as `nvidia-smi topo -m` prints it: "X" (itself),
  // "NV<links>", "PIX", "PXB", "PHB", "NODE", "SYS"; empty when the backend cannot tell.
  std::vector<std::vector<std::string>> topology;
};

// One reading of one GPU. Fields a GPU or driver does not support are unset.
struct GpuSample {
  int index = 0;
  std::optional<int> gpu_util_percent;
  std::optional<int> mem_copy_util_percent;
  std::optional<MiB> fb_used;
  std::optional<MiB> fb_free;
  std::optional<int> temperature_c;
  std::optional<double> power_w;
  std::optional<uint64_t> energy_mj;  // since the driver loaded
  std::optional<int> sm_clock_mhz;
  std::optional<int> mem_clock_mhz;
  std::optional<uint64_t> ecc_corrected;    // volatile
  std::optional<uint64_t> ecc_uncorrected;  // volatile
  std::optional<uint64_t> remapped_rows;    // rows remapped so far (correctable + not)
  // The same rows by cause, and whether a remapping failed (nvmlDeviceGetRemappedRows).
  std::optional<uint64_t> remapped_rows_correctable;
  std::optional<uint64_t> remapped_rows_uncorrectable;
  std::optional<bool> row_remap_failed;
  std::optional<int> memory_temperature_c;  // HBM
  std::optional<int> enc_util_percent;
  std::optional<int> dec_util_percent;
  std::optional<uint64_t> pcie_replays;  // since the driver loaded
  // NVLink traffic since the driver loaded, in KiB, received plus sent over every link.
  std::optional<uint64_t> nvlink_kib;
  // The value of the last Xid the backend saw on this GPU, 0 when none; unset when the backend
  // does not watch Xids (as DCGM_FI_DEV_XID_ERRORS).
  std::optional<int> last_xid;
  // Profiling ratios (0 to 1) over the time since the previous sample (NVML's GPM on Hopper
  // and later): the graphics engine active, the tensor pipes active.
  std::optional<double> gr_engine_active;
  std::optional<double> tensor_active;

  // One MIG instance of a GPU in MIG mode: what NVML tells of it alone.
  struct MigInstance {
    int gpu_instance_id = 0;  // NVML's GPU instance id (dcgm-exporter's GPU_I_ID)
    std::string profile;      // "3g.40gb" (GPU_I_PROFILE)
    int start = 0;            // its first memory slice (MigPlacement::start)
    std::optional<MiB> fb_used;
    std::optional<MiB> fb_free;
    std::optional<double> gr_engine_active;
    std::optional<double> tensor_active;
  };
  std::vector<MigInstance> mig;  // by start; empty when not in MIG mode
};

struct XidEvent {
  int gpu = 0;  // index
  int xid = 0;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string_view Name() const = 0;
  virtual absl::StatusOr<NodeGpus> Discover() = 0;
  // One reading of every GPU that answers (a lost GPU is missing).
  virtual absl::StatusOr<std::vector<GpuSample>> Sample() = 0;
  // The GPUs (indexes) the node's running tasks hold, told before each Sample: the simulated
  // backend shows them busy (simulated_backend.h); a real one measures, and ignores it.
  virtual void SetBusyGpus(const std::set<int>& gpus) { (void)gpus; }
  // Xid events since the last call: the simulated backend's injected ones, NVML's event set
  // (critical Xids and double-bit ECC errors, as Xid 48).
  virtual std::vector<XidEvent> TakeXids() { return {}; }
  // Fault injection, for tests and demos: `fault` is "xid" (value: the Xid), "temperature"
  // (value: degrees C), "ecc" (value: uncorrectable errors to add), "ecc-corrected" and
  // "remap" (corrected errors / remapped rows to add: failure precursors), "lost" or "reset"
  // (the GPU is reset: faults cleared, energy counter restarted). Unimplemented except when
  // simulated.
  // Thread-safe where implemented (it comes from another thread than sampling).
  virtual absl::Status Inject(std::string_view fault, int gpu, int64_t value) {
    (void)fault, (void)gpu, (void)value;
    return absl::UnimplementedError("fault injection needs simulated GPUs (--simulate)");
  }
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_GPU_BACKEND_H_
