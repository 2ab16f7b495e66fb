// Gateway (gateway.h): client connections, authorization, forwarding with balancing, retries,
// timeouts, waiting for a replica, and dynamic batching.
// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/object_meta.h"
#include "core/policy.h"
#include "core/text.h"
#include "gateway/balancer.h"
#include "gateway/batching.h"
#include "server/gateway_impl.h"
#include "server/http_read.h"
#include "server/rest.h"
#include "server/tls_conn.h"

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // GCC 12 on Asio's coroutine frames

namespace gpucloud::server {

using namespace gateway_detail;  // NOLINT: the gateway's own private names
namespace http = beast::http;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

constexpr size_t kMaxBodyLimit = 64 << 20;  // no service takes more (decode_service.cc)
constexpr std::string_view kPlainHttpAnswer =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 41\r\n"
    "Connection: close\r\n\r\nThe gateway speaks HTTPS only (TLS 1.3).\n";

// An answer the gateway makes itself: {"code", "reason", "message"}.
HttpResponse ErrorAnswer(int code, std::string_view reason, const std::string& message) {
  HttpResponse res{static_cast<http::status>(code), 11};
  res.set(http::field::content_type, "application/json");
  res.body() =
      nlohmann::json{{"code", code}, {"reason", reason}, {"message", message}}.dump() + "\n";
  return res;
}

bool Idempotent(http::verb v) {
  return v == http::verb::get || v == http::verb::head || v == http::verb::options ||
         v == http::verb::put || v == http::verb::delete_;
}

bool HopByHop(http::field f) {
  return f == http::field::connection || f == http::field::keep_alive ||
         f == http::field::proxy_authenticate || f == http::field::proxy_authorization ||
         f == http::field::te || f == http::field::trailer || f == http::field::transfer_encoding ||
         f == http::field::upgrade;
}

// /{ns}/{service}/{rest} of a target: the service key and what the replica is asked for.
struct Target {
  std::string ns, name, rest;
  std::string key;  // "ns/name"
};
std::optional<Target> ParseGatewayTarget(std::string_view target) {
  const size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? "" : target.substr(q);
  if (path.size() < 2 || path[0] != '/') return std::nullopt;
  const size_t a = path.find('/', 1);
  if (a == std::string_view::npos) return std::nullopt;
  const size_t b = path.find('/', a + 1);
  Target t;
  t.ns = std::string(path.substr(1, a - 1));
  t.name = std::string(path.substr(a + 1, b == std::string_view::npos ? b : b - a - 1));
  if (!ValidateDnsLabel(t.ns).ok() || !ValidateDnsLabel(t.name).ok()) return std::nullopt;
  // Plain appends: this runs for every request (Cat formats each piece).
  t.key.reserve(t.ns.size() + 1 + t.name.size());
  t.key.append(t.ns).append("/").append(t.name);
  const std::string_view rest = b == std::string_view::npos ? "/" : path.substr(b);
  t.rest.reserve(rest.size() + query.size());
  t.rest.append(rest).append(query);
  return t;
}

// Closes the connection's socket when what it waits for (a handshake, the next request, a
// write) takes longer than its limit. A timer that ticks once a second and reads the phase,
// rather than one armed and cancelled around every read: that would be two timer operations
// per request. Touched only on the connection's worker.
class Watchdog {
 public:
  explicit Watchdog(tcp::socket& s) : state_(std::make_shared<State>(s)) { Tick(state_); }
  // A tick already due runs later: it finds the state gone and touches nothing.
  ~Watchdog() {
    state_->gone = true;
    state_->timer.cancel();
  }
  void Watch(absl::Duration limit) {
    state_->since = std::chrono::steady_clock::now();
    state_->limit = absl::ToChronoMilliseconds(limit);
  }
  void Unwatch() { state_->limit = std::chrono::milliseconds(0); }

