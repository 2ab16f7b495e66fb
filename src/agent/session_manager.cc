#include "agent/session_manager.h"

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// GCC 12 takes Asio's coroutine frames' own operator delete for a mismatch once it inlines
// them (a false positive: the frame's operator new is Asio's too).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "agent/session_impl.h"
#include "core/log.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace beast = boost::beast;
using api::ws::Into;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

// The most TCP connections one port-forward session carries at once.
constexpr size_t kMaxForwardConnections = 4096;
// The most one read of a forwarded connection takes, and so one message carries: large enough
// that a bulk transfer is not a wake-up per 64 KiB through three processes.
constexpr size_t kForwardChunk = 256 << 10;
// What a forwarded connection may receive before its connect to the task's port is done.
constexpr size_t kMaxPendingBytes = 4 << 20;

}  // namespace

std::optional<std::string> FindOnPath(const std::string& name, const std::string& path) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
  };
  if (name.find('/') != std::string::npos) return name;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = Cat(dir, "/", name);
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<std::string>> ExecArgv(const SessionTarget& target,
                                                  const api::SessionRequest& request,
                                                  const std::string& agent_path) {
  if (request.command.empty()) return absl::InvalidArgumentError("command: empty");
  if (!target.container.empty()) {
    std::vector<std::string> argv = target.podman;
    if (argv.empty()) return absl::InvalidArgumentError("no container runtime");
    std::optional<std::string> podman = FindOnPath(argv[0], agent_path);
    if (!podman) return absl::NotFoundError(Cat("command not found: ", argv[0]));
    argv[0] = *podman;
    argv.insert(argv.end(), {"exec", "-i"});
    if (request.tty) argv.push_back("-t");
    argv.push_back(target.container);
    argv.insert(argv.end(), request.command.begin(), request.command.end());
    return argv;
  }
  auto path = target.env.find("PATH");
  std::optional<std::string> program = FindOnPath(
      request.command[0], path != target.env.end() ? path->second : "/usr/local/bin:/usr/bin:/bin");
  if (!program) return absl::NotFoundError(Cat("command not found: ", request.command[0]));
  std::vector<std::string> argv = request.command;
  argv[0] = *program;
  return argv;
}

void SessionManager::Impl::Log(const std::string& line, bool warn) const {
  log::Write(warn ? log::Level::kWarn : log::Level::kInfo, "agent", line, {{"node", options.node}});
}

void SessionManager::Impl::Touch(const std::string& assignment) {
  const absl::Time now = absl::FromUnixMillis(clock.NowMillis());
  std::lock_guard lock(mu);
  last_activity[assignment] = now;
}

uint64_t SessionManager::Impl::Register(Entry e) {
  {
    std::lock_guard lock(mu);
    ++open_total;
  }
  Touch(e.assignment);
  uint64_t id = next_entry++;
  entries[id] = std::move(e);
  return id;
}

void SessionManager::Impl::Unregister(uint64_t id) {
  auto it = entries.find(id);
  if (it == entries.end()) return;
  {
    std::lock_guard lock(mu);
    --open_total;
  }
  entries.erase(it);
  idle.notify_all();
}

asio::awaitable<void> SessionManager::Impl::TunnelLoop(Tunnel& t) {
  const std::string where = Cat(t.server.host, ":", t.server.port);
  absl::Duration backoff = absl::Milliseconds(250);
  bool failing = false;
  while (!stopping) {
    absl::StatusOr<std::shared_ptr<asio::ssl::context>> ctx = api::ws::TlsContext(t.server);
    absl::Status failure = ctx.status();
    if (ctx.ok()) {
      absl::StatusOr<std::unique_ptr<api::ws::Stream>> ws =
          co_await api::ws::Open(io.get_executor(), **ctx, t.server, api::TunnelPath(options.node));
      if (ws.ok() && !stopping) {
        if (failing) Log(Cat("session tunnel to ", where, " open again"));
        failing = false;
        backoff = absl::Milliseconds(250);
        t.open = ws->get();
        boost::system::error_code ec;
        std::string text;
        while (co_await api::ws::Read(**ws, text, ec)) {
          absl::StatusOr<api::SessionRequest> request = api::ParseSessionRequest(text);
          if (!request.ok()) {
            Log(Cat("session request not understood: ", request.status().message()), true);
            continue;
          }
          asio::co_spawn(io, Serve(*std::move(request), *ctx, t.server), asio::detached);
        }
        t.open = nullptr;
        failure = absl::UnavailableError(Cat("session tunnel closed: ", ec.message()));
      } else if (!ws.ok()) {
        failure = ws.status();
      }
    }
    if (stopping) break;
    if (!failing)
      Log(Cat("session tunnel to ", where, ": ", failure.message(), "; retrying"), true);
    failing = true;
    t.retry.expires_after(absl::ToChronoNanoseconds(backoff));
    boost::system::error_code ec;
    co_await t.retry.async_wait(Into(ec));
    backoff = std::min(backoff * 2, options.max_backoff);
  }
}

