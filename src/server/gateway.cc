// Gateway (gateway.h): lifecycle, routes from the store, readiness checks, metrics.
// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include "server/gateway.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/log.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "gateway/remote_loads.h"
#include "manifest/manifest.h"
#include "server/gateway_impl.h"
#include "server/object_cache.h"
#include "server/tls_conn.h"

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // GCC 12 on Asio's coroutine frames

namespace gpucloud::server {

using namespace gateway_detail;  // NOLINT: the gateway's own private names
namespace http = beast::http;
using Json = nlohmann::ordered_json;

namespace {

// host:port split at the last colon ("" host when there is none).
std::pair<std::string, uint16_t> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {"", 0};
  int port = std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return {"", 0};
  return {address.substr(0, colon), static_cast<uint16_t>(port)};
}

constexpr int kHealthFailuresToRemove = 2;
constexpr auto kHealthTick = std::chrono::milliseconds(100);

}  // namespace

void Gateway::Impl::Log(const std::string& line) const {
  if (options.log) {
    options.log(line);
  } else {
    log::Warn("gateway", line);
  }
}

std::vector<std::unique_ptr<Worker>> Gateway::Impl::MakeWorkers(int n) {
  if (n <= 0) n = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8);
  std::vector<std::unique_ptr<Worker>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<Worker>());
  return out;
}

size_t Gateway::Impl::WorkerOf(const asio::any_io_executor& ex) const {
  const asio::execution_context* ctx = &asio::query(ex, asio::execution::context);
  for (size_t i = 0; i < workers.size(); ++i) {
    if (ctx == &workers[i]->io) return i;
  }
  return 0;
}

std::shared_ptr<std::vector<std::unique_ptr<ConnPool>>> Gateway::Impl::NewPools() const {
  auto pools = std::make_shared<std::vector<std::unique_ptr<ConnPool>>>();
  for (size_t i = 0; i < workers.size(); ++i) pools->push_back(std::make_unique<ConnPool>());
  return pools;
}

void Gateway::Impl::WakeWaiters(const std::string& service) {
  std::vector<Waiter> woken;
  {
    std::lock_guard lock(mu);
    for (auto& [svc, list] : waiters) {
      if (!service.empty() && svc != service) continue;
      for (Waiter& w : list) woken.push_back(w);
    }
  }
  for (Waiter& w : woken) {
    asio::post(w.timer->get_executor(), [t = w.timer] { t->cancel(); });
  }
}

namespace {
thread_local size_t tls_worker = 0;  // the index of the worker running on this thread
}  // namespace

Gateway::Impl::CounterShard& Gateway::Impl::MyShard() {
  return *shards[std::min(tls_worker, shards.size() - 1)];
}

void Gateway::Impl::Count(const std::string& service, int code, double seconds, bool retried) {
  CounterShard& shard = MyShard();
  std::lock_guard lock(shard.mu);
  ServiceCounters& c = shard.by_service[service];
  ++c.by_code[code];
  if (c.latency_counts.empty()) c.latency_counts.assign(kLatencyBounds.size() + 1, 0);
  const size_t i = std::lower_bound(kLatencyBounds.begin(), kLatencyBounds.end(), seconds) -
                   kLatencyBounds.begin();
  ++c.latency_counts[i];
  c.latency_sum += seconds;
  ++c.latency_count;
  if (retried) ++c.retries;
}

void Gateway::Impl::CountQueued(const std::string& service, int delta) {
  CounterShard& shard = MyShard();
  std::lock_guard lock(shard.mu);
  shard.by_service[service].queued += delta;
}

void Gateway::Impl::CountBatch(const std::string& service, size_t size) {
  CounterShard& shard = MyShard();
  std::lock_guard lock(shard.mu);
  ServiceCounters& c = shard.by_service[service];
  if (c.batch_counts.empty()) c.batch_counts.assign(kBatchBounds.size() + 1, 0);
  const size_t i =
      std::lower_bound(kBatchBounds.begin(), kBatchBounds.end(), static_cast<double>(size)) -
      kBatchBounds.begin();
  ++c.batch_counts[i];
  c.batch_sum += static_cast<double>(size);
  ++c.batch_count;
}

// ---- Routes ----

