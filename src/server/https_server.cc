#include "server/https_server.h"

#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "core/text.h"
#include "server/metrics.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out += static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

void SplitTarget(std::string_view target, Request* r) {
  size_t q = target.find('?');
  r->path = PercentDecode(target.substr(0, q));
  if (q == std::string_view::npos) return;
  for (const std::string& pair : SplitAny(target.substr(q + 1), "&")) {
    size_t eq = pair.find('=');
    r->query[PercentDecode(pair.substr(0, eq))] =
        eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1));
  }
}

}  // namespace

struct HttpsServer::Impl {
  RestApi& api;
  const TokenBook& tokens;
  store::Store& store;
  Options options;
  asio::io_context io;
  asio::ssl::context tls{asio::ssl::context::tls_server};
  tcp::acceptor acceptor{io};
  std::thread accept_thread;
  // Open connections, each served by a detached thread that removes itself when done (so a
  // long-running server does not keep finished threads around); Stop waits for the set to
  // empty. Shared with those threads, so that the last one's unlock never outlives it.
  struct Connections {
    std::mutex mu;
    std::condition_variable drained;
    std::map<uint64_t, std::shared_ptr<tcp::socket>> open;
    uint64_t next_id = 0;
  };
  std::shared_ptr<Connections> conns = std::make_shared<Connections>();
  std::atomic<bool> stopping{false};
  ApiMetrics metrics;

  Impl(RestApi& a, const TokenBook& t, store::Store& s, Options o)
      : api(a), tokens(t), store(s), options(std::move(o)) {}

