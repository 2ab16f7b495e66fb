#include "server/https_server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "core/log.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "server/audited_store.h"
#include "server/console_assets.h"
#include "server/http_read.h"
#include "server/metrics.h"
#include "server/rate_limit.h"
#include "server/rest_util.h"
#include "server/session_relay.h"
#include "server/tls_conn.h"
#include "server/wakeup_feed.h"

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using HttpRequest = http::request<http::string_body>;

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(std::clamp(d, absl::ZeroDuration(), absl::Hours(24 * 365)));
}

// One open connection, as Stop and the wake-ups see it. Everything here is touched only on
// `strand`, the executor the connection's coroutine runs on.
struct Conn {
  explicit Conn(asio::strand<asio::io_context::executor_type> s)
      : strand(s), wake(std::make_shared<asio::steady_timer>(s)), deadline(s) {}
  asio::strand<asio::io_context::executor_type> strand;
  // What a watch or followed log waits on between batches: expires, or a WakeupFeed cancels it.
  std::shared_ptr<asio::steady_timer> wake;
  // When it fires, the socket is closed (what the connection is doing took too long).
  asio::steady_timer deadline;
  tcp::socket* socket = nullptr;  // while the coroutine has one: for Stop and the deadline
};

// Points conn.socket at `socket` for as long as it lives.
class Attach {
 public:
  Attach(Conn& conn, tcp::socket& socket) : conn_(conn) { conn_.socket = &socket; }
  ~Attach() {
    conn_.socket = nullptr;
    conn_.deadline.cancel();
  }
  Attach(const Attach&) = delete;
  Attach& operator=(const Attach&) = delete;

 private:
  Conn& conn_;
};

// A connection's I/O as the request handling sees it.
struct Link {
  std::shared_ptr<Conn> conn;
  TlsConn& tls;
  // The verified client certificate's CN and serial (an agent's), for the whole connection.
  std::optional<std::pair<std::string, std::string>> peer;
  std::string peer_ip;  // the client's address, for the audit log
  // What is read but not parsed yet (the start of a pipelined request).
  beast::flat_buffer buffer;
  // Closes the socket unless disarmed (or armed again) within `d`.
  void Arm(absl::Duration d) {
    conn->deadline.expires_after(Chrono(d));
    conn->deadline.async_wait([weak = std::weak_ptr<Conn>(conn)](beast::error_code ec) {
      std::shared_ptr<Conn> c = weak.lock();
      if (!ec && c && c->socket != nullptr) c->socket->close(ec);
    });
  }
  void Disarm() { conn->deadline.cancel(); }
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

// Coroutines here are called with named objects only, never a temporary of class type in the
// co_await expression: GCC 12 destroys such temporaries at the wrong time (early, or twice).
//
// Runs `f` (a blocking call into the API or the store) on `pool` and comes back with its result
// (or its exception) to the calling coroutine's executor.
asio::awaitable<Response> CallOn(asio::thread_pool& pool, const std::function<Response()>& f) {
  auto task = [&f]() -> asio::awaitable<Response> { co_return f(); };
  Response out = co_await asio::co_spawn(pool, std::move(task), asio::use_awaitable);
  co_return out;
}

// The store's change log as the keys a WakeupFeed needs, a revision's changes together.
WakeupFeed::Changes StoreChanges(store::Store& store) {
  return [&store](int64_t after) -> std::optional<std::vector<WakeupFeed::Change>> {
    absl::StatusOr<std::vector<store::Event>> events = store.Changes("", after, 4096);
    if (!events.ok()) return std::nullopt;  // compacted past `after` (or failing): unknown
    std::vector<WakeupFeed::Change> out;
    for (store::Event& e : *events) out.push_back({e.revision, std::move(e.kv.key)});
    return out;
  };
}

int DefaultIoThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8);
}

}  // namespace

