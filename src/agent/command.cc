#include "agent/command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include <signal.h>

#include "agent/exporter.h"
#include "agent/metrics_server.h"
#include "agent/nvml_backend.h"
#include "agent/simulated_backend.h"

namespace gpucloud::agent {
namespace {

nlohmann::ordered_json ToJson(const NodeGpus& node) {
  nlohmann::ordered_json out;
  out["backend"] = node.backend;
  out["driverVersion"] = node.driver_version;
  out["cudaDriverVersion"] = node.cuda_driver_version;
  out["gpus"] = nlohmann::ordered_json::array();
  for (const GpuDevice& g : node.gpus) {
    out["gpus"].push_back({{"index", g.index},
                           {"uuid", g.uuid},
                           {"name", g.name},
                           {"type", g.catalog_type},
                           {"memoryMiB", g.memory.raw()},
                           {"pciBusId", g.pci_bus_id},
                           {"migEnabled", g.mig_enabled}});
  }
  return out;
}

}  // namespace

int RunAgent(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"gpucloud agent: the node agent"};
  app.require_subcommand(1);
  std::string simulate, library = kNvmlLibrary;
  CLI::App* discover = app.add_subcommand("discover", "print the node's GPUs as JSON");
  CLI::App* metrics = app.add_subcommand("metrics", "print one dcgm-exporter style scrape");
  CLI::App* serve = app.add_subcommand("serve", "serve /metrics over HTTP until stopped");
  std::string listen = "0.0.0.0:9400";
  serve->add_option("--listen", listen, "address and port (dcgm-exporter's default 9400)");
  for (CLI::App* sub : {discover, metrics, serve}) {
    sub->add_option("--simulate", simulate, "simulated GPUs, e.g. 8xH100 or 4xA100-80GB,2xT4");
    sub->add_option("--nvml-library", library, "NVML library to load");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  if (serve->parsed()) {
    // Block the stop signals before the server thread starts; wait for them below.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  }
  absl::StatusOr<std::unique_ptr<GpuBackend>> backend =
      simulate.empty() ? OpenNvml(library) : MakeSimulatedBackend(simulate);
  NodeGpus node;
  std::vector<GpuSample> samples;
  if (!backend.ok()) {
    if (!simulate.empty() || !absl::IsUnavailable(backend.status())) {
      err << "gpucloud agent: " << backend.status().message() << "\n";
      return 1;
    }
    // No driver here: a node without GPUs, said once.
    err << "gpucloud agent: no NVIDIA driver (" << backend.status().message()
        << "); this node has no GPUs\n";
    node.backend = "none";
  } else {
    absl::StatusOr<NodeGpus> found = (*backend)->Discover();
    if (!found.ok()) {
      err << "gpucloud agent: " << found.status().message() << "\n";
      return 1;
    }
    node = std::move(*found);
    if (metrics->parsed()) {
      absl::StatusOr<std::vector<GpuSample>> s = (*backend)->Sample();
      if (!s.ok()) {
        err << "gpucloud agent: " << s.status().message() << "\n";
        return 1;
      }
      samples = std::move(*s);
    }
  }
  if (serve->parsed()) {
    if (!backend.ok()) {
      err << "gpucloud agent: nothing to serve without GPUs\n";
      return 1;
    }
    size_t colon = listen.rfind(':');
    int port = colon == std::string::npos ? -1 : std::atoi(listen.c_str() + colon + 1);
    if (port < 0 || port > 65535) {
      err << "gpucloud agent: --listen: \"" << listen << "\" is not HOST:PORT\n";
      return 2;
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    MetricsServer server(**backend, listen.substr(0, colon), static_cast<uint16_t>(port), host);
    if (absl::Status s = server.Start(); !s.ok()) {
      err << "gpucloud agent: " << s.message() << "\n";
      return 1;
    }
    out << "gpucloud agent: serving http://" << listen.substr(0, colon) << ":" << server.port()
        << "/metrics (" << node.gpus.size() << " GPUs, " << node.backend << ")" << std::endl;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    int sig = 0;
    sigwait(&stop, &sig);
    server.Stop();
    return 0;
  }
  if (discover->parsed()) {
    out << ToJson(node).dump(2) << "\n";
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    out << DcgmMetricsText(node, samples, host);
  }
  return 0;
}

}  // namespace gpucloud::agent
