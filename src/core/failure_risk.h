// FailureRiskModel: predicts that one GPU is likely to fail soon from its health history, so
// that its jobs can checkpoint and move, and the GPU be cordoned, before the failure.
//
// The model is a decayed evidence score. Each precursor signal adds weight x amount; the
// weight of old evidence halves every `half_life_s`, so the score measures the recent rate of
// trouble (a trend), not a lifetime count that every old GPU eventually reaches:
//   score(t) = sum over signals i of weight(kind_i) * amount_i * 2^(-(t - t_i) / half_life)
// The GPU is at risk while score >= threshold. The signals, after what the field studies of
// large GPU fleets report as failure precursors (rising corrected ECC, row remapping, repeated
// thermal excursions, the Xids NVIDIA says to watch):
//   - corrected (single-bit) ECC errors: weight per error, a burst's share capped;
//   - rows remapped (a bank replaced a failing row);
//   - a thermal excursion (the GPU crossed `thermal margin` below its limit);
//   - a watch-class Xid: 63 (row remapping recorded), 92 (high single-bit rate), 94
//     (contained ECC error), 121 (C2C link corrected errors).
// One model per GPU, used by the node agent (on NVML's or the simulated backend's readings) and
// by the simulator (on injected precursors), so the precision and recall measured in the
// simulator are those of the code that runs on the nodes.
// Value type; not thread-safe.
#ifndef GPUCLOUD_CORE_FAILURE_RISK_H_
#define GPUCLOUD_CORE_FAILURE_RISK_H_

#include <array>
#include <cstdint>
#include <string>

namespace gpucloud {

enum class RiskSignal { kCorrectedEcc, kRowRemap, kThermal, kWatchXid };
inline constexpr int kRiskSignalKinds = 4;

struct RiskModelParams {
  double half_life_s = 6 * 3600;
  double threshold = 4.0;
  double weight_corrected_ecc = 0.02;    // per error
  double max_corrected_ecc_burst = 2.0;  // most one reading of corrected errors adds
  double weight_row_remap = 1.5;         // per row
  double weight_thermal = 0.5;           // per excursion
  double weight_watch_xid = 1.5;         // per Xid
};

class FailureRiskModel {
 public:
  explicit FailureRiskModel(RiskModelParams p = {}) : p_(p) {}
  // Adds a signal at `t_ms` (non-decreasing across calls; an earlier one counts as now).
  void Observe(RiskSignal kind, double amount, int64_t t_ms);
  double Score(int64_t t_ms) const;
  bool AtRisk(int64_t t_ms) const { return Score(t_ms) >= p_.threshold; }
  // "score 5.2 >= 4: 3 rows remapped, 140 corrected ECC errors (recent)": what the evidence is.
  std::string Explain(int64_t t_ms) const;
  // Forget everything (the GPU was replaced or reset).
  void Reset();
  const RiskModelParams& params() const { return p_; }

 private:
  double Weight(RiskSignal kind, double amount) const;
  double Decay(int64_t t_ms) const;
  RiskModelParams p_;
  // Per kind, as of `t_ms_`: decayed weighted evidence and decayed raw amounts (for Explain).
  std::array<double, kRiskSignalKinds> score_{};
  std::array<double, kRiskSignalKinds> amount_{};
  int64_t t_ms_ = 0;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_FAILURE_RISK_H_
