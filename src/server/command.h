// `gpucloud server`: the control plane — the durable store behind the HTTPS REST API, the
// controller loop (nodes, jobs, the scheduler) and the logs.
//   gpucloud server [--data-dir DIR] [--listen HOST:PORT] [--scheduler-config FILE]
//                   [--heartbeat-timeout S] [--grace S] [--checkpoint-root DIR]
// On first start it creates DIR with a CA, a server certificate, an admin token (written for
// gpuctl to DIR/admin.config, mode 0600) and the agents' bootstrap token (DIR/bootstrap.token).
// It prints the URL it serves and runs until SIGINT or SIGTERM. Exit codes: 0 after a signal,
// 1 on a startup error, 2 usage.
#ifndef GPUCLOUD_SERVER_COMMAND_H_
#define GPUCLOUD_SERVER_COMMAND_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/sched_config.h"

namespace CLI {
class App;
}

namespace gpucloud::server {
struct ControlPlaneOptions;

int RunServer(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// A file holding one SchedulerConfiguration; InvalidArgument naming the file and document.
absl::StatusOr<SchedulerConfig> LoadSchedulerConfig(const std::string& path);

// The autoscaler's flags, shared by `gpucloud server` and `gpucloud up`: --scale-down-after,
// --boot-timeout, --autoscale-backoff, --autoscale-max-gpus, --autoscale-max-usd-per-hour,
// --local-provider,
// --local-agent-arg.
struct AutoscalerFlags {
  std::string scale_down_after = "10m";
  std::string boot_timeout = "10m";
  std::string backoff = "5m";
  int64_t max_gpus = 0;
  std::string max_usd_per_hour;
  bool local_provider = false;
  std::vector<std::string> local_agent_args;
  // Money and carbon (docs/cost.md): the currency of prices and budgets, the PUE and the
  // default grid carbon intensity (gCO2e/kWh).
  std::string currency = "USD";
  double pue = 1.0;
  int32_t carbon_intensity = 0;
};
void AddAutoscalerFlags(CLI::App& app, AutoscalerFlags& flags);
// Into `o`; InvalidArgument naming the flag.
absl::Status ApplyAutoscalerFlags(const AutoscalerFlags& flags, ControlPlaneOptions& o);

// The inference gateway's --gateway-listen HOST:PORT (docs/services.md), shared by `gpucloud
// server` and `gpucloud up`: none unless given.
void AddGatewayFlag(CLI::App& app, std::string& listen);
// Into `o` (nothing for ""); InvalidArgument naming the flag.
absl::Status ApplyGatewayFlag(const std::string& listen, ControlPlaneOptions& o);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_COMMAND_H_