 private:
  struct State {
    explicit State(tcp::socket& s) : timer(s.get_executor()), socket(s) {}
    asio::steady_timer timer;
    tcp::socket& socket;  // valid while !gone
    SteadyTime since;
    std::chrono::milliseconds limit{0};
    bool gone = false;
  };
  static void Tick(const std::shared_ptr<State>& st) {
    st->timer.expires_after(std::chrono::seconds(1));
    st->timer.async_wait([st](beast::error_code ec) {
      if (ec || st->gone) return;
      if (st->limit.count() > 0 && std::chrono::steady_clock::now() - st->since >= st->limit) {
        st->socket.close(ec);
        return;
      }
      Tick(st);
    });
  }
  std::shared_ptr<State> state_;
};

// One attempt at one replica.
struct Attempt {
  enum class Kind { kOk, kUnreachable, kFailed, kTimeout };
  Kind kind = Kind::kOk;
  HttpResponse res;
  std::string why;
};

}  // namespace

// What a proxied request came to: the replica's answer, or the gateway's own error.
struct ProxyAnswer {
  HttpResponse res;
  std::string replica;
  bool retried = false;
};

// ---- Forwarding ----

// A deadline for the operations on one replica connection: when it passes, the socket is
// closed and `timed_out` says why the operation failed. One timer per attempt (Beast's
// tcp_stream arms one per operation).
struct AttemptClock {
  struct State {
    tcp::socket* socket = nullptr;
    bool timed_out = false;
    bool done = false;  // the attempt is over: a late expiry touches nothing
  };
  asio::steady_timer timer;
  std::shared_ptr<State> state = std::make_shared<State>();
  explicit AttemptClock(const asio::any_io_executor& ex) : timer(ex) {}
  ~AttemptClock() {
    state->done = true;
    timer.cancel();
  }
  void Arm(SteadyTime at, tcp::socket* socket) {
    state->socket = socket;
    timer.expires_at(at);
    timer.async_wait([st = state](beast::error_code ec) {
      if (ec || st->done || st->socket == nullptr) return;
      st->timed_out = true;
      st->socket->close(ec);
    });
  }
};

asio::awaitable<Attempt> SendTo(Gateway::Impl& m, const Endpoint& ep, HttpRequest& req,
                                SteadyTime deadline) {
  Attempt out;
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  ConnPool& pool = *(*ep.pools)[m.WorkerOf(ex)];
  for (int pass = 0; pass < 2; ++pass) {
    std::unique_ptr<tcp::socket> s = pass == 0 ? pool.Take() : nullptr;
    const bool reused = s != nullptr;
    beast::error_code ec;
    AttemptClock clock(ex);
    if (!s) {
      s = std::make_unique<tcp::socket>(ex);
      tcp::resolver resolver(ex);
      auto found = co_await resolver.async_resolve(ep.host, std::to_string(ep.port), Into(ec));
      clock.Arm(std::min(deadline, std::chrono::steady_clock::now() +
                                       absl::ToChronoMilliseconds(m.options.connect_timeout)),
                s.get());
      if (!ec) co_await asio::async_connect(*s, found, Into(ec));
      if (ec) {
        out.kind = Attempt::Kind::kUnreachable;
        out.why = Cat("replica ", ep.job, " (", ep.host, ":", ep.port,
                      "): ", clock.state->timed_out ? "connect timed out" : ec.message());
        co_return out;
      }
      s->set_option(tcp::no_delay(true), ec);
    }
    clock.Arm(deadline, s.get());
    co_await http::async_write(*s, req, Into(ec));
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxBodyLimit);
    parser.skip(req.method() == http::verb::head);  // its Content-Length announces no body
    beast::flat_buffer buffer;
    if (!ec) co_await http::async_read(*s, buffer, parser, Into(ec));
    if (ec && clock.state->timed_out) {
      out.kind = Attempt::Kind::kTimeout;
      out.why = Cat("replica ", ep.job, " did not answer in time");
      co_return out;
    }
    if (ec && reused && !parser.got_some()) continue;  // a keep-alive the replica had closed
    if (ec) {
      out.kind = Attempt::Kind::kFailed;
      out.why = Cat("replica ", ep.job, " (", ep.host, ":", ep.port, "): ", ec.message());
      co_return out;
    }
    out.res = parser.release();
    if (out.res.keep_alive() && buffer.size() == 0) pool.Put(std::move(s));
    co_return out;
  }
  out.kind = Attempt::Kind::kFailed;
  out.why = Cat("replica ", ep.job, " closed the connection");
  co_return out;
}

