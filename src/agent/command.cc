#include "agent/command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/exporter.h"
#include "agent/metrics_server.h"
#include "agent/node_agent.h"
#include "agent/nvml_backend.h"
#include "agent/simulated_backend.h"
#include "api/client.h"
#include "core/clock.h"
#include "core/log_flags.h"
#include "core/parse.h"
#include "core/text.h"

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
    if (!g.mig_layout.empty()) {
      auto& mig = out["gpus"].back()["migDevices"] = nlohmann::ordered_json::array();
      for (const MigPlacement& m : g.mig_layout) {
        auto uuid = g.mig_uuid_by_start.find(m.start);
        mig.push_back({{"profile", m.profile},
                       {"start", m.start},
                       {"uuid", uuid == g.mig_uuid_by_start.end() ? "" : uuid->second}});
      }
    }
  }
  if (!node.topology.empty()) out["topology"] = node.topology;
  return out;
}

// SIGINT and SIGTERM: blocked in every thread, awaited with sigwait.
sigset_t StopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  return stop;
}

void WaitForStopSignal() {
  sigset_t stop = StopSignals();
  int sig = 0;
  sigwait(&stop, &sig);
}

// A machine without an NVIDIA driver: a node with CPUs and memory, no GPUs.
class NoGpuBackend : public GpuBackend {
 public:
  std::string_view Name() const override { return "none"; }
  absl::StatusOr<NodeGpus> Discover() override { return NodeGpus{"none", "", 0, {}}; }
  absl::StatusOr<std::vector<GpuSample>> Sample() override { return std::vector<GpuSample>{}; }
};

