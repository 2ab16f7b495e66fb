#include "sched/registry.h"

#include "core/text.h"
#include "sched/plugins/filters.h"
#include "sched/plugins/scores.h"

namespace gpucloud::sched {
namespace {

struct FilterEntry {
  std::string_view name;
  std::unique_ptr<FilterPlugin> (*make)();
};

// Cheap, selective checks first.
constexpr FilterEntry kFilters[] = {
    {"NodeHealth", NewNodeHealthFilter},     {"GpuType", NewGpuTypeFilter},
    {"NodeSelector", NewNodeSelectorFilter}, {"TaintToleration", NewTaintTolerationFilter},
    {"CudaVersion", NewCudaVersionFilter},
};

}  // namespace

std::vector<std::string> FilterPluginNames() {
  std::vector<std::string> out;
  for (const FilterEntry& e : kFilters) out.emplace_back(e.name);
  return out;
}

absl::StatusOr<std::unique_ptr<FilterPlugin>> MakeFilterPlugin(std::string_view name) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return e.make();
  }
  return absl::NotFoundError(
      Cat("unknown filter plugin \"", name, "\" (known: ", Join(FilterPluginNames(), ", "), ")"));
}

std::vector<std::unique_ptr<FilterPlugin>> DefaultFilters() {
  std::vector<std::unique_ptr<FilterPlugin>> out;
  for (const FilterEntry& e : kFilters) out.push_back(e.make());
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<FilterPlugin>>> MakeFilters(
    const std::vector<std::string>& names) {
  if (names.empty()) return DefaultFilters();
  std::vector<std::unique_ptr<FilterPlugin>> out;
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == names[i]) {
        return absl::InvalidArgumentError(Cat("filter plugin ", names[i], " is listed twice"));
      }
    }
    absl::StatusOr<std::unique_ptr<FilterPlugin>> f = MakeFilterPlugin(names[i]);
    if (!f.ok()) return f.status();
    out.push_back(std::move(*f));
  }
  return out;
}

std::vector<std::string> ScorePluginNames() { return {"BinPack", "Fragmentation"}; }

absl::StatusOr<std::vector<WeightedScore>> MakeScorePlugins(
    const std::vector<ScorePluginConfig>& configs) {
  std::vector<WeightedScore> out;
  for (size_t i = 0; i < configs.size(); ++i) {
    const ScorePluginConfig& c = configs[i];
    for (size_t j = 0; j < i; ++j) {
      if (configs[j].name == c.name) {
        return absl::InvalidArgumentError(Cat("score plugin ", c.name, " is listed twice"));
      }
    }
    if (c.weight < 0) {
      return absl::InvalidArgumentError(Cat("score plugin ", c.name, ": weight must be >= 0"));
    }
    if (!c.workload.empty() && c.name != "Fragmentation") {
      return absl::InvalidArgumentError(
          Cat("score plugin ", c.name, ": only Fragmentation takes a workload"));
    }
    std::unique_ptr<ScorePlugin> p;
    if (c.name == "BinPack") p = NewBinPackScore();
    if (c.name == "Fragmentation") p = NewFragmentationScore(c.workload);
    if (!p) {
      return absl::NotFoundError(Cat("unknown score plugin \"", c.name,
                                     "\" (known: ", Join(ScorePluginNames(), ", "), ")"));
    }
    if (c.weight > 0) out.push_back({std::move(p), c.weight});
  }
  return out;
}

}  // namespace gpucloud::sched
