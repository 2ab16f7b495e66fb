// Billing arithmetic on the server: what a node's GPUs cost per hour (its pool's price and
// billing class, NodePool; a node in no known pool at its GPU type's catalog on-demand price),
// and so what an allocation costs per hour, by billing class. GPU equivalents are
// sched::GpuShareOf's: a whole GPU 1, a share its fraction, a MIG instance its compute slices
// out of the GPU's (OpenCost bills fractions and MIG as whole GPUs: opencost#3828; we do not).
// Value types and pure functions; thread-compatible.
#ifndef GPUCLOUD_SERVER_BILLING_H_
#define GPUCLOUD_SERVER_BILLING_H_

#include <map>
#include <optional>
#include <string>

#include "api/usage.h"
#include "core/gpu_catalog.h"
#include "core/node.h"
#include "core/node_pool.h"
#include "sched/cluster_state.h"
#include "server/job_status.h"
#include "server/object_cache.h"

namespace gpucloud::server {

struct NodePrice {
  MicroUsd per_gpu_hour;
  BillingClass billing = BillingClass::kOnDemand;
};

class PriceBook {
 public:
  // Borrows `catalog`.
  PriceBook(std::map<std::string, NodePool> pools, const GpuCatalog& catalog)
      : pools_(std::move(pools)), catalog_(&catalog) {}
  // Prices from now on are those at `now_ms` (a pool's priceSchedule); 0 until set: the pools'
  // fixed prices.
  void At(int64_t now_ms) { now_ms_ = now_ms; }
  // The price of one of `node`'s GPUs per hour.
  NodePrice Of(const Node& node) const;
  // A pool's price per GPU-hour now.
  MicroUsd PriceOf(const NodePool& pool) const;
  // Which schedule periods hold now ("pool:index;" for each pool with a schedule): when it
  // changes, prices changed.
  std::string Epoch() const;
  // The pool named `name`, or null.
  const NodePool* Pool(const std::string& name) const;
  const std::map<std::string, NodePool>& pools() const { return pools_; }
  const GpuCatalog& catalog() const { return *catalog_; }

 private:
  std::map<std::string, NodePool> pools_;
  const GpuCatalog* catalog_;
  int64_t now_ms_ = 0;
};

// The NodePools cached in `cache` (a "/nodepools/" ObjectCache), by name; one that does not
// parse is skipped (the API refuses such writes).
std::map<std::string, NodePool> NodePoolsOf(const ObjectCache& cache);

// What `a` costs per hour in `state`, by billing class name ("on-demand", "reserved", "spot").
std::map<std::string, double> UsdPerHour(const sched::ClusterState& state,
                                         const sched::Allocation& a, const PriceBook& prices);

// The same rate by node pool ("" for nodes in no pool).
std::map<std::string, double> UsdPerHourByPool(const sched::ClusterState& state,
                                               const sched::Allocation& a, const PriceBook& prices);

// Grams of CO2e per kWh of `a`'s GPU energy: its nodes' pools' intensities weighted by the GPU
// equivalents it holds on each, times the PUE.
double Co2eGramsPerKwh(const sched::ClusterState& state, const sched::Allocation& a,
                       const PriceBook& prices, const CarbonOptions& carbon);

// The usage record of the attempt that `before` held and `after` settled (SettleAttempt) at
// `now_ms`, of job {ns}/{name} (uid, queue, whether it accepts spot); nullopt when `before`
// held no GPUs. Its energy is what the settle added.
struct JobIdentity {
  std::string ns, name, uid, queue;
  bool spot_tolerant = false;
};
std::optional<api::AttemptUsage> EndedAttemptUsage(const JobIdentity& job, const JobStatus& before,
                                                   const JobStatus& after, int64_t now_ms);

// `s`'s running attempt re-rated at `now_ms` (a pool's price changed): the part at the old
// price is added to s.cost_usd and returned as its usage record (energy stays with the
// attempt's last record), and `s` is billed at `rate` (by class) and `by_pool` from now.
// nullopt (and `s` unchanged) when the attempt holds no billed GPUs.
std::optional<api::AttemptUsage> Rerate(const JobIdentity& job, JobStatus& s,
                                        std::map<std::string, double> rate,
                                        std::map<std::string, double> by_pool, int64_t now_ms);

// What the GPUs of `state`'s nodes that no job holds (free, unhealthy or held by a
// placeholder) cost per hour, by pool name ("" for nodes in no pool): idle cost. A reserved
// pool's commitment (minNodes machines) is paid whether its machines are up or not: the GPUs
// it commits to that are not in `state` are idle too.
std::map<std::string, double> IdleUsdPerHourByPool(const sched::ClusterState& state,
                                                   const PriceBook& prices);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_BILLING_H_
