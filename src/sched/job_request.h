// JobRequest: what the scheduler needs to know of a job, flattened from core::Job once per job
// (so plugins do not re-derive it for every node). Value type; thread-compatible.
#ifndef GPUCLOUD_SCHED_JOB_REQUEST_H_
#define GPUCLOUD_SCHED_JOB_REQUEST_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "sched/cluster_state.h"

namespace gpucloud::sched {

struct TaskRequest {
  std::string name;
  int32_t replicas = 1;
  ReplicaRequest per_replica;
};

struct JobRequest {
  std::string key;  // "namespace/name": the allocation's job key
  std::vector<TaskRequest> tasks;
  int32_t gang_size = 1;  // replicas that must start together
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  int min_cuda_version = 0;

  int32_t TotalReplicas() const;
  // Whole GPUs all replicas need together, or nullopt when some task asks for MIG instances or
  // a share (whose room is not counted in whole GPUs).
  std::optional<int64_t> WholeGpusNeeded() const;
  // Every GPU type some task accepts (empty: some task accepts any type, or none needs a GPU).
  std::vector<std::string> AcceptedGpuTypes() const;
};

JobRequest MakeJobRequest(const Job& job);

// What filter plugins may look at: node selector, tolerations, CUDA version, accepted GPU types
// and whether the job needs a GPU. Jobs with equal signatures pass the same filters on the same
// nodes, so which nodes they may use is computed once per signature.
std::string FilterSignature(const JobRequest& job);

// Everything about a job that placement depends on, except its key: two jobs with the same shape
// fit or fail alike on the same cluster state.
std::string ShapeKey(const JobRequest& job);

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_JOB_REQUEST_H_
