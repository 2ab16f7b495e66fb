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

TEST(TaskEnv, Hostfile) {
  EXPECT_EQ(Hostfile({{"node-a", 4}, {"node-b", 4}}), "node-a slots=4\nnode-b slots=4\n");
}

}  // namespace
}  // namespace gpucloud::agent
