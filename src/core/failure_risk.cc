#include "core/failure_risk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpucloud {

double FailureRiskModel::Weight(RiskSignal kind, double amount) const {
  switch (kind) {
    case RiskSignal::kCorrectedEcc:
      return std::min(p_.max_corrected_ecc_burst, p_.weight_corrected_ecc * amount);
    case RiskSignal::kRowRemap:
      return p_.weight_row_remap * amount;
    case RiskSignal::kThermal:
      return p_.weight_thermal * amount;
    case RiskSignal::kWatchXid:
      return p_.weight_watch_xid * amount;
  }
  return 0;
}

double FailureRiskModel::Decay(int64_t t_ms) const {
  if (t_ms <= t_ms_ || p_.half_life_s <= 0) return 1.0;
  return std::exp2(-static_cast<double>(t_ms - t_ms_) / 1000.0 / p_.half_life_s);
}

void FailureRiskModel::Observe(RiskSignal kind, double amount, int64_t t_ms) {
  if (amount <= 0) return;
  double d = Decay(t_ms);
  for (int k = 0; k < kRiskSignalKinds; ++k) {
    score_[k] *= d;
    amount_[k] *= d;
  }
  t_ms_ = std::max(t_ms_, t_ms);
  score_[static_cast<int>(kind)] += Weight(kind, amount);
  amount_[static_cast<int>(kind)] += amount;
}

double FailureRiskModel::Score(int64_t t_ms) const {
  double sum = 0;
  for (double s : score_) sum += s;
  return sum * Decay(t_ms);
}

std::string FailureRiskModel::Explain(int64_t t_ms) const {
  double d = Decay(t_ms);
  static constexpr const char* kNames[kRiskSignalKinds] = {
      "corrected ECC errors", "rows remapped", "thermal excursions", "watch-class Xids"};
  std::vector<std::pair<double, std::string>> parts;
  for (int k = 0; k < kRiskSignalKinds; ++k) {
    if (score_[k] * d < 0.05) continue;
    parts.push_back(
        {score_[k] * d, fmt::format("{:.0f} {}", std::max(1.0, amount_[k] * d), kNames[k])});
  }
  std::sort(parts.rbegin(), parts.rend());
  std::string out =
      fmt::format("score {:.1f} {} {:g}", Score(t_ms), AtRisk(t_ms) ? ">=" : "<", p_.threshold);
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? ": " : ", ") + parts[i].second;
  if (!parts.empty()) out += fmt::format(" (decayed, half-life {:g} h)", p_.half_life_s / 3600);
  return out;
}

void FailureRiskModel::Reset() {
  score_ = {};
  amount_ = {};
}

}  // namespace gpucloud
