#include "server/session_relay.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>

#include "api/ws_client.h"
#include "core/log.h"
#include "core/text.h"
#include "server/credentials.h"

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using Ws = websocket::stream<TlsStream>;

// The server's WebSocket settings: pings when quiet, closed after 60 s without a word back.
void Configure(Ws& ws) {
  websocket::stream_base::timeout t;
  t.handshake_timeout = std::chrono::seconds(10);
  t.idle_timeout = std::chrono::seconds(60);
  t.keep_alive_pings = true;
  ws.set_option(t);
  ws.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(beast::http::field::server, "gpucloud"); }));
  ws.read_message_max(16 << 20);
  ws.auto_fragment(false);  // a message relayed as one frame, not 4 KiB fragments
}

// Waits on `timer` until Notify-like cancellation or `d`.
asio::awaitable<void> Sleep(asio::steady_timer& timer, absl::Duration d) {
  timer.expires_after(absl::ToChronoNanoseconds(std::min(d, absl::Hours(24))));
  beast::error_code ec;
  co_await timer.async_wait(Into(ec));
}

// Reads messages from `from` and writes each to `to`, until `from` ends; then passes its close
// on (or closes `to` with a reason when `from` broke off).
asio::awaitable<void> Pump(Ws& from, Ws& to, const char* side) {
  beast::flat_buffer buffer;
  beast::error_code ec;
  for (;;) {
    co_await from.async_read(buffer, Into(ec));
    if (ec) break;
    to.binary(from.got_binary());
    co_await to.async_write(buffer.data(), Into(ec));
    buffer.consume(buffer.size());
    if (ec) co_return;  // `to` is gone: its own read ends the other pump
  }
  websocket::close_reason why = from.reason();
  if (ec != websocket::error::closed) {
    why = websocket::close_reason(websocket::close_code::going_away);
    why.reason = Cat("the ", side, "'s connection was lost");
  }
  beast::error_code ignored;
  co_await to.async_close(why, Into(ignored));
}

}  // namespace

// A client's session, from its request to the agent until the agent's connection arrives, and
// then until the relay ends. Fields named "client side" are touched on the client's strand only;
// "agent side" on the agent connection's strand only.
struct SessionRelay::Waiting {
  std::string node;
  asio::any_io_executor client_ex;
  Timer client_wake;
  Ws* agent = nullptr;  // client side: the agent's WebSocket, once handed over
  bool dialed = false;  // client side
  asio::any_io_executor agent_ex;
  Timer agent_wake;
  bool done = false;  // agent side: the client side has given the connection back
};

struct SessionRelay::Tunnel {
  explicit Tunnel(asio::any_io_executor ex) : ex(ex), wake(ex) {}
  asio::any_io_executor ex;
  // On the tunnel's strand only:
  std::deque<std::string> out;
  asio::steady_timer wake;
  bool open = true;
  Ws* ws = nullptr;
};

SessionRelay::SessionRelay(Options options) : options_(std::move(options)) {}
SessionRelay::~SessionRelay() = default;

void SessionRelay::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    log::Info("server", line);
  }
}

bool SessionRelay::HasTunnel(const std::string& node) const {
  std::lock_guard lock(mu_);
  return tunnels_.contains(node);
}

int SessionRelay::tunnels() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(tunnels_.size());
}

bool SessionRelay::Pending(const std::string& node, const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = waiting_.find(id);
  return it != waiting_.end() && it->second->node == node;
}

bool SessionRelay::SendToTunnel(const std::string& node, std::string message) {
  std::shared_ptr<Tunnel> t;
  {
    std::lock_guard lock(mu_);
    auto it = tunnels_.find(node);
    if (it == tunnels_.end()) return false;
    t = it->second;
  }
  asio::post(t->ex, [t, m = std::move(message)]() mutable {
    if (!t->open) return;
    t->out.push_back(std::move(m));
    t->wake.cancel();
  });
  return true;
}

