// Node pool specs: a group of identical GPU machines with a billing class and a price, grown
// and shrunk between min and max nodes by the autoscaler (a later component). Specs only.
// Value types; thread-compatible.
#ifndef GPUCLOUD_CORE_NODE_POOL_H_
#define GPUCLOUD_CORE_NODE_POOL_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/job.h"
#include "core/object_meta.h"
#include "core/quantity.h"

namespace gpucloud {

inline constexpr std::string_view kStaticProvider = "static";

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // "NoSchedule", "PreferNoSchedule", "NoExecute"
  bool operator==(const Taint&) const = default;
};

// The highest grid carbon intensity a pool may name (gCO2e/kWh; coal is about 1,000).
inline constexpr int32_t kMaxCarbonIntensity = 2'000;

// A price that holds for a period: spot prices that change over time (a cloud's price feed
// written into the pool). `until_ms` 0: open-ended (the last period only).
struct PricePeriod {
  int64_t from_ms = 0;
  int64_t until_ms = 0;
  MicroUsd price_per_gpu_hour;
  bool operator==(const PricePeriod&) const = default;
};

struct NodePoolSpec {
  std::string gpu_type;  // catalog name
  int32_t gpus_per_node = 8;
  int32_t min_nodes = 0;
  int32_t max_nodes = 1;
  BillingClass billing = BillingClass::kOnDemand;
  std::optional<MicroUsd> price_per_gpu_hour;  // unset = catalog price with the class discount
  std::string provider = std::string(kStaticProvider);
  std::map<std::string, std::string> labels;  // added to every node of the pool
  std::vector<Taint> taints;
  // The grid's carbon intensity where the pool's machines run, in grams of CO2 equivalent per
  // kWh; 0: the server's default (--carbon-intensity).
  int32_t carbon_intensity = 0;
  // Prices over time, contiguous and ascending (the manifest refuses gaps and overlaps); outside
  // them, price_per_gpu_hour (or the catalog's).
  std::vector<PricePeriod> price_schedule;
  bool operator==(const NodePoolSpec&) const = default;
};

struct NodePool {
  ObjectMeta metadata;
  NodePoolSpec spec;
  bool operator==(const NodePool&) const = default;
};

// How GPU energy becomes carbon: the data centre's power usage effectiveness (facility energy
// over IT energy; 1.0 counts the GPUs' energy alone) and the grid's intensity (gCO2e/kWh) for
// pools that name none (NodePoolSpec::carbon_intensity; 0: unknown).
struct CarbonOptions {
  double pue = 1.0;
  int32_t default_intensity = 0;
};

// Default discount of a billing class against the on-demand price, in percent of that price:
// on-demand 100, reserved 60 (the seeds: 30-50% off), spot 30 (the seeds: 70-90% off).
int64_t BillingClassPricePercent(BillingClass c);

// The pool's price per GPU-hour: its own, or the catalog's on-demand price of its type times the
// class's percentage. Zero for a type the catalog does not know.
MicroUsd EffectivePricePerGpuHour(const NodePoolSpec& pool, const GpuCatalog& catalog);
// The same at `now_ms`: the schedule's period that holds then, if any.
MicroUsd EffectivePricePerGpuHourAt(const NodePoolSpec& pool, const GpuCatalog& catalog,
                                    int64_t now_ms);
// The index of the schedule's period that holds at `now_ms`; -1 for none.
int PricePeriodAt(const NodePoolSpec& pool, int64_t now_ms);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_NODE_POOL_H_
