#include "up/command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "agent/metrics_server.h"
#include "agent/node_agent.h"
#include "agent/nvml_backend.h"
#include "agent/simulated_backend.h"
#include "api/client.h"
#include "core/clock.h"
#include "core/gpu_catalog.h"
#include "core/log_flags.h"
#include "core/parse.h"
#include "core/text.h"
#include "server/command.h"
#include "server/control_plane.h"

namespace gpucloud::up {

int RunUp(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // Keys, tokens, the store and logs are the operator's alone (tasks pass through the data
  // directory to their checkpoints, so nothing in it may be readable by others).
  umask(077);
  CLI::App app{"gpucloud up: a control plane and an agent for this machine, in one command"};
  server::ControlPlaneOptions o;
  std::string listen = "127.0.0.1:8443", simulate, node_name;
  app.add_option("--data-dir", o.data_dir, "store, certificates, tokens, logs, checkpoints");
  app.add_option("--listen", listen, "address and port to serve HTTPS on (port 0: any)");
  app.add_option("--simulate", simulate,
                 "simulated GPUs, e.g. 4xH100 (default: the real ones; 4xH100 without a driver)");
  app.add_option("--node-name", node_name, "the local node's name (default: the host name)");
  std::string gateway_listen;
  server::AddGatewayFlag(app, gateway_listen);
  std::string metrics_listen;
  app.add_option("--metrics-listen", metrics_listen,
                 "serve the agent's GPU metrics (dcgm-exporter's names) on ADDR:PORT over HTTP, "
                 "as `gpucloud agent run --metrics-listen` does (port 0: any)");
  app.add_flag("--init", o.init,
               "start with an empty store even though an earlier server's credentials are there");
  std::string scheduler_config;
  app.add_option(
      "--scheduler-config", scheduler_config,
      "a SchedulerConfiguration YAML file (examples/scheduler/), as for gpucloud server");
  app.add_option("--record-scheduler", o.record_scheduler,
                 "record what the scheduler is given and decides to this file (JSON lines; "
                 "`gpucloud sim --trace FILE` replays and checks it)");
  // One machine to try things on: a namespace is made by the first write into it.
  o.namespace_provisioning = server::NamespaceProvisioning::kAuto;
  std::map<std::string, server::NamespaceProvisioning> provisioning{
      {"explicit", server::NamespaceProvisioning::kExplicit},
      {"auto", server::NamespaceProvisioning::kAuto}};
  app.add_option("--namespace-provisioning", o.namespace_provisioning,
                 "a write into a namespace that does not exist: auto (made on the spot; the "
                 "default here) or explicit (404, as `gpucloud server` answers by default)")
      ->transform(CLI::CheckedTransformer(provisioning, CLI::ignore_case));
  server::AutoscalerFlags autoscaler_flags;
  server::AddAutoscalerFlags(app, autoscaler_flags);
  log::Flags log_flags;
  log::AddFlags(app, log_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  // One machine to try things on: NodePools with provider local start agents here, which run
  // host processes from here as the local node does.
  autoscaler_flags.local_provider = true;
  if (autoscaler_flags.local_agent_args.empty()) {
    autoscaler_flags.local_agent_args = {"--allow-host-processes", "--workdir",
                                         std::filesystem::current_path().string()};
  }
  if (absl::Status s = server::ApplyAutoscalerFlags(autoscaler_flags, o); !s.ok()) {
    err << "gpucloud up: " << s.message() << "\n";
    return 2;
  }
  if (absl::Status s = log::ConfigureFromFlags(log_flags); !s.ok()) {
    err << "gpucloud up: " << s.message() << "\n";
    return 2;
  }
  // Absolute from here on: admin.config, the agent's state and the checkpoints' default root
  // are under it, and are used from other working directories (a task's, a user's shell).
  o.data_dir = std::filesystem::absolute(o.data_dir).lexically_normal().string();
  if (o.data_dir.size() > 1 && o.data_dir.ends_with('/')) o.data_dir.pop_back();
  absl::StatusOr<HostPort> addr = ParseHostPort("--listen", listen);
  if (!addr.ok()) {
    err << "gpucloud up: " << addr.status().message() << "\n";
    return 2;
  }
  o.address = addr->host;
  o.port = addr->port;
  if (absl::Status s = server::ApplyGatewayFlag(gateway_listen, o); !s.ok()) {
    err << "gpucloud up: " << s.message() << "\n";
    return 2;
  }
  if (!scheduler_config.empty()) {
    absl::StatusOr<SchedulerConfig> c = server::LoadSchedulerConfig(scheduler_config);
    if (!c.ok()) {
      err << "gpucloud up: --scheduler-config: " << c.status().message() << "\n";
      return 2;
    }
    o.scheduler = *c;
  }
  std::optional<HostPort> metrics_addr;
  if (!metrics_listen.empty()) {
    absl::StatusOr<HostPort> m = ParseHostPort("--metrics-listen", metrics_listen);
    if (!m.ok()) {
      err << "gpucloud up: " << m.status().message() << "\n";
      return 2;
    }
    metrics_addr = *m;
  }
  if (node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    node_name = ToLower(host);
  }
  absl::StatusOr<std::unique_ptr<agent::GpuBackend>> backend =
      simulate.empty() ? agent::OpenNvml(agent::kNvmlLibrary)
                       : agent::MakeSimulatedBackend(simulate, GpuCatalog::Default(), node_name);
  if (!backend.ok() && simulate.empty() && absl::IsUnavailable(backend.status())) {
    out << "gpucloud up: no NVIDIA driver here (" << backend.status().message()
        << "); simulating 4xH100\n";
    backend = agent::MakeSimulatedBackend("4xH100", GpuCatalog::Default(), node_name);
  }
  if (!backend.ok()) {
    err << "gpucloud up: " << backend.status().message() << "\n";
    return 1;
  }

  signal(SIGPIPE, SIG_IGN);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGUSR1);  // the agent's thread: the agent ended on its own
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  server::ControlPlane cp(o);
  if (absl::Status s = cp.Start(); !s.ok()) {
    err << "gpucloud up: " << s.message() << "\n";
    return 1;
  }
  api::ClientConfig client{o.address, 0, cp.ca_path(), cp.bootstrap_token()};
  {
    absl::StatusOr<api::ClientConfig> c =
        api::ParseClientConfig(Cat("server: ", cp.url(), "\ncertificate-authority: ", cp.ca_path(),
                                   "\ntoken: ", cp.bootstrap_token(), "\n"),
                               "gpucloud up");
    if (!c.ok()) {
      err << "gpucloud up: " << c.status().message() << "\n";
      return 1;
    }
    client = *c;
  }
  agent::NodeAgentOptions ao;
  ao.node_name = node_name;
  ao.address = "127.0.0.1";
  ao.state_dir = o.data_dir + "/agent";
  ao.kill_tasks_on_stop = true;
  // The demo runs the example trainer as a host process from here (the repository), as its
  // namespace's unprivileged user; images run too, where Podman is installed.
  ao.allow_host_processes = true;
  ao.workdir = std::filesystem::current_path().string();
  const SystemClock clock;
  agent::NodeAgent node(client, **backend, clock, ao);
  // The agent samples the GPUs with its heartbeats; the metrics server shows its view.
  std::unique_ptr<agent::MetricsServer> metrics;
  if (metrics_addr) {
    metrics = std::make_unique<agent::MetricsServer>([&node] { return node.MetricsText(); },
                                                     metrics_addr->host, metrics_addr->port);
    if (absl::Status s = metrics->Start(); !s.ok()) {
      err << "gpucloud up: " << s.message() << "\n";
      cp.Stop();
      return 1;
    }
  }
  absl::Status agent_status;
  // An agent that cannot run (its state directory, its GPUs) stops the whole of `up` at once,
  // with its reason, rather than leave a control plane with no node behind a healthy banner.
  std::thread agent_thread([&] {
    agent_status = node.Run();
    kill(getpid(), SIGUSR1);
  });

  out << "gpucloud up: control plane at " << cp.url() << ", node " << node_name << " ("
      << (*backend)->Name() << " GPUs)\n";
  if (!cp.gateway_url().empty()) out << "  inference gateway: " << cp.gateway_url() << "\n";
  if (metrics) {
    out << "  metrics: http://" << metrics_addr->host << ":" << metrics->port()
        << "/metrics (the agent's GPUs; the control plane's at " << cp.url() << "/metrics)\n";
  }
  out << "  use it:  export GPUCLOUD_CONFIG=" << cp.admin_config_path() << "\n"
      << "           gpuctl run --gpus 1 -- python3 examples/trainer/train.py\n"
      << "           gpuctl get jobs; gpuctl logs JOB; gpuctl top\n"
      << "  console: " << cp.url() << "/ui/ (sign in with the token in " << cp.admin_config_path()
      << ")\n"
      << "  stop it: Ctrl-C" << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  if (sig == SIGUSR1) {
    out << "gpucloud up: the agent stopped; stopping" << std::endl;
  } else {
    out << "gpucloud up: stopping on signal " << sig << std::endl;
  }
  if (metrics) metrics->Stop();
  node.Stop();
  agent_thread.join();
  cp.Stop();
  if (!agent_status.ok()) {
    err << "gpucloud up: agent: " << agent_status.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace gpucloud::up