void Gateway::Impl::RouteLoop() {
  ObjectCache cache("/inferenceservices/");
  bool first = true;
  int64_t published = 0;
  while (!stopping) {
    absl::StatusOr<bool> changed = cache.Sync(store);
    if (!changed.ok()) {
      Log(Cat("reading services failed: ", changed.status().message()));
    } else if (*changed || first) {
      first = false;
      std::map<std::string, std::shared_ptr<const InferenceService>> svcs;
      std::map<std::string, Json> endpoints;
      for (const auto& [key, obj] : cache.objects()) {
        manifest::ParseResult p = manifest::ParseStoredManifest(obj.doc, key);
        if (!p.ok() || p.manifests.size() != 1) continue;
        const auto* svc = std::get_if<InferenceService>(&p.manifests[0].object);
        if (svc == nullptr) continue;
        const std::string k = Cat(svc->metadata.namespace_, "/", svc->metadata.name);
        svcs[k] = std::make_shared<const InferenceService>(*svc);
        const Json st = obj.doc.value("status", Json::object());
        endpoints[k] = st.is_object() ? st.value("endpoints", Json::array()) : Json::array();
      }
      PublishRoutes(svcs, endpoints);
    }
    if (const int64_t now = clock.NowMillis(); options.publish_load && now - published >= 1000) {
      published = now;
      PublishLoad(now);
    }
    store.WaitForChange(cache.revision(), absl::Milliseconds(250));
  }
}

void Gateway::Impl::PublishLoad(int64_t now_ms) {
  std::vector<store::Op> ops;
  for (const auto& [key, route] : *Snapshot()) {
    gateway::LoadMeter::Reading r = load.Read(key, 5);
    if (r.samples.empty() && r.queued == 0 && r.in_flight == 0) continue;  // nothing new
    gateway::LoadReport report{.updated_ms = now_ms,
                               .samples = std::move(r.samples),
                               .in_flight = r.in_flight,
                               .queued = r.queued,
                               .last_request_ms = r.last_request_ms};
    ops.push_back({.key = Cat("/serviceload/", options.id, "/", key),
                   .value = gateway::LoadReportToJson(report),
                   .unlogged = true});
  }
  if (ops.empty()) return;
  if (absl::StatusOr<int64_t> rev = store.Txn(ops); !rev.ok()) {
    Log(Cat("publishing the services' load failed: ", rev.status().message()));
  }
}

void Gateway::Impl::PublishRoutes(
    const std::map<std::string, std::shared_ptr<const InferenceService>>& svcs,
    const std::map<std::string, Json>& endpoints) {
  std::shared_ptr<const Routes> old = Snapshot();
  auto next = std::make_shared<Routes>();
  std::set<std::string> keep;
  for (const auto& [key, svc] : svcs) {
    auto route = std::make_shared<Route>();
    route->key = key;
    route->svc = svc;
    const Json& eps = endpoints.at(key);
    for (const Json& e : eps.is_array() ? eps : Json::array()) {
      if (!e.is_object()) continue;
      auto [host, port] = SplitAddress(e.value("address", ""));
      if (host.empty()) continue;
      Endpoint ep{.job = e.value("job", ""),
                  .key = Cat(svc->metadata.namespace_, "/", e.value("job", "")),
                  .host = host,
                  .port = port,
                  .host_header = Cat(host, ":", port)};
      ep.health = health.Get(ep.key);
      // The same replica at the same address keeps its idle connections.
      if (auto it = old->find(key); it != old->end()) {
        for (const Endpoint& o : it->second->endpoints) {
          if (o.key == ep.key && o.host == ep.host && o.port == ep.port) ep.pools = o.pools;
        }
      }
      if (!ep.pools) ep.pools = NewPools();
      keep.insert(ep.key);
      route->endpoints.push_back(std::move(ep));
    }
    (*next)[key] = std::move(route);
  }
  routes.store(std::move(next));
  health.Retain(keep);
  for (const auto& [key, route] : *old) {
    if (!svcs.count(key)) load.Forget(key);
  }
  WakeWaiters("");
}

// ---- Readiness checks ----