struct HttpsServer::Impl {
  RestApi& api;
  const TokenBook& tokens;
  store::Store& store;
  Options options;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  // Blocking calls (the API, the store) run here, not on the I/O threads: a pool for nodes (and
  // the bootstrap token), one for admins, one for tenants, so that neither a tenant's flood nor
  // admins' writes waiting on a slow store (etcd under load) delay an agent's heartbeat.
  // Agents' and admins' watches and followed logs read on stream_pool, so that their reads do not
  // queue heartbeats either.
  asio::thread_pool node_pool, admin_pool, tenant_pool, stream_pool;
  asio::ssl::context tls_context{asio::ssl::context::tls_server};
  tcp::acceptor acceptor{asio::make_strand(io)};
  WakeupFeed store_feed;
  std::unique_ptr<WakeupFeed> log_feed;  // with options.logs
  std::atomic<bool> started{false}, stopping{false};
  // Open connections and whether the accept loop still runs; Stop waits for both to end.
  std::mutex mu;
  std::condition_variable drained;
  std::map<uint64_t, std::shared_ptr<Conn>> open;  // guarded by mu
  uint64_t next_id = 0, refused = 0;               // guarded by mu
  bool accepting = false;                          // guarded by mu
  ApiMetrics metrics;
  SessionRelay relay{SessionRelay::Options{}};  // its lines are news, not warnings: log::Info
  TenantLimiter limiter;
  TokenBuckets rate;

  Impl(RestApi& a, const TokenBook& t, store::Store& s, Options o)
      : api(a),
        tokens(t),
        store(s),
        options(std::move(o)),
        node_pool(options.handler_threads),
        admin_pool(options.handler_threads),
        tenant_pool(options.handler_threads),
        stream_pool(options.handler_threads),
        store_feed(
            [&s](int64_t after, absl::Duration d) {
              s.WaitForChange(after, d);
              return s.Revision();
            },
            s.Revision(), absl::Milliseconds(50), StoreChanges(s)),
        limiter(options.max_requests_per_tenant, options.max_streams_per_tenant),
        rate(options.tenant_requests_per_second, options.tenant_request_burst) {
    if (options.logs != nullptr) {
      LogStore* logs = options.logs;
      // The position is the count of appends: followers wake when something was appended.
      log_feed = std::make_unique<WakeupFeed>(
          [logs](int64_t after, absl::Duration d) {
            return static_cast<int64_t>(logs->WaitForMore(static_cast<uint64_t>(after), d));
          },
          static_cast<int64_t>(logs->WaitForMore(0, absl::ZeroDuration())));
    }
  }

  void Log(const std::string& line) {
    if (options.log) {
      options.log(line);
    } else {
      log::Warn("server", line);
    }
  }

  // ---- Accepting ----

  asio::awaitable<void> AcceptLoop() {
    absl::Duration backoff = absl::Milliseconds(5);
    bool failing = false;
    asio::steady_timer pause(acceptor.get_executor());
    while (!stopping) {
      auto strand = asio::make_strand(io);
      tcp::socket socket(strand);
      beast::error_code ec;
      co_await acceptor.async_accept(socket, Into(ec));
      if (stopping) break;
      if (ec) {
        // Out of descriptors (or memory) is temporary: say so once, retry with back-off.
        if (!failing) Log(Cat("accept failed: ", ec.message(), "; retrying"));
        failing = true;
        pause.expires_after(Chrono(backoff));
        co_await pause.async_wait(Into(ec));
        backoff = std::min(backoff * 2, absl::Seconds(1));
        continue;
      }
      if (failing) Log("accepting connections again");
      failing = false;
      backoff = absl::Milliseconds(5);
      Launch(strand, std::move(socket));
    }
    std::lock_guard lock(mu);
    accepting = false;
    drained.notify_all();
  }

