#include "agent/metrics_server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "agent/exporter.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

struct MetricsServer::Impl {
  Impl(GpuBackend* b, std::string a, uint16_t p, std::string h)
      : backend(b), address(std::move(a)), port(p), hostname(std::move(h)) {}
  GpuBackend* backend;
  std::function<std::string()> render;
  std::function<std::pair<int, std::string>(const std::string&, const std::string&)> handler;
  std::string address;
  uint16_t port;
  std::string hostname;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<bool> stopping{false};

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

  void Serve(tcp::socket& socket) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    http::request<http::string_body> req;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    std::string target(req.target().data(), req.target().size());
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
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
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

void MetricsServer::SetHandler(
    std::function<std::pair<int, std::string>(const std::string&, const std::string&)> handler) {
  impl_->handler = std::move(handler);
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
  if (ec) return absl::UnavailableError(Cat("cannot listen on ", m.address, ":", m.port, ": ", ec.message()));
  m.thread = std::thread([&m] {
    while (!m.stopping) {
      tcp::socket socket(m.io);
      beast::error_code aec;
      m.acceptor.accept(socket, aec);
      if (aec || m.stopping) break;
      m.Serve(socket);
    }
  });
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
  m.thread.join();
  m.acceptor.close(ec);
}

}  // namespace gpucloud::agent