asio::awaitable<void> Gateway::Impl::HealthLoop() {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  std::map<std::string, int64_t> next_check;  // by replica key
  std::set<std::string> in_progress;
  auto checking = std::make_shared<std::mutex>();
  auto done = std::make_shared<std::set<std::string>>();
  while (!stopping) {
    const int64_t now = clock.NowMillis();
    {
      std::lock_guard lock(*checking);
      for (const std::string& k : *done) in_progress.erase(k);
      done->clear();
    }
    std::shared_ptr<const Routes> r = Snapshot();
    for (const auto& [key, route] : *r) {
      for (const Endpoint& ep : route->endpoints) {
        if (in_progress.count(ep.key)) continue;
        int64_t& due = next_check[ep.key];
        if (due > now) continue;
        // Not ready: asked often, so a new replica serves as soon as it can.
        due = now + (ep.health->ready ? absl::ToInt64Milliseconds(options.health_interval) : 200);
        in_progress.insert(ep.key);
        asio::co_spawn(workers[0]->io, CheckOne(key, ep),
                       [checking, done, k = ep.key](std::exception_ptr) {
                         std::lock_guard lock(*checking);
                         done->insert(k);
                       });
      }
    }
    tick.expires_after(kHealthTick);
    beast::error_code ec;
    co_await tick.async_wait(Into(ec));
  }
  std::lock_guard lock(mu);
  health_running = false;
  drained.notify_all();
}

asio::awaitable<void> Gateway::Impl::CheckOne(std::string service, Endpoint ep) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(absl::ToChronoMilliseconds(options.health_timeout));
  beast::error_code ec;
  tcp::resolver resolver(co_await asio::this_coro::executor);
  auto found = co_await resolver.async_resolve(ep.host, std::to_string(ep.port), Into(ec));
  bool ok = false;
  if (!ec) co_await stream.async_connect(found, Into(ec));
  if (!ec) {
    std::shared_ptr<const Route> route = RouteOf(service);
    http::request<http::empty_body> req{http::verb::get, "/", 11};
    if (route) req.target(route->svc->spec.readiness_path);
    req.set(http::field::host, Cat(ep.host, ":", ep.port));
    req.set(http::field::user_agent, "gpucloud-gateway");
    req.keep_alive(false);
    co_await http::async_write(stream, req, Into(ec));
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    if (!ec) co_await http::async_read(stream, buffer, res, Into(ec));
    ok = !ec && res.result_int() >= 200 && res.result_int() < 300;
  }
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  if (ok) {
    ep.health->failures = 0;
    if (!ep.health->ready.exchange(true)) WakeWaiters(service);
  } else if (++ep.health->failures >= kHealthFailuresToRemove) {
    ep.health->ready = false;
  }
}

// ---- Metrics ----

namespace {

// Adds `b` into `a`.
void Merge(ServiceCounters& a, const ServiceCounters& b) {
  for (const auto& [code, n] : b.by_code) a.by_code[code] += n;
  auto add = [](std::vector<int64_t>& x, const std::vector<int64_t>& y) {
    if (x.empty()) x.assign(y.size(), 0);
    for (size_t i = 0; i < y.size() && i < x.size(); ++i) x[i] += y[i];
  };
  add(a.latency_counts, b.latency_counts);
  a.latency_sum += b.latency_sum;
  a.latency_count += b.latency_count;
  a.retries += b.retries;
  a.queued += b.queued;
  add(a.batch_counts, b.batch_counts);
  a.batch_sum += b.batch_sum;
  a.batch_count += b.batch_count;
}

}  // namespace

