// How a trace's jobs become the scheduler's requests in the simulator: whole-GPU tasks split
// into replicas that fit a node, shares of a GPU kept as shares. Internal to the simulator
// (simulator.cc); pure functions, thread-safe.
#ifndef GPUCLOUD_SIM_REQUESTS_H_
#define GPUCLOUD_SIM_REQUESTS_H_

#include <cstdint>

#include "sched/scheduler.h"
#include "sim/trace.h"

namespace gpucloud::sim {

// The largest replica size <= max_per_node that divides `gpus`.
int32_t ReplicaSize(int64_t gpus, int32_t max_per_node);

// Trace job `job` (the `index`th of its trace) as the scheduler's pending job "j/<index>"; with
// `oracle_estimates`, a job without an estimate gets its real duration as one.
sched::PendingJob MakeRequest(const TraceJob& job, int32_t index, int32_t max_per_node,
                              bool oracle_estimates);

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_REQUESTS_H_
