#include "core/queue.h"

#include "core/node_pool.h"

namespace gpucloud {

std::string_view QueueOrderingName(QueueOrdering o) {
  switch (o) {
    case QueueOrdering::kSjf:
      return "sjf";
    case QueueOrdering::kLas:
      return "las";
    case QueueOrdering::kDlas:
      return "dlas";
    case QueueOrdering::kFifo:
      break;
  }
  return "fifo";
}

std::optional<QueueOrdering> ParseQueueOrdering(std::string_view text) {
  if (text == "fifo") return QueueOrdering::kFifo;
  if (text == "sjf") return QueueOrdering::kSjf;
  if (text == "las") return QueueOrdering::kLas;
  if (text == "dlas") return QueueOrdering::kDlas;
  return std::nullopt;
}

int64_t BillingClassPricePercent(BillingClass c) {
  switch (c) {
    case BillingClass::kReserved:
      return 60;
    case BillingClass::kSpot:
      return 30;
    case BillingClass::kOnDemand:
      break;
  }
  return 100;
}

MicroUsd EffectivePricePerGpuHour(const NodePoolSpec& pool, const GpuCatalog& catalog) {
  if (pool.price_per_gpu_hour) return *pool.price_per_gpu_hour;
  const GpuType* type = catalog.Find(pool.gpu_type);
  if (type == nullptr) return MicroUsd(0);
  return MicroUsd(type->on_demand_price_per_hour.raw() * BillingClassPricePercent(pool.billing) /
                  100);
}

int PricePeriodAt(const NodePoolSpec& pool, int64_t now_ms) {
  for (size_t i = 0; i < pool.price_schedule.size(); ++i) {
    const PricePeriod& p = pool.price_schedule[i];
    if (now_ms >= p.from_ms && (p.until_ms == 0 || now_ms < p.until_ms)) return static_cast<int>(i);
  }
  return -1;
}

MicroUsd EffectivePricePerGpuHourAt(const NodePoolSpec& pool, const GpuCatalog& catalog,
                                    int64_t now_ms) {
  const int i = PricePeriodAt(pool, now_ms);
  return i >= 0 ? pool.price_schedule[i].price_per_gpu_hour
                : EffectivePricePerGpuHour(pool, catalog);
}

}  // namespace gpucloud
