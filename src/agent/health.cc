#include "agent/health.h"

#include <set>

#include "core/text.h"

namespace gpucloud::agent {

XidClass ClassifyXid(int xid) {
  static const std::set<int> kDrain = {46,  48,  62,  64,  74,  79,  95,  109, 110, 119, 120, 136,
                                       140, 143, 144, 145, 146, 147, 148, 149, 150, 155, 156, 158, 160};
  static const std::set<int> kApplication = {13, 31, 43, 45};
  static const std::set<int> kWatch = {63, 68, 92, 94, 121};
  if (kDrain.contains(xid)) return XidClass::kDrain;
  if (kApplication.contains(xid)) return XidClass::kApplication;
  if (kWatch.contains(xid)) return XidClass::kWatch;
  return XidClass::kUnknown;
}

std::string DescribeXid(int xid) {
  static const std::map<int, std::string> kNames = {
      {13, "graphics engine exception"}, {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},    {45, "preemptive cleanup"},
      {48, "double-bit ECC error"},      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recorded"},
      {64, "ECC page retirement or row remapping failure"},
      {74, "NVLink error"},              {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"}, {94, "contained ECC error"},
      {95, "uncontained ECC error"},     {119, "GSP RPC timeout"},
      {120, "GSP error"}};
  auto it = kNames.find(xid);
  return it == kNames.end() ? Cat("Xid ", xid) : Cat("Xid ", xid, " (", it->second, ")");
}

bool HealthMonitor::MarkUnhealthy(int gpu, std::string reason) {
  GpuCondition& c = gpus_[gpu];
  if (!c.healthy) return false;  // the first cause stays
  c = {false, std::move(reason)};
  return true;
}

bool HealthMonitor::OnXid(int gpu, int xid) {
  XidClass k = ClassifyXid(xid);
  if (k == XidClass::kApplication || k == XidClass::kWatch) return false;
  return MarkUnhealthy(gpu, DescribeXid(xid));
}

bool HealthMonitor::OnSamples(const std::vector<GpuSample>& samples, int gpu_count) {
  bool changed = false;
  std::set<int> answered;
  for (const GpuSample& s : samples) {
    answered.insert(s.index);
    gpus_.try_emplace(s.index);
    // A GPU reset (or driver reload) starts the energy counter again: evidence that a GPU
    // marked unhealthy may be fine now.
    if (s.energy_mj) {
      auto last = energy_mj_.find(s.index);
      if (last != energy_mj_.end() && *s.energy_mj < last->second && !gpus_[s.index].healthy) {
        gpus_[s.index] = {};
        hot_[s.index] = 0;
        changed = true;
      }
      energy_mj_[s.index] = *s.energy_mj;
    }
    if (s.ecc_uncorrected.value_or(0) > 0) {
      changed = MarkUnhealthy(s.index, Cat(*s.ecc_uncorrected, " uncorrectable ECC errors")) || changed;
    }
    if (s.temperature_c && *s.temperature_c >= t_.max_temperature_c) {
      if (++hot_[s.index] >= t_.hot_samples) {
        changed = MarkUnhealthy(s.index, Cat("overheating: ", *s.temperature_c, " C for ",
                                             hot_[s.index], " samples (limit ", t_.max_temperature_c,
                                             " C)")) ||
                  changed;
      }
    } else {
      hot_[s.index] = 0;
    }
  }
  for (int g = 0; g < gpu_count; ++g) {
    if (!answered.contains(g)) changed = MarkUnhealthy(g, "the GPU is lost (no answer from the driver)") || changed;
  }
  return changed;
}

bool HealthMonitor::ResetAll() {
  bool changed = false;
  for (auto& [gpu, c] : gpus_) {
    if (!c.healthy) {
      c = {};
      changed = true;
    }
  }
  hot_.clear();
  return changed;
}

}  // namespace gpucloud::agent
