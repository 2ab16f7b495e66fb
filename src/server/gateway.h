// Gateway: the HTTPS front of inference services. A request to
//   https://GATEWAY/{namespace}/{service}/{path...}
// with a bearer token whose policies allow `services:Invoke` on gpucloud:service/{ns}/{name}
// is sent to one of the service's ready replicas as `/{path...}` (the same method, query,
// headers less Authorization and hop-by-hop ones, and body), over HTTP/1.1 keep-alive
// connections kept per replica, and its answer given back with `X-Gpucloud-Replica`.
//
//   - Routes come from the services' status (the service controller's endpoints, services.h),
//     read from the store on every change: every server runs a gateway, the leader or not.
//   - Balancing: least outstanding requests among ready replicas (gateway/balancer.h).
//   - Health: each replica's readiness path is asked every `health_interval`; two failures in a
//     row (or a refused connection while proxying) take it out, one success puts it back.
//   - Retries: a request whose replica could not be reached is tried on another, up to the
//     service's `retries`; one whose replica failed after it was sent is retried only when its
//     method is idempotent (GET, HEAD, OPTIONS, PUT, DELETE). 502 names the replica and why.
//   - Timeouts: the service's requestTimeout, waiting included: 504 when the replica is slower.
//   - Scale from zero: a request for a service with no ready replica waits (counted as load, so
//     the scaler asks for one: `wake_scaler` runs at once) until one is ready or its timeout
//     passes (503 naming why); at most `max_queued_per_service` wait per service (503 beyond).
//   - Dynamic batching (spec.batching: gateway/batching.h): POSTs to the batch path are
//     gathered per service and sent as one; each caller gets its slice.
//   - Bounds: the service's maxRequestBytes (413), `max_connections`, handshake and read
//     timeouts, a header limit (431).
//   - Measurements: every request is counted in the LoadMeter (the scaler's input) and the
//     ReplicaHealth table (in flight per replica); RenderMetrics gives gpucloud_service_*.
//
// Why in the server process (on a port of its own, `--gateway-listen`) rather than a daemon of
// its own: it authenticates with the server's tokens and policies in memory (no token review
// round trip per request), and hands its measurements to the service controller without a
// wire protocol. It has its own I/O threads and listener, so its traffic never waits behind the
// API's: one io_context per thread (`io_threads`), a connection and the replica connections it
// uses kept on one thread from accept to close (as Envoy's workers), so that no request hops
// between threads. Thread-safe; Stop (or the destructor) closes the listener and waits for
// connections.
#ifndef GPUCLOUD_SERVER_GATEWAY_H_
#define GPUCLOUD_SERVER_GATEWAY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gateway/load_meter.h"
#include "gateway/replica_health.h"
#include "server/authorizer.h"
#include "server/credentials.h"
#include "store/store.h"

namespace gpucloud::server {

struct GatewayOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  std::string cert_path, key_path;
  int io_threads = 0;  // 0: one per core, 2 to 8
  int max_connections = 4096;
  int max_queued_per_service = 1000;
  absl::Duration handshake_timeout = absl::Seconds(10);
  absl::Duration read_timeout = absl::Seconds(60);  // idle keep-alive included
  absl::Duration write_timeout = absl::Seconds(60);
  size_t max_header_bytes = 32 << 10;
  absl::Duration health_interval = absl::Seconds(1);
  absl::Duration health_timeout = absl::Seconds(1);
  absl::Duration connect_timeout = absl::Seconds(2);
  // Several servers on one store (etcd): every second the gateway publishes what it measured
  // of each service under /serviceload/{id}/{ns}/{name} (gateway/remote_loads.h), for the
  // leader's autoscaler. `id` names this gateway; off on a store of one server.
  bool publish_load = false;
  std::string id;
  // Called (from an I/O thread; must not block) when a request waits for a replica.
  std::function<void()> wake_scaler;
  std::function<void(const std::string&)> log;  // stderr if unset
};

class Gateway {
 public:
  // Borrows everything; all must outlive the gateway.
  Gateway(store::Store& store, const TokenBook& tokens, const Authorizer& authorizer,
          gateway::LoadMeter& load, gateway::ReplicaHealth& health, GatewayOptions options);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  absl::Status Start();
  uint16_t port() const;
  void Stop();
  // gpucloud_service_requests_total, _request_duration_seconds, _queued, _retries_total,
  // _batch_size (Prometheus text).
  std::string RenderMetrics() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_GATEWAY_H_