asio::awaitable<void> SessionManager::Impl::Serve(api::SessionRequest request,
                                                  std::shared_ptr<asio::ssl::context> ctx,
                                                  api::ClientConfig server) {
  absl::StatusOr<std::unique_ptr<api::ws::Stream>> opened = co_await api::ws::Open(
      io.get_executor(), *ctx, server, api::SessionPath(options.node, request.id));
  if (!opened.ok()) {
    Log(Cat("session ", request.id.substr(0, 8), " not dialled back: ", opened.status().message()),
        true);
    co_return;
  }
  api::ws::Stream& ws = **opened;
  Entry entry;
  entry.assignment = request.assignment;
  entry.abort = [&ws] {
    boost::system::error_code ec;
    beast::get_lowest_layer(ws).socket().close(ec);
  };
  const uint64_t id = Register(std::move(entry));
  std::shared_ptr<const SessionTarget> target;
  if (!stopping) target = options.find(request.assignment, request.attempt);
  auto alive = std::make_shared<bool>(true);
  if (target)
    asio::co_spawn(io, Watch(id, request.assignment, request.attempt, alive), asio::detached);
  if (request.kind == "exec" || request.kind == "attach") {
    if (target && request.kind == "attach") {
      co_await Attach(ws, request, *target);
    } else if (target) {
      co_await Exec(ws, request, *target, id);
    } else {
      api::ExecStatus gone{-1, 0,
                           Cat("the task ", request.assignment, " is not running on node ",
                               options.node, " (it ended, or was restarted elsewhere)")};
      api::ws::Sender<api::ws::Stream> sender(ws);
      co_await FinishWithStatus(sender, gone);
    }
  } else if (target) {
    co_await Forward(ws, request);
  } else {
    websocket::close_reason why(websocket::close_code::going_away);
    why.reason = "the task is not running on this node";
    boost::system::error_code ec;
    co_await ws.async_close(why, Into(ec));
  }
  *alive = false;
  Unregister(id);
}

asio::awaitable<void> SessionManager::Impl::Watch(uint64_t id, std::string assignment, int attempt,
                                                  std::shared_ptr<bool> alive) {
  asio::steady_timer tick(io);
  boost::system::error_code ec;
  while (*alive && !stopping) {
    tick.expires_after(std::chrono::seconds(1));
    co_await tick.async_wait(Into(ec));
    if (!*alive || stopping || options.find(assignment, attempt) != nullptr) continue;
    // The task ended (or stops): the session goes with it, saying so.
    if (auto it = entries.find(id); it != entries.end() && it->second.announce) {
      it->second.announce("the task ended: this session closes");
      tick.expires_after(std::chrono::milliseconds(200));
      co_await tick.async_wait(Into(ec));
    }
    if (auto it = entries.find(id); *alive && it != entries.end()) it->second.abort();
    break;
  }
}

