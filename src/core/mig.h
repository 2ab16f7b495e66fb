// MIG placement rules on one GPU: an instance of a profile may start only at that profile's
// valid memory-slice positions, instances never overlap in memory slices, the compute slices in
// use never exceed seven, and no profile exceeds its instance limit. The scheduler and the agent
// both use these checks. Stateless functions over value types; thread-safe.
#ifndef GPUCLOUD_CORE_MIG_H_
#define GPUCLOUD_CORE_MIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/gpu_catalog.h"

namespace gpucloud {

struct MigPlacement {
  std::string profile;  // e.g. "3g.40gb"
  int start = 0;        // first memory slice

  bool operator==(const MigPlacement&) const = default;
};

// OK when `layout` is a valid set of instances on a GPU of `type`; otherwise an
// InvalidArgument error naming the first offending instance.
absl::Status ValidateMigLayout(const GpuType& type, const std::vector<MigPlacement>& layout);

// The start positions where one more instance of `profile` fits next to `layout`, lowest
// first. Empty when it fits nowhere or the profile is unknown for the type.
std::vector<int> FreeMigStarts(const GpuType& type, const std::vector<MigPlacement>& layout,
                               const MigProfile& profile);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_MIG_H_
