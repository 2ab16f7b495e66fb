// Usage records: what one attempt of a job used and what it cost at one price, kept by the
// server under /usage/{namespace}/{uid}.{attempt}.{start_ms} when the attempt ends, or when a
// price change (a pool's priceSchedule) re-rates it (in the same transaction as the job's
// status, so a record exists exactly when the job's cost counts it), and kept after the job is
// deleted. An attempt at one price all along has one record. Served at GET
// .../namespaces/{ns}/usage and .../usage (every namespace); read by `gpuctl cost --since --until`,
// the server's budgets and `gpuctl cost tco`. An attempt that is still running is the same record
// ended now (AttemptUsageOf). Value types and pure functions; thread-compatible.
#ifndef GPUCLOUD_API_USAGE_H_
#define GPUCLOUD_API_USAGE_H_

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "api/job_status.h"

namespace gpucloud::api {

struct AttemptUsage {
  std::string ns;     // JSON "namespace"
  std::string job;    // the job's name
  std::string uid;    // the job's uid (a name may be reused after a delete)
  std::string queue;  // the job's queue when the attempt ran
  int attempt = 0;
  // Bound to its GPUs (or re-rated at a price change), and the GPUs released (the attempt
  // settled) or re-rated again. The attempt's energy is on its last record.
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  bool spot_tolerant = false;  // the job accepted spot capacity (TCO's spot scenario)
  double gpus = 0;             // GPU equivalents held (a share its fraction, MIG its slices)
  std::map<std::string, double> gpus_by_type;  // GPU equivalents by GPU type
  // Dollars per hour while it ran, by billing class and by node pool ("" for nodes in no pool).
  std::map<std::string, double> usd_per_hour;
  std::map<std::string, double> usd_per_hour_by_pool;
  double energy_j = 0;        // its tasks' GPU energy, as the agents measured it (0: not measured)
  double co2e_g_per_kwh = 0;  // grams of CO2e per kWh of that energy (grid intensity x PUE)
  double co2e_g() const { return energy_j / 3.6e6 * co2e_g_per_kwh; }
  bool operator==(const AttemptUsage&) const = default;

  double hours() const { return end_ms > start_ms ? (end_ms - start_ms) / 3.6e6 : 0.0; }
  // The part of [start_ms, end_ms) inside [since_ms, until_ms), in hours (0 when none).
  double HoursIn(int64_t since_ms, int64_t until_ms) const;
};

// The store key of a record.
std::string UsageKey(const AttemptUsage& u);

nlohmann::json UsageToJson(const AttemptUsage& u);
// InvalidArgument naming the field ("usage.startMs: must be an integer").
absl::StatusOr<AttemptUsage> UsageFromJson(const nlohmann::json& j);

// The current attempt of job `job` (an API object: metadata, spec, status) as a record that ends
// at `now_ms`; nullopt when the job holds no billed GPUs now.
std::optional<AttemptUsage> AttemptUsageOf(const nlohmann::json& job, int64_t now_ms);

// Whether a job document accepts spot capacity (spec.billing: spot).
bool SpotTolerant(const nlohmann::json& job);

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_USAGE_H_