// Waits (until `deadline`, or 1 s, or a change) for a replica of `key`; false when the queue
// is full.
asio::awaitable<bool> WaitForReplica(Gateway::Impl& m, const std::string& key,
                                     SteadyTime deadline) {
  auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
  {
    std::lock_guard lock(m.mu);
    std::vector<Waiter>& list = m.waiters[key];
    if (static_cast<int>(list.size()) >= m.options.max_queued_per_service) co_return false;
    list.push_back({timer});
  }
  m.load.Queued(key, 1);
  m.CountQueued(key, 1);
  if (m.options.wake_scaler) m.options.wake_scaler();
  timer->expires_at(std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  beast::error_code ec;
  co_await timer->async_wait(Into(ec));
  {
    std::lock_guard lock(m.mu);
    std::vector<Waiter>& list = m.waiters[key];
    std::erase_if(list, [&](const Waiter& w) { return w.timer == timer; });
    if (list.empty()) m.waiters.erase(key);
  }
  m.load.Queued(key, -1);
  m.CountQueued(key, -1);
  co_return true;
}

// Sends `req` to a replica of `key`: balancing, waiting, retries, timeouts.
asio::awaitable<ProxyAnswer> Proxy(Gateway::Impl& m, const std::string& key, HttpRequest& req,
                                   SteadyTime deadline) {
  ProxyAnswer a;
  std::set<std::string> tried;
  std::string last_why;
  const bool idempotent = Idempotent(req.method());
  for (int attempts = 0;;) {
    std::shared_ptr<const Route> route = m.RouteOf(key);
    if (!route) {
      a.res = ErrorAnswer(404, "NotFound", Cat("no InferenceService ", key));
      co_return a;
    }
    std::vector<gateway::ReplicaLoad> loads;
    for (const Endpoint& ep : route->endpoints) {
      loads.push_back({.ready = ep.health->ready.load(),
                       .in_flight = ep.health->in_flight.load(),
                       .tried = tried.count(ep.key) > 0});
    }
    std::optional<size_t> pick = gateway::PickReplica(loads, m.turn++);
    if (!pick) {
      if (!tried.empty()) {
        a.res = ErrorAnswer(502, "BadGateway", Cat("no replica of ", key, " answered: ", last_why));
        co_return a;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        a.res = ErrorAnswer(503, "NoReadyReplica",
                            Cat("no replica of ", key, " became ready within the request timeout (",
                                route->svc->spec.request_timeout_seconds, "s)"));
        co_return a;
      }
      if (!co_await WaitForReplica(m, key, deadline)) {
        a.res = ErrorAnswer(
            503, "QueueFull",
            Cat(m.options.max_queued_per_service, " requests already wait for a replica of ", key));
        co_return a;
      }
      continue;
    }
    const Endpoint& ep = route->endpoints[*pick];  // `route` holds it
    req.set(http::field::host, ep.host_header);
    ++ep.health->in_flight;
    Attempt at = co_await SendTo(m, ep, req, deadline);
    --ep.health->in_flight;
    switch (at.kind) {
      case Attempt::Kind::kOk:
        a.res = std::move(at.res);
        a.replica = ep.job;
        co_return a;
      case Attempt::Kind::kTimeout:
        a.res = ErrorAnswer(
            504, "GatewayTimeout",
            Cat(at.why, " (requestTimeout ", route->svc->spec.request_timeout_seconds, "s)"));
        co_return a;
      case Attempt::Kind::kUnreachable:
        ep.health->ready = false;  // the readiness check puts it back
        [[fallthrough]];
      case Attempt::Kind::kFailed:
        tried.insert(ep.key);
        last_why = at.why;
        if ((at.kind == Attempt::Kind::kUnreachable || idempotent) &&
            attempts < route->svc->spec.retries) {
          ++attempts;
          a.retried = true;
          continue;
        }
        a.res = ErrorAnswer(502, "BadGateway", at.why);
        co_return a;
    }
  }
  co_return a;  // not reached: every attempt returns or continues
}

// ---- Dynamic batching ----

asio::awaitable<void> Dispatch(Gateway::Impl& m, std::string key, std::string path,
                               std::vector<std::shared_ptr<BatchSlot>> slots, SteadyTime deadline) {
  std::vector<std::vector<std::string>> parts;
  std::vector<size_t> counts;
  for (const auto& s : slots) {
    parts.push_back(s->instances);
    counts.push_back(s->instances.size());
  }
  HttpRequest req{http::verb::post, path, 11};
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "gpucloud-gateway");
  req.body() = gateway::BatchBody(parts);
  req.keep_alive(true);
  req.prepare_payload();
  size_t total = 0;
  for (size_t c : counts) total += c;
  m.CountBatch(key, total);
  ProxyAnswer a = co_await Proxy(m, key, req, deadline);
  std::vector<std::string> bodies(slots.size(), a.res.body());
  int status = a.res.result_int();
  if (status >= 200 && status < 300) {
    absl::StatusOr<std::vector<std::string>> split =
        gateway::SplitPredictions(a.res.body(), counts);
    if (split.ok()) {
      bodies = *std::move(split);
    } else {
      status = 502;
      const std::string body =
          ErrorAnswer(502, "BadBatchAnswer",
                      Cat("replica ", a.replica, ": ", split.status().message()))
              .body();
      std::fill(bodies.begin(), bodies.end(), body);
    }
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    std::lock_guard lock(slots[i]->mu);
    slots[i]->done = true;
    slots[i]->status = status;
    slots[i]->body = std::move(bodies[i]);
    asio::post(slots[i]->wake->get_executor(), [t = slots[i]->wake] { t->cancel(); });
  }
}

