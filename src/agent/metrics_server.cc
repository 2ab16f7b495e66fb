#include "agent/metrics_server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/exporter.h"
#include "core/log.h"
#include "core/query.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// One accepted connection, with an io_context of its own so that its thread can run it with
// deadlines (beast's timeouts are for asynchronous operations) and Stop can end it.
struct Connection {
  asio::io_context io;
  tcp::socket socket{io};
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace

struct MetricsServer::Impl {
  Impl(GpuBackend* b, std::string a, uint16_t p, std::string h)
      : backend(b), address(std::move(a)), port(p), hostname(std::move(h)) {}
  // Constant after Start.
  GpuBackend* backend;
  std::function<std::string()> render;
  Handler handler;
  std::string address;
  uint16_t port;
  std::string hostname;
  absl::Duration io_timeout = absl::Seconds(5);
  size_t max_connections = 64;

  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::mutex backoff_mu;
  std::condition_variable backoff_cv;  // wakes an accept back-off on Stop
  std::mutex answer_mu;                // one answer at a time: the backend is not thread-safe
  std::list<std::unique_ptr<Connection>> connections;  // the accept thread's, then Stop's

  std::pair<http::status, std::string> Answer(const std::string& target) {
    if (target == "/healthz") return {http::status::ok, "ok\n"};
    if (target != "/metrics") return {http::status::not_found, "not found\n"};
    if (render) return {http::status::ok, render()};
    absl::StatusOr<NodeGpus> node = backend->Discover();
    absl::StatusOr<std::vector<GpuSample>> samples =
        node.ok() ? backend->Sample() : absl::StatusOr<std::vector<GpuSample>>(node.status());
    if (!samples.ok()) {
      return {http::status::service_unavailable, Cat(samples.status().message(), "\n")};
    }
    return {http::status::ok, DcgmMetricsText(*node, *samples, hostname)};
  }

