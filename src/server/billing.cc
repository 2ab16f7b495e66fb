#include "server/billing.h"

#include <algorithm>
#include <vector>

#include "core/text.h"
#include "manifest/manifest.h"

namespace gpucloud::server {

std::map<std::string, NodePool> NodePoolsOf(const ObjectCache& cache) {
  std::map<std::string, NodePool> pools;
  for (const auto& [key, obj] : cache.objects()) {
    manifest::ParseResult p = manifest::ParseStoredManifest(obj.doc, key);
    if (!p.ok() || p.manifests.size() != 1) continue;
    if (const NodePool* pool = std::get_if<NodePool>(&p.manifests[0].object)) {
      pools[pool->metadata.name] = *pool;
    }
  }
  return pools;
}

MicroUsd PriceBook::PriceOf(const NodePool& pool) const {
  return EffectivePricePerGpuHourAt(pool.spec, *catalog_, now_ms_);
}

std::string PriceBook::Epoch() const {
  std::string epoch;
  for (const auto& [name, pool] : pools_) {
    if (!pool.spec.price_schedule.empty()) {
      epoch += Cat(name, ":", PricePeriodAt(pool.spec, now_ms_), ";");
    }
  }
  return epoch;
}

NodePrice PriceBook::Of(const Node& node) const {
  if (const NodePool* p = Pool(node.pool)) return {PriceOf(*p), p->spec.billing};
  const GpuType* type = node.gpus.empty() ? nullptr : catalog_->Find(node.gpus[0].type);
  return {type ? type->on_demand_price_per_hour : MicroUsd(0), BillingClass::kOnDemand};
}

const NodePool* PriceBook::Pool(const std::string& name) const {
  auto it = pools_.find(name);
  return it == pools_.end() ? nullptr : &it->second;
}

std::map<std::string, double> UsdPerHour(const sched::ClusterState& state,
                                         const sched::Allocation& a, const PriceBook& prices) {
  std::map<std::string, double> out;
  for (const sched::ReplicaPlacement& r : a.replicas) {
    const NodePrice price = prices.Of(state.node(r.node));
    double gpus = 0;
    for (const sched::GpuAssignment& g : r.gpus) gpus += state.ShareOf(r.node, g).raw() / 1000.0;
    if (gpus > 0) {
      out[std::string(BillingClassName(price.billing))] +=
          gpus * static_cast<double>(price.per_gpu_hour.raw()) / 1e6;
    }
  }
  return out;
}

std::map<std::string, double> UsdPerHourByPool(const sched::ClusterState& state,
                                               const sched::Allocation& a,
                                               const PriceBook& prices) {
  std::map<std::string, double> out;
  for (const sched::ReplicaPlacement& r : a.replicas) {
    const Node& node = state.node(r.node);
    double gpus = 0;
    for (const sched::GpuAssignment& g : r.gpus) gpus += state.ShareOf(r.node, g).raw() / 1000.0;
    if (gpus > 0)
      out[node.pool] += gpus * static_cast<double>(prices.Of(node).per_gpu_hour.raw()) / 1e6;
  }
  return out;
}

double Co2eGramsPerKwh(const sched::ClusterState& state, const sched::Allocation& a,
                       const PriceBook& prices, const CarbonOptions& carbon) {
  double gpus = 0, weighted = 0;
  for (const sched::ReplicaPlacement& r : a.replicas) {
    const Node& node = state.node(r.node);
    const NodePool* pool = prices.Pool(node.pool);
    const int32_t intensity = pool != nullptr && pool->spec.carbon_intensity > 0
                                  ? pool->spec.carbon_intensity
                                  : carbon.default_intensity;
    for (const sched::GpuAssignment& g : r.gpus) {
      const double share = state.ShareOf(r.node, g).raw() / 1000.0;
      gpus += share;
      weighted += share * intensity;
    }
  }
  return gpus > 0 ? carbon.pue * weighted / gpus : 0.0;
}

std::optional<api::AttemptUsage> EndedAttemptUsage(const JobIdentity& job, const JobStatus& before,
                                                   const JobStatus& after, int64_t now_ms) {
  if (before.gpus <= 0 || after.gpus > 0 || before.scheduled_ms <= 0) return std::nullopt;
  api::AttemptUsage u;
  u.ns = job.ns;
  u.job = job.name;
  u.uid = job.uid;
  u.queue = job.queue;
  u.spot_tolerant = job.spot_tolerant;
  u.attempt = before.attempt;
  u.start_ms = before.BilledFrom();
  u.end_ms = std::max(now_ms, u.start_ms);
  u.gpus = before.gpus;
  u.gpus_by_type = before.gpus_by_type;
  u.usd_per_hour = before.usd_per_hour;
  u.usd_per_hour_by_pool = before.usd_per_hour_by_pool;
  u.energy_j = std::max(0.0, after.energy_j - before.energy_j);
  u.co2e_g_per_kwh = before.co2e_g_per_kwh;
  return u;
}

std::optional<api::AttemptUsage> Rerate(const JobIdentity& job, JobStatus& s,
                                        std::map<std::string, double> rate,
                                        std::map<std::string, double> by_pool, int64_t now_ms) {
  if (s.gpus <= 0 || s.scheduled_ms <= 0 || s.usd_per_hour.empty()) return std::nullopt;
  JobStatus settled = s;
  settled.gpus = 0;  // the part before now, as if it ended here (no energy: see above)
  std::optional<api::AttemptUsage> u = EndedAttemptUsage(job, s, settled, now_ms);
  const int64_t from = s.BilledFrom();
  if (now_ms > from) {
    for (const auto& [billing, r] : s.usd_per_hour) {
      s.cost_usd[billing] += r * static_cast<double>(now_ms - from) / 3.6e6;
    }
  }
  s.billed_from_ms = std::max(now_ms, from);
  s.usd_per_hour = std::move(rate);
  s.usd_per_hour_by_pool = std::move(by_pool);
  return u;
}

std::map<std::string, double> IdleUsdPerHourByPool(const sched::ClusterState& state,
                                                   const PriceBook& prices) {
  std::vector<double> used(state.node_count(), 0);
  for (const auto& [key, a] : state.allocations()) {
    if (a.placeholder) continue;
    for (const sched::ReplicaPlacement& r : a.replicas) {
      for (const sched::GpuAssignment& g : r.gpus) {
        used[r.node] += state.ShareOf(r.node, g).raw() / 1000.0;
      }
    }
  }
  std::map<std::string, double> out;
  std::map<std::string, int64_t> present;  // GPUs of each pool's nodes in the state
  for (sched::NodeIndex n = 0; n < state.node_count(); ++n) {
    const Node& node = state.node(n);
    const double idle = std::max(0.0, static_cast<double>(node.gpus.size()) - used[n]);
    out[node.pool] += idle * static_cast<double>(prices.Of(node).per_gpu_hour.raw()) / 1e6;
    present[node.pool] += static_cast<int64_t>(node.gpus.size());
  }
  // A reserved pool is a commitment: its minNodes machines are paid for whether they are up
  // or not; those not in the state (not registered, or not Ready) are idle.
  for (const auto& [name, pool] : prices.pools()) {
    if (pool.spec.billing != BillingClass::kReserved) continue;
    const int64_t committed =
        static_cast<int64_t>(pool.spec.min_nodes) * pool.spec.gpus_per_node - present[name];
    if (committed <= 0) continue;
    out[name] +=
        static_cast<double>(committed) * static_cast<double>(prices.PriceOf(pool).raw()) / 1e6;
  }
  return out;
}

}  // namespace gpucloud::server
