#include "core/mig.h"

#include <algorithm>
#include <map>

#include "core/text.h"

namespace gpucloud {
namespace {

bool IsValidStart(const MigProfile& p, int start) {
  return std::find(p.valid_starts.begin(), p.valid_starts.end(), start) != p.valid_starts.end();
}

}  // namespace

absl::Status ValidateMigLayout(const GpuType& type, const std::vector<MigPlacement>& layout) {
  if (!type.mig_capable() && !layout.empty()) {
    return absl::InvalidArgumentError(Cat(type.name, " does not support MIG"));
  }
  unsigned used_slices = 0;
  int compute = 0;
  std::map<std::string, int> per_profile;
  for (size_t i = 0; i < layout.size(); ++i) {
    const MigPlacement& m = layout[i];
    const MigProfile* p = type.FindMigProfile(m.profile);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          Cat("instance ", i, ": ", type.name, " has no MIG profile ", m.profile));
    }
    if (!IsValidStart(*p, m.start)) {
      return absl::InvalidArgumentError(
          Cat("instance ", i, ": ", m.profile, " cannot start at slice ", m.start));
    }
    unsigned mask = ((1u << p->memory_slices) - 1) << m.start;
    if (used_slices & mask) {
      return absl::InvalidArgumentError(Cat("instance ", i, ": ", m.profile, " at slice ", m.start,
                                            " overlaps another instance"));
    }
    used_slices |= mask;
    compute += p->compute_slices;
    if (++per_profile[p->name] > p->max_instances) {
      return absl::InvalidArgumentError(
          Cat("instance ", i, ": more than ", p->max_instances, " instances of ", p->name));
    }
  }
  if (compute > kMigComputeSlices) {
    return absl::InvalidArgumentError(
        Cat("instances use ", compute, " compute slices, the GPU has ", kMigComputeSlices));
  }
  return absl::OkStatus();
}

std::vector<int> FreeMigStarts(const GpuType& type, const std::vector<MigPlacement>& layout,
                               const MigProfile& profile) {
  std::vector<int> out;
  std::vector<MigPlacement> candidate = layout;
  candidate.push_back({profile.name, 0});
  for (int start : profile.valid_starts) {
    candidate.back().start = start;
    if (ValidateMigLayout(type, candidate).ok()) out.push_back(start);
  }
  return out;
}

}  // namespace gpucloud
