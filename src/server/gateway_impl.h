// The gateway's private pieces shared by its source files (gateway.cc: routes, health checks,
// metrics, lifecycle; gateway_proxy.cc: client connections and forwarding). Not for use
// outside the gateway.
#ifndef GPUCLOUD_SERVER_GATEWAY_IMPL_H_
#define GPUCLOUD_SERVER_GATEWAY_IMPL_H_

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/inference_service.h"
#include "server/gateway.h"

namespace gpucloud::server::gateway_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
// One I/O thread and its own io_context (as Envoy's workers and nginx's worker processes):
// a client connection lives on one worker from accept to close, and so do the replica
// connections it uses, so that no request hops between threads.
struct Worker {
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
};

// Idle keep-alive connections to one replica, from one worker.
struct ConnPool {
  static constexpr size_t kMaxIdle = 64;
  std::mutex mu;
  std::vector<std::unique_ptr<tcp::socket>> idle;
  std::unique_ptr<tcp::socket> Take() {
    std::lock_guard lock(mu);
    if (idle.empty()) return nullptr;
    std::unique_ptr<tcp::socket> s = std::move(idle.back());
    idle.pop_back();
    return s;
  }
  void Put(std::unique_ptr<tcp::socket> s) {
    std::lock_guard lock(mu);
    if (idle.size() < kMaxIdle) idle.push_back(std::move(s));
  }
};

struct Endpoint {
  std::string job;   // the replica's job
  std::string key;   // "ns/job": its ReplicaHealth entry
  std::string host;  // the node's address
  uint16_t port = 0;
  std::string host_header;  // "host:port"
  std::shared_ptr<gateway::ReplicaHealth::Entry> health;
  // Per worker (Gateway::Impl::workers' order): each worker's idle connections to it.
  std::shared_ptr<std::vector<std::unique_ptr<ConnPool>>> pools;
};

struct Route {
  std::string key;  // "ns/name"
  std::shared_ptr<const InferenceService> svc;
  std::vector<Endpoint> endpoints;
};
using Routes = std::map<std::string, std::shared_ptr<const Route>>;

// Requests waiting for a replica of a service: timers that a change cancels (each on its own
// executor).
struct Waiter {
  std::shared_ptr<asio::steady_timer> timer;
};

// What one batch caller waits for: the batch's answer for it.
struct BatchSlot {
  std::vector<std::string> instances;
  std::shared_ptr<asio::steady_timer> wake;
  std::mutex mu;
  bool done = false;
  int status = 0;
  std::string body;
  std::string content_type = "application/json";
};
// A service's batch being gathered.
struct PendingBatch {
  std::vector<std::shared_ptr<BatchSlot>> slots;
  size_t instances = 0;
  uint64_t generation = 0;  // which batch the delay timer belongs to
};

// Per service, for /metrics.
struct ServiceCounters {
  std::map<int, int64_t> by_code;
  std::vector<int64_t> latency_counts;  // per kLatencyBounds, then +Inf (not cumulative)
  double latency_sum = 0;
  int64_t latency_count = 0;
  int64_t retries = 0;
  int64_t queued = 0;                 // waiting now
  std::vector<int64_t> batch_counts;  // per kBatchBounds, then +Inf
  double batch_sum = 0;
  int64_t batch_count = 0;
};

inline const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,    1,     2.5,  5,     10,   30};
inline const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

}  // namespace gpucloud::server::gateway_detail

namespace gpucloud::server {

struct Gateway::Impl {
  using Route = gateway_detail::Route;
  using Routes = gateway_detail::Routes;
  using Endpoint = gateway_detail::Endpoint;

  Impl(store::Store& s, const TokenBook& t, const Authorizer& a, gateway::LoadMeter& l,
       gateway::ReplicaHealth& h, GatewayOptions o)
      : store(s), tokens(t), authorizer(a), load(l), health(h), options(std::move(o)) {}

  store::Store& store;
  const TokenBook& tokens;
  const Authorizer& authorizer;
  gateway::LoadMeter& load;
  gateway::ReplicaHealth& health;
  GatewayOptions options;
  SystemClock clock;

