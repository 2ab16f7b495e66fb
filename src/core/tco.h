// Total cost of ownership: measured GPU usage priced four ways, to answer "what should we buy?"
// (seed 003, 比较不同计费模式的TCO):
//   1. on-demand: every GPU-hour at the on-demand price;
//   2. reserved + on-demand: a reserved base (whole GPUs per type, paid for the whole window
//      whether used or not) and on-demand above it; the base is the one that costs least, found
//      on the usage's duration curve (it is where the share of time usage exceeds it equals the
//      reserved price over the on-demand price);
//   3. reserved + spot: the same for the usage of jobs that do not accept spot, and spot prices
//      for those that do;
//   4. owned: enough GPUs of each type for the peak, bought and amortized over N years (the
//      window's share of it), the energy at a price per kWh times the PUE (measured where the
//      usage says, else the board power for the GPU-hours), and a yearly operations cost per GPU.
// Pure functions over value types; thread-compatible.
#ifndef GPUCLOUD_CORE_TCO_H_
#define GPUCLOUD_CORE_TCO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/gpu_catalog.h"

namespace gpucloud {

// A stretch of GPU use: `gpus` GPU equivalents of `gpu_type` from start to end.
struct TcoUsage {
  std::string gpu_type;
  int64_t start_ms = 0, end_ms = 0;
  double gpus = 0;
  bool spot_tolerant = false;
  double energy_j = 0;  // measured GPU energy; 0: not measured (board power is assumed)
};

struct TcoPrices {                               // per GPU of one type
  double on_demand = 0, reserved = 0, spot = 0;  // dollars per GPU-hour
  double purchase = 0;                           // dollars, with its share of the server
  double watts = 0;                              // board power under load
};

struct TcoOptions {
  int64_t since_ms = 0, until_ms = 0;  // the window the usage is priced over
  double amortization_years = 4;
  double ops_per_gpu_year = 3'000;  // dollars: space, support, people
  double usd_per_kwh = 0.10;
  double pue = 1.5;
  std::map<std::string, TcoPrices> prices;  // by GPU type; a type missing: DefaultTcoPrices
};

// The defaults for a catalog type: its on-demand list price, reserved and spot at the billing
// classes' default discounts (core/node_pool.h), a purchase price and board power from public
// list prices and datasheets (docs/cost.md lists them). A type the table lacks: $0 purchase and
// 300 W.
TcoPrices DefaultTcoPrices(const GpuType& type);

struct TcoScenario {
  std::string name;  // "on-demand", "reserved+on-demand", "reserved+spot", "owned"
  double usd = 0;
  std::string how;  // what was bought: "reserved 12 x H100-80GB; on-demand 340 GPU-h"
};

struct TcoReport {
  std::vector<TcoScenario> scenarios;  // in the order above
  size_t cheapest = 0;                 // index into scenarios
  double gpu_hours = 0;
  std::map<std::string, double> peak_gpus;  // by type
  double hours = 0;                         // the window's
};

TcoReport ComputeTco(const std::vector<TcoUsage>& usage, const TcoOptions& options,
                     const GpuCatalog& catalog = GpuCatalog::Default());

// The report as a table with the cheapest marked and a last line saying by how much it beats
// on-demand and the next best.
std::string FormatTco(const TcoReport& report);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_TCO_H_