  // Starts serving `socket` on its own strand, or closes it when the server holds its maximum.
  void Launch(asio::strand<asio::io_context::executor_type> strand, tcp::socket socket) {
    auto conn = std::make_shared<Conn>(strand);
    uint64_t id;
    {
      std::lock_guard lock(mu);
      if (stopping || static_cast<int>(open.size()) >= options.max_connections) {
        ++refused;
        return;  // closed as `socket` goes
      }
      id = next_id++;
      open[id] = conn;
    }
    asio::co_spawn(strand, Session(conn, std::move(socket)), [this, id](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          Log(Cat("connection failed: ", x.what()));
        }
      }
      std::lock_guard lock(mu);
      open.erase(id);
      drained.notify_all();
    });
  }

  // ---- One connection ----

  asio::awaitable<void> Session(std::shared_ptr<Conn> conn, tcp::socket socket) {
    if (stopping) co_return;  // Stop may have passed this connection before it started
    Attach attach(*conn, socket);
    beast::error_code ec;
    // Each write is a whole answer (or chunk): send it now, not after the client's delayed ACK.
    socket.set_option(tcp::no_delay(true), ec);
    TlsConn tls(socket, tls_context.native_handle());
    Link link{conn, tls};
    if (auto remote = socket.remote_endpoint(ec); !ec) link.peer_ip = remote.address().to_string();
    link.Arm(options.handshake_timeout);
    co_await socket.async_wait(tcp::socket::wait_read, Into(ec));
    if (ec || stopping) co_return;
    unsigned char first = 0;
    if (::recv(socket.native_handle(), &first, 1, MSG_PEEK) != 1) co_return;
    if (first != 0x16) {  // not a TLS handshake record: plain HTTP gets a plain answer
      if (first >= 'A' && first <= 'Z') {
        co_await asio::async_write(socket, asio::buffer(kPlainHttpAnswer), Into(ec));
        socket.shutdown(tcp::socket::shutdown_send, ec);
      }
      co_return;
    }
    co_await tls.Handshake(ec);
    link.Disarm();
    if (ec) co_return;
    link.peer = tls.PeerCertificate();
    co_await ServeRequests(link);
  }

  asio::awaitable<void> ServeRequests(Link& l) {
    while (!stopping) {
      l.Arm(options.read_timeout);  // idle time before the request included
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
      parser.body_limit(kMaxBodyBytes + 1);
      beast::error_code ec;
      co_await ReadHttpRequest(l.tls, l.buffer, parser, ec);
      if (ec) {
        co_await AnswerReadError(l, parser.get(), ec);
        co_return;
      }
      l.Disarm();  // handling is not bounded by the socket's deadlines
      if (l.buffer.size() == 0) l.buffer.shrink_to_fit();  // an idle connection keeps nothing
      const HttpRequest& req = parser.get();
      bool keep = false;
      std::string failure;
      try {
        keep = co_await ServeOne(*l.conn, l, req);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      if (!failure.empty()) {
        // One request's failure is its own 500, never the server's end.
        Log(Cat("request ", std::string(req.method_string()), " ",
                std::string(req.target().substr(0, 200)), " failed: ", failure));
        const Response failed = Status(500, "InternalError", "the server failed on this request");
        co_await Write(l, req, failed);
        co_return;
      }
      if (!keep || !req.keep_alive()) co_return;
    }
  }

  asio::awaitable<void> AnswerReadError(Link& l, const HttpRequest& req, beast::error_code ec) {
    Response answer;
    if (ec == http::error::body_limit) {
      answer = Status(413, "RequestEntityTooLarge", "the body is over the limit");
    } else if (ec == http::error::header_limit) {
      answer = Status(431, "RequestHeaderFieldsTooLarge",
                      Cat("the request's header is over ", options.max_header_bytes, " bytes"));
    } else if (ec.category() == beast::error_code(http::error::end_of_stream).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      answer = Status(400, "BadRequest", Cat("malformed request: ", ec.message()));
    } else {
      co_return;  // the client went away, or was too slow: nothing to answer
    }
    co_await Write(l, req, answer);
    co_await LingeringClose(l);
  }

  // After answering a request that was not read whole, reads (and drops) what the client is
  // still sending for a moment before closing: closing with unread data makes the kernel reset
  // the connection, and the client may lose the answer.
  asio::awaitable<void> LingeringClose(Link& l) {
    l.Arm(absl::Seconds(1));
    std::vector<char> sink(16 << 10);
    size_t drained_bytes = 0;
    beast::error_code ec;
    while (!ec && !stopping && drained_bytes < (4u << 20)) {
      drained_bytes += co_await l.tls.ReadSome(sink.data(), sink.size(), ec);
    }
  }

  // Who sent `req`: its bearer token's identity, else the connection's node certificate's
  // (a node that was deleted, or whose certificate expired, is nobody).
  std::optional<Identity> Authenticate(const Link& l, const HttpRequest& req) {
    std::string auth(req[http::field::authorization]);
    if (auth.starts_with("Bearer ")) return tokens.Find(auth.substr(7));
    if (!auth.empty() || !l.peer || options.node_certs == nullptr) return std::nullopt;
    std::optional<std::string> node =
        options.node_certs->Authenticate(l.peer->first, l.peer->second);
    if (!node) return std::nullopt;
    Identity who;
    who.user = l.peer->first;
    who.node = true;
    who.node_name = *node;
    return who;
  }

  static std::string_view View(beast::string_view v) { return {v.data(), v.size()}; }

  // Serves one request; false when the connection is to be closed after it.
  asio::awaitable<bool> ServeOne(Conn& c, Link& stream, const HttpRequest& req) {
    absl::Time started_at = absl::Now();
    Request r;
    r.method = std::string(req.method_string());
    ParseTarget(std::string_view(req.target().data(), req.target().size()), &r);
    r.body = req.body();
    r.content_type = std::string(req[http::field::content_type]);
    if (r.path == "/healthz") {  // for load balancers and probes: no token needed
      const Response ok{200, "ok\n", "text/plain"};
      co_return co_await Write(stream, req, ok);
    }
    // The web console's files: no token (they hold no data; the page signs in to the API).
    if (std::optional<Response> ui = ServeConsole(
            r.method, r.path, View(req[http::field::accept_encoding]),
            View(req[http::field::if_none_match]), !req[http::field::authorization].empty())) {
      co_return co_await Write(stream, req, *ui);
    }
    std::optional<Identity> who = Authenticate(stream, req);
    if (who) r.who = *who;
    AuditRequest audit;
    BeginAudit(audit, stream, req, r, started_at);
    auto observe = [&](int status) {
      metrics.Observe(r.method, ResourceOfPath(r.path), status,
                      absl::ToDoubleSeconds(absl::Now() - started_at));
    };
    if (!who) {
      observe(401);
      const bool certificate = stream.peer && req[http::field::authorization].empty();
      Response unauthorized =
          Status(401, "Unauthorized",
                 certificate ? Cat("the node certificate for ", stream.peer->first,
                                   " is no longer valid (the node was deleted, or the certificate "
                                   "expired or was renewed twice since): join again")
                             : "a valid bearer token is required");
      FinishAudit(audit, unauthorized);
      co_return co_await Write(stream, req, unauthorized);
    }
    const bool watch = r.method == "GET" && QueryTrue(r, "watch");
    const bool follow = r.method == "GET" && r.path.ends_with("/logs") && QueryTrue(r, "follow");
    std::string session_node, session_id;
    const SessionKind session = ClassifySession(r, &session_node, &session_id);
    const bool stream_request = watch || follow || session != SessionKind::kNone;
    // Admins and agents (their certificates, and the bootstrap token they join with) are not
    // limited: a whole cluster of agents joins at once after an outage.
    const bool tenant = !r.who.admin && !r.who.node && !r.who.bootstrap;
    if (std::optional<Response> refusal = Admit(r, tenant, stream_request)) {
      observe(refusal->status);
      FinishAudit(audit, *refusal);
      co_return co_await Write(stream, req, *refusal);
    }
    absl::Cleanup release = [&] {
      if (tenant) limiter.Release(r.who.user, stream_request);
    };
    asio::thread_pool& pool = tenant ? tenant_pool : r.who.admin ? admin_pool : node_pool;
    // Agents' and admins' watches and followed logs read on a pool of their own: on a slow store
    // (etcd under load) hundreds of agents' watch reads would otherwise queue heartbeats.
    asio::thread_pool& streams = tenant ? tenant_pool : stream_pool;
    if (watch) {
      co_await StreamWatch(c, streams, stream, req, r, audit);
      co_return false;
    }
    if (follow) {
      co_await StreamLogs(c, streams, stream, req, r, audit);
      co_return false;
    }
    if (session != SessionKind::kNone) {
      const std::function<void(int)> observed = observe;
      co_await ServeSession(c, pool, stream, req, r, audit, session, session_id, observed);
      co_return false;
    }
    const bool metrics_request = r.path == "/metrics" && r.method == "GET";
    std::function<Response()> handle = [&]() {
      AuditScope scope(options.audit != nullptr ? &audit : nullptr);  // the API's Txns record it
      Response out = metrics_request ? Response{200, RenderMetrics(), "text/plain; version=0.0.4"}
                                     : api.Handle(r);
      FinishAudit(audit, out);
      return out;
    };
    Response resp = co_await CallOn(pool, handle);
    observe(resp.status);
    co_return co_await Write(stream, req, resp);
  }

  // The record of `r` (audited_store.h), when the server keeps an audit log.
  void BeginAudit(AuditRequest& a, const Link& l, const HttpRequest& req, const Request& r,
                  absl::Time received) {
    if (options.audit == nullptr) return;
    a.record = AuditRecordFor(r, l.peer_ip, std::string(req[http::field::user_agent]), NewAuditId(),
                              absl::ToUnixMillis(received));
  }
  // Records the answer `resp` unless a Txn recorded the request, and names the record in the
  // answer's Audit-Id header. A record that cannot be buffered is logged; the answer goes.
  void FinishAudit(AuditRequest& a, Response& resp) {
    if (options.audit == nullptr) return;
    resp.headers["Audit-Id"] = a.record.audit_id;
    if (absl::Status s = FinishAuditRequest(*options.audit, a, resp); !s.ok()) {
      Log(Cat("audit record of ", a.record.audit_id, " not kept: ", s.ToString()));
    }
  }

  // A tenant's request over its rate or its in-flight share: the 429 to answer. Otherwise the
  // request holds one of the tenant's slots (released by the caller).
  std::optional<Response> Admit(const Request& r, bool tenant, bool stream_request) {
    if (!tenant) return std::nullopt;
    if (absl::Duration wait = rate.Take(r.who.user, absl::Now()); wait > absl::ZeroDuration()) {
      return TooManyRequests(Cat("user ", r.who.user, " is over its request rate (",
                                 options.tenant_requests_per_second, "/s); retry later"),
                             wait);
    }
    if (!limiter.Acquire(r.who.user, stream_request)) {
      return TooManyRequests(
          Cat("user ", r.who.user, " has too many ",
              stream_request ? "watches and followed logs" : "requests", " in flight; retry"),
          absl::Seconds(1));
    }
    return std::nullopt;
  }

  std::string RenderMetrics() {
    size_t open_now = 0;
    uint64_t refused_total = 0;
    {
      std::lock_guard lock(mu);
      open_now = open.size();
      refused_total = refused;
    }
    PromText p;
    p.Append(metrics.Render(store.Revision()));
    p.Family("gpucloud_api_open_connections", "gauge", "Connections the API server holds open.")
        .Sample(open_now);
    p.Family("gpucloud_api_refused_connections_total", "counter",
             "Connections closed at once because the server held its maximum.")
        .Sample(refused_total);
    p.Family("gpucloud_api_sessions", "gauge",
             "Interactive sessions (exec, port-forward) relayed to agents now.")
        .Sample(relay.sessions());
    p.Family("gpucloud_api_session_tunnels", "gauge",
             "Agents holding a session tunnel to this server now.")
        .Sample(relay.tunnels());
    if (options.extra_metrics) p.Append(options.extra_metrics());
    return p.Take();
  }

  // ---- Writing ----

  asio::awaitable<bool> Write(Link& l, const HttpRequest& req, const Response& resp) {
    http::response<http::string_body> res{static_cast<http::status>(resp.status), req.version()};
    res.set(http::field::server, "gpucloud");
    res.set(http::field::content_type, resp.content_type);
    for (const auto& [k, v] : resp.headers) res.set(k, v);
    res.keep_alive(req.keep_alive());
    res.body() = resp.body;
    res.prepare_payload();
    std::ostringstream wire;
    wire << res;
    co_return co_await WriteRaw(l, wire.str());
  }

  // Writes `data` within the write timeout.
  asio::awaitable<bool> WriteRaw(Link& l, const std::string& data) {
    beast::error_code ec;
    l.Arm(options.write_timeout);
    co_await l.tls.WriteAll(data, ec);
    l.Disarm();
    co_return !ec;
  }

  // Writes a chunk of a streamed answer within the write timeout; the wait between chunks has
  // no deadline (the stream's own timeout ends it). "" writes the last chunk.
  asio::awaitable<bool> WriteChunk(Link& l, const std::string& data) {
    std::ostringstream size;
    size << std::hex << data.size();
    const std::string chunk =
        data.empty() ? std::string("0\r\n\r\n") : Cat(size.str(), "\r\n", data, "\r\n");
    co_return co_await WriteRaw(l, chunk);
  }

  asio::awaitable<bool> WriteStreamHead(Link& l, const HttpRequest& req, const char* content_type,
                                        const std::map<std::string, std::string>& headers) {
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::server, "gpucloud");
    head.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) head.set(k, v);
    head.chunked(true);
    std::ostringstream wire;
    wire << head.base();
    co_return co_await WriteRaw(l, wire.str());
  }

  // ---- Interactive sessions (session_relay.h) ----

  enum class SessionKind { kNone, kClient, kTunnel, kDialBack };

  // Whether `r` asks for a session's WebSocket: a client's exec or port-forward, an agent's
  // tunnel or dial-back (with the node and session id it names).
  static SessionKind ClassifySession(const Request& r, std::string* node, std::string* id) {
    constexpr std::string_view kRoot = "/apis/gpucloud/v1/";
    if (r.method != "GET" || !r.path.starts_with(kRoot)) return SessionKind::kNone;
    std::vector<std::string> parts;
    for (std::string_view rest = std::string_view(r.path).substr(kRoot.size());;) {
      size_t slash = rest.find('/');
      parts.emplace_back(rest.substr(0, slash));
      if (slash == std::string_view::npos) break;
      rest = rest.substr(slash + 1);
    }
    if (parts.size() == 5 && parts[0] == "namespaces" && parts[2] == "jobs" &&
        (parts[4] == "exec" || parts[4] == "portforward" || parts[4] == "attach")) {
      return SessionKind::kClient;
    }
    if (parts.size() >= 3 && parts[0] == "nodes") {
      *node = parts[1];
      if (parts.size() == 3 && parts[2] == "tunnel") return SessionKind::kTunnel;
      if (parts.size() == 4 && parts[2] == "sessions") {
        *id = parts[3];
        return SessionKind::kDialBack;
      }
    }
    return SessionKind::kNone;
  }

  // A session: the API decides (authorization, the task's node), then the connection becomes a
  // WebSocket that the relay serves until the session ends.
  // `observe` records the request's metrics: 101 for an upgrade, timed to it.
  asio::awaitable<void> ServeSession(Conn& c, asio::thread_pool& pool, Link& l,
                                     const HttpRequest& req, const Request& r, AuditRequest& audit,
                                     SessionKind kind, const std::string& id,
                                     const std::function<void(int)>& observe) {
    std::string node;
    std::optional<api::SessionRequest> asked;
    std::function<Response()> handle = [&]() {
      AuditScope scope(options.audit != nullptr ? &audit : nullptr);
      Response out = api.Handle(r);
      if (out.status == 200 && !websocket::is_upgrade(req)) {
        out = Status(400, "BadRequest",
                     Cat(r.path, " is a WebSocket: ask for an upgrade (as gpuctl exec does)"));
      }
      if (out.status == 200) out = SessionAnswer(out, kind, id, node, asked);
      FinishAudit(audit, out);
      return out;
    };
    Response answer = co_await CallOn(pool, handle);
    observe(answer.status == 200 ? 101 : answer.status);
    if (answer.status != 200) {
      co_await Write(l, req, answer);
      co_return;
    }
    if (kind == SessionKind::kClient) {
      co_await relay.ServeClient(l.tls, req, node, *asked, c.wake, stopping);
    } else if (kind == SessionKind::kTunnel) {
      co_await relay.ServeTunnel(l.tls, req, node);
    } else {
      tcp::socket* socket = c.socket;
      // While the client's side relays, this connection's socket is the client side's: Stop
      // must not close it from here.
      const std::function<void(bool)> own = [&c, socket](bool mine) {
        c.socket = mine ? socket : nullptr;
      };
      co_await relay.ServeDialBack(l.tls, req, node, id, c.wake, own);
    }
  }

  // The API's 200 for a session, checked against the relay: the client's target (503 when the
  // node's agent holds no tunnel), or a dial-back for a session that waits (404 otherwise).
  Response SessionAnswer(const Response& ok, SessionKind kind, const std::string& id,
                         std::string& node, std::optional<api::SessionRequest>& asked) {
    nlohmann::json j = nlohmann::json::parse(ok.body, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j["node"].is_string()) {
      return Status(500, "InternalError", "the API's session answer is not understood");
    }
    node = j["node"].get<std::string>();
    if (kind == SessionKind::kClient) {
      absl::StatusOr<api::SessionRequest> request = api::ParseSessionRequest(j["request"].dump());
      if (!request.ok())
        return Status(500, "InternalError", std::string(request.status().message()));
      asked = *std::move(request);
      if (!relay.HasTunnel(node)) {
        return Status(503, "ServiceUnavailable",
                      Cat("the agent of node ", node,
                          " has no session channel open (disconnected, or older than this "
                          "server); try again"));
      }
    }
    if (kind == SessionKind::kDialBack && !relay.Pending(node, id)) {
      return Status(404, "NotFound", Cat("no session ", id, " waits for node ", node));
    }
    return ok;
  }

  // ---- Streams ----

  // Waits on c.wake until `feed` has a change under `prefix` past `after`, `timeout` passes,
  // or Stop.
  asio::awaitable<void> WaitOn(Conn& c, WakeupFeed& feed, int64_t after, const std::string& prefix,
                               absl::Duration timeout) {
    c.wake->expires_after(Chrono(timeout));
    if (stopping || !feed.Register(c.wake, after, prefix)) co_return;
    beast::error_code ec;
    co_await c.wake->async_wait(Into(ec));
    feed.Unregister(c.wake.get());
  }

  // A followed log: what is there, then what arrives, until the job ends or the client leaves.
  // Each read goes on where the last one's X-Gpucloud-Offset says the log does (with
  // timestamps=true the answer is longer than the log bytes it holds).
  asio::awaitable<void> StreamLogs(Conn& c, asio::thread_pool& pool, Link& stream,
                                   const HttpRequest& req, const Request& request,
                                   AuditRequest& audit) {
    Request r = request;
    r.query.erase("follow");
    int64_t offset = std::max<int64_t>(0, QueryInt(r, "offset").value_or(0));
    std::function<Response()> handle = [&] { return api.Handle(r); };
    auto read = [&] { return CallOn(pool, handle); };
    int64_t seen = log_feed ? log_feed->position() : 0;  // before the read: no append is missed
    Response chunk = co_await read();
    FinishAudit(audit, chunk);  // the stream is one request: recorded as its first answer
    if (chunk.status != 200) {
      co_await Write(stream, req, chunk);
      co_return;
    }
    // Later reads are of the same attempt, even when a new one starts meanwhile, and go on from
    // where the first one (a tail, or what is since) ended: by offset, not tailLines or
    // sinceSeconds again. A job that has not started (attempt 0: no task ran) is followed into
    // the attempt current when one first shows (its first, unless that one already ended and
    // another began meanwhile), from that attempt's beginning: `gpuctl logs -f` after a submit.
    // After a later read: true when the chunk is of that attempt, read from an offset into
    // attempt 0's (empty) log, so that it must be read again from its start.
    auto pin = [&r, &offset](const Response& ch, bool later) {
      auto a = ch.headers.find("X-Gpucloud-Attempt");
      if (r.query.contains("attempt") || a == ch.headers.end() || a->second == "0") return false;
      r.query["attempt"] = a->second;
      if (!later || offset == 0) return false;
      offset = 0;
      r.query["offset"] = "0";
      return true;
    };
    pin(chunk, false);
    r.query.erase("tailLines");
    r.query.erase("sinceSeconds");
    if (!co_await WriteStreamHead(stream, req, "text/plain", chunk.headers)) co_return;
    for (;;) {
      int64_t next = offset + static_cast<int64_t>(chunk.body.size());
      if (auto o = chunk.headers.find("X-Gpucloud-Offset"); o != chunk.headers.end()) {
        if (!absl::SimpleAtoi(o->second, &next)) next = offset;
      }
      // An answer that holds no byte of the log (a limitBytes that cuts within a timestamp) is
      // not written: it would be written again with the next read.
      if (next > offset) {
        if (!chunk.body.empty() && !co_await WriteChunk(stream, chunk.body)) co_return;
        offset = next;
        r.query["offset"] = std::to_string(offset);
        chunk = co_await read();
        if (chunk.status == 200 && pin(chunk, true)) chunk = co_await read();
        if (chunk.status != 200) break;
        continue;  // drain what is there before waiting
      }
      if (!chunk.more || stopping) break;
      const std::string any;
      if (log_feed) {
        co_await WaitOn(c, *log_feed, seen, any, absl::Milliseconds(500));
        seen = log_feed->position();
      } else {
        co_await WaitOn(c, store_feed, store_feed.position(), any, absl::Milliseconds(500));
      }
      chunk = co_await read();
      if (chunk.status == 200 && pin(chunk, true)) chunk = co_await read();
      if (chunk.status != 200) break;
    }
    const std::string last_chunk;
    co_await WriteChunk(stream, last_chunk);
  }

  asio::awaitable<void> StreamWatch(Conn& c, asio::thread_pool& pool, Link& stream,
                                    const HttpRequest& req, const Request& request,
                                    AuditRequest& audit) {
    Request r = request;
    int64_t timeout_s = QueryInt(r, "timeoutSeconds").value_or(300);
    if (timeout_s < 0 || timeout_s > 999'999) timeout_s = 300;  // a bad timeout: the default
    const bool bookmarks = QueryTrue(r, "allowWatchBookmarks");
    std::function<Response()> handle = [&] { return api.Handle(r); };
    auto read = [&] { return CallOn(pool, handle); };
    Response batch = co_await read();  // validates everything; errors are answered plainly
    FinishAudit(audit, batch);         // the stream is one request: recorded as its first answer
    if (batch.status != 200) {
      co_await Write(stream, req, batch);
      co_return;
    }
    if (!co_await WriteStreamHead(stream, req, "application/x-ndjson", batch.headers)) co_return;
    absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
    absl::Time last_write = absl::InfinitePast();
    const std::string prefix = batch.watch_prefix;
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
        if (!co_await WriteChunk(stream, batch.body)) co_return;
        last_write = absl::Now();
      }
      if (stopping || absl::Now() >= deadline) break;
      co_await WaitOn(c, store_feed, last, prefix,
                      std::min(absl::Seconds(1), deadline - absl::Now()));
      if (std::optional<int64_t> quiet = store_feed.QuietThrough(last, prefix)) {
        // Nothing under the prefix changed up to `quiet`: caught up there without a read.
        batch = Response{};
        batch.revision = *quiet;
        continue;
      }
      // The changes after `last` (after an empty store's 0: the current state, as ADDED events).
      r.query["resourceVersion"] = std::to_string(last);
      batch = co_await read();
      if (batch.status != 200) break;
    }
    const std::string last_chunk;
    co_await WriteChunk(stream, last_chunk);
  }
};

