// Factories of the built-in filter plugins, one per file in this folder. Use the registry
// (sched/registry.h) to get them by name.
#ifndef GPUCLOUD_SCHED_PLUGINS_FILTERS_H_
#define GPUCLOUD_SCHED_PLUGINS_FILTERS_H_

#include <memory>

#include "sched/plugin.h"

namespace gpucloud::sched {

std::unique_ptr<FilterPlugin> NewNodeHealthFilter();       // "NodeHealth"
std::unique_ptr<FilterPlugin> NewNodeSelectorFilter();     // "NodeSelector"
std::unique_ptr<FilterPlugin> NewTaintTolerationFilter();  // "TaintToleration"
std::unique_ptr<FilterPlugin> NewCudaVersionFilter();      // "CudaVersion"
std::unique_ptr<FilterPlugin> NewGpuTypeFilter();          // "GpuType"

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_PLUGINS_FILTERS_H_
