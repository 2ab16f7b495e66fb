// `gpuctl cost [--by namespace|queue|job|class|pool] [--since T] [--until T] [-n NS]
// [-o table|json|csv]`: what jobs cost, used and emitted in a time window, from the server's
// usage records (api/usage.h: one per ended attempt, kept after the job is deleted) and the
// attempts running now (counted up to now). An attempt that overlaps the window counts for the
// part inside it: dollars, GPU-hours and energy in proportion to the time.
// CostRows is pure (tests); RunCost reads the records and the jobs. Thread-compatible.
#ifndef GPUCLOUD_CLI_COST_COMMAND_H_
#define GPUCLOUD_CLI_COST_COMMAND_H_

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/client.h"
#include "api/usage.h"
#include "core/tco.h"

namespace gpucloud::cli {

struct CostRow {
  std::string key;  // the group: a namespace, queue, "ns/job", billing class or pool
  // Dollars by billing class (empty when grouped by pool: a pool has one class).
  std::map<std::string, double> by_class;
  double total = 0;
  int64_t jobs = 0;       // distinct jobs (uids) with usage in the window
  double gpu_hours = 0;   // GPU equivalents x hours
  double energy_kwh = 0;  // GPU energy as the agents measured it
  double co2e_kg = 0;     // that energy at its pools' grid intensity and the PUE
  bool operator==(const CostRow&) const = default;
};

// The usage inside [since_ms, until_ms) grouped `by` ("namespace", "queue", "job", "class",
// "pool"), most expensive first; InvalidArgument naming --by for another grouping.
absl::StatusOr<std::vector<CostRow>> CostRows(const std::vector<api::AttemptUsage>& usage,
                                              const std::string& by, int64_t since_ms,
                                              int64_t until_ms);
// The rows as a table, JSON (a list of {BY, totalUsd, byClass, jobs, gpuHours, energyKwh,
// co2eKg}) or CSV.
std::string FormatCost(const std::vector<CostRow>& rows, const std::string& by,
                       const std::string& output);

// A --since/--until value as unix ms: a duration back from `now_ms` ("30d", "12h", "90m"), a
// date ("2026-12-01", midnight UTC) or an RFC 3339 time; InvalidArgument naming `flag`.
absl::StatusOr<int64_t> ParseCostTime(const std::string& flag, const std::string& text,
                                      int64_t now_ms);

// The records of the window (GET usage) and the jobs' current attempts (GET jobs), the latter
// dropped where a record of the same attempt exists (it ended between the two reads).
absl::StatusOr<std::vector<api::AttemptUsage>> ReadUsage(const api::Client& client,
                                                         const std::string& ns, int64_t since_ms,
                                                         int64_t until_ms, int64_t now_ms,
                                                         std::ostream& err);

struct CostFlags {
  std::string ns, by = "namespace", output = "table", since, until;
};
int RunCost(const api::Client& client, const CostFlags& flags, std::ostream& out,
            std::ostream& err);

// The records as core/tco.h's usage: one stretch per GPU type of each attempt (its energy split
// by GPUs); an attempt that names no type counts as `default_type`.
std::vector<TcoUsage> TcoUsageOf(const std::vector<api::AttemptUsage>& usage,
                                 const std::string& default_type);

// `gpuctl cost tco [--since 30d] [--until T] [-n NS] [--years N] [--ops-usd-per-gpu-year D]
// [--usd-per-kwh D] [--pue X] [-o table|json]`: the window's measured usage priced four ways
// (core/tco.h), at the catalog's list prices.
struct TcoFlags {
  std::string ns, output = "table", since = "30d", until;
  TcoOptions options;
};
int RunCostTco(const api::Client& client, const TcoFlags& flags, std::ostream& out,
               std::ostream& err);

// `gpuctl budget NAMESPACE [--monthly-usd N] [--alert-at 50,80,100] [--on-exceeded wait|stop]
// [--currency C] [--clear]`: shows the namespace's monthly budget and this month's alerts, or
// sets (replaces) or clears it on its Namespace object (server/budgets.h; admins). The server
// checks it: a bad field is refused naming it, and nothing changes.
struct BudgetFlags {
  std::string ns, monthly_usd, alert_at, on_exceeded, currency;
  bool clear = false;
};
int RunBudget(const api::Client& client, const BudgetFlags& flags, std::ostream& out,
              std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_COST_COMMAND_H_
