#include "cli/exec_client.h"

// GCC 12 takes Asio's coroutine frames' own operator delete for a mismatch once it inlines
// them (a false positive: the frame's operator new is Asio's too).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <map>
#include <ostream>

#include "absl/strings/numbers.h"
#include "api/ws_client.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using api::ws::Into;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using Stream = api::ws::Stream;
using Sender = api::ws::Sender<Stream>;

// fd 0 in raw mode for as long as it lives (a terminal only), as ssh and kubectl do: every key,
// Ctrl-C included, goes to the remote terminal.
class RawMode {
 public:
  explicit RawMode(bool on) {
    if (!on || !isatty(0) || tcgetattr(0, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(0, TCSANOW, &raw) == 0;
  }
  ~RawMode() {
    if (active_) tcsetattr(0, TCSANOW, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

std::optional<api::TerminalSize> LocalTerminalSize() {
  winsize w{};
  for (int fd : {0, 1, 2}) {
    if (ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0) {
      return api::TerminalSize{w.ws_col, w.ws_row};
    }
  }
  return std::nullopt;
}

// Whether Asio can wait on `fd` (epoll refuses regular files and /dev/null).
bool Pollable(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(fd);
}

asio::awaitable<void> SendInput(Sender& sender, ExecIo& io) {
  std::string_view rest = io.input;
  while (!rest.empty()) {
    const std::string chunk = api::ExecMessage(api::ExecChannel::kStdin, rest.substr(0, 64 << 10));
    rest.remove_prefix(std::min<size_t>(rest.size(), 64 << 10));
    if (!co_await sender.Send(chunk)) co_return;
  }
  if (!io.tty) {
    const std::string eof = api::ExecMessage(api::ExecChannel::kStdin, "");
    co_await sender.Send(eof);
  }
}

asio::awaitable<void> SendStdin(Sender& sender, asio::posix::stream_descriptor& in, bool tty) {
  std::vector<char> buffer(32 << 10);
  boost::system::error_code ec;
  for (;;) {
    size_t n = co_await in.async_read_some(asio::buffer(buffer), Into(ec));
    if (ec) break;
    const std::string m =
        api::ExecMessage(api::ExecChannel::kStdin, std::string_view(buffer.data(), n));
    if (!co_await sender.Send(m)) co_return;
  }
  if (!tty) {
    const std::string eof = api::ExecMessage(api::ExecChannel::kStdin, "");
    co_await sender.Send(eof);
  }
}

asio::awaitable<void> SendResizes(Sender& sender, asio::signal_set& winch) {
  boost::system::error_code ec;
  for (;;) {
    co_await winch.async_wait(Into(ec));
    if (ec) break;
    if (std::optional<api::TerminalSize> size = LocalTerminalSize()) {
      const std::string m =
          api::ExecMessage(api::ExecChannel::kResize, api::TerminalSizeJson(*size));
      if (!co_await sender.Send(m)) break;
    }
  }
}

asio::awaitable<void> ExecSession(asio::ssl::context& ctx, const api::ClientConfig& config,
                                  const std::string& target, ExecIo& io,
                                  absl::StatusOr<api::ExecStatus>& result) {
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  absl::StatusOr<std::unique_ptr<Stream>> opened = co_await api::ws::Open(ex, ctx, config, target);
  if (!opened.ok()) {
    result = opened.status();
    co_return;
  }
  Stream& ws = **opened;
  Sender sender(ws);
  RawMode raw(io.tty);
  asio::signal_set winch(ex);
  if (io.tty) {
    if (std::optional<api::TerminalSize> size = LocalTerminalSize()) {
      const std::string m =
          api::ExecMessage(api::ExecChannel::kResize, api::TerminalSizeJson(*size));
      co_await sender.Send(m);
    }
    winch.add(SIGWINCH);
    asio::co_spawn(ex, SendResizes(sender, winch), asio::detached);
  }
  std::optional<asio::posix::stream_descriptor> in;
  if (io.stdin_fd >= 0 && Pollable(io.stdin_fd)) {
    in.emplace(ex, dup(io.stdin_fd));  // closing it resets the blocking mode Asio changed
    asio::co_spawn(ex, SendStdin(sender, *in, io.tty), asio::detached);
  } else if (io.stdin_fd >= 0 || io.send_input) {
    if (io.stdin_fd >= 0) {  // a file (or /dev/null): read whole, then sent
      char buffer[64 << 10];
      ssize_t n;
      while ((n = read(io.stdin_fd, buffer, sizeof buffer)) > 0) {
        io.input.append(buffer, static_cast<size_t>(n));
      }
    }
    asio::co_spawn(ex, SendInput(sender, io), asio::detached);
  }
  std::optional<api::ExecStatus> status;
  boost::system::error_code ec;
  std::string m;
  while (co_await api::ws::Read(ws, m, ec)) {
    if (m.empty()) continue;
    const std::string_view data = std::string_view(m).substr(1);
    switch (static_cast<api::ExecChannel>(m[0])) {
      case api::ExecChannel::kStdout:
        if (io.on_stdout) io.on_stdout(data);
        break;
      case api::ExecChannel::kStderr:
        if (io.on_stderr) io.on_stderr(data);
        break;
      case api::ExecChannel::kStatus:
        if (absl::StatusOr<api::ExecStatus> s = api::ParseExecStatus(data); s.ok()) status = *s;
        break;
      default:
        break;
    }
  }
  winch.cancel(ec);
  if (in) in->close(ec);
  if (status) {
    result = *status;
  } else if (ec == websocket::error::closed && !ws.reason().reason.empty()) {
    result =
        absl::UnavailableError(std::string(ws.reason().reason.data(), ws.reason().reason.size()));
  } else {
    result = absl::UnavailableError(
        Cat("the session ended before the command did (", ec.message(), ")"));
  }
}

// One port-forward session: local connections to the task's port through one WebSocket.
struct Forwarder {
  Forwarder(Stream& ws, asio::any_io_executor ex, int remote, std::ostream& err)
      : ws(ws), sender(ws), acceptor(ex), done(ex), remote(remote), err(err) {}
  Stream& ws;
  Sender sender;
  tcp::acceptor acceptor;
  std::map<uint32_t, std::shared_ptr<tcp::socket>> conns;
  uint32_t next = 1;
  int running = 0;  // coroutines not ended
  api::ws::Event done;
  bool ended = false;
  std::string why;  // the session's end, when it ended on its own
  int remote;
  std::ostream& err;

  void End() {
    ended = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    for (auto& [id, s] : conns) s->close(ec);
    conns.clear();
  }

  asio::awaitable<void> Pump(uint32_t id, std::shared_ptr<tcp::socket> socket) {
    std::vector<char> buffer(256 << 10);  // as the agent's: fewer, larger messages
    boost::system::error_code ec;
    for (;;) {
      size_t n = co_await socket->async_read_some(asio::buffer(buffer), Into(ec));
      if (ec) break;
      const std::string m =
          api::EncodeForward(api::ForwardFrame::kData, id, std::string_view(buffer.data(), n));
      if (!co_await sender.Send(m)) break;
    }
    if (auto it = conns.find(id); it != conns.end() && it->second == socket) {
      conns.erase(it);
      const std::string m = api::EncodeForward(api::ForwardFrame::kClose, id);
      co_await sender.Send(m);
    }
    --running;
    done.Notify();
  }

  asio::awaitable<void> Accept() {
    asio::any_io_executor ex = co_await asio::this_coro::executor;
    boost::system::error_code ec;
    while (!ended) {
      auto socket = std::make_shared<tcp::socket>(ex);
      co_await acceptor.async_accept(*socket, Into(ec));
      if (ec || ended) break;
      socket->set_option(tcp::no_delay(true), ec);
      const uint32_t id = next++;
      conns[id] = socket;
      const std::string open = api::EncodeForward(api::ForwardFrame::kOpen, id);
      if (!co_await sender.Send(open)) break;
      ++running;
      asio::co_spawn(ex, Pump(id, socket), asio::detached);
    }
    --running;
    done.Notify();
  }

  asio::awaitable<void> Read() {
    boost::system::error_code ec;
    std::string m;
    while (co_await api::ws::Read(ws, m, ec)) {
      std::optional<api::ForwardMessage> f = api::DecodeForward(m);
      if (!f) continue;
      auto it = conns.find(f->connection);
      if (it == conns.end()) continue;
      std::shared_ptr<tcp::socket> socket = it->second;
      if (f->type == api::ForwardFrame::kData) {
        boost::system::error_code write_ec;
        co_await asio::async_write(*socket, asio::buffer(f->payload), Into(write_ec));
        if (write_ec) socket->close(write_ec);
      } else if (f->type == api::ForwardFrame::kClose) {
        if (!f->payload.empty()) {
          err << "gpuctl port-forward: port " << remote << ": " << f->payload << "\n";
          err.flush();
        }
        conns.erase(it);
        socket->close(ec);
      }
    }
    if (!ended) {
      why = ec == websocket::error::closed && !ws.reason().reason.empty()
                ? std::string(ws.reason().reason.data(), ws.reason().reason.size())
                : Cat("the session to port ", remote, " ended (", ec.message(), ")");
    }
    End();
    --running;
    done.Notify();
  }
};

asio::awaitable<void> ForwardAll(asio::ssl::context& ctx, const api::ClientConfig& config,
                                 const std::string& address, const std::vector<ForwardSpec>& specs,
                                 const std::function<std::string(int)>& target_of,
                                 const std::function<void(const std::vector<int>&)>& ready,
                                 const std::atomic<bool>* stop, bool handle_signals,
                                 std::ostream& err, absl::Status& result) {
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  std::vector<std::unique_ptr<Stream>> sessions;
  std::vector<std::unique_ptr<Forwarder>> forwarders;
  std::vector<int> ports;
  for (const ForwardSpec& s : specs) {
    absl::StatusOr<std::unique_ptr<Stream>> ws =
        co_await api::ws::Open(ex, ctx, config, target_of(s.remote));
    if (!ws.ok()) {
      result = ws.status();
      co_return;
    }
    auto f = std::make_unique<Forwarder>(**ws, ex, s.remote, err);
    boost::system::error_code ec;
    tcp::endpoint local(asio::ip::make_address(address, ec), static_cast<uint16_t>(s.local));
    if (!ec) f->acceptor.open(local.protocol(), ec);
    if (!ec) f->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) f->acceptor.bind(local, ec);
    if (!ec) f->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      result = absl::UnavailableError(
          Cat("cannot listen on ", address, ":", s.local, ": ", ec.message()));
      co_return;
    }
    ports.push_back(f->acceptor.local_endpoint().port());
    sessions.push_back(*std::move(ws));
    forwarders.push_back(std::move(f));
  }
  if (ready) ready(ports);
  for (auto& f : forwarders) {
    f->running = 2;
    asio::co_spawn(ex, f->Accept(), asio::detached);
    asio::co_spawn(ex, f->Read(), asio::detached);
  }
  asio::signal_set signals(ex);
  bool interrupted = false;
  if (handle_signals) {
    signals.add(SIGINT);
    signals.add(SIGTERM);
    signals.async_wait([&](boost::system::error_code e, int) {
      if (!e) interrupted = true;
    });
  }
  asio::steady_timer tick(ex);
  auto any_ended = [&] {
    for (auto& f : forwarders) {
      if (f->ended) return true;
    }
    return false;
  };
  while (!interrupted && !any_ended() && !(stop != nullptr && stop->load())) {
    tick.expires_after(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    co_await tick.async_wait(Into(ec));
  }
  boost::system::error_code ec;
  signals.cancel(ec);
  for (auto& f : forwarders) {
    if (f->ended && !f->why.empty() && result.ok()) result = absl::UnavailableError(f->why);
    f->End();
    co_await f->sender.Close();
  }
  for (auto& f : forwarders) {
    while (f->running > 0) co_await f->done.Wait();
  }
}

}  // namespace

absl::StatusOr<api::ExecStatus> RunExec(const api::ClientConfig& config, const std::string& target,
                                        ExecIo& io) {
  absl::StatusOr<std::shared_ptr<asio::ssl::context>> ctx = api::ws::TlsContext(config);
  if (!ctx.ok()) return ctx.status();
  asio::io_context ioc;
  absl::StatusOr<api::ExecStatus> result = absl::UnavailableError("the session did not start");
  asio::co_spawn(ioc, ExecSession(**ctx, config, target, io, result), asio::detached);
  ioc.run();
  return result;
}

absl::StatusOr<ForwardSpec> ParseForwardSpec(std::string_view spec) {
  ForwardSpec out;
  std::string_view local = spec, remote = spec;
  if (size_t colon = spec.find(':'); colon != std::string_view::npos) {
    local = spec.substr(0, colon);
    remote = spec.substr(colon + 1);
  }
  auto port = [](std::string_view s, bool zero_ok, int* p) {
    return absl::SimpleAtoi(absl::string_view(s.data(), s.size()), p) && *p >= (zero_ok ? 0 : 1) &&
           *p <= 65535;
  };
  if (!port(remote, false, &out.remote) ||
      (!local.empty() && !port(local, local != remote, &out.local))) {
    return absl::InvalidArgumentError(
        Cat("\"", spec, "\" is not a port mapping (REMOTE, LOCAL:REMOTE or :REMOTE; ports 1 to ",
            "65535)"));
  }
  if (local == remote) out.local = out.remote;
  if (local.empty()) out.local = 0;
  return out;
}

absl::Status PortForward(const api::ClientConfig& config, const std::string& address,
                         const std::vector<ForwardSpec>& specs,
                         const std::function<std::string(int remote)>& target_of,
                         const std::function<void(const std::vector<int>&)>& ready,
                         const std::atomic<bool>* stop, bool handle_signals, std::ostream& err) {
  api::ws::RaiseDescriptorLimit();  // a shell's usual 1,024 is short of thousands of connections
  absl::StatusOr<std::shared_ptr<asio::ssl::context>> ctx = api::ws::TlsContext(config);
  if (!ctx.ok()) return ctx.status();
  asio::io_context ioc;
  absl::Status result;
  asio::co_spawn(ioc,
                 ForwardAll(**ctx, config, address, specs, target_of, ready, stop, handle_signals,
                            err, result),
                 asio::detached);
  ioc.run();
  return result;
}

}  // namespace gpucloud::cli
