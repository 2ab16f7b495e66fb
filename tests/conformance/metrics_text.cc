// A test helper for prometheus_text_test.py: the metrics text of both daemons, rendered by their
// real code from representative data (jobs in several phases and queues, nodes, GPUs of two
// types, live jobs, recoveries; simulated GPUs with tasks on them, NVLink, MIG instances and
// an unhealthy GPU).
//   metrics_text server   prints the server's /metrics text (ApiMetrics + cluster metrics).
//   metrics_text agent    serves the node agent's metrics text on the agent's metrics server
//                         (127.0.0.1, a free port), prints "PORT\n", and stops when stdin closes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "agent/exporter.h"
#include "agent/health.h"
#include "agent/metrics_server.h"
#include "agent/simulated_backend.h"
#include "server/controller.h"
#include "server/metrics.h"

namespace gpucloud {
namespace {

std::string ServerText() {
  server::ApiMetrics api;
  api.Observe("GET", "jobs", 200, 0.0004);
  api.Observe("GET", "jobs", 404, 0.02);
  api.Observe("POST", "jobs", 201, 0.3);
  api.Observe("PUT", "nodes/heartbeat", 200, 5.0);
  server::ClusterMetrics m;
  m.jobs_by_phase = {{"Pending", 2}, {"Running", 3}, {"Succeeded", 1}};
  m.pending_by_queue = {{"default", 1}, {"research", 1}};
  m.gpus_total_by_type = {{"H100-80GB", 16}, {"A100-80GB", 8}};
  m.gpus_allocated_by_type = {{"H100-80GB", 12}, {"A100-80GB", 0.5}};
  m.nodes_ready = 3;
  m.nodes_not_ready = 1;
  m.jobs_deferred = 1;
  m.passes = 10;
  m.last_pass_seconds = 0.004;
  m.stage_seconds = {{"sync", 0.001}, {"nodes", 0.001}, {"jobs", 0.001}, {"schedule", 0.001}};
  m.bind_latency_bounds = {0.01, 0.1, 1, 10};
  m.bind_latency_counts = {1, 2, 3, 3, 4};
  m.bind_latency_sum = 12.5;
  m.bind_latency_count = 4;
  m.recovery_count = 2;
  m.recovery_sum = 30;
  m.recovery_max = 20;
  m.job_gpu_seconds = {100, 80, 20};
  m.live_jobs = {{"default/train", {64, 60, 4}}, {"research/sweep-1", {8, 8, 0}}};
  m.gpu_seconds_registered = 240;
  m.gpu_seconds_available = 230;
  return server::RenderClusterMetrics(m).insert(0, api.Render(42));
}

// Four NVLinked H100s, an A100 and an A100 in MIG mode; GPU 3 had an Xid 79.
constexpr char kAgentGpus[] =
    "gpus:\n"
    "  - {type: H100, count: 4, nvlinkIsland: 0}\n"
    "  - {type: A100-80GB, count: 1}\n"
    "  - {type: A100-80GB, count: 1, mig: [3g.40gb@0, 3g.40gb@4]}\n";

int ServeAgentText() {
  std::string spec = std::filesystem::temp_directory_path() /
                     ("metrics_text_gpus." + std::to_string(getpid()) + ".yaml");
  std::ofstream(spec) << kAgentGpus;
  auto backend = agent::MakeSimulatedBackend(spec);
  std::filesystem::remove(spec);
  if (!backend.ok()) {
    std::cerr << backend.status() << "\n";
    return 1;
  }
  (void)(*backend)->Inject("xid", 3, 79);
  auto node = (*backend)->Discover();
  auto samples = (*backend)->Sample();
  if (!node.ok() || !samples.ok()) {
    std::cerr << "simulated GPUs: " << node.status() << " " << samples.status() << "\n";
    return 1;
  }
  std::multimap<int, agent::GpuOwner> owners = {{0, {"default", "train", "worker-0"}},
                                                {1, {"default", "train", "worker-1"}},
                                                {4, {"research", "sweep-1", "main-0"}},
                                                {5, {"research", "mig-1", "main-0", 4}}};
  std::map<int, agent::GpuCondition> health = {{3, {false, agent::DescribeXid(79), false, ""}},
                                               {2, {true, "", true, "remapped rows"}}};
  std::vector<agent::TaskEnergy> energy = {{"default", "train", "worker-0", 0, 1, 1234.5},
                                           {"default", "train", "worker-1", 1, 1, 1200},
                                           {"research", "sweep-1", "main-0", 0, 0, 88}};
  std::string text = agent::DcgmMetricsText(*node, *samples, {"node-a", &owners, &health}) +
                     agent::TaskEnergyMetricsText(energy, "node-a");
  agent::MetricsServer server([&] { return text; }, "127.0.0.1", 0);
  if (absl::Status s = server.Start(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::cout << server.port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  server.Stop();
  return 0;
}

}  // namespace
}  // namespace gpucloud

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "server") {
    std::cout << gpucloud::ServerText();
    return 0;
  }
  if (mode == "agent") return gpucloud::ServeAgentText();
  std::cerr << "usage: metrics_text server|agent\n";
  return 2;
}
