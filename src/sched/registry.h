// The plugin registry: built-in plugins by name, so that a scheduler profile (a list of names,
// later read from YAML) chooses which run. Stateless functions; thread-safe.
#ifndef GPUCLOUD_SCHED_REGISTRY_H_
#define GPUCLOUD_SCHED_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sched/plugin.h"

namespace gpucloud::sched {

// Names of every built-in filter plugin, in their default order.
std::vector<std::string> FilterPluginNames();
// The filter named `name`; NotFound naming the known ones otherwise.
absl::StatusOr<std::unique_ptr<FilterPlugin>> MakeFilterPlugin(std::string_view name);
// Every built-in filter, in the default order.
std::vector<std::unique_ptr<FilterPlugin>> DefaultFilters();

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_REGISTRY_H_
