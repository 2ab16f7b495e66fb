#include "agent/task_env.h"

#include <gtest/gtest.h>

namespace gpucloud::agent {
namespace {

TEST(TaskEnv, RendezvousGpusAndCheckpointsForOneReplicaOfAGang) {
  TaskEnvInput in;
  in.namespace_ = "team-a";
  in.job = "llm";
  in.job_uid = "u-1";
  in.task = "worker";
  in.attempt = 2;
  in.gpu_uuids = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  in.gpus_share_nvlink = true;
  in.master_addr = "10.0.0.1";
  in.master_port = 29600;
  in.world_size = 8;
  in.rank = 5;
  in.local_rank = 1;
  in.local_world_size = 4;
  in.node_rank = 1;
  in.nodes = 2;
  in.hostfile_path = "/var/lib/gpucloud/llm/hostfile";
  in.checkpoint_dir = "/ckpt/team-a/llm";
  in.restart_count = 1;
  in.user_env = {{"RANK", "0"}, {"LR", "0.1"}, {"NCCL_DEBUG", "INFO"}};
  std::map<std::string, std::string> env = BuildTaskEnv(in);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "GPU-a,GPU-b,GPU-c,GPU-d");
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b,GPU-c,GPU-d");
  EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "29600");
  EXPECT_EQ(env.at("WORLD_SIZE"), "8");
  EXPECT_EQ(env.at("RANK"), "5");  // the user's RANK=0 cannot fake it
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("NODE_RANK"), "1");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_RANK"), "5");
  EXPECT_EQ(env.at("GPUCLOUD_HOSTFILE"), "/var/lib/gpucloud/llm/hostfile");
  EXPECT_EQ(env.at("GPUCLOUD_CHECKPOINT_DIR"), "/ckpt/team-a/llm");
  EXPECT_EQ(env.at("GPUCLOUD_RESTART_COUNT"), "1");
  EXPECT_EQ(env.at("GPUCLOUD_ATTEMPT"), "2");
  EXPECT_EQ(env.at("LR"), "0.1");
  EXPECT_EQ(env.at("NCCL_DEBUG"), "INFO");       // the user's choice stays
  EXPECT_FALSE(env.contains("NCCL_P2P_LEVEL"));  // two nodes: NCCL decides
  EXPECT_FALSE(env.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
}

