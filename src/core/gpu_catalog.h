// The GPU catalog: every GPU model gpucloud knows, with its memory, architecture, compute
// capability, MIG profiles and their valid placements, relative training speed and default
// on-demand price. Also maps what users write ("h100", "nvidia-a100") and what the hardware
// reports ("NVIDIA A100-SXM4-80GB") to catalog entries; a model the catalog does not know maps
// to a generic entry with its real memory. The default catalog is immutable after construction
// and safe to share between threads.
#ifndef GPUCLOUD_CORE_GPU_CATALOG_H_
#define GPUCLOUD_CORE_GPU_CATALOG_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/quantity.h"

namespace gpucloud {

enum class GpuArch { kUnknown, kVolta, kTuring, kAmpere, kAda, kHopper };
std::string_view GpuArchName(GpuArch arch);

// Number of memory slices in a MIG-capable GPU (A100, H100, H200 all have 8).
inline constexpr int kMigMemorySlices = 8;
// Number of compute slices (GPCs usable by MIG).
inline constexpr int kMigComputeSlices = 7;

// One MIG GPU-instance profile, e.g. "3g.40gb" on an H100-80GB.
struct MigProfile {
  std::string name;               // as nvidia-smi prints it: "1g.10gb", "1g.10gb+me"
  int compute_slices = 0;         // the "Ng" part
  int memory_slices = 0;          // slices of the 8 memory slices it occupies
  MiB memory;                     // nominal memory of the instance
  int max_instances = 0;          // most instances of this profile on one GPU
  std::vector<int> valid_starts;  // memory-slice indices where an instance may start
};

struct GpuType {
  std::string name;         // canonical catalog name, e.g. "H100-80GB"
  std::string family;       // lower-case model token, e.g. "h100"
  std::string accelerator;  // node label value, e.g. "nvidia-h100"
  MiB memory;
  GpuArch arch = GpuArch::kUnknown;
  int compute_capability = 0;            // major * 10 + minor, e.g. 90 for 9.0
  std::vector<MigProfile> mig_profiles;  // empty when the model has no MIG
  int64_t relative_speed_milli = 1000;   // training throughput relative to a V100 (= 1000)
  MicroUsd on_demand_price_per_hour;     // default list price per GPU-hour
  bool generic = false;                  // true for models outside the catalog

  bool mig_capable() const { return !mig_profiles.empty(); }
  const MigProfile* FindMigProfile(std::string_view profile) const;
};

class GpuCatalog {
 public:
  // The built-in catalog (V100, T4, A10, L40S, A100, H100, H200, RTX 4090).
  static const GpuCatalog& Default();

  explicit GpuCatalog(std::vector<GpuType> types);

  const std::vector<GpuType>& types() const { return types_; }

  // Exact canonical name, case-insensitive ("h100-80gb" finds "H100-80GB"). Null if unknown.
  const GpuType* Find(std::string_view name) const;

  // What a user may write for a type: a canonical name, a family ("a100" = both A100s), an
  // accelerator label ("nvidia-a100") or a product name ("NVIDIA-A100-SXM4-80GB"). Returns the
  // matching canonical types, empty when nothing matches.
  std::vector<const GpuType*> Resolve(std::string_view user_text) const;

  // Maps a name reported by the driver (NVML / nvidia-smi) and the device's total memory to a
  // catalog entry. Unknown models give a generic entry named "generic-<model>" carrying the real
  // memory, so discovery never fails on new hardware.
  GpuType FromHardware(std::string_view reported_name, MiB total_memory) const;

  // Types that offer the MIG profile `profile`.
  std::vector<const GpuType*> TypesWithMigProfile(std::string_view profile) const;

  // Canonical names joined with ", " for error messages.
  std::string KnownNames() const;

 private:
  std::vector<GpuType> types_;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_GPU_CATALOG_H_
