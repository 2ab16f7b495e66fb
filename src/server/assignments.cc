#include "server/assignments.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/hash.h"
#include "core/text.h"
#include "server/job_arrays.h"

namespace gpucloud::server {
namespace {

// The parts of an assignment that come from the task's spec.
void FromSpec(const TaskSpec& spec, const Job& job, api::Assignment& a) {
  a.command = spec.command;
  a.command.insert(a.command.end(), spec.args.begin(), spec.args.end());
  for (const EnvVar& e : spec.env) a.env[e.name] = e.value;
  a.secret_env = spec.secret_env;  // references only: the node asks for the values at start
  a.env_from = spec.env_from;
  a.secret_volumes = spec.secret_volumes;
  if (job.spec.ssh) {  // the job's own keys (server/ssh_keys.h), in every task
    a.secret_volumes.push_back(SshKeysVolume(job.metadata.name, *job.spec.ssh));
    a.env[std::string(kSshDirEnv)] = job.spec.ssh->mount_path;
  }
  a.image_pull_secrets = spec.image_pull_secrets;
  a.working_dir = spec.working_dir;
  a.image = spec.image;
  if (!a.image.empty()) {
    a.image_pull_policy = spec.image_pull_policy;  // AssignmentToJson resolves a default
    a.image_entrypoint = spec.command.empty();
  }
  a.run_as_user = spec.security_context.run_as_user;
  a.run_as_group = spec.security_context.run_as_group;
  a.run_as_non_root = spec.security_context.run_as_non_root;
  a.checkpoint_node_local = job.spec.checkpoint.node_local;
  a.checkpoint_replicate = job.spec.checkpoint.replicate;
  AddArrayEnv(job.spec, &a.env);  // an array's element: GPUCLOUD_ARRAY_INDEX, ... over `env`
}

// The GPUs of one replica, and their indices for the message.
std::vector<std::string> AssignGpus(const PlacedOn& p, api::Assignment& a) {
  std::vector<std::string> names;
  for (const sched::GpuAssignment& g : p.replica.gpus) {
    api::AssignedGpu ag;
    ag.index = g.gpu;
    ag.uuid = p.info->gpus[g.gpu].uuid;
    ag.mode = std::string(GpuModeName(g.mode));
    ag.mig_profile = g.mig.profile;
    ag.mig_start = g.mig.start;
    ag.fraction_milli = g.fraction.raw();
    ag.mps = g.sharing == GpuSharing::kMps;
    a.gpus.push_back(std::move(ag));
    names.push_back(std::to_string(g.gpu));
  }
  return names;
}

}  // namespace

int MasterPort(std::string_view job_uid, int attempt, const std::set<int>& taken) {
  uint64_t h = Fnv1a64(Cat(job_uid, "/", attempt));
  int first = static_cast<int>(h % kMasterPortCount);
  for (int i = 0; i < kMasterPortCount; ++i) {
    int port = kMasterPortBase + (first + i) % kMasterPortCount;
    if (!taken.contains(port)) return port;
  }
  return kMasterPortBase + first;
}

const std::string& NodeAddress(const api::NodeInfo& node) {
  return node.address.empty() ? node.hostname : node.address;
}

Binding AssignmentsFor(const BindInput& in, std::vector<PlacedOn> replicas) {
  const Job& job = *in.job;
  const std::string& ns = job.metadata.namespace_;
  const std::string& name = job.metadata.name;
  std::map<std::string, size_t> task_order;
  for (size_t i = 0; i < job.spec.tasks.size(); ++i) task_order[job.spec.tasks[i].name] = i;
  std::stable_sort(replicas.begin(), replicas.end(), [&](const PlacedOn& a, const PlacedOn& b) {
    return std::pair(task_order[a.replica.task], a.replica.replica) <
           std::pair(task_order[b.replica.task], b.replica.replica);
  });
  // Node ranks by each node's lowest rank; each task's replicas' addresses in replica order.
  std::vector<std::string> node_order;
  std::map<std::string, int> local_count;
  std::map<std::string, std::vector<std::string>> task_hosts;
  for (const PlacedOn& p : replicas) {
    if (!local_count.contains(p.node)) node_order.push_back(p.node);
    ++local_count[p.node];
    task_hosts[p.replica.task].push_back(NodeAddress(*p.info));
  }
  std::vector<std::pair<std::string, int>> hosts;
  std::map<std::string, const api::NodeInfo*> info_of;
  for (const PlacedOn& p : replicas) info_of.emplace(p.node, p.info);
  for (const std::string& node : node_order) {
    hosts.emplace_back(NodeAddress(*info_of.at(node)), local_count[node]);
  }
  Binding b;
  std::map<std::string, int> local_next;
  for (size_t rank = 0; rank < replicas.size(); ++rank) {
    const PlacedOn& p = replicas[rank];
    PlacedReplica pr{Cat(ns, ".", name, ".", rank), p.node, static_cast<int>(rank), p.replica};
    pr.placement.node = 0;
    api::Assignment a;
    a.name = pr.name;
    a.namespace_ = ns;
    a.job = name;
    a.job_uid = in.uid;
    a.attempt = in.attempt;
    a.task = p.replica.task;
    a.replica = p.replica.replica;
    a.rank = static_cast<int>(rank);
    a.world_size = static_cast<int>(replicas.size());
    a.node_rank = static_cast<int>(std::find(node_order.begin(), node_order.end(), p.node) -
                                   node_order.begin());
    a.nodes = static_cast<int>(node_order.size());
    a.local_rank = local_next[p.node]++;
    a.local_world_size = local_count[p.node];
    a.master_addr = hosts[0].first;
    a.master_port = in.master_port;
    a.hosts = hosts;
    a.task_hosts = task_hosts;
    std::vector<std::string> gpu_names = AssignGpus(p, a);
    FromSpec(job.spec.tasks[task_order[p.replica.task]], job, a);
    a.checkpoint_dir = in.checkpoint_dir;
    a.restart_count = in.attempt - 1;
    a.cpu_milli = p.replica.cpu.raw();
    a.memory_mib = p.replica.memory.raw();
    a.grace_seconds = in.grace_seconds;
    if (job.spec.interactive) a.idle_timeout_seconds = job.spec.interactive->idle_timeout_seconds;
    b.where.push_back(gpu_names.empty() ? p.node
                                        : Cat(p.node, " (GPU ", Join(gpu_names, ","), ")"));
    b.assignments.push_back(std::move(a));
    b.placement.push_back(std::move(pr));
  }
  return b;
}

}  // namespace gpucloud::server
