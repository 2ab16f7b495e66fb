#include "server/https_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/time/time.h"
#include "core/text.h"
#include "server/metrics.h"
#include "server/rate_limit.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// One open connection: its socket and the time by which what it is doing (a handshake, reading
// a request, writing an answer) must be done; the reaper shuts down the socket after it.
struct Connection {
  explicit Connection(asio::io_context& io) : socket(io) {}
  void Arm(absl::Duration d) { deadline_ns = absl::ToUnixNanos(absl::Now() + d); }
  void Disarm() { deadline_ns = std::numeric_limits<int64_t>::max(); }
  bool Expired(absl::Time now) const { return absl::ToUnixNanos(now) > deadline_ns.load(); }
  tcp::socket socket;
  std::atomic<int64_t> deadline_ns{std::numeric_limits<int64_t>::max()};
};

// Requests and streams in flight per tenant user (a simple form of Kubernetes' API Priority
// and Fairness; the caller exempts admins and nodes, so agents never wait behind a tenant).
class TenantLimiter {
 public:
  TenantLimiter(int max_requests, int max_streams)
      : max_requests_(max_requests), max_streams_(max_streams) {}
  // True when `user` may start one more request (stream: a watch or followed log); then
  // Release must follow.
  bool Acquire(const std::string& user, bool stream) {
    std::lock_guard lock(mu_);
    int& n = (stream ? streams_ : requests_)[user];
    if (n >= (stream ? max_streams_ : max_requests_)) return false;
    ++n;
    return true;
  }
  void Release(const std::string& user, bool stream) {
    std::lock_guard lock(mu_);
    auto& by_user = stream ? streams_ : requests_;
    if (auto it = by_user.find(user); it != by_user.end() && --it->second <= 0) by_user.erase(it);
  }

 private:
  const int max_requests_, max_streams_;
  std::mutex mu_;
  std::map<std::string, int> requests_, streams_;
};

// 429 with the seconds to wait before retrying.
Response TooManyRequests(std::string message, absl::Duration retry_after) {
  Response r = Status(429, "TooManyRequests", std::move(message));
  r.headers["Retry-After"] = std::to_string(
      std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(retry_after, absl::Seconds(1)))));
  return r;
}

// What a plain-HTTP client gets on the TLS port (it cannot read a TLS alert).
constexpr std::string_view kPlainHttpAnswer =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    "Content-Length: 48\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

}  // namespace

struct HttpsServer::Impl {
  using Stream = beast::ssl_stream<tcp::socket&>;
  RestApi& api;
  const TokenBook& tokens;
  store::Store& store;
  Options options;
  asio::io_context io;
  asio::ssl::context tls{asio::ssl::context::tls_server};
  tcp::acceptor acceptor{io};
  std::thread accept_thread;
  std::thread reaper_thread;
  // Open connections, each served by a detached thread that removes itself when done (so a
  // long-running server does not keep finished threads around); Stop waits for the set to
  // empty. Shared with those threads, so that the last one's unlock never outlives it.
  struct Connections {
    std::mutex mu;
    std::condition_variable drained;
    std::condition_variable stop_wait;  // the reaper's and the accept back-off's sleep
    std::map<uint64_t, std::shared_ptr<Connection>> open;
    uint64_t next_id = 0;
    uint64_t refused = 0;  // over max_connections
  };
  std::shared_ptr<Connections> conns = std::make_shared<Connections>();
  std::atomic<bool> stopping{false};
  ApiMetrics metrics;
  TenantLimiter limiter;
  TokenBuckets rate;

  Impl(RestApi& a, const TokenBook& t, store::Store& s, Options o)
      : api(a),
        tokens(t),
        store(s),
        options(std::move(o)),
        limiter(options.max_requests_per_tenant, options.max_streams_per_tenant),
        rate(options.tenant_requests_per_second, options.tenant_request_burst) {}

  void Log(const std::string& line) {
    if (options.log) {
      options.log(line);
    } else {
      std::cerr << "gpucloud server: " << line << std::endl;
    }
  }

  // True when the connection speaks TLS; a plain HTTP request is answered 400 here.
  bool LooksLikeTls(Connection& c) {
    unsigned char first = 0;
    beast::error_code ec;
    c.socket.receive(asio::buffer(&first, 1), tcp::socket::message_peek, ec);
    if (ec) return false;
    if (first == 0x16) return true;  // a TLS handshake record
    if (first >= 'A' && first <= 'Z') {
      asio::write(c.socket, asio::buffer(kPlainHttpAnswer), ec);
      c.socket.shutdown(tcp::socket::shutdown_send, ec);
    }
    return false;
  }