// `gpucloud agent run`: joins the control plane and runs what it assigns.
int RunNode(GpuBackend& backend, const api::ClientConfig& server, NodeAgentOptions options,
            const std::string& metrics_listen, bool allow_fault_injection, std::ostream& out,
            std::ostream& err) {
  const SystemClock clock;
  NodeAgent agent(server, backend, clock, options);
  std::unique_ptr<MetricsServer> metrics;
  if (!metrics_listen.empty()) {
    absl::StatusOr<HostPort> addr = ParseHostPort("--metrics-listen", metrics_listen);
    if (!addr.ok()) {
      err << "gpucloud agent: " << addr.status().message() << "\n";
      return 2;
    }
    // The agent samples the GPUs (with its heartbeats); the metrics server shows its view.
    metrics = std::make_unique<MetricsServer>([&agent] { return agent.MetricsText(); }, addr->host,
                                              addr->port);
    // Fault injection (simulated GPUs) only when asked: it is unauthenticated.
    if (allow_fault_injection) metrics->SetHandler(FaultInjectionHandler(backend));
    if (absl::Status s = metrics->Start(); !s.ok()) {
      err << "gpucloud agent: " << s.message() << "\n";
      return 1;
    }
    out << "gpucloud agent: metrics at http://" << addr->host << ":" << metrics->port()
        << "/metrics" << std::endl;
  }
  std::thread waiter([&agent] {
    WaitForStopSignal();
    agent.Stop();
  });
  out << "gpucloud agent: joining " << server.host << ":" << server.port;
  for (const api::ServerAddress& more : server.more_servers) {
    out << ", " << more.host << ":" << more.port;
  }
  out << std::endl;
  absl::Status s = agent.Run();
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (!s.ok()) {
    err << "gpucloud agent: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int RunAgent(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // Everything the agent writes (task records, logs, hostfiles) is its user's alone; its tasks
  // inherit this umask too.
  umask(077);
  CLI::App app{"gpucloud agent: the node agent"};
  app.require_subcommand(1);
  std::string simulate, library = kNvmlLibrary;
  CLI::App* discover = app.add_subcommand("discover", "print the node's GPUs as JSON");
  CLI::App* metrics = app.add_subcommand("metrics", "print one dcgm-exporter style scrape");
  CLI::App* serve = app.add_subcommand("serve", "serve /metrics over HTTP until stopped");
  std::string listen = "0.0.0.0:9400";
  serve->add_option("--listen", listen, "address and port (dcgm-exporter's default 9400)");
  CLI::App* run = app.add_subcommand("run", "join the control plane and run what it assigns");
  std::string config_path, server_url, ca, token_file;
  NodeAgentOptions options;
  std::vector<std::string> labels;
  run->add_option("--config", config_path, "client config (server, certificate-authority, token)");
  run->add_option(
      "--server", server_url,
      "the control plane's URL, or its servers' URLs separated by commas (instead of --config)");
  run->add_option("--ca", ca, "the control plane's CA certificate (with --server)");
  run->add_option("--token-file", token_file, "file holding the bootstrap token (with --server)");
  run->add_option("--node-name", options.node_name, "this node's name (default: the host name)");
  run->add_option("--address", options.address, "address other nodes reach this one at");
  run->add_option("--pool", options.pool, "node pool");
  run->add_option("--label", labels, "node label KEY=VALUE (repeatable)");
  run->add_option("--state-dir", options.state_dir, "task records, logs and hostfiles");
  run->add_option("--cpu-milli", options.cpu_milli, "CPU to offer, in milli-CPUs (default: all)");
  run->add_option("--max-tasks", options.max_tasks,
                  "tasks the server may place on this node at most (Kubernetes' maxPods)")
      ->check(CLI::Range(0, 100'000));
  run->add_option("--memory-mib", options.memory_mib, "memory to offer, in MiB (default: all)");
  std::string metrics_listen;
  run->add_option(
      "--metrics-listen", metrics_listen,
      "serve /metrics (dcgm-exporter names, task labels) on HOST:PORT, e.g. 0.0.0.0:9400");
  bool allow_fault_injection = false;
  run->add_flag("--allow-fault-injection", allow_fault_injection,
                "serve POST /inject on the metrics port (simulated GPUs; unauthenticated: for "
                "tests)");
  run->add_option("--task-pids-max", options.task_pids_max,
                  "the most processes one task may have (cgroup pids.max; 0: no limit)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--workdir", options.workdir,
                  "a host process's working directory when its spec names none (default: its "
                  "sandbox)");
  run->add_flag("--allow-host-processes", options.allow_host_processes,
                "run tasks without an image on the host, as their namespace's unprivileged user "
                "(default: only containers)");
  run->add_flag("--allow-root-tasks", options.allow_root_tasks,
                "let a task's securityContext ask for user or group 0");
  run->add_option("--podman", options.container.podman, "the podman binary");
  run->add_option("--container-runtime", options.container.oci_runtime,
                  "Podman's OCI runtime (--runtime), e.g. runc; default: Podman's");
  std::string image_store;
  run->add_option("--image-store", image_store,
                  "Podman's image store and run state under DIR (default: Podman's own)");
  run->add_option("--registry-auth-file", options.container.auth_file,
                  "registry credentials for pulls (containers-auth.json, as podman login writes)");
  run->add_option("--registry-cert-dir", options.container.cert_dir,
                  "a directory of registry CA certificates (*.crt), as podman pull --cert-dir");
  double image_store_max_gib = 0;
  run->add_option("--image-store-max-gib", image_store_max_gib,
                  "the most disk the image store may use: least recently used images go (0: no "
                  "limit)")
      ->check(CLI::NonNegativeNumber);
  double pull_timeout_minutes = 30;
  run->add_option("--image-pull-timeout", pull_timeout_minutes,
                  "minutes a pull may take before it is stopped and retried later")
      ->check(CLI::PositiveNumber);
  double image_gc_hours = 24;
  run->add_option("--image-gc-hours", image_gc_hours,
                  "images no task used for this long are removed (checked hourly)")
      ->check(CLI::PositiveNumber);
  run->add_option("--cdi-spec-dir", options.cdi_spec_dir,
                  "where the CDI spec of the NVIDIA GPUs is written (\"\" = nowhere)");
  for (CLI::App* sub : {discover, metrics, serve, run}) {
    sub->add_option("--simulate", simulate, "simulated GPUs, e.g. 8xH100 or 4xA100-80GB,2xT4");
    sub->add_option("--nvml-library", library, "NVML library to load");
  }
  log::Flags log_flags;
  for (CLI::App* daemon : {serve, run}) log::AddFlags(*daemon, log_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  if (absl::Status s = log::ConfigureFromFlags(log_flags); !s.ok()) {
    err << "gpucloud agent: " << s.message() << "\n";
    return 2;
  }
  if (serve->parsed() || run->parsed()) {
    // Block the stop signals before the server thread starts; wait for them below.
    sigset_t stop = StopSignals();
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  }
  if (run->parsed() && options.node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    options.node_name = ToLower(host);
  }
  absl::StatusOr<std::unique_ptr<GpuBackend>> backend =
      simulate.empty() ? OpenNvml(library)
                       : MakeSimulatedBackend(simulate, GpuCatalog::Default(),
                                              run->parsed() ? options.node_name : "");
  if (run->parsed()) {
    api::ClientConfig server;
    if (!server_url.empty()) {
      std::ifstream f(token_file);
      std::string token;
      std::getline(f, token);
      if (token.empty()) {
        err << "gpucloud agent: --token-file: cannot read a token from \"" << token_file << "\"\n";
        return 2;
      }
      std::string tmp =
          Cat("server: ", server_url, "\ncertificate-authority: ", ca, "\ntoken: ", token, "\n");
      absl::StatusOr<api::ClientConfig> c = api::ParseClientConfig(tmp, "--server");
      if (!c.ok()) {
        err << "gpucloud agent: " << c.status().message() << "\n";
        return 2;
      }
      server = *c;
    } else {
      absl::StatusOr<api::ClientConfig> c =
          api::LoadClientConfig(api::DefaultConfigPath(config_path));
      if (!c.ok()) {
        err << "gpucloud agent: " << c.status().message() << "\n";
        return 2;
      }
      server = *c;
    }
    for (const std::string& l : labels) {
      size_t eq = l.find('=');
      if (eq == std::string::npos || eq == 0) {
        err << "gpucloud agent: --label: \"" << l << "\" is not KEY=VALUE\n";
        return 2;
      }
      options.labels[l.substr(0, eq)] = l.substr(eq + 1);
    }
    options.image_store_max_bytes = static_cast<int64_t>(image_store_max_gib * (1LL << 30));
    options.image_gc_age = absl::Hours(image_gc_hours);
    options.container.pull_timeout = absl::Minutes(pull_timeout_minutes);
    if (!image_store.empty()) {
      std::string dir = std::filesystem::absolute(image_store).lexically_normal().string();
      options.container.storage_root = dir + "/storage";
      options.container.run_root = dir + "/run";
      options.container.tmp_dir = dir + "/tmp";
    }
    if (!backend.ok()) {
      if (!simulate.empty() || !absl::IsUnavailable(backend.status())) {
        err << "gpucloud agent: " << backend.status().message() << "\n";
        return 1;
      }
      err << "gpucloud agent: no NVIDIA driver (" << backend.status().message()
          << "); this node has no GPUs\n";
      backend = std::unique_ptr<GpuBackend>(std::make_unique<NoGpuBackend>());
    }
    return RunNode(**backend, server, options, metrics_listen, allow_fault_injection, out, err);
  }
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
    absl::StatusOr<HostPort> addr = ParseHostPort("--listen", listen);
    if (!addr.ok()) {
      err << "gpucloud agent: " << addr.status().message() << "\n";
      return 2;
    }
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    MetricsServer server(**backend, addr->host, addr->port, host);
    if (absl::Status s = server.Start(); !s.ok()) {
      err << "gpucloud agent: " << s.message() << "\n";
      return 1;
    }
    out << "gpucloud agent: serving http://" << addr->host << ":" << server.port() << "/metrics ("
        << node.gpus.size() << " GPUs, " << node.backend << ")" << std::endl;
    WaitForStopSignal();
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
