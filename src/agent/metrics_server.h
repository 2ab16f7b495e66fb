// The agent's metrics endpoint: plain HTTP (like dcgm-exporter, default port 9400) serving
// GET /metrics — a fresh GPU sample in dcgm-exporter's names (exporter.h) — and GET /healthz.
// One request at a time on one thread; Start returns once it listens. Thread-safe to Stop.
#ifndef GPUCLOUD_AGENT_METRICS_SERVER_H_
#define GPUCLOUD_AGENT_METRICS_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "agent/gpu_backend.h"

namespace gpucloud::agent {

class MetricsServer {
 public:
  // Borrows `backend` (used only from the server's thread once started).
  MetricsServer(GpuBackend& backend, std::string address, uint16_t port, std::string hostname);
  // Serves what `render` returns (the node agent's view: its last sample, with the labels of
  // the tasks on each GPU); `render` is called from the server's thread.
  MetricsServer(std::function<std::string()> render, std::string address, uint16_t port);
  ~MetricsServer();
  // Answers requests other than GET /metrics and /healthz (the agent's fault injection), as
  // (HTTP status, body). Set before Start.
  void SetHandler(std::function<std::pair<int, std::string>(const std::string& method,
                                                            const std::string& target)> handler);
  absl::Status Start();
  uint16_t port() const;
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_METRICS_SERVER_H_