// Takes the service's gathered batch (under m.mu): what SendBatch sends.
std::vector<std::shared_ptr<BatchSlot>> TakeBatch(PendingBatch& b) {
  std::vector<std::shared_ptr<BatchSlot>> slots = std::move(b.slots);
  b.slots.clear();
  b.instances = 0;
  ++b.generation;
  return slots;
}

// Sends a batch from the worker of `ex` (not under m.mu).
void SendBatch(Gateway::Impl& m, const asio::any_io_executor& ex, const std::string& key,
               const std::string& path, std::vector<std::shared_ptr<BatchSlot>> slots,
               SteadyTime deadline) {
  if (slots.empty()) return;
  asio::co_spawn(ex, Dispatch(m, key, path, std::move(slots), deadline), asio::detached);
}

asio::awaitable<HttpResponse> ServeBatched(Gateway::Impl& m, const Route& route,
                                           const HttpRequest& req, SteadyTime deadline) {
  absl::StatusOr<std::vector<std::string>> instances = gateway::InstancesOf(req.body());
  if (!instances.ok())
    co_return ErrorAnswer(400, "BadRequest", std::string(instances.status().message()));
  const ServiceBatching& cfg = *route.svc->spec.batching;
  auto slot = std::make_shared<BatchSlot>();
  slot->instances = *std::move(instances);
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  slot->wake = std::make_shared<asio::steady_timer>(ex);
  slot->wake->expires_at(deadline);
  std::vector<std::shared_ptr<BatchSlot>> full;
  {
    std::lock_guard lock(m.mu);
    PendingBatch& b = m.batches[route.key];
    b.slots.push_back(slot);
    b.instances += slot->instances.size();
    if (b.instances >= static_cast<size_t>(cfg.max_batch_size)) {
      full = TakeBatch(b);
    } else if (b.slots.size() == 1) {
      // The first of a batch starts its delay.
      auto timer = std::make_shared<asio::steady_timer>(ex);
      timer->expires_after(std::chrono::milliseconds(cfg.max_queue_delay_ms));
      timer->async_wait([&m, ex, timer, key = route.key, path = cfg.path, gen = b.generation,
                         deadline](beast::error_code) {
        std::vector<std::shared_ptr<BatchSlot>> due;
        {
          std::lock_guard lock(m.mu);
          PendingBatch& pending = m.batches[key];
          if (pending.generation == gen) due = TakeBatch(pending);
        }
        SendBatch(m, ex, key, path, std::move(due), deadline);
      });
    }
  }
  SendBatch(m, ex, route.key, cfg.path, std::move(full), deadline);
  beast::error_code ec;
  co_await slot->wake->async_wait(Into(ec));
  std::lock_guard lock(slot->mu);
  if (!slot->done) {
    co_return ErrorAnswer(
        504, "GatewayTimeout",
        Cat("the batch of ", route.key, " was not answered within the request timeout"));
  }
  HttpResponse res{static_cast<http::status>(slot->status), 11};
  res.set(http::field::content_type, slot->content_type);
  res.body() = std::move(slot->body);
  co_return res;
}

