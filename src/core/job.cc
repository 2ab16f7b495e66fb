#include "core/job.h"

namespace gpucloud {

std::string_view BillingClassName(BillingClass c) {
  switch (c) {
    case BillingClass::kReserved:
      return "reserved";
    case BillingClass::kSpot:
      return "spot";
    case BillingClass::kOnDemand:
      break;
  }
  return "on-demand";
}

std::optional<BillingClass> ParseBillingClass(std::string_view text) {
  if (text == "on-demand") return BillingClass::kOnDemand;
  if (text == "reserved") return BillingClass::kReserved;
  if (text == "spot") return BillingClass::kSpot;
  return std::nullopt;
}

std::string_view GpuSharingName(GpuSharing s) {
  return s == GpuSharing::kMps ? "mps" : "time-slicing";
}

std::optional<GpuSharing> ParseGpuSharing(std::string_view text) {
  if (text == "time-slicing") return GpuSharing::kTimeSlicing;
  if (text == "mps") return GpuSharing::kMps;
  return std::nullopt;
}

MilliGpu GpuRequest::PerReplicaGpus() const {
  switch (mode) {
    case GpuMode::kWhole:
      return WholeGpus(count);
    case GpuMode::kShared:
      return fraction;
    case GpuMode::kMig:
    case GpuMode::kNone:
      break;
  }
  return MilliGpu(0);
}

int32_t JobSpec::TotalReplicas() const {
  int32_t total = 0;
  for (const TaskSpec& t : tasks) total += t.replicas;
  return total;
}

int32_t JobSpec::GangSize() const { return min_available > 0 ? min_available : TotalReplicas(); }

MilliGpu JobSpec::TotalGpus() const {
  MilliGpu total;
  for (const TaskSpec& t : tasks) total += t.resources.gpu.PerReplicaGpus() * t.replicas;
  return total;
}

}  // namespace gpucloud