  void Serve(std::shared_ptr<tcp::socket> socket) {
    beast::ssl_stream<tcp::socket&> stream(*socket, tls);
    beast::error_code ec;
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) return;
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(kMaxBodyBytes + 1);
      http::read(stream, buffer, parser, ec);
      if (ec == http::error::body_limit) {
        Write(stream, parser.get(), Response{413, "{\"kind\":\"Status\",\"code\":413,\"message\":"
                                                  "\"the body is over the limit\"}\n"});
        return;
      }
      if (ec) return;
      const http::request<http::string_body>& req = parser.get();
      absl::Time started = absl::Now();
      Request r;
      r.method = std::string(req.method_string());
      SplitTarget(std::string_view(req.target().data(), req.target().size()), &r);
      r.body = req.body();
      if (r.path == "/healthz") {  // for load balancers and probes: no token needed
        if (!Write(stream, req, Response{200, "ok\n", "text/plain"}) || !req.keep_alive()) return;
        continue;
      }
      std::string auth(req[http::field::authorization]);
      std::optional<Identity> who =
          auth.starts_with("Bearer ") ? tokens.Find(auth.substr(7)) : std::nullopt;
      if (!who) {
        Write(stream, req,
              Response{401, "{\"apiVersion\":\"v1\",\"kind\":\"Status\",\"status\":\"Failure\","
                            "\"reason\":\"Unauthorized\",\"code\":401,\"message\":\"a valid "
                            "bearer token is required\"}\n"});
        metrics.Observe(r.method, ResourceOfPath(r.path), 401,
                        absl::ToDoubleSeconds(absl::Now() - started));
        if (!req.keep_alive()) return;
        continue;
      }
      r.who = *who;
      if (r.method == "GET" && r.query.contains("watch") && r.query.at("watch") == "true") {
        StreamWatch(stream, req, r);
        return;
      }
      if (r.method == "GET" && r.path.ends_with("/logs") && r.query.contains("follow") &&
          r.query.at("follow") == "true") {
        StreamLogs(stream, req, r);
        return;
      }
      Response resp = r.path == "/metrics" && r.method == "GET"
                          ? Response{200,
                                     metrics.Render(store.Revision()) +
                                         (options.extra_metrics ? options.extra_metrics() : ""),
                                     "text/plain; version=0.0.4"}
                          : api.Handle(r);
      metrics.Observe(r.method, ResourceOfPath(r.path), resp.status,
                      absl::ToDoubleSeconds(absl::Now() - started));
      if (!Write(stream, req, resp) || !req.keep_alive()) return;
    }
  }

  template <typename Stream>
  bool Write(Stream& stream, const http::request<http::string_body>& req, const Response& resp) {
    http::response<http::string_body> res{static_cast<http::status>(resp.status), req.version()};
    res.set(http::field::server, "gpucloud");
    res.set(http::field::content_type, resp.content_type);
    for (const auto& [k, v] : resp.headers) res.set(k, v);
    res.keep_alive(req.keep_alive());
    res.body() = resp.body;
    res.prepare_payload();
    beast::error_code ec;
    http::write(stream, res, ec);
    return !ec;
  }

  // A followed log: what is there, then what arrives, until the job ends or the client leaves.
  template <typename Stream>
  void StreamLogs(Stream& stream, const http::request<http::string_body>& req, Request r) {
    r.query.erase("follow");
    int64_t offset = std::max<int64_t>(0, QueryInt(r, "offset").value_or(0));
    Response chunk = api.Handle(r);
    if (chunk.status != 200) {
      Write(stream, req, chunk);
      return;
    }
    // Later reads are of the same attempt, even when a new one starts meanwhile.
    if (auto a = chunk.headers.find("X-Gpucloud-Attempt"); a != chunk.headers.end()) {
      r.query["attempt"] = a->second;
    }
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::server, "gpucloud");
    head.set(http::field::content_type, "text/plain");
    for (const auto& [k, v] : chunk.headers) head.set(k, v);
    head.chunked(true);
    http::response_serializer<http::empty_body> sr{head};
    beast::error_code ec;
    http::write_header(stream, sr, ec);
    if (ec) return;
    for (;;) {
      if (!chunk.body.empty()) {
        asio::write(stream, http::make_chunk(asio::buffer(chunk.body)), ec);
        if (ec) return;
        offset += static_cast<int64_t>(chunk.body.size());
        r.query["offset"] = std::to_string(offset);
        chunk = api.Handle(r);
        if (chunk.status != 200) break;
        continue;  // drain what is there before waiting
      }
      if (!chunk.more || stopping) break;
      if (options.logs != nullptr) options.logs->WaitForMore(absl::Milliseconds(500));
      chunk = api.Handle(r);
      if (chunk.status != 200) break;
    }
    asio::write(stream, http::make_chunk_last(), ec);
  }

  template <typename Stream>
  void StreamWatch(Stream& stream, const http::request<http::string_body>& req, Request r) {
    // A bad resourceVersion is answered by api.Handle below; a bad timeout means the default.
    int64_t last = std::max<int64_t>(0, QueryInt(r, "resourceVersion").value_or(0));
    int64_t timeout_s = QueryInt(r, "timeoutSeconds").value_or(300);
    if (timeout_s < 0 || timeout_s > 999'999) timeout_s = 300;
    const bool bookmarks =
        r.query.contains("allowWatchBookmarks") && r.query.at("allowWatchBookmarks") == "true";
    int64_t revision = store.Revision();  // every change up to here is in the first batch
    Response batch = api.Handle(r);        // validates everything; errors are answered plainly
    if (batch.status != 200) {
      Write(stream, req, batch);
      return;
    }
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::server, "gpucloud");
    head.set(http::field::content_type, "application/x-ndjson");
    head.chunked(true);
    http::response_serializer<http::empty_body> sr{head};
    beast::error_code ec;
    http::write_header(stream, sr, ec);
    if (ec) return;
    absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
    absl::Time last_write = absl::InfinitePast();
    for (;;) {
      int64_t seen = last;
      for (const std::string& line : SplitAny(batch.body, "\n")) {
        if (line.empty()) continue;
        size_t at = line.rfind("\"resourceVersion\":\"");
        if (at != std::string::npos) {
          seen = std::max<int64_t>(seen, std::atoll(line.c_str() + at + 19));
        }
      }
      if (batch.body.empty() && bookmarks && absl::Now() - last_write >= absl::Seconds(1)) {
        // Nothing happened: say so (Kubernetes' BOOKMARK), so that the client knows the stream
        // is alive and where it stands.
        batch.body = Cat("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"",
                         std::max(seen, revision), "\"}}}\n");
      }
      if (!batch.body.empty()) {
        asio::write(stream, http::make_chunk(asio::buffer(batch.body)), ec);
        if (ec) return;
        last_write = absl::Now();
      }
      // The batch holds every change under the prefix up to `revision` (read before it).
      last = std::max(seen, revision);
      if (stopping || absl::Now() >= deadline) break;
      store.WaitForChange(last, std::min(absl::Seconds(1), deadline - absl::Now()));
      revision = store.Revision();
      r.query["resourceVersion"] = std::to_string(last);
      batch = api.Handle(r);
      if (batch.status != 200) break;
    }
    asio::write(stream, http::make_chunk_last(), ec);
  }
};


