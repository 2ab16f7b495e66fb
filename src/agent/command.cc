#include "agent/command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "agent/exporter.h"
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
  for (CLI::App* sub : {discover, metrics}) {
    sub->add_option("--simulate", simulate, "simulated GPUs, e.g. 8xH100 or 4xA100-80GB,2xT4");
    sub->add_option("--nvml-library", library, "NVML library to load");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
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