asio::awaitable<void> SessionManager::Impl::Forward(api::ws::Stream& ws,
                                                    const api::SessionRequest& r) {
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  // One forwarded connection: until it is connected (and what came before is written), data
  // from the client waits in `pending`, so that a slow connect holds up no other connection.
  struct Conn {
    explicit Conn(asio::any_io_executor e) : socket(e) {}
    tcp::socket socket;
    bool connected = false;
    std::string pending;
  };
  struct State {
    explicit State(asio::any_io_executor e) : done(e) {}
    std::map<uint32_t, std::shared_ptr<Conn>> conns;
    int pumps = 0;
    api::ws::Event done;
  };
  auto state = std::make_shared<State>(ex);
  api::ws::Sender<api::ws::Stream> sender(ws);
  const std::string assignment = r.assignment;
  const tcp::endpoint target(asio::ip::address_v4::loopback(), static_cast<uint16_t>(r.port));
  // Connects `id`, writes what waited, then carries the task's side into data messages; its
  // close (with the reason when it failed) ends it.
  auto pump = [this, state, &sender, assignment, target, port = r.port](
                  uint32_t id, std::shared_ptr<Conn> c) -> asio::awaitable<void> {
    boost::system::error_code ec;
    std::string why;
    co_await c->socket.async_connect(target, Into(ec));
    if (ec) why = Cat("cannot connect to port ", port, " in the task: ", ec.message());
    while (!ec && !c->connected) {
      if (c->pending.empty()) {
        c->connected = true;
        break;
      }
      std::string waiting = std::exchange(c->pending, {});
      co_await asio::async_write(c->socket, asio::buffer(waiting), Into(ec));
    }
    std::vector<char> buffer(ec ? 0 : kForwardChunk);
    while (!ec) {
      size_t n = co_await c->socket.async_read_some(asio::buffer(buffer), Into(ec));
      if (ec) break;
      Touch(assignment);
      const std::string data =
          api::EncodeForward(api::ForwardFrame::kData, id, std::string_view(buffer.data(), n));
      if (!co_await sender.Send(data)) break;
    }
    if (auto it = state->conns.find(id); it != state->conns.end() && it->second == c) {
      state->conns.erase(it);
      const std::string close = api::EncodeForward(api::ForwardFrame::kClose, id, why);
      co_await sender.Send(close);
    }
    --state->pumps;
    state->done.Notify();
  };
  boost::system::error_code ec;
  std::string message;
  while (co_await api::ws::Read(ws, message, ec)) {
    std::optional<api::ForwardMessage> m = api::DecodeForward(message);
    if (!m) continue;
    Touch(assignment);
    auto it = state->conns.find(m->connection);
    if (m->type == api::ForwardFrame::kOpen) {
      std::string refused;
      if (it != state->conns.end()) {
        refused = "connection id in use";
      } else if (state->conns.size() >= kMaxForwardConnections) {
        refused = Cat("too many connections in this session (", kMaxForwardConnections, ")");
      }
      if (!refused.empty()) {
        const std::string close =
            api::EncodeForward(api::ForwardFrame::kClose, m->connection, refused);
        if (!co_await sender.Send(close)) break;
        continue;
      }
      auto c = std::make_shared<Conn>(ex);
      state->conns[m->connection] = c;
      ++state->pumps;
      asio::co_spawn(ex, pump(m->connection, c), asio::detached);
    } else if (m->type == api::ForwardFrame::kData && it != state->conns.end()) {
      std::shared_ptr<Conn> c = it->second;
      if (!c->connected) {
        c->pending.append(m->payload);
        if (c->pending.size() > kMaxPendingBytes) c->socket.close(ec);  // its pump says why
        continue;
      }
      boost::system::error_code write_ec;
      co_await asio::async_write(c->socket, asio::buffer(m->payload), Into(write_ec));
      if (write_ec) c->socket.close(write_ec);  // its pump ends it and says so
    } else if (m->type == api::ForwardFrame::kClose && it != state->conns.end()) {
      std::shared_ptr<Conn> c = it->second;
      state->conns.erase(it);
      c->socket.close(ec);
    }
  }
  for (auto& [id, c] : state->conns) {
    boost::system::error_code ignored;
    c->socket.close(ignored);
  }
  state->conns.clear();
  while (state->pumps > 0) co_await state->done.Wait();
  co_await sender.Close();
}

SessionManager::SessionManager(Options options, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(options), clock)) {}

SessionManager::~SessionManager() { Stop(); }

void SessionManager::Start() {
  Impl& m = *impl_;
  if (m.thread.joinable()) return;
  api::ws::RaiseDescriptorLimit();  // a port-forward holds up to kMaxForwardConnections sockets
  m.work.emplace(m.io.get_executor());
  std::vector<api::ServerAddress> servers{{m.options.server.host, m.options.server.port}};
  servers.insert(servers.end(), m.options.server.more_servers.begin(),
                 m.options.server.more_servers.end());
  for (size_t i = 0; i < servers.size(); ++i) {
    const api::ServerAddress& a = servers[i];
    // Each server once: two tunnels of one node to one server would replace each other there.
    if (std::find(servers.begin(), servers.begin() + i, a) != servers.begin() + i) continue;
    api::ClientConfig one = m.options.server;
    one.host = a.host;
    one.port = a.port;
    one.more_servers.clear();
    m.tunnels.push_back(std::make_unique<Impl::Tunnel>(m.io, std::move(one)));
    asio::co_spawn(m.io, m.TunnelLoop(*m.tunnels.back()), asio::detached);
  }
  m.thread = std::thread([&m] { m.io.run(); });
}

void SessionManager::Stop() {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  asio::post(m.io, [&m] {
    m.stopping = true;
    for (const std::unique_ptr<Impl::Tunnel>& t : m.tunnels) {
      t->retry.cancel();
      if (t->open != nullptr) {
        boost::system::error_code ec;
        beast::get_lowest_layer(*t->open).socket().close(ec);
      }
    }
    for (auto& [id, e] : m.entries) e.abort();
  });
  {
    // Sessions end as their sockets close (their processes killed and reaped); bounded.
    std::unique_lock lock(m.mu);
    m.idle.wait_for(lock, std::chrono::seconds(10), [&m] { return m.open_total == 0; });
  }
  m.work.reset();
  m.io.stop();
  m.thread.join();
  std::lock_guard lock(m.mu);
  for (pid_t pid : m.children) {
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  m.children.clear();
}

std::optional<absl::Time> SessionManager::LastActivity(const std::string& assignment) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->last_activity.find(assignment);
  if (it == impl_->last_activity.end()) return std::nullopt;
  return it->second;
}

void SessionManager::Announce(const std::string& assignment, const std::string& text) {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  asio::post(m.io, [&m, assignment, text] {
    for (auto& [id, e] : m.entries) {
      if (e.assignment == assignment && e.announce) e.announce(text);
    }
  });
}

}  // namespace gpucloud::agent