std::string Gateway::RenderMetrics() const {
  std::map<std::string, ServiceCounters> counters;
  for (const auto& shard : impl_->shards) {
    std::lock_guard lock(shard->mu);
    for (const auto& [svc, c] : shard->by_service) Merge(counters[svc], c);
  }
  PromText out;
  auto labels = [](const std::string& svc) {
    const size_t slash = svc.find('/');
    return PromLabels{{"namespace", svc.substr(0, slash)}, {"service", svc.substr(slash + 1)}};
  };
  out.Family("gpucloud_service_requests_total", "counter",
             "Requests the gateway answered, by HTTP status.");
  for (const auto& [svc, c] : counters) {
    for (const auto& [code, n] : c.by_code) {
      PromLabels l = labels(svc);
      l.emplace_back("code", std::to_string(code));
      out.Sample(l, static_cast<double>(n));
    }
  }
  // A histogram of per-bucket counts (the last +Inf's), made cumulative.
  auto histogram = [&](const std::string& svc, const std::vector<double>& bounds,
                       const std::vector<int64_t>& counts, double sum, int64_t count) {
    if (counts.empty()) return;
    std::vector<double> cumulative;
    double running = 0;
    for (int64_t n : counts) cumulative.push_back(running += static_cast<double>(n));
    out.Histogram(labels(svc), bounds, cumulative, sum, static_cast<double>(count));
  };
  out.Family("gpucloud_service_request_duration_seconds", "histogram",
             "Time from a request's arrival at the gateway to its answer, waiting included.");
  for (const auto& [svc, c] : counters) {
    histogram(svc, kLatencyBounds, c.latency_counts, c.latency_sum, c.latency_count);
  }
  out.Family("gpucloud_service_queued_requests", "gauge",
             "Requests waiting for a ready replica (a service scaling from zero).");
  for (const auto& [svc, c] : counters) out.Sample(labels(svc), static_cast<double>(c.queued));
  out.Family("gpucloud_service_retries_total", "counter",
             "Requests tried again on another replica.");
  for (const auto& [svc, c] : counters) out.Sample(labels(svc), static_cast<double>(c.retries));
  out.Family("gpucloud_service_batch_size", "histogram", "Instances per batch sent to a replica.");
  for (const auto& [svc, c] : counters) {
    histogram(svc, kBatchBounds, c.batch_counts, c.batch_sum, c.batch_count);
  }
  return out.Take();
}

// ---- Lifecycle ----

Gateway::Gateway(store::Store& store, const TokenBook& tokens, const Authorizer& authorizer,
                 gateway::LoadMeter& load, gateway::ReplicaHealth& health, GatewayOptions options)
    : impl_(std::make_unique<Impl>(store, tokens, authorizer, load, health, std::move(options))) {}

Gateway::~Gateway() { Stop(); }

absl::Status Gateway::Start() {
  Impl& m = *impl_;
  SSL_CTX* ctx = m.tls_context.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A record in one read(2) rather than its header and then its body (TlsConn only waits for
  // the socket when OpenSSL asks, so bytes it holds are never waited for).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_num_tickets(ctx, 0);
  beast::error_code ec;
  m.tls_context.use_certificate_chain_file(m.options.cert_path, ec);
  if (!ec) m.tls_context.use_private_key_file(m.options.key_path, asio::ssl::context::pem, ec);
  if (ec) return absl::InternalError(Cat("gateway TLS: ", ec.message()));
  tcp::endpoint ep(asio::ip::make_address(m.options.address, ec), m.options.port);
  if (ec)
    return absl::InvalidArgumentError(Cat("--gateway-listen: bad address ", m.options.address));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(Cat("the gateway cannot listen on ", m.options.address, ":",
                                      m.options.port, ": ", ec.message()));
  }
  {
    std::lock_guard lock(m.mu);
    m.accepting = true;
    m.health_running = true;
  }
  m.route_thread = std::thread([&m] { m.RouteLoop(); });
  asio::co_spawn(m.acceptor.get_executor(), m.AcceptLoop(), asio::detached);
  asio::co_spawn(m.workers[0]->io, m.HealthLoop(), asio::detached);
  for (size_t i = 0; i < m.workers.size(); ++i) {
    Worker& w = *m.workers[i];
    w.work.emplace(w.io.get_executor());
    w.thread = std::thread([io = &w.io, i] {
      tls_worker = i;
      io->run();
    });
  }
  m.started = true;
  return absl::OkStatus();
}

uint16_t Gateway::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void Gateway::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true) || !m.started) return;
  asio::post(m.acceptor.get_executor(), [&m] {
    beast::error_code ec;
    m.acceptor.close(ec);
  });
  m.WakeWaiters("");
  {
    std::unique_lock lock(m.mu);
    for (const auto& [id, conn] : m.open) {
      asio::post(conn->executor, [conn] {
        beast::error_code ec;
        if (conn->socket != nullptr) conn->socket->close(ec);
      });
    }
    m.drained.wait(lock, [&m] { return m.open.empty() && !m.accepting && !m.health_running; });
  }
  if (m.route_thread.joinable()) m.route_thread.join();
  for (const std::unique_ptr<Worker>& w : m.workers) {
    w->work.reset();
    w->io.stop();  // readiness checks in flight are dropped
    if (w->thread.joinable()) w->thread.join();
  }
}

}  // namespace gpucloud::server