asio::awaitable<void> SessionRelay::ServeClient(TlsConn& tls, const HttpRequest& req,
                                                const std::string& node,
                                                const api::SessionRequest& asked, Timer wake,
                                                const std::atomic<bool>& stopping) {
  api::SessionRequest request = asked;
  Ws client{TlsStream(tls)};
  Configure(client);
  beast::error_code ec;
  co_await client.async_accept(req, Into(ec));
  if (ec) co_return;
  auto w = std::make_shared<Waiting>();
  w->node = node;
  w->client_ex = co_await asio::this_coro::executor;
  w->client_wake = wake;
  // 128 random bits: a path segment, so a DNS label (at most 63 characters).
  request.id = NewToken().substr(0, 32);
  auto refuse = [&](const std::string& why) -> asio::awaitable<void> {  // `why`: a named one
    websocket::close_reason reason(websocket::close_code::try_again_later);
    reason.reason = why.substr(0, 120);
    beast::error_code ignored;
    co_await client.async_close(reason, Into(ignored));
  };
  {
    std::lock_guard lock(mu_);
    waiting_[request.id] = w;
  }
  if (!SendToTunnel(node, api::SessionRequestJson(request))) {
    {
      std::lock_guard lock(mu_);
      waiting_.erase(request.id);
    }
    const std::string why = Cat("the agent of node ", node, " is not connected");
    co_await refuse(why);
    co_return;
  }
  const absl::Time deadline = absl::Now() + options_.dial_timeout;
  while (!w->dialed) {
    const bool give_up = stopping || absl::Now() >= deadline;
    if (give_up) {
      std::lock_guard lock(mu_);
      // Still waiting: nobody will hand it over. Taken: the hand-over is on its way.
      if (waiting_.erase(request.id) > 0) break;
    }
    co_await Sleep(*wake, give_up ? absl::Milliseconds(100) : deadline - absl::Now());
  }
  if (!w->dialed) {
    const std::string why = Cat("the agent of node ", node, " did not answer within ",
                                absl::FormatDuration(options_.dial_timeout));
    co_await refuse(why);
    co_return;
  }
  ++sessions_;
  Log(Cat("session ", request.id.substr(0, 8), " (", request.kind, " into ", request.assignment,
          ", by ", request.user, ") relayed through node ", node));
  // Both ends: the first pump that ends starts a 5 s limit on the other.
  struct Limit {
    explicit Limit(asio::any_io_executor ex) : timer(ex) {}
    asio::steady_timer timer;
    bool finished = false;
  };
  auto limit = std::make_shared<Limit>(w->client_ex);
  Ws* agent = w->agent;
  asio::awaitable<void> up = Pump(client, *agent, "agent");
  asio::awaitable<void> down = Pump(*agent, client, "client");
  const std::function<void()> on_first = [limit, &client, agent] {
    limit->timer.expires_after(std::chrono::seconds(5));
    limit->timer.async_wait([limit, &client, agent](beast::error_code) {
      if (limit->finished) return;
      TlsStream c = client.next_layer(), a = agent->next_layer();
      beast_close_socket(c);
      beast_close_socket(a);
    });
  };
  co_await api::ws::Both(up, down, on_first);
  limit->finished = true;
  limit->timer.cancel();
  --sessions_;
  asio::post(w->agent_ex, [w] {
    w->done = true;
    w->agent_wake->cancel();
  });
}

asio::awaitable<bool> SessionRelay::ServeDialBack(TlsConn& tls, const HttpRequest& req,
                                                  const std::string& node, const std::string& id,
                                                  Timer wake,
                                                  const std::function<void(bool)>& own) {
  Ws agent{TlsStream(tls)};
  Configure(agent);
  beast::error_code ec;
  co_await agent.async_accept(req, Into(ec));
  if (ec) co_return false;
  std::shared_ptr<Waiting> w;
  {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(id);
    if (it != waiting_.end() && it->second->node == node) {
      w = it->second;
      waiting_.erase(it);
    }
  }
  if (w == nullptr) {  // the client gave up meanwhile
    websocket::close_reason reason(websocket::close_code::policy_error);
    reason.reason = "no such session";
    co_await agent.async_close(reason, Into(ec));
    co_return false;
  }
  w->agent_ex = co_await asio::this_coro::executor;
  w->agent_wake = wake;
  own(false);
  asio::post(w->client_ex, [w, a = &agent] {
    w->agent = a;
    w->dialed = true;
    w->client_wake->cancel();
  });
  while (!w->done) co_await Sleep(*wake, absl::Hours(1));
  own(true);
  co_return true;
}

asio::awaitable<void> SessionRelay::ServeTunnel(TlsConn& tls, const HttpRequest& req,
                                                const std::string& node) {
  Ws ws{TlsStream(tls)};
  Configure(ws);
  beast::error_code ec;
  co_await ws.async_accept(req, Into(ec));
  if (ec) co_return;
  auto t = std::make_shared<Tunnel>(co_await asio::this_coro::executor);
  t->ws = &ws;
  std::shared_ptr<Tunnel> replaced;
  {
    std::lock_guard lock(mu_);
    replaced = std::exchange(tunnels_[node], t);
  }
  if (replaced) {
    asio::post(replaced->ex, [replaced] {
      replaced->open = false;
      replaced->wake.cancel();
    });
  }
  Log(Cat("node ", node, " opened its session tunnel"));
  auto reader = [](std::shared_ptr<Tunnel> t) -> asio::awaitable<void> {
    beast::flat_buffer buffer;
    beast::error_code ec;
    while (!ec) {  // nothing is expected from the agent: this serves pings and notices the end
      co_await t->ws->async_read(buffer, Into(ec));
      buffer.consume(buffer.size());
    }
    t->open = false;
    t->wake.cancel();
  };
  auto writer = [](std::shared_ptr<Tunnel> t) -> asio::awaitable<void> {
    beast::error_code ec;
    while (t->open) {
      if (t->out.empty()) {
        t->wake.expires_at(asio::steady_timer::time_point::max());
        co_await t->wake.async_wait(Into(ec));
        continue;
      }
      std::string message = std::move(t->out.front());
      t->out.pop_front();
      t->ws->text(true);
      co_await t->ws->async_write(asio::buffer(message), Into(ec));
      if (ec) break;
    }
    t->open = false;
  };
  asio::awaitable<void> read = reader(t);
  asio::awaitable<void> write = writer(t);
  const std::function<void()> on_first = [t] {
    TlsStream s = t->ws->next_layer();
    beast_close_socket(s);
  };
  co_await api::ws::Both(read, write, on_first);
  {
    std::lock_guard lock(mu_);
    if (auto it = tunnels_.find(node); it != tunnels_.end() && it->second == t) tunnels_.erase(it);
  }
  Log(Cat("node ", node, "'s session tunnel closed"));
}

}  // namespace gpucloud::server
