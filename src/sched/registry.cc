#include "sched/registry.h"

#include "core/text.h"
#include "sched/plugins/filters.h"

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

}  // namespace gpucloud::sched
