#include "core/job.h"

#include <utility>

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

namespace {

constexpr std::pair<LifecycleEvent, std::string_view> kEventNames[] = {
    {LifecycleEvent::kAny, "*"},
    {LifecycleEvent::kPodFailed, "PodFailed"},
    {LifecycleEvent::kPodEvicted, "PodEvicted"},
    {LifecycleEvent::kTaskCompleted, "TaskCompleted"},
    {LifecycleEvent::kTaskFailed, "TaskFailed"},
    {LifecycleEvent::kJobUnknown, "JobUnknown"},
};

constexpr std::pair<LifecycleAction, std::string_view> kActionNames[] = {
    {LifecycleAction::kRestartJob, "RestartJob"},
    {LifecycleAction::kCompleteJob, "CompleteJob"},
    {LifecycleAction::kAbortJob, "AbortJob"},
    {LifecycleAction::kTerminateJob, "TerminateJob"},
};

constexpr std::pair<GpuMode, std::string_view> kGpuModeNames[] = {
    {GpuMode::kNone, "none"},
    {GpuMode::kWhole, "whole"},
    {GpuMode::kMig, "mig"},
    {GpuMode::kShared, "shared"},
};

}  // namespace

std::string_view LifecycleEventName(LifecycleEvent e) {
  for (const auto& [value, name] : kEventNames) {
    if (value == e) return name;
  }
  return "*";
}

std::optional<LifecycleEvent> ParseLifecycleEvent(std::string_view text) {
  for (const auto& [value, name] : kEventNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

std::string_view LifecycleActionName(LifecycleAction a) {
  for (const auto& [value, name] : kActionNames) {
    if (value == a) return name;
  }
  return "RestartJob";
}

std::optional<LifecycleAction> ParseLifecycleAction(std::string_view text) {
  if (text == "RestartTask" || text == "RestartPod") return LifecycleAction::kRestartJob;
  for (const auto& [value, name] : kActionNames) {
    if (name == text) return value;
  }
  return std::nullopt;
}

std::string_view GpuModeName(GpuMode m) {
  for (const auto& [value, name] : kGpuModeNames) {
    if (value == m) return name;
  }
  return "none";
}

std::optional<GpuMode> ParseGpuMode(std::string_view text) {
  for (const auto& [value, name] : kGpuModeNames) {
    if (name == text) return value;
  }
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

std::string_view PullPolicyName(PullPolicy p) {
  switch (p) {
    case PullPolicy::kAlways:
      return "Always";
    case PullPolicy::kIfNotPresent:
      return "IfNotPresent";
    case PullPolicy::kNever:
      return "Never";
    case PullPolicy::kDefault:
      break;
  }
  return "";
}

std::optional<PullPolicy> ParsePullPolicy(std::string_view text) {
  if (text == "Always") return PullPolicy::kAlways;
  if (text == "IfNotPresent") return PullPolicy::kIfNotPresent;
  if (text == "Never") return PullPolicy::kNever;
  return std::nullopt;
}

PullPolicy ResolvePullPolicy(PullPolicy p, std::string_view image) {
  if (p != PullPolicy::kDefault) return p;
  if (image.find('@') != std::string_view::npos) return PullPolicy::kIfNotPresent;  // a digest
  // The tag follows the last ':' after the last '/' (a ':' before it is a registry's port).
  size_t slash = image.rfind('/');
  size_t colon = image.rfind(':');
  bool tagged =
      colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash);
  if (!tagged || image.substr(colon + 1) == "latest") return PullPolicy::kAlways;
  return PullPolicy::kIfNotPresent;
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