  void Serve(Connection& c) {
    c.Arm(options.handshake_timeout);
    if (!LooksLikeTls(c)) return;
    Stream stream(c.socket, tls);
    beast::error_code ec;
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) return;
    beast::flat_buffer buffer;
    while (!stopping) {
      c.Arm(options.read_timeout);  // idle time before the request included
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
      parser.body_limit(kMaxBodyBytes + 1);
      http::read(stream, buffer, parser, ec);
      if (ec) {
        AnswerReadError(c, stream, parser.get(), ec);
        return;
      }
      c.Disarm();  // handling is not bounded by the socket's deadlines; each write arms its own
      const http::request<http::string_body>& req = parser.get();
      bool keep = false;
      try {
        keep = ServeOne(c, stream, req);
      } catch (const std::exception& e) {
        // One request's failure is its own 500, never the server's end.
        Log(Cat("request ", std::string(req.method_string()), " ",
                std::string(req.target().substr(0, 200)), " failed: ", e.what()));
        Write(c, stream, req, Status(500, "InternalError", "the server failed on this request"));
        return;
      }
      if (!keep || !req.keep_alive()) return;
    }
  }

  template <typename Req>
  void AnswerReadError(Connection& c, Stream& stream, const Req& req, beast::error_code ec) {
    if (ec == http::error::body_limit) {
      Write(c, stream, req, Status(413, "RequestEntityTooLarge", "the body is over the limit"));
    } else if (ec == http::error::header_limit) {
      Write(c, stream, req,
            Status(431, "RequestHeaderFieldsTooLarge",
                   Cat("the request's header is over ", options.max_header_bytes, " bytes")));
    } else if (ec.category() == beast::error_code(http::error::end_of_stream).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      Write(c, stream, req, Status(400, "BadRequest", Cat("malformed request: ", ec.message())));
    } else {
      return;  // the client went away: nothing to answer
    }
    LingeringClose(c, stream);
  }

  // After answering a request that was not read whole, reads (and drops) what the client is
  // still sending for a moment before closing: closing with unread data makes the kernel reset
  // the connection, and the client may lose the answer.
  void LingeringClose(Connection& c, Stream& stream) {
    c.Arm(absl::Seconds(1));
    char sink[16 << 10];
    size_t drained = 0;
    beast::error_code ec;
    while (!ec && drained < (4u << 20)) drained += stream.read_some(asio::buffer(sink), ec);
  }

  // Serves one request; false when the connection is to be closed after it.
  bool ServeOne(Connection& c, Stream& stream, const http::request<http::string_body>& req) {
    absl::Time started = absl::Now();
    Request r;
    r.method = std::string(req.method_string());
    ParseTarget(std::string_view(req.target().data(), req.target().size()), &r);
    r.body = req.body();
    if (r.path == "/healthz") {  // for load balancers and probes: no token needed
      return Write(c, stream, req, Response{200, "ok\n", "text/plain"});
    }
    std::string auth(req[http::field::authorization]);
    std::optional<Identity> who =
        auth.starts_with("Bearer ") ? tokens.Find(auth.substr(7)) : std::nullopt;
    auto observe = [&](int status) {
      metrics.Observe(r.method, ResourceOfPath(r.path), status,
                      absl::ToDoubleSeconds(absl::Now() - started));
    };
    if (!who) {
      observe(401);
      return Write(c, stream, req,
                   Response{401,
                            "{\"apiVersion\":\"v1\",\"kind\":\"Status\",\"status\":\"Failure\","
                            "\"reason\":\"Unauthorized\",\"code\":401,\"message\":\"a valid "
                            "bearer token is required\"}\n"});
    }
    r.who = *who;
    const bool watch =
        r.method == "GET" && r.query.contains("watch") && r.query.at("watch") == "true";
    const bool follow = r.method == "GET" && r.path.ends_with("/logs") &&
                        r.query.contains("follow") && r.query.at("follow") == "true";
    const bool stream_request = watch || follow;
    const bool tenant = !r.who.admin && !r.who.node;  // admins and agents are not limited
    if (absl::Duration wait = tenant ? rate.Take(r.who.user, absl::Now()) : absl::ZeroDuration();
        wait > absl::ZeroDuration()) {
      observe(429);
      return Write(c, stream, req,
                   TooManyRequests(Cat("user ", r.who.user, " is over its request rate (",
                                       options.tenant_requests_per_second, "/s); retry later"),
                                   wait));
    }
    if (tenant && !limiter.Acquire(r.who.user, stream_request)) {
      observe(429);
      return Write(c, stream, req,
                   TooManyRequests(Cat("user ", r.who.user, " has too many ",
                                       stream_request ? "watches and followed logs" : "requests",
                                       " in flight; retry"),
                                   absl::Seconds(1)));
    }
    absl::Cleanup release = [&] {
      if (tenant) limiter.Release(r.who.user, stream_request);
    };
    if (watch) {
      StreamWatch(c, stream, req, r);
      return false;
    }
    if (follow) {
      StreamLogs(c, stream, req, r);
      return false;
    }
    Response resp = r.path == "/metrics" && r.method == "GET"
                        ? Response{200, RenderMetrics(), "text/plain; version=0.0.4"}
                        : api.Handle(r);
    observe(resp.status);
    return Write(c, stream, req, resp);
  }

  std::string RenderMetrics() {
    size_t open = 0;
    uint64_t refused = 0;
    {
      std::lock_guard lock(conns->mu);
      open = conns->open.size();
      refused = conns->refused;
    }
    return Cat(metrics.Render(store.Revision()),
               "# HELP gpucloud_api_open_connections Connections the API server holds open.\n"
               "# TYPE gpucloud_api_open_connections gauge\n"
               "gpucloud_api_open_connections ",
               open, "\n",
               "# HELP gpucloud_api_refused_connections_total Connections closed at once because "
               "the server held its maximum.\n"
               "# TYPE gpucloud_api_refused_connections_total counter\n"
               "gpucloud_api_refused_connections_total ",
               refused, "\n", options.extra_metrics ? options.extra_metrics() : "");
  }

  template <typename Req>
  bool Write(Connection& c, Stream& stream, const Req& req, const Response& resp) {
    http::response<http::string_body> res{static_cast<http::status>(resp.status), req.version()};
    res.set(http::field::server, "gpucloud");
    res.set(http::field::content_type, resp.content_type);
    for (const auto& [k, v] : resp.headers) res.set(k, v);
    res.keep_alive(req.keep_alive());
    res.body() = resp.body;
    res.prepare_payload();
    beast::error_code ec;
    c.Arm(options.write_timeout);
    http::write(stream, res, ec);
    return !ec;
  }

  // Writes a chunk of a streamed answer within the write timeout; the wait between chunks has
  // no deadline (the stream's own timeout ends it).
  bool WriteChunk(Connection& c, Stream& stream, const std::string& data) {
    beast::error_code ec;
    c.Arm(options.write_timeout);
    if (data.empty()) {
      asio::write(stream, http::make_chunk_last(), ec);
    } else {
      asio::write(stream, http::make_chunk(asio::buffer(data)), ec);
    }
    c.Disarm();
    return !ec;
  }

  template <typename Req>
  bool WriteStreamHead(Connection& c, Stream& stream, const Req& req, const char* content_type,
                       const std::map<std::string, std::string>& headers) {
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::server, "gpucloud");
    head.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) head.set(k, v);
    head.chunked(true);
    http::response_serializer<http::empty_body> sr{head};
    beast::error_code ec;
    c.Arm(options.write_timeout);
    http::write_header(stream, sr, ec);
    c.Disarm();
    return !ec;
  }

  // A followed log: what is there, then what arrives, until the job ends or the client leaves.
  template <typename Req>
  void StreamLogs(Connection& c, Stream& stream, const Req& req, Request r) {
    r.query.erase("follow");
    int64_t offset = std::max<int64_t>(0, QueryInt(r, "offset").value_or(0));
    Response chunk = api.Handle(r);
    if (chunk.status != 200) {
      Write(c, stream, req, chunk);
      return;
    }
    // Later reads are of the same attempt, even when a new one starts meanwhile.
    if (auto a = chunk.headers.find("X-Gpucloud-Attempt"); a != chunk.headers.end()) {
      r.query["attempt"] = a->second;
    }
    if (!WriteStreamHead(c, stream, req, "text/plain", chunk.headers)) return;
    for (;;) {
      if (!chunk.body.empty()) {
        if (!WriteChunk(c, stream, chunk.body)) return;
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
    WriteChunk(c, stream, "");
  }

  template <typename Req>
  void StreamWatch(Connection& c, Stream& stream, const Req& req, Request r) {
    int64_t timeout_s = QueryInt(r, "timeoutSeconds").value_or(300);
    if (timeout_s < 0 || timeout_s > 999'999) timeout_s = 300;  // a bad timeout: the default
    const bool bookmarks =
        r.query.contains("allowWatchBookmarks") && r.query.at("allowWatchBookmarks") == "true";
    Response batch = api.Handle(r);  // validates everything; errors are answered plainly
    if (batch.status != 200) {
      Write(c, stream, req, batch);
      return;
    }
    if (!WriteStreamHead(c, stream, req, "application/x-ndjson", {})) return;
    absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
    absl::Time last_write = absl::InfinitePast();
    for (;;) {
      // The batch holds every change under the prefix up to batch.revision: the API says so,
      // rather than this reading revisions out of the objects' text (a tenant's env var named
      // resourceVersion would win that).
      const int64_t last = batch.revision;
      if (batch.body.empty() && bookmarks && absl::Now() - last_write >= absl::Seconds(1)) {
        // Nothing happened: say so (Kubernetes' BOOKMARK), so that the client knows the stream
        // is alive and where it stands.
        batch.body = Cat("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"",
                         last, "\"}}}\n");
      }
      if (!batch.body.empty()) {
        if (!WriteChunk(c, stream, batch.body)) return;
        last_write = absl::Now();
      }
      if (stopping || absl::Now() >= deadline) break;
      store.WaitForChange(last, std::min(absl::Seconds(1), deadline - absl::Now()));
      // The changes after `last` (after an empty store's 0: the current state, as ADDED events).
      r.query["resourceVersion"] = std::to_string(last);
      batch = api.Handle(r);
      if (batch.status != 200) break;
    }
    WriteChunk(c, stream, "");
  }

  // Closes connections whose deadline passed, until Stop.
  void Reap() {
    absl::Duration period = std::clamp(
        std::min({options.handshake_timeout, options.read_timeout, options.write_timeout}) / 4,
        absl::Milliseconds(10), absl::Milliseconds(500));
    std::unique_lock lock(conns->mu);
    while (!stopping) {
      conns->stop_wait.wait_for(lock, absl::ToChronoMilliseconds(period));
      absl::Time now = absl::Now();
      for (auto& [id, conn] : conns->open) {
        if (!conn->Expired(now)) continue;
        beast::error_code ec;
        conn->socket.shutdown(tcp::socket::shutdown_both, ec);
        conn->Disarm();  // once
      }
    }
  }

  void Accept() {
    absl::Duration backoff = absl::Milliseconds(5);
    bool failing = false;
    while (!stopping) {
      auto conn = std::make_shared<Connection>(io);
      beast::error_code ec;
      acceptor.accept(conn->socket, ec);
      if (stopping) break;
      if (ec) {
        // Out of descriptors (or memory) is temporary: say so once, retry with back-off.
        if (!failing) Log(Cat("accept failed: ", ec.message(), "; retrying"));
        failing = true;
        std::unique_lock lock(conns->mu);
        conns->stop_wait.wait_for(lock, absl::ToChronoMilliseconds(backoff));
        backoff = std::min(backoff * 2, absl::Seconds(1));
        continue;
      }
      if (failing) Log("accepting connections again");
      failing = false;
      backoff = absl::Milliseconds(5);
      Spawn(std::move(conn));
    }
  }

  void Spawn(std::shared_ptr<Connection> conn) {
    std::shared_ptr<Connections> set = conns;
    std::lock_guard<std::mutex> lock(set->mu);
    if (static_cast<int>(set->open.size()) >= options.max_connections) {
      ++set->refused;
      return;  // closed as `conn` goes
    }
    uint64_t id = set->next_id++;
    set->open[id] = conn;
    try {
      std::thread([this, set, conn, id]() mutable {
        try {
          Serve(*conn);  // Stop waits for this before the Impl goes away
        } catch (const std::exception& e) {
          Log(Cat("connection failed: ", e.what()));
        }
        // The socket must go before Stop can return (its io_context dies with the Impl): drop
        // this thread's reference now, and the set's under the lock, before saying it is done.
        conn.reset();
        std::lock_guard<std::mutex> done(set->mu);
        set->open.erase(id);
        set->drained.notify_all();
      }).detach();
    } catch (const std::system_error& e) {  // no thread to be had: close this one
      set->open.erase(id);
      ++set->refused;
      Log(Cat("cannot start a connection thread: ", e.what()));
    }
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
  m.accept_thread = std::thread([&m] { m.Accept(); });
  m.reaper_thread = std::thread([&m] { m.Reap(); });
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
  Impl::Connections& c = *m.conns;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stop_wait.notify_all();
  }
  if (m.accept_thread.joinable()) m.accept_thread.join();
  if (m.reaper_thread.joinable()) m.reaper_thread.join();
  std::unique_lock<std::mutex> lock(c.mu);
  for (auto& [id, conn] : c.open) conn->socket.shutdown(tcp::socket::shutdown_both, ec);
  c.drained.wait(lock, [&c] { return c.open.empty(); });
}

}  // namespace gpucloud::server
