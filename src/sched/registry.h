// The plugin registry: built-in plugins by name, so that a scheduler profile (a
// SchedulerConfiguration file, core/sched_config.h) chooses which run and with what weights.
// Stateless functions; thread-safe.
#ifndef GPUCLOUD_SCHED_REGISTRY_H_
#define GPUCLOUD_SCHED_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/sched_config.h"
#include "sched/plugin.h"

namespace gpucloud::sched {

// Names of every built-in filter plugin, in their default order.
std::vector<std::string> FilterPluginNames();
// The filter named `name`; NotFound naming the known ones otherwise.
absl::StatusOr<std::unique_ptr<FilterPlugin>> MakeFilterPlugin(std::string_view name);
// Every built-in filter, in the default order.
std::vector<std::unique_ptr<FilterPlugin>> DefaultFilters();
// The filters named (every built-in one when `names` is empty); NotFound for an unknown name,
// InvalidArgument for a name given twice.
absl::StatusOr<std::vector<std::unique_ptr<FilterPlugin>>> MakeFilters(
    const std::vector<std::string>& names);

// Names of every built-in score plugin.
std::vector<std::string> ScorePluginNames();
// The score plugins configured, with their weights; NotFound for an unknown name,
// InvalidArgument for a duplicate, a weight below 0 or a workload on a plugin other than
// Fragmentation.
absl::StatusOr<std::vector<WeightedScore>> MakeScorePlugins(
    const std::vector<ScorePluginConfig>& configs);

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_REGISTRY_H_
