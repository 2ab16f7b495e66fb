#include "core/tco.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/node_pool.h"
#include "core/text.h"

namespace gpucloud {
namespace {

constexpr double kHoursPerYear = 8'760;

// Purchase price per GPU (the card's street price times 1.3 for its share of the server,
// network and storage) and board power (the datasheet's maximum), by catalog name. Prices are
// public list or street prices at launch; see docs/cost.md for the sources.
struct HardwareDefaults {
  const char* name;
  double card_usd;
  double watts;
};
constexpr HardwareDefaults kHardware[] = {
    {"V100-16GB", 8'000, 300},  {"V100-32GB", 10'000, 300}, {"T4", 2'500, 70},
    {"A10", 3'500, 150},        {"L40S", 9'000, 350},       {"A100-40GB", 12'000, 400},
    {"A100-80GB", 16'000, 400}, {"H100-80GB", 30'000, 700}, {"H200-141GB", 35'000, 700},
    {"RTX-4090", 2'000, 450},
};
constexpr double kServerShare = 1.3;

// Piecewise-constant GPU use of one type over the window: (level, hours) segments.
struct Curve {
  std::vector<std::pair<double, double>> segments;
  double peak = 0;
  double gpu_hours = 0;
};

Curve CurveOf(const std::vector<const TcoUsage*>& usage, int64_t since, int64_t until) {
  std::vector<std::pair<int64_t, double>> edges;
  for (const TcoUsage* u : usage) {
    const int64_t from = std::max(u->start_ms, since), to = std::min(u->end_ms, until);
    if (to <= from || u->gpus <= 0) continue;
    edges.emplace_back(from, u->gpus);
    edges.emplace_back(to, -u->gpus);
  }
  std::sort(edges.begin(), edges.end());
  Curve c;
  double level = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    level += edges[i].second;
    if (i + 1 < edges.size() && edges[i + 1].first > edges[i].first && level > 1e-9) {
      const double hours = (edges[i + 1].first - edges[i].first) / 3.6e6;
      c.segments.emplace_back(level, hours);
      c.peak = std::max(c.peak, level);
      c.gpu_hours += level * hours;
    }
  }
  return c;
}

// The cheapest reserved base for `c` (whole GPUs) and what it costs with on-demand above it over
// a window of `window_h` hours: {base, dollars}.
std::pair<int64_t, double> BestReservedBase(const Curve& c, double window_h, const TcoPrices& p) {
  // Segments by level, with suffix sums of hours and of level x hours above each.
  std::vector<std::pair<double, double>> s = c.segments;
  std::sort(s.begin(), s.end());
  std::vector<double> hours(s.size() + 1, 0), level_hours(s.size() + 1, 0);
  for (size_t i = s.size(); i-- > 0;) {
    hours[i] = hours[i + 1] + s[i].second;
    level_hours[i] = level_hours[i + 1] + s[i].first * s[i].second;
  }
  auto cost = [&](int64_t base) {
    // The segments above the base run partly on demand.
    size_t i =
        std::upper_bound(s.begin(), s.end(), std::pair<double, double>(base, 1e300)) - s.begin();
    const double above = level_hours[i] - static_cast<double>(base) * hours[i];
    return static_cast<double>(base) * window_h * p.reserved + above * p.on_demand;
  };
  std::pair<int64_t, double> best{0, cost(0)};
  const int64_t top = static_cast<int64_t>(std::ceil(c.peak - 1e-9));
  for (int64_t base = 1; base <= top; ++base) {
    if (double d = cost(base); d < best.second - 1e-9) best = {base, d};
  }
  return best;
}

std::string Gpus(double n) { return fmt::format("{:.0f}", n); }

}  // namespace

TcoPrices DefaultTcoPrices(const GpuType& type) {
  TcoPrices p;
  const double od = static_cast<double>(type.on_demand_price_per_hour.raw()) / 1e6;
  p.on_demand = od;
  p.reserved = od * BillingClassPricePercent(BillingClass::kReserved) / 100.0;
  p.spot = od * BillingClassPricePercent(BillingClass::kSpot) / 100.0;
  p.watts = 300;
  for (const HardwareDefaults& h : kHardware) {
    if (type.name == h.name) {
      p.purchase = h.card_usd * kServerShare;
      p.watts = h.watts;
    }
  }
  return p;
}

TcoReport ComputeTco(const std::vector<TcoUsage>& usage, const TcoOptions& o,
                     const GpuCatalog& catalog) {
  TcoReport r;
  r.hours = std::max<int64_t>(0, o.until_ms - o.since_ms) / 3.6e6;
  std::map<std::string, std::vector<const TcoUsage*>> all, firm;  // firm: not spot-tolerant
  for (const TcoUsage& u : usage) {
    all[u.gpu_type].push_back(&u);
    if (!u.spot_tolerant) firm[u.gpu_type].push_back(&u);
  }
  TcoScenario od{"on-demand", 0, ""}, res{"reserved+on-demand", 0, ""},
      spot{"reserved+spot", 0, ""}, owned{"owned", 0, ""};
  std::vector<std::string> res_how, spot_how, owned_how;
  for (const auto& [type, list] : all) {
    TcoPrices p;
    if (auto it = o.prices.find(type); it != o.prices.end()) {
      p = it->second;
    } else if (const GpuType* t = catalog.Find(type)) {
      p = DefaultTcoPrices(*t);
    }
    const Curve c = CurveOf(list, o.since_ms, o.until_ms);
    r.gpu_hours += c.gpu_hours;
    r.peak_gpus[type] = c.peak;
    od.usd += c.gpu_hours * p.on_demand;
    auto [base, cost] = BestReservedBase(c, r.hours, p);
    res.usd += cost;
    res_how.push_back(Cat(base, " x ", type));
    const Curve f = CurveOf(firm[type], o.since_ms, o.until_ms);
    auto [firm_base, firm_cost] = BestReservedBase(f, r.hours, p);
    spot.usd += firm_cost + (c.gpu_hours - f.gpu_hours) * p.spot;
    spot_how.push_back(Cat(firm_base, " x ", type, " reserved, ",
                           fmt::format("{:.0f}", c.gpu_hours - f.gpu_hours), " GPU-h spot"));
    // Owned: the peak's GPUs, their window's share of the purchase and of the operations,
    // and the energy.
    const double n = std::ceil(c.peak - 1e-9);
    const double years = r.hours / kHoursPerYear;
    double kwh = 0;
    for (const TcoUsage* u : list) {
      const int64_t from = std::max(u->start_ms, o.since_ms), to = std::min(u->end_ms, o.until_ms);
      if (to <= from) continue;
      const double h = (to - from) / 3.6e6,
                   part = h / std::max(1e-12, (u->end_ms - u->start_ms) / 3.6e6);
      kwh += u->energy_j > 0 ? u->energy_j * part / 3.6e6 : u->gpus * h * p.watts / 1000.0;
    }
    owned.usd += n * p.purchase * years / o.amortization_years + n * o.ops_per_gpu_year * years +
                 kwh * o.pue * o.usd_per_kwh;
    owned_how.push_back(Cat(Gpus(n), " x ", type));
  }
  res.how = Cat("reserved ", Join(res_how, ", "), "; on-demand above");
  spot.how = Join(spot_how, "; ");
  od.how = fmt::format("{:.0f} GPU-h", r.gpu_hours);
  owned.how = Cat("bought ", Join(owned_how, ", "),
                  fmt::format(" (the peak), over {:g} years, power at ${:.2f}/kWh x PUE {:g}",
                              o.amortization_years, o.usd_per_kwh, o.pue));
  r.scenarios = {od, res, spot, owned};
  for (size_t i = 1; i < r.scenarios.size(); ++i) {
    if (r.scenarios[i].usd < r.scenarios[r.cheapest].usd - 1e-9) r.cheapest = i;
  }
  return r;
}

std::string FormatTco(const TcoReport& r) {
  std::string out = fmt::format("{:<20} {:>14} {:>10}  {}\n", "SCENARIO", "COST", "VS OD", "HOW");
  const double od = r.scenarios.empty() ? 0 : r.scenarios[0].usd;
  for (size_t i = 0; i < r.scenarios.size(); ++i) {
    const TcoScenario& s = r.scenarios[i];
    const std::string vs = od > 0 ? fmt::format("{:+.0f}%", (s.usd - od) / od * 100) : "-";
    out += fmt::format("{:<20} {:>14} {:>10}  {}{}\n", s.name, fmt::format("${:.2f}", s.usd), vs,
                       s.how, i == r.cheapest ? "  <- cheapest" : "");
  }
  if (r.scenarios.empty() || r.gpu_hours <= 0) return out + "no GPU use in the window\n";
  double next = -1;
  for (size_t i = 0; i < r.scenarios.size(); ++i) {
    if (i != r.cheapest && (next < 0 || r.scenarios[i].usd < next)) next = r.scenarios[i].usd;
  }
  const TcoScenario& best = r.scenarios[r.cheapest];
  out += fmt::format(
      "{:.0f} GPU-hours over {:.0f} hours: {} is cheapest, ${:.2f} ({:.0f}%) less than "
      "on-demand and ${:.2f} less than the next best\n",
      r.gpu_hours, r.hours, best.name, od - best.usd, od > 0 ? (od - best.usd) / od * 100 : 0.0,
      next - best.usd);
  return out;
}

}  // namespace gpucloud