HttpsServer::HttpsServer(RestApi& api, const TokenBook& tokens, store::Store& store,
                         Options options)
    : impl_(std::make_unique<Impl>(api, tokens, store, std::move(options))) {}

HttpsServer::~HttpsServer() { Stop(); }

absl::Status HttpsServer::Start() {
  Impl& m = *impl_;
  SSL_CTX_set_min_proto_version(m.tls_context.native_handle(), TLS1_3_VERSION);
  // An idle connection (an agent's keep-alive, a quiet watch) then holds no TLS buffers.
  SSL_CTX_set_mode(m.tls_context.native_handle(),
                   SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // No session tickets: no client of ours resumes (gpuctl makes one request per process, agents
  // keep their connection), and OpenSSL's default two per connection cost an encryption each
  // and arrived after the handshake, before any answer.
  SSL_CTX_set_num_tickets(m.tls_context.native_handle(), 0);
  beast::error_code ec;
  m.tls_context.use_certificate_chain_file(m.options.cert_path, ec);
  if (!ec) m.tls_context.use_private_key_file(m.options.key_path, asio::ssl::context::pem, ec);
  if (ec) return absl::InternalError(Cat("TLS: ", ec.message()));
  if (m.options.node_certs != nullptr) {
    // Agents authenticate with client certificates of the server's CA; everyone else need
    // not present one (a bearer token then says who they are).
    SSL_CTX* ctx = m.tls_context.native_handle();
    if (SSL_CTX_load_verify_locations(ctx, m.options.client_ca_path.c_str(), nullptr) != 1) {
      return absl::InternalError(Cat("TLS: cannot read the client CA ", m.options.client_ca_path));
    }
    SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(m.options.client_ca_path.c_str()));
    SSL_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
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
  m.store_feed.Start();
  if (m.log_feed) m.log_feed->Start();
  m.work.emplace(m.io.get_executor());
  m.accepting = true;
  asio::co_spawn(m.acceptor.get_executor(), m.AcceptLoop(), asio::detached);
  int n = m.options.io_threads > 0 ? m.options.io_threads : DefaultIoThreads();
  for (int i = 0; i < n; ++i) m.io_threads.emplace_back([&m] { m.io.run(); });
  m.started = true;
  return absl::OkStatus();
}

uint16_t HttpsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpsServer::Stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true) || !m.started) return;
  asio::post(m.acceptor.get_executor(), [&m] {
    beast::error_code ec;
    m.acceptor.close(ec);
  });
  {
    std::unique_lock lock(m.mu);
    for (const auto& entry : m.open) {  // each closed on its own strand
      std::shared_ptr<Conn> conn = entry.second;
      asio::post(conn->strand, [conn] {
        beast::error_code ec;
        if (conn->socket != nullptr) conn->socket->close(ec);
        conn->wake->cancel();
      });
    }
    m.drained.wait(lock, [&m] { return m.open.empty() && !m.accepting; });
  }
  m.store_feed.Stop();
  if (m.log_feed) m.log_feed->Stop();
  m.work.reset();
  for (std::thread& t : m.io_threads) t.join();
  m.node_pool.join();
  m.admin_pool.join();
  m.tenant_pool.join();
  m.stream_pool.join();
}

}  // namespace gpucloud::server
