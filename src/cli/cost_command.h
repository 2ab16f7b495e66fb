// `gpuctl cost [--by namespace|queue|job|class] [-n NS] [-o table|json|csv]`: what jobs have
// cost, from their statuses (the server prices each attempt at its nodes' pools' prices from
// binding to its end; the current attempt is counted up to now), grouped. Jobs that were
// deleted are not in it (their cost is in the server's gpucloud_cost_usd_total).
// CostRows is pure (tests); RunCost reads the jobs. Thread-compatible.
#ifndef GPUCLOUD_CLI_COST_COMMAND_H_
#define GPUCLOUD_CLI_COST_COMMAND_H_

#include <cstdint>
#include <iosfwd>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/client.h"

namespace gpucloud::cli {

struct CostRow {
  std::string key;                         // the group: a namespace, queue, "ns/job" or class
  std::map<std::string, double> by_class;  // dollars by billing class
  double total = 0;
  int64_t jobs = 0;
  bool operator==(const CostRow&) const = default;
};

// The jobs (API objects) grouped `by` ("namespace", "queue", "job", "class"), most expensive
// first; InvalidArgument naming --by for another grouping.
absl::StatusOr<std::vector<CostRow>> CostRows(const std::vector<nlohmann::json>& jobs,
                                              const std::string& by, int64_t now_ms);
// The rows as a table, JSON (a list of {key, total, byClass, jobs}) or CSV.
std::string FormatCost(const std::vector<CostRow>& rows, const std::string& by,
                       const std::string& output);

int RunCost(const api::Client& client, const std::string& ns, const std::string& by,
            const std::string& output, std::ostream& out, std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_COST_COMMAND_H_
