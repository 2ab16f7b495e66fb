#include "agent/task_env.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string_view>

#include "core/object_meta.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

// Volcano's key for a task in file and variable names: '-' turned into '_'. nullopt for a name
// that is not an RFC 1123 label (the manifest allows no other, but the assignment decoder does
// not check, and the name becomes a file name).
std::optional<std::string> VolcanoKey(const std::string& task) {
  if (!ValidateDnsLabel(task).ok()) return std::nullopt;
  std::string key = task;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

// Volcano's env and svc plugins: the replica's index in its task, and every task's hosts.
void SetVolcanoEnv(const TaskEnvInput& in, std::map<std::string, std::string>& env) {
  env["VK_TASK_INDEX"] = std::to_string(in.replica);
  env["VC_TASK_INDEX"] = std::to_string(in.replica);
  for (const auto& [task, hosts] : in.task_hosts) {
    std::optional<std::string> key = VolcanoKey(task);
    if (!key) continue;
    for (char& c : *key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    env[Cat("VC_", *key, "_HOSTS")] = Join(hosts, ",");
    env[Cat("VC_", *key, "_NUM")] = std::to_string(hosts.size());
  }
}

// Paths the manifest wrote under Volcano's /etc/volcano, where this task finds those files.
void RebaseVolcanoPaths(const std::string& volcano_dir, std::map<std::string, std::string>& env) {
  constexpr std::string_view kVolcanoDir = "/etc/volcano";
  if (volcano_dir.empty() || volcano_dir == kVolcanoDir) return;
  for (auto& [name, value] : env) {
    if (value.starts_with(kVolcanoDir) && value.size() > kVolcanoDir.size() &&
        value[kVolcanoDir.size()] == '/') {
      value = volcano_dir + value.substr(kVolcanoDir.size());
    }
  }
}

// torchrun's PET_ variables, as Kubeflow's training operator sets them for a PyTorchJob: one
// torchrun agent per replica. WORLD_SIZE counts processes when the job says how many a replica
// runs.
void SetTorchrunEnv(const TaskEnvInput& in, const std::string& master_addr,
                    std::map<std::string, std::string>& env) {
  env["PET_NNODES"] = std::to_string(in.world_size);
  env["PET_NODE_RANK"] = std::to_string(in.rank);
  env["PET_MASTER_ADDR"] = master_addr;
  env["PET_MASTER_PORT"] = std::to_string(in.master_port);
  auto nproc = in.user_env.find("PET_NPROC_PER_NODE");
  if (nproc == in.user_env.end()) return;
  const std::string& n = nproc->second;
  bool number = !n.empty() && n.size() <= 4 && n.find_first_not_of("0123456789") == n.npos;
  if (number && std::stoi(n) > 0) {
    env["WORLD_SIZE"] = std::to_string(static_cast<int64_t>(in.world_size) * std::stoi(n));
  }
}

}  // namespace

std::map<std::string, std::string> BuildTaskEnv(const TaskEnvInput& in) {
  std::map<std::string, std::string> env = in.user_env;
  RebaseVolcanoPaths(in.volcano_dir, env);
  auto set = [&](const char* k, std::string v) { env[k] = std::move(v); };
  std::string gpus = in.gpu_uuids.empty() ? std::string() : Join(in.gpu_uuids, ",");
  // No GPU: hide them all ("void" is what NVIDIA's container runtime understands).
  set("CUDA_VISIBLE_DEVICES", gpus);
  set("NVIDIA_VISIBLE_DEVICES", gpus.empty() ? std::string("void") : gpus);
  if (in.mps_thread_percentage) {
    set("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(*in.mps_thread_percentage));
  } else {
    env.erase("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  }
  const std::string master_addr = in.master_addr.empty() ? "127.0.0.1" : in.master_addr;
  set("MASTER_ADDR", master_addr);
  set("MASTER_PORT", std::to_string(in.master_port));
  set("WORLD_SIZE", std::to_string(in.world_size));
  set("RANK", std::to_string(in.rank));
  set("LOCAL_RANK", std::to_string(in.local_rank));
  set("LOCAL_WORLD_SIZE", std::to_string(in.local_world_size));
  set("NODE_RANK", std::to_string(in.node_rank));
  set("GROUP_RANK", std::to_string(in.node_rank));  // torchrun's name for it
  SetTorchrunEnv(in, master_addr, env);
  // Open MPI's names for the same facts, for mpirun-free launches.
  set("OMPI_COMM_WORLD_SIZE", std::to_string(in.world_size));
  set("OMPI_COMM_WORLD_RANK", std::to_string(in.rank));
  set("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(in.local_rank));
  if (!in.hostfile_path.empty()) set("GPUCLOUD_HOSTFILE", in.hostfile_path);
  // NCCL: within one NVLink island, peer-to-peer over NVLink; across nodes let NCCL choose,
  // but say so in its log.
  if (in.nodes <= 1 && in.gpus_share_nvlink && in.gpu_uuids.size() > 1) {
    set("NCCL_P2P_LEVEL", "NVL");
  }
  if (!env.contains("NCCL_DEBUG")) set("NCCL_DEBUG", "WARN");
  set("GPUCLOUD_NAMESPACE", in.namespace_);
  set("GPUCLOUD_JOB", in.job);
  set("GPUCLOUD_JOB_UID", in.job_uid);
  set("GPUCLOUD_TASK", in.task);
  set("GPUCLOUD_ATTEMPT", std::to_string(in.attempt));
  set("GPUCLOUD_CHECKPOINT_DIR", in.checkpoint_dir);
  set("GPUCLOUD_RESTART_COUNT", std::to_string(in.restart_count));
  SetVolcanoEnv(in, env);
  return env;
}

std::string Hostfile(const std::vector<std::pair<std::string, int>>& hosts_and_slots) {
  std::string out;
  for (const auto& [host, slots] : hosts_and_slots) out += Cat(host, " slots=", slots, "\n");
  return out;
}

std::map<std::string, std::string> VolcanoHostFiles(
    const std::map<std::string, std::vector<std::string>>& task_hosts) {
  std::map<std::string, std::string> files;
  for (const auto& [task, hosts] : task_hosts) {
    if (std::optional<std::string> key = VolcanoKey(task)) {
      files[Cat(*key, ".host")] = Join(hosts, "\n");
    }
  }
  return files;
}

std::string MpiHostfile(const std::vector<std::string>& hosts, int slots_per_replica,
                        MpiHostfileFormat format) {
  std::vector<std::pair<std::string, int64_t>> replicas_on;  // host, replicas: first seen first
  for (const std::string& host : hosts) {
    auto it = std::find_if(replicas_on.begin(), replicas_on.end(),
                           [&](const auto& e) { return e.first == host; });
    if (it == replicas_on.end()) {
      replicas_on.emplace_back(host, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [host, n] : replicas_on) {
    const int64_t slots = n * slots_per_replica;
    out += format == MpiHostfileFormat::kOpenMpi ? Cat(host, " slots=", slots, "\n")
                                                 : Cat(host, ":", slots, "\n");
  }
  return out;
}

std::map<std::string, std::string> TaskHostFiles(
    const std::map<std::string, std::vector<std::string>>& task_hosts,
    const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> files = VolcanoHostFiles(task_hosts);
  auto impl = env.find("GPUCLOUD_MPI_IMPLEMENTATION");
  if (impl == env.end()) return files;
  MpiHostfileFormat format;
  if (impl->second == "OpenMPI") {
    format = MpiHostfileFormat::kOpenMpi;
  } else if (impl->second == "Intel" || impl->second == "MPICH") {
    format = MpiHostfileFormat::kHydra;
  } else {
    return files;
  }
  int slots = 1;
  if (auto s = env.find("GPUCLOUD_MPI_SLOTS_PER_WORKER"); s != env.end()) {
    const std::string& n = s->second;
    bool number = !n.empty() && n.size() <= 4 && n.find_first_not_of("0123456789") == n.npos;
    if (number && std::stoi(n) > 0) slots = std::stoi(n);
  }
  for (const auto& [task, hosts] : task_hosts) {
    if (std::optional<std::string> key = VolcanoKey(task)) {
      files[Cat(*key, ".hostfile")] = MpiHostfile(hosts, slots, format);
    }
  }
  return files;
}

}  // namespace gpucloud::agent