TEST(TaskEnv, SharesAndNoGpu) {
  TaskEnvInput mps;
  mps.gpu_uuids = {"GPU-a"};
  mps.mps_thread_percentage = 25;
  EXPECT_EQ(BuildTaskEnv(mps).at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  TaskEnvInput none;
  std::map<std::string, std::string> env = BuildTaskEnv(none);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
  TaskEnvInput island;
  island.gpu_uuids = {"GPU-a", "GPU-b"};
  island.gpus_share_nvlink = true;
  EXPECT_EQ(BuildTaskEnv(island).at("NCCL_P2P_LEVEL"), "NVL");
}

TEST(TaskEnv, VolcanosTaskIndexAndEveryTasksHosts) {
  TaskEnvInput in;
  in.task = "mpi-worker";
  in.replica = 1;
  in.task_hosts = {{"mpimaster", {"10.0.0.1"}},
                   {"mpi-worker", {"10.0.0.2", "10.0.0.3", "10.0.0.3"}}};
  // A user's own values are overridden, as for the other variables; unrelated ones stay.
  in.user_env = {{"VK_TASK_INDEX", "7"}, {"VC_MPIMASTER_HOSTS", "evil"}, {"VC_OTHER", "x"}};
  std::map<std::string, std::string> env = BuildTaskEnv(in);
  EXPECT_EQ(env.at("VK_TASK_INDEX"), "1");
  EXPECT_EQ(env.at("VC_TASK_INDEX"), "1");
  EXPECT_EQ(env.at("VC_MPIMASTER_HOSTS"), "10.0.0.1");
  EXPECT_EQ(env.at("VC_MPIMASTER_NUM"), "1");
  EXPECT_EQ(env.at("VC_MPI_WORKER_HOSTS"), "10.0.0.2,10.0.0.3,10.0.0.3");  // upper, '-' to '_'
  EXPECT_EQ(env.at("VC_MPI_WORKER_NUM"), "3");
  EXPECT_EQ(env.at("VC_OTHER"), "x");
  // Without hosts (an older server) the index is still there, and no host variables.
  TaskEnvInput alone;
  env = BuildTaskEnv(alone);
  EXPECT_EQ(env.at("VK_TASK_INDEX"), "0");
  EXPECT_EQ(env.at("VC_TASK_INDEX"), "0");
  auto no_host_variables = [](const std::map<std::string, std::string>& env) {
    for (const auto& [k, v] : env) EXPECT_FALSE(k.ends_with("_HOSTS") || k.ends_with("_NUM")) << k;
  };
  no_host_variables(env);
  // A name that is no task name makes no variable.
  alone.task_hosts = {{"Bad Name", {"a"}}, {"", {"b"}}};
  no_host_variables(BuildTaskEnv(alone));
}

TEST(TaskEnv, VolcanoHostFilesAreWhatVolcanosSvcPluginWrites) {
  std::map<std::string, std::string> files =
      VolcanoHostFiles({{"mpimaster", {"10.0.0.1"}}, {"mpi-worker", {"10.0.0.2", "10.0.0.3"}}});
  // '-' becomes '_' in the file name too (not upper-cased); no newline after the last address,
  // so `cat /etc/volcano/mpi_worker.host | tr "\n" ","` gives "10.0.0.2,10.0.0.3".
  EXPECT_EQ(files, (std::map<std::string, std::string>{{"mpimaster.host", "10.0.0.1"},
                                                       {"mpi_worker.host", "10.0.0.2\n10.0.0.3"}}));
  EXPECT_TRUE(VolcanoHostFiles({}).empty());
  // Names that could leave the directory are never file names.
  EXPECT_TRUE(VolcanoHostFiles({{"../etc", {"a"}}, {"a/b", {"a"}}, {"", {"a"}}}).empty());
}

// What Kubeflow's training operator gives a PyTorchJob's pods, from the same inputs: torchrun's
// PET_ variables, one torchrun agent per replica (the master is rank 0).
TEST(TaskEnv, TorchrunVariablesAsTheTrainingOperatorSetsThem) {
  TaskEnvInput in;
  in.master_addr = "10.0.0.1";
  in.master_port = 23456;
  in.world_size = 3;  // master + 2 workers
  in.rank = 2;
  in.node_rank = 1;
  std::map<std::string, std::string> env = BuildTaskEnv(in);
  EXPECT_EQ(env.at("PET_NNODES"), "3");
  EXPECT_EQ(env.at("PET_NODE_RANK"), "2");  // the replica's rank, not its node's
  EXPECT_EQ(env.at("PET_MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("PET_MASTER_PORT"), "23456");
  EXPECT_FALSE(env.contains("PET_NPROC_PER_NODE"));  // torchrun's own default then
  EXPECT_EQ(env.at("WORLD_SIZE"), "3");

  // nprocPerNode comes in the job's env; WORLD_SIZE then counts processes, as the operator does.
  in.user_env = {{"PET_NPROC_PER_NODE", "4"}, {"PET_NNODES", "9"}};
  env = BuildTaskEnv(in);
  EXPECT_EQ(env.at("PET_NPROC_PER_NODE"), "4");
  EXPECT_EQ(env.at("PET_NNODES"), "3");  // the job cannot fake its size
  EXPECT_EQ(env.at("WORLD_SIZE"), "12");
  EXPECT_EQ(env.at("RANK"), "2");
  EXPECT_EQ(env.at("OMPI_COMM_WORLD_SIZE"), "3");
  for (const char* n : {"gpu", "auto", "0", "99999"}) {
    in.user_env = {{"PET_NPROC_PER_NODE", n}};
    EXPECT_EQ(BuildTaskEnv(in).at("WORLD_SIZE"), "3") << n;  // as the operator: not a count
  }
}

// A job's paths under /etc/volcano (an MPIJob launcher's hostfile) are where the files are: as
// written in a container, where the agent put them for a host process.
TEST(TaskEnv, VolcanoPathsInTheJobsEnvFollowTheHostFiles) {
  TaskEnvInput in;
  in.user_env = {{"OMPI_MCA_orte_default_hostfile", "/etc/volcano/worker.host"},
                 {"OTHER", "/etc/volcanoes"},
                 {"DIR", "/etc/volcano"}};
  in.volcano_dir = "/etc/volcano";
  EXPECT_EQ(BuildTaskEnv(in).at("OMPI_MCA_orte_default_hostfile"), "/etc/volcano/worker.host");
  in.volcano_dir = "/var/lib/gpucloud/run/x/volcano";
  std::map<std::string, std::string> env = BuildTaskEnv(in);
  EXPECT_EQ(env.at("OMPI_MCA_orte_default_hostfile"),
            "/var/lib/gpucloud/run/x/volcano/worker.host");
  EXPECT_EQ(env.at("OTHER"), "/etc/volcanoes");
  EXPECT_EQ(env.at("DIR"), "/etc/volcano");
  in.volcano_dir.clear();  // not provided: left as written
  EXPECT_EQ(BuildTaskEnv(in).at("OMPI_MCA_orte_default_hostfile"), "/etc/volcano/worker.host");
}

TEST(TaskEnv, Hostfile) {
  EXPECT_EQ(Hostfile({{"node-a", 4}, {"node-b", 4}}), "node-a slots=4\nnode-b slots=4\n");
}

// mpirun's hostfile: one line per distinct host, its slots the workers there x slots a worker.
struct MpiHostfileCase {
  const char* name;
  std::vector<std::string> hosts;  // a host once per worker placed there, in replica order
  int slots;
  MpiHostfileFormat format;
  const char* want;
};

class MpiHostfileTable : public ::testing::TestWithParam<MpiHostfileCase> {};

TEST_P(MpiHostfileTable, OneLinePerHostWithItsWorkersSlots) {
  const MpiHostfileCase& c = GetParam();
  EXPECT_EQ(MpiHostfile(c.hosts, c.slots, c.format), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, MpiHostfileTable,
    ::testing::Values(MpiHostfileCase{"none", {}, 2, MpiHostfileFormat::kOpenMpi, ""},
                      MpiHostfileCase{"one_worker_a_host",
                                      {"10.0.0.2", "10.0.0.3"},
                                      2,
                                      MpiHostfileFormat::kOpenMpi,
                                      "10.0.0.2 slots=2\n10.0.0.3 slots=2\n"},
                      MpiHostfileCase{"two_workers_on_one_host",
                                      {"10.0.0.2", "10.0.0.2"},
                                      1,
                                      MpiHostfileFormat::kOpenMpi,
                                      "10.0.0.2 slots=2\n"},
                      MpiHostfileCase{"mixed_in_first_seen_order",
                                      {"10.0.0.3", "10.0.0.2", "10.0.0.3", "10.0.0.3"},
                                      4,
                                      MpiHostfileFormat::kOpenMpi,
                                      "10.0.0.3 slots=12\n10.0.0.2 slots=4\n"},
                      MpiHostfileCase{"hydra",
                                      {"10.0.0.2", "10.0.0.2", "10.0.0.3"},
                                      2,
                                      MpiHostfileFormat::kHydra,
                                      "10.0.0.2:4\n10.0.0.3:2\n"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TaskEnv, AnMpiLaunchersTaskGetsHostfilesBesideVolcanosHostFiles) {
  const std::map<std::string, std::vector<std::string>> hosts = {
      {"launcher", {"10.0.0.1"}}, {"worker", {"10.0.0.2", "10.0.0.2", "10.0.0.3"}}};
  // Without GPUCLOUD_MPI_IMPLEMENTATION: Volcano's files only, a line per replica as Volcano's
  // svc plugin writes them (a pod a line: `mpirun --host` counts a slot per entry).
  EXPECT_EQ(TaskHostFiles(hosts, {}), VolcanoHostFiles(hosts));
  EXPECT_EQ(TaskHostFiles(hosts, {}).at("worker.host"), "10.0.0.2\n10.0.0.2\n10.0.0.3");
  std::map<std::string, std::string> files = TaskHostFiles(
      hosts, {{"GPUCLOUD_MPI_IMPLEMENTATION", "OpenMPI"}, {"GPUCLOUD_MPI_SLOTS_PER_WORKER", "2"}});
  EXPECT_EQ(files.at("worker.host"), "10.0.0.2\n10.0.0.2\n10.0.0.3");
  EXPECT_EQ(files.at("worker.hostfile"), "10.0.0.2 slots=4\n10.0.0.3 slots=2\n");
  EXPECT_EQ(files.at("launcher.hostfile"), "10.0.0.1 slots=2\n");
  for (const char* impl : {"Intel", "MPICH"}) {
    files = TaskHostFiles(hosts, {{"GPUCLOUD_MPI_IMPLEMENTATION", impl}});
    EXPECT_EQ(files.at("worker.hostfile"), "10.0.0.2:2\n10.0.0.3:1\n") << impl;  // 1 slot
  }
  // A count that is not one, or another implementation: 1 slot, or no hostfile.
  files = TaskHostFiles(
      hosts, {{"GPUCLOUD_MPI_IMPLEMENTATION", "OpenMPI"}, {"GPUCLOUD_MPI_SLOTS_PER_WORKER", "-3"}});
  EXPECT_EQ(files.at("worker.hostfile"), "10.0.0.2 slots=2\n10.0.0.3 slots=1\n");
  EXPECT_EQ(TaskHostFiles(hosts, {{"GPUCLOUD_MPI_IMPLEMENTATION", "MVAPICH"}}),
            VolcanoHostFiles(hosts));
}

}  // namespace
}  // namespace gpucloud::agent