HttpsServer::HttpsServer(RestApi& api, const TokenBook& tokens, store::Store& store,
                         Options options)
    : impl_(std::make_unique<Impl>(api, tokens, store, std::move(options))) {}

HttpsServer::~HttpsServer() { Stop(); }

absl::Status HttpsServer::Start() {
  Impl& m = *impl_;
  SSL_CTX_set_min_proto_version(m.tls.native_handle(), TLS1_3_VERSION);
  beast::error_code ec;
  m.tls.use_certificate_chain_file(m.options.cert_path, ec);
  if (!ec) m.tls.use_private_key_file(m.options.key_path, asio::ssl::context::pem, ec);
  if (ec) return absl::InternalError(Cat("TLS: ", ec.message()));
  tcp::endpoint ep(asio::ip::make_address(m.options.address, ec), m.options.port);
  if (ec) return absl::InvalidArgumentError(Cat("--listen: bad address ", m.options.address));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        Cat("cannot listen on ", m.options.address, ":", m.options.port, ": ", ec.message()));
  }
  m.accept_thread = std::thread([&m] {
    while (!m.stopping) {
      auto socket = std::make_shared<tcp::socket>(m.io);
      beast::error_code aec;
      m.acceptor.accept(*socket, aec);
      if (aec || m.stopping) break;
      std::shared_ptr<Impl::Connections> conns = m.conns;
      std::lock_guard<std::mutex> lock(conns->mu);
      uint64_t id = conns->next_id++;
      conns->open[id] = socket;
      std::thread([&m, conns, socket, id]() mutable {
        m.Serve(socket);  // Stop waits for this before `m` goes away
        // The socket must go before Stop can return (its io_context dies with `m`): drop this
        // thread's reference now, and the set's under the lock, before saying it is done.
        socket.reset();
        std::lock_guard<std::mutex> done(conns->mu);
        conns->open.erase(id);
        conns->drained.notify_all();
      }).detach();
    }
  });
  return absl::OkStatus();
}

uint16_t HttpsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpsServer::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true)) return;
  beast::error_code ec;
  if (m.accept_thread.joinable()) {  // wake the blocking accept with a connection of our own
    tcp::socket wake(m.io);
    wake.connect(tcp::endpoint(asio::ip::make_address(m.options.address, ec), port()), ec);
  }
  m.acceptor.close(ec);
  if (m.accept_thread.joinable()) m.accept_thread.join();
  Impl::Connections& c = *m.conns;
  std::unique_lock<std::mutex> lock(c.mu);
  for (auto& [id, s] : c.open) s->shutdown(tcp::socket::shutdown_both, ec);
  c.drained.wait(lock, [&c] { return c.open.empty(); });
}

}  // namespace gpucloud::server
