// The environment of a training task: which GPUs it sees (CUDA_VISIBLE_DEVICES with GPU or MIG
// UUIDs, NVIDIA_VISIBLE_DEVICES, the MPS thread share), the torchrun / DeepSpeed / MPI
// rendezvous variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
// LOCAL_WORLD_SIZE, NODE_RANK, a hostfile, and torchrun's PET_NNODES, PET_NODE_RANK,
// PET_MASTER_ADDR and PET_MASTER_PORT as Kubeflow's training operator sets them), NCCL hints from
// the topology, gpucloud's own (GPUCLOUD_CHECKPOINT_DIR, GPUCLOUD_RESTART_COUNT, job identity), and
// what Volcano's job plugins give a pod, so that unmodified Volcano jobs run: the env plugin's
// VK_TASK_INDEX and VC_TASK_INDEX, the svc plugin's VC_<TASK>_HOSTS and VC_<TASK>_NUM, and the
// contents of its /etc/volcano/<task>.host files (VolcanoHostFiles; the agent writes and mounts
// them), and an MPI launcher's hostfile with one line per host (MpiHostfile). Where Volcano names
// a pod by DNS, gpucloud gives its node's address (tasks use the host's network). Pure
// functions; thread-safe.
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
  int replica = 0;  // the index of this replica within its task (VK_TASK_INDEX)
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
  // Where this task finds Volcano's <task>.host files (VolcanoHostFiles): "/etc/volcano" in a
  // container, the agent's directory for a host process; empty = not provided.
  std::string volcano_dir;
  // Every task of the job: its replicas' addresses in replica order (Assignment::task_hosts).
  std::map<std::string, std::vector<std::string>> task_hosts;
  std::string checkpoint_dir;
  int restart_count = 0;
  std::map<std::string, std::string> user_env;  // from the job spec
};

// The variables to set. The user's own come first and gpucloud's override them where they
// collide (a task cannot fake its rank or see other GPUs). PET_NPROC_PER_NODE is the user's
// (a PyTorchJob's nprocPerNode, carried in the job's env), never set here; when it is a number
// N, WORLD_SIZE is replicas x N, as the training operator counts it (torchrun re-exports the
// per-process WORLD_SIZE and RANK; RANK stays the replica's). PET_NNODES is the replicas placed,
// PET_NODE_RANK the replica's rank. A user value that is a path under /etc/volcano/ (an MPIJob
// launcher's hostfile) is moved under `volcano_dir` when that is another directory. VC_<TASK>_HOSTS
// (addresses joined by
// ',') and VC_<TASK>_NUM for every task of `task_hosts` whose name is an RFC 1123 label, with
// the name upper-cased and '-' turned into '_', as Volcano's svc plugin names them.
std::map<std::string, std::string> BuildTaskEnv(const TaskEnvInput& in);

// A DeepSpeed / MPI hostfile: "host slots=N" per line, in rank order.
std::string Hostfile(const std::vector<std::pair<std::string, int>>& hosts_and_slots);

// The files Volcano's svc plugin mounts at /etc/volcano: file name -> content. For each task,
// "<task>.host" with '-' turned into '_' (Volcano's name: task "mpi-worker" gives
// "mpi_worker.host"), holding its replicas' addresses one a line in replica order, with no
// newline after the last, byte for byte as Volcano writes it (its examples read the file with
// `tr "\n" ","`, which a trailing newline would turn into a trailing comma). A task whose name
// is not an RFC 1123 label (so could name a path outside the directory) is left out.
std::map<std::string, std::string> VolcanoHostFiles(
    const std::map<std::string, std::vector<std::string>>& task_hosts);

// MPI hostfile formats: Open MPI's "host slots=N"; MPICH's and Intel MPI's (Hydra) "host:N".
enum class MpiHostfileFormat { kOpenMpi, kHydra };

// What mpirun expects of a hostfile for the replicas at `hosts` (in replica order, a host once
// per replica placed there, as Assignment::task_hosts lists them): one line per distinct host,
// in order of first appearance, its slots the replicas there x `slots_per_replica`, each line
// ending in '\n'; "" for no hosts. (A host listed twice would be two entries to mpirun.)
std::string MpiHostfile(const std::vector<std::string>& hosts, int slots_per_replica,
                        MpiHostfileFormat format);

// The files of a task's Volcano directory (/etc/volcano in a container): VolcanoHostFiles, and
// when `env` (the assignment's) says GPUCLOUD_MPI_IMPLEMENTATION (OpenMPI, or Intel or MPICH for
// Hydra's format; a Kubeflow MPIJob's launcher has it) also "<task>.hostfile" for each task
// (Volcano's key, as "<task>.host"): its MpiHostfile with GPUCLOUD_MPI_SLOTS_PER_WORKER slots a
// replica (1 when unset or not a number in [1, 9999]). Another implementation adds nothing.
std::map<std::string, std::string> TaskHostFiles(
    const std::map<std::string, std::vector<std::string>>& task_hosts,
    const std::map<std::string, std::string>& env);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_TASK_ENV_H_
