#include "agent/health.h"

#include <set>

#include "core/text.h"

namespace gpucloud::agent {

XidClass ClassifyXid(int xid) {
  static const std::set<int> kDrain = {46,  48,  62,  64,  74,  79,  95,  109, 110,
                                       119, 120, 136, 140, 143, 144, 145, 146, 147,
                                       148, 149, 150, 155, 156, 158, 160};
  static const std::set<int> kApplication = {13, 31, 43, 45};
  static const std::set<int> kWatch = {63, 68, 92, 94, 121};
  if (kDrain.contains(xid)) return XidClass::kDrain;
  if (kApplication.contains(xid)) return XidClass::kApplication;
  if (kWatch.contains(xid)) return XidClass::kWatch;
  return XidClass::kUnknown;
}

std::string DescribeXid(int xid) {
  static const std::map<int, std::string> kNames = {
      {13, "graphics engine exception"},
      {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},
      {45, "preemptive cleanup"},
      {48, "double-bit ECC error"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recorded"},
      {64, "ECC page retirement or row remapping failure"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {119, "GSP RPC timeout"},
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

bool HealthMonitor::UpdateRisk(int gpu, int64_t now_ms) {
  GpuCondition& c = gpus_[gpu];
  auto m = risk_.try_emplace(gpu, t_.risk).first;
  // Sticky, as unhealthy is: a GPU expected to fail stays out until the operator has looked
  // (uncordon: ResetAll), even when the evidence fades. An unhealthy GPU is no longer "at risk".
  bool at_risk = c.healthy && (c.at_risk || m->second.AtRisk(now_ms));
  // The evidence as it stood when the GPU was flagged: a text that changed with every sample
  // would make every heartbeat look like news to the server.
  if (at_risk == c.at_risk) return false;
  c.at_risk = at_risk;
  c.risk = at_risk ? m->second.Explain(now_ms) : "";
  return true;
}

bool HealthMonitor::OnXid(int gpu, int xid, int64_t now_ms) {
  XidClass k = ClassifyXid(xid);
  if (k == XidClass::kWatch && xid != 68) {  // 68: a video processor exception, not a precursor
    risk_.try_emplace(gpu, t_.risk).first->second.Observe(RiskSignal::kWatchXid, 1, now_ms);
    return UpdateRisk(gpu, now_ms);
  }
  if (k == XidClass::kApplication || k == XidClass::kWatch) return false;
  bool changed = MarkUnhealthy(gpu, DescribeXid(xid));
  return UpdateRisk(gpu, now_ms) || changed;
}

bool HealthMonitor::OnSamples(const std::vector<GpuSample>& samples, int gpu_count,
                              int64_t now_ms) {
  bool changed = false;
  std::set<int> answered;
  for (const GpuSample& s : samples) {
    answered.insert(s.index);
    gpus_.try_emplace(s.index);
    FailureRiskModel& model = risk_.try_emplace(s.index, t_.risk).first->second;
    Counters& k = counters_[s.index];
    // Increases of cumulative counters; a lower reading is a reset (volatile counters restart
    // with the driver), the new baseline.
    auto increase = [](std::optional<uint64_t>& last, std::optional<uint64_t> now) -> double {
      if (!now) return 0;
      double d = last && *now >= *last ? static_cast<double>(*now - *last) : 0;
      last = now;
      return d;
    };
    model.Observe(RiskSignal::kCorrectedEcc, increase(k.ecc_corrected, s.ecc_corrected), now_ms);
    model.Observe(RiskSignal::kRowRemap, increase(k.remapped_rows, s.remapped_rows), now_ms);
    if (s.temperature_c) {
      bool warm = *s.temperature_c >= t_.max_temperature_c - t_.thermal_margin_c;
      if (warm && !k.warm) model.Observe(RiskSignal::kThermal, 1, now_ms);
      k.warm = warm;
    }
    // A GPU reset (or driver reload) starts the energy counter again: evidence that a GPU
    // marked unhealthy may be fine now.
    if (s.energy_mj) {
      auto last = energy_mj_.find(s.index);
      if (last != energy_mj_.end() && *s.energy_mj < last->second && !gpus_[s.index].healthy) {
        gpus_[s.index] = {};
        hot_[s.index] = 0;
        model.Reset();
        changed = true;
      }
      energy_mj_[s.index] = *s.energy_mj;
    }
    if (s.ecc_uncorrected.value_or(0) > 0) {
      changed =
          MarkUnhealthy(s.index, Cat(*s.ecc_uncorrected, " uncorrectable ECC errors")) || changed;
    }
    if (s.temperature_c && *s.temperature_c >= t_.max_temperature_c) {
      if (++hot_[s.index] >= t_.hot_samples) {
        changed =
            MarkUnhealthy(s.index, Cat("overheating: ", *s.temperature_c, " C for ", hot_[s.index],
                                       " samples (limit ", t_.max_temperature_c, " C)")) ||
            changed;
      }
    } else {
      hot_[s.index] = 0;
    }
  }
  for (int g = 0; g < gpu_count; ++g) {
    if (!answered.contains(g))
      changed = MarkUnhealthy(g, "the GPU is lost (no answer from the driver)") || changed;
  }
  for (auto& [gpu, c] : gpus_) changed = UpdateRisk(gpu, now_ms) || changed;
  return changed;
}

bool HealthMonitor::ResetAll() {
  bool changed = false;
  for (auto& [gpu, c] : gpus_) {
    if (!c.healthy || c.at_risk) {
      c = {};
      changed = true;
    }
  }
  hot_.clear();
  // The operator looked at the GPUs: the evidence so far is answered for.
  for (auto& [gpu, m] : risk_) m.Reset();
  return changed;
}

}  // namespace gpucloud::agent