  http::response<http::string_body> Respond(const http::request<http::string_body>& req) {
    std::string target(req.target().data(), req.target().size());
    std::lock_guard lock(answer_mu);
    auto [status, body] = Answer(target);
    if (handler && status == http::status::not_found) {
      auto [code, text] = handler(std::string(req.method_string()), target);
      status = static_cast<http::status>(code);
      body = std::move(text);
    }
    http::response<http::string_body> res{status, req.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.keep_alive(false);
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  // On the connection's thread: one request within io_timeout, its answer within io_timeout.
  void Serve(Connection& c) {
    beast::tcp_stream stream(std::move(c.socket));
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
    auto timeout = absl::ToChronoMilliseconds(io_timeout);
    stream.expires_after(timeout);
    http::async_read(stream, buffer, req, [&](beast::error_code ec, size_t) {
      if (ec) return;  // closed, malformed or too slow: dropped
      res = Respond(req);
      stream.expires_after(timeout);
      http::async_write(stream, res, [&](beast::error_code, size_t) {
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    });
    c.io.run();
  }

  // Beyond max_connections: 503 without reading the request (a non-blocking write into an
  // empty socket buffer), then closed.
  static void Refuse(tcp::socket& socket) {
    static constexpr std::string_view kBusy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
        "Connection: close\r\n\r\ntoo many connections\n";
    beast::error_code ec;
    socket.non_blocking(true, ec);
    socket.write_some(asio::buffer(kBusy.data(), kBusy.size()), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  void JoinEnded() {
    for (auto it = connections.begin(); it != connections.end();) {
      if (!(*it)->done) {
        ++it;
        continue;
      }
      (*it)->thread.join();
      it = connections.erase(it);
    }
  }

  void AcceptLoop() {
    absl::Duration backoff = absl::Milliseconds(10);
    while (!stopping) {
      auto c = std::make_unique<Connection>();
      beast::error_code ec;
      acceptor.accept(c->socket, ec);
      if (stopping) break;
      if (ec) {
        // Out of descriptors, or a connection reset before it was accepted: try again later.
        log::Warn("agent", "metrics server: accept failed",
                  {{"error", ec.message()}, {"retry_in", absl::FormatDuration(backoff)}});
        std::unique_lock lock(backoff_mu);
        backoff_cv.wait_for(lock, absl::ToChronoMilliseconds(backoff),
                            [this] { return stopping.load(); });
        backoff = std::min(backoff * 2, absl::Seconds(1));
        continue;
      }
      backoff = absl::Milliseconds(10);
      JoinEnded();
      if (connections.size() >= max_connections) {
        Refuse(c->socket);
        continue;
      }
      Connection* raw = c.get();
      connections.push_back(std::move(c));
      raw->thread = std::thread([this, raw] {
        Serve(*raw);
        raw->done = true;
      });
    }
  }
};

MetricsServer::MetricsServer(GpuBackend& backend, std::string address, uint16_t port,
                             std::string hostname)
    : impl_(std::make_unique<Impl>(&backend, std::move(address), port, std::move(hostname))) {}

MetricsServer::MetricsServer(std::function<std::string()> render, std::string address,
                             uint16_t port)
    : impl_(std::make_unique<Impl>(nullptr, std::move(address), port, "")) {
  impl_->render = std::move(render);
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::SetHandler(Handler handler) { impl_->handler = std::move(handler); }

void MetricsServer::SetLimits(absl::Duration io_timeout, int max_connections) {
  impl_->io_timeout = io_timeout;
  impl_->max_connections = static_cast<size_t>(std::max(1, max_connections));
}

absl::Status MetricsServer::Start() {
  Impl& m = *impl_;
  beast::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(m.address, ec), m.port);
  if (ec) return absl::InvalidArgumentError(Cat("bad address ", m.address));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        Cat("cannot listen on ", m.address, ":", m.port, ": ", ec.message()));
  }
  m.thread = std::thread([&m] { m.AcceptLoop(); });
  return absl::OkStatus();
}

uint16_t MetricsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void MetricsServer::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true) || !m.thread.joinable()) return;
  beast::error_code ec;
  tcp::socket wake(m.io);  // wake the blocking accept
  wake.connect(tcp::endpoint(asio::ip::make_address(m.address, ec), port()), ec);
  { std::lock_guard lock(m.backoff_mu); }
  m.backoff_cv.notify_all();
  m.thread.join();
  m.acceptor.close(ec);
  for (auto& c : m.connections) c->io.stop();  // thread-safe; a run() not yet begun returns at once
  for (auto& c : m.connections) c->thread.join();
  m.connections.clear();
}

MetricsServer::Handler FaultInjectionHandler(GpuBackend& backend) {
  return [&backend](const std::string& method,
                    const std::string& target) -> std::pair<int, std::string> {
    RequestTarget t = ParseRequestTarget(target);
    if (t.path != "/inject") return {404, "not found\n"};
    if (method != "POST") return {405, "use POST\n"};
    // A parameter's value; nullopt (the answer said in `bad`) when it is not a number.
    constexpr int kMax = std::numeric_limits<int>::max();
    std::string bad;
    auto number = [&](const std::string& name) -> std::optional<int64_t> {
      std::optional<int64_t> v = ParseQueryInt(t.query[name], kMax);
      if (!v) bad = Cat(name, ": must be a whole number from 0 to ", kMax, "\n");
      return v;
    };
    if (!t.query.contains("gpu")) return {400, "gpu: is required\n"};
    std::optional<int64_t> gpu = number("gpu");
    if (!gpu) return {400, bad};
    for (const char* fault :
         {"xid", "temperature", "ecc", "ecc-corrected", "remap", "lost", "reset"}) {
      if (!t.query.contains(fault)) continue;
      std::optional<int64_t> value = number(fault);
      if (!value) return {400, bad};
      absl::Status s = backend.Inject(fault, static_cast<int>(*gpu), *value);
      if (!s.ok()) {
        return {s.code() == absl::StatusCode::kUnimplemented ? 501 : 400, Cat(s.message(), "\n")};
      }
      return {200, Cat("injected ", fault, " on GPU ", *gpu, "\n")};
    }
    return {400, "give one of xid, temperature, ecc, ecc-corrected, remap, lost, reset\n"};
  };
}

}  // namespace gpucloud::agent