  std::vector<std::unique_ptr<gateway_detail::Worker>> workers = MakeWorkers(options.io_threads);
  size_t next_worker = 0;  // the accept loop's (round robin)
  gateway_detail::asio::ssl::context tls_context{gateway_detail::asio::ssl::context::tls_server};
  gateway_detail::tcp::acceptor acceptor{workers[0]->io};
  std::atomic<bool> started{false}, stopping{false};
  std::atomic<uint64_t> turn{0};

  // Routes, published by the route thread.
  std::atomic<std::shared_ptr<const Routes>> routes{std::make_shared<const Routes>()};
  std::thread route_thread;
  std::mutex route_wait_mu;
  std::condition_variable route_wait;

  // Open connections (sockets, for Stop) and the accept loop; Stop waits for both.
  std::mutex mu;
  std::condition_variable drained;
  struct OpenConn {
    gateway_detail::asio::any_io_executor executor;  // its worker's
    gateway_detail::tcp::socket* socket = nullptr;
  };
  std::map<uint64_t, std::shared_ptr<OpenConn>> open;
  uint64_t next_id = 0;
  bool accepting = false;
  std::map<std::string, std::vector<gateway_detail::Waiter>> waiters;  // by service; under mu
  std::map<std::string, gateway_detail::PendingBatch> batches;         // by service; under mu
  bool health_running = false;                                         // under mu

  // The counters, one shard per worker (a worker's thread counts in its own: no contention);
  // RenderMetrics adds them up.
  struct CounterShard {
    std::mutex mu;
    std::map<std::string, gateway_detail::ServiceCounters> by_service;
  };
  std::vector<std::unique_ptr<CounterShard>> shards = MakeShards(workers.size());
  static std::vector<std::unique_ptr<CounterShard>> MakeShards(size_t n) {
    std::vector<std::unique_ptr<CounterShard>> out;
    for (size_t i = 0; i < n; ++i) out.push_back(std::make_unique<CounterShard>());
    return out;
  }
  CounterShard& MyShard();  // the calling worker's (shard 0 from any other thread)

  std::shared_ptr<const Routes> Snapshot() const { return routes.load(); }
  std::shared_ptr<const Route> RouteOf(const std::string& key) const {
    std::shared_ptr<const Routes> r = Snapshot();
    auto it = r->find(key);
    return it == r->end() ? nullptr : it->second;
  }
  void Log(const std::string& line) const;
  static std::vector<std::unique_ptr<gateway_detail::Worker>> MakeWorkers(int n);
  // The index in `workers` of the worker whose io_context runs `ex`.
  size_t WorkerOf(const gateway_detail::asio::any_io_executor& ex) const;
  // A fresh set of per-worker pools for a replica.
  std::shared_ptr<std::vector<std::unique_ptr<gateway_detail::ConnPool>>> NewPools() const;
  // Wakes the requests waiting for a replica of `service` ("" for every service).
  void WakeWaiters(const std::string& service);
  void Count(const std::string& service, int code, double seconds, bool retried);
  void CountQueued(const std::string& service, int delta);
  void CountBatch(const std::string& service, size_t size);

  // gateway.cc
  void RouteLoop();
  // Every second with options.publish_load: this gateway's LoadReports into the store.
  void PublishLoad(int64_t now_ms);
  void PublishRoutes(const std::map<std::string, std::shared_ptr<const InferenceService>>& svcs,
                     const std::map<std::string, nlohmann::ordered_json>& endpoints);
  gateway_detail::asio::awaitable<void> HealthLoop();
  gateway_detail::asio::awaitable<void> CheckOne(std::string service, Endpoint ep);
  // gateway_proxy.cc
  gateway_detail::asio::awaitable<void> AcceptLoop();
  gateway_detail::asio::awaitable<void> Session(std::shared_ptr<OpenConn> conn,
                                                gateway_detail::tcp::socket socket);
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_GATEWAY_IMPL_H_