// ---- Serving one client request ----

asio::awaitable<HttpResponse> ServeRequest(Gateway::Impl& m, const HttpRequest& req,
                                           const std::string& peer_ip) {
  std::string_view target(req.target().data(), req.target().size());
  if (target == "/healthz") {
    HttpResponse ok{http::status::ok, 11};
    ok.set(http::field::content_type, "text/plain");
    ok.body() = "ok\n";
    co_return ok;
  }
  std::optional<Target> t = ParseGatewayTarget(target);
  if (!t) {
    co_return ErrorAnswer(404, "NotFound", "the gateway serves /{namespace}/{service}/{path}");
  }
  std::string auth(req[http::field::authorization]);
  std::optional<Identity> who;
  if (auth.starts_with("Bearer ")) who = m.tokens.Find(auth.substr(7));
  if (!who) co_return ErrorAnswer(401, "Unauthorized", "a valid bearer token is required");
  const RequestedAction what{"services:Invoke",
                             ResourceName(ResourceType::kService, t->ns, t->name)};
  authz::Decision d = m.authorizer.Decide(*who, what, {});
  if (!d.allowed()) {
    co_return ErrorAnswer(403, "Forbidden",
                          Cat(who->user, " may not ", what.action, " on ", what.resource, " (",
                              d.StatementName(), ")"));
  }
  std::shared_ptr<const Route> route = m.RouteOf(t->key);
  if (!route) co_return ErrorAnswer(404, "NotFound", Cat("no InferenceService ", t->key));
  const InferenceServiceSpec& spec = route->svc->spec;
  if (req.body().size() > static_cast<size_t>(spec.max_request_bytes)) {
    co_return ErrorAnswer(413, "RequestEntityTooLarge",
                          Cat("the body is ", req.body().size(), " bytes; ", t->key,
                              " takes at most ", spec.max_request_bytes));
  }
  const SteadyTime deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(spec.request_timeout_seconds);
  const SteadyTime started = std::chrono::steady_clock::now();
  m.load.Arrived(t->key);
  HttpResponse res;
  bool retried = false;
  std::string replica;
  if (spec.batching && req.method() == http::verb::post && t->rest == spec.batching->path) {
    res = co_await ServeBatched(m, *route, req, deadline);
  } else {
    HttpRequest out{req.method(), t->rest, 11};
    for (const auto& f : req) {
      if (HopByHop(f.name()) || f.name() == http::field::authorization ||
          f.name() == http::field::host || f.name() == http::field::content_length) {
        continue;
      }
      out.set(f.name_string(), f.value());
    }
    out.set("X-Forwarded-For", peer_ip);
    out.set("X-Forwarded-Proto", "https");
    out.body() = req.body();
    out.keep_alive(true);
    out.prepare_payload();
    ProxyAnswer a = co_await Proxy(m, t->key, out, deadline);
    res = std::move(a.res);
    retried = a.retried;
    replica = a.replica;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  m.load.Finished(t->key, seconds * 1000);
  m.Count(t->key, res.result_int(), seconds, retried);
  if (!replica.empty()) res.set("X-Gpucloud-Replica", replica);
  co_return res;
}

// ---- Connections ----

namespace {

asio::awaitable<bool> WriteResponse(TlsConn& tls, HttpResponse& res, bool keep_alive) {
  for (auto it = res.begin(); it != res.end();) {
    it = HopByHop(it->name()) ? res.erase(it) : std::next(it);
  }
  res.set(http::field::server, "gpucloud-gateway");
  res.keep_alive(keep_alive);
  res.prepare_payload();
  // The header and body as one string, one TLS write (no ostream).
  std::string wire;
  wire.reserve(256 + res.body().size());
  wire += "HTTP/1.1 ";
  wire += std::to_string(res.result_int());
  wire += ' ';
  wire.append(res.reason().data(), res.reason().size());
  wire += "\r\n";
  for (const auto& f : res) {
    wire.append(f.name_string().data(), f.name_string().size());
    wire += ": ";
    wire.append(f.value().data(), f.value().size());
    wire += "\r\n";
  }
  wire += "\r\n";
  if (res.result() != http::status::no_content && res.result() != http::status::not_modified) {
    wire += res.body();
  }
  beast::error_code ec;
  co_await tls.WriteAll(wire, ec);
  co_return !ec;
}

}  // namespace

asio::awaitable<void> Gateway::Impl::Session(std::shared_ptr<OpenConn> conn, tcp::socket socket) {
  struct Detach {
    OpenConn& c;
    ~Detach() { c.socket = nullptr; }
  } detach{*conn};
  conn->socket = &socket;
  if (stopping) co_return;
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  std::string peer_ip;
  if (auto remote = socket.remote_endpoint(ec); !ec) peer_ip = remote.address().to_string();
  Watchdog watchdog(socket);
  watchdog.Watch(options.handshake_timeout);
  co_await socket.async_wait(tcp::socket::wait_read, Into(ec));
  if (ec || stopping) co_return;
  unsigned char first = 0;
  if (::recv(socket.native_handle(), &first, 1, MSG_PEEK) != 1) co_return;
  if (first != 0x16) {
    co_await asio::async_write(socket, asio::buffer(kPlainHttpAnswer), Into(ec));
    co_return;
  }
  TlsConn tls(socket, tls_context.native_handle());
  co_await tls.Handshake(ec);
  if (ec) co_return;
  beast::flat_buffer buffer;
  while (!stopping) {
    watchdog.Watch(options.read_timeout);
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
    parser.body_limit(kMaxBodyLimit);
    co_await ReadHttpRequest(tls, buffer, parser, ec);
    watchdog.Unwatch();
    if (ec) {
      HttpResponse bad;
      if (ec == http::error::body_limit) {
        bad = ErrorAnswer(413, "RequestEntityTooLarge", "the body is over 64 MiB");
      } else if (ec == http::error::header_limit) {
        bad = ErrorAnswer(431, "RequestHeaderFieldsTooLarge", "the header is over the limit");
      } else if (ec != http::error::end_of_stream && ec != http::error::partial_message &&
                 ec.category() == beast::error_code(http::error::end_of_stream).category()) {
        bad = ErrorAnswer(400, "BadRequest", Cat("malformed request: ", ec.message()));
      } else {
        co_return;
      }
      watchdog.Watch(options.write_timeout);
      co_await WriteResponse(tls, bad, false);
      co_return;
    }
    const HttpRequest& req = parser.get();
    HttpResponse res;
    try {
      res = co_await ServeRequest(*this, req, peer_ip);
    } catch (const std::exception& e) {
      Log(Cat("request ", std::string(req.target().substr(0, 200)), " failed: ", e.what()));
      res = ErrorAnswer(500, "InternalError", "the gateway failed on this request");
    }
    const bool keep = req.keep_alive();
    watchdog.Watch(options.write_timeout);
    if (!co_await WriteResponse(tls, res, keep) || !keep) co_return;
  }
}

asio::awaitable<void> Gateway::Impl::AcceptLoop() {
  asio::steady_timer pause(acceptor.get_executor());
  while (!stopping) {
    const asio::any_io_executor strand = workers[next_worker++ % workers.size()]->io.get_executor();
    tcp::socket socket(strand);
    beast::error_code ec;
    co_await acceptor.async_accept(socket, Into(ec));
    if (stopping) break;
    if (ec) {
      pause.expires_after(std::chrono::milliseconds(50));
      co_await pause.async_wait(Into(ec));
      continue;
    }
    auto conn = std::make_shared<OpenConn>(OpenConn{strand, nullptr});
    uint64_t id;
    {
      std::lock_guard lock(mu);
      if (static_cast<int>(open.size()) >= options.max_connections) continue;
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
  std::lock_guard lock(mu);
  accepting = false;
  drained.notify_all();
}

}  // namespace gpucloud::server
