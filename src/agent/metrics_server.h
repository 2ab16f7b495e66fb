// The agent's metrics endpoint: plain HTTP (like dcgm-exporter, default port 9400) serving
// GET /metrics — a fresh GPU sample in dcgm-exporter's names (exporter.h) — and GET /healthz.
// One thread accepts; each connection is served on a thread of its own (one request, then the
// connection is closed), with a deadline for reading the request and one for writing the answer
// (an idle or slow client is dropped, it holds up no one else), up to a number of connections
// at once: beyond it a connection gets 503 at once. Answers are computed one at a time (the
// backend and the handler are called from one thread at a time). An accept error (out of
// descriptors) is logged and retried with back-off. Start returns once it listens. Thread-safe
// to Stop.
#ifndef GPUCLOUD_AGENT_METRICS_SERVER_H_
#define GPUCLOUD_AGENT_METRICS_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/gpu_backend.h"

namespace gpucloud::agent {

class MetricsServer {
 public:
  using Handler = std::function<std::pair<int, std::string>(const std::string& method,
                                                            const std::string& target)>;
  // Borrows `backend` (used from one server thread at a time once started).
  MetricsServer(GpuBackend& backend, std::string address, uint16_t port, std::string hostname);
  // Serves what `render` returns (the node agent's view: its last sample, with the labels of
  // the tasks on each GPU); `render` is called from the server's threads, one at a time.
  MetricsServer(std::function<std::string()> render, std::string address, uint16_t port);
  ~MetricsServer();
  // Answers requests other than GET /metrics and /healthz (the agent's fault injection), as
  // (HTTP status, body). Set before Start; without one they are 404.
  void SetHandler(Handler handler);
  // The deadline to read a request, and again to write its answer (default 5 s), and the most
  // connections served at once (default 64). Set before Start.
  void SetLimits(absl::Duration io_timeout, int max_connections);
  absl::Status Start();
  uint16_t port() const;
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Fault injection on simulated GPUs, for SetHandler: POST /inject?gpu=1&xid=79,
// &temperature=95, &ecc=1, &ecc-corrected=50, &remap=2 (failure precursors), &lost=1 or
// &reset=1. Unauthenticated: only for tests and `--allow-fault-injection`. Borrows `backend`.
MetricsServer::Handler FaultInjectionHandler(GpuBackend& backend);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_METRICS_SERVER_H_
