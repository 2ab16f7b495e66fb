// The environment of a training task: which GPUs it sees (CUDA_VISIBLE_DEVICES with GPU or MIG
// UUIDs, NVIDIA_VISIBLE_DEVICES, the MPS thread share), the torchrun / DeepSpeed / MPI
// rendezvous variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
// LOCAL_WORLD_SIZE, NODE_RANK, a hostfile), NCCL hints from the topology, and gpucloud's own
// (GPUCLOUD_CHECKPOINT_DIR, GPUCLOUD_RESTART_COUNT, job identity). Pure functions; thread-safe.
#ifndef GPUCLOUD_AGENT_TASK_ENV_H_
#define GPUCLOUD_AGENT_TASK_ENV_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpucloud::agent {

struct TaskEnvInput {
  std::string namespace_;
  std::string job;
  std::string job_uid;
  std::string task;
  int attempt = 0;
  std::vector<std::string> gpu_uuids;        // "GPU-..." or "MIG-..."; empty = no GPU
  std::optional<int> mps_thread_percentage;  // MPS shares only
  bool gpus_share_nvlink = false;            // every GPU of the task on one NVLink island
  // Rendezvous: rank 0's address and port, and this replica's place in the gang.
  std::string master_addr;
  int master_port = 29500;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int nodes = 1;
  std::string hostfile_path;  // written by the executor; empty = none
  std::string checkpoint_dir;
  int restart_count = 0;
  std::map<std::string, std::string> user_env;  // from the job spec
};

// The variables to set. The user's own come first and gpucloud's override them where they
// collide (a task cannot fake its rank or see other GPUs).
std::map<std::string, std::string> BuildTaskEnv(const TaskEnvInput& in);

// A DeepSpeed / MPI hostfile: "host slots=N" per line, in rank order.
std::string Hostfile(const std::vector<std::pair<std::string, int>>& hosts_and_slots);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_TASK_ENV_H_
