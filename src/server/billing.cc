#include "server/billing.h"

#include <algorithm>
#include <vector>

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

NodePrice PriceBook::Of(const Node& node) const {
  if (const NodePool* p = Pool(node.pool)) {
    return {EffectivePricePerGpuHour(p->spec, *catalog_), p->spec.billing};
  }
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
  for (sched::NodeIndex n = 0; n < state.node_count(); ++n) {
    const Node& node = state.node(n);
    const double idle = std::max(0.0, static_cast<double>(node.gpus.size()) - used[n]);
    out[node.pool] += idle * static_cast<double>(prices.Of(node).per_gpu_hour.raw()) / 1e6;
  }
  return out;
}

}  // namespace gpucloud::server
