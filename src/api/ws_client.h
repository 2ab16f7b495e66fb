// WebSockets for interactive sessions (session_wire.h), on Boost.Beast: the client side that
// gpuctl and the agent share (TLS 1.3 to the control plane, verified against its CA, with a
// bearer token or a client certificate as api::Client does), and two helpers for coroutines
// that share one WebSocket on one strand. Coroutines (Asio's C++20 awaitables); each object is
// used on one strand (a single-threaded io_context, or an explicit strand): not thread-safe.
#ifndef GPUCLOUD_API_WS_CLIENT_H_
#define GPUCLOUD_API_WS_CLIENT_H_

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "api/client.h"

namespace gpucloud::api::ws {

namespace asio = boost::asio;
namespace beast = boost::beast;
using Stream = beast::websocket::stream<beast::ssl_stream<beast::tcp_stream>>;

// Completion token for coroutines: no exception for an I/O error, which lands in `ec`.
inline auto Into(boost::system::error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

// The TLS context for `config`: the server verified by its CA, the client certificate presented
// when the config has one. InvalidArgument naming the file that cannot be read.
absl::StatusOr<std::shared_ptr<asio::ssl::context>> TlsContext(const ClientConfig& config);

// Opens a WebSocket to `target` on `config`'s servers (the first that takes the connection, in
// order), with its bearer token; `ctx` must outlive the stream. TCP within 3 s, TLS and the
// upgrade within 10 s; then the stream pings its peer when quiet and ends after 60 s without a
// word back (a dropped connection is noticed). Errors: Unavailable when no server can be reached;
// a refused upgrade as the server's status and message (401 Unauthenticated, 403
// PermissionDenied, 404 NotFound, 409 FailedPrecondition, 400/422 InvalidArgument, 429
// ResourceExhausted, 503 Unavailable, others Unknown).
asio::awaitable<absl::StatusOr<std::unique_ptr<Stream>>> Open(asio::any_io_executor ex,
                                                              asio::ssl::context& ctx,
                                                              const ClientConfig& config,
                                                              std::string target);

// Raises this process's soft limit on open descriptors to its hard limit (at most 65,536): a
// process that carries thousands of sessions' sockets (port-forward) needs more than a shell's
// usual 1,024. Best effort: a limit it may not raise stays as it is.
void RaiseDescriptorLimit();

// The absl code of an HTTP status (as Open maps a refusal).
absl::StatusCode CodeOfHttpStatus(int status);

// Writes to one WebSocket from many coroutines, one message at a time (Beast allows one write in
// flight): Send returns once its message is written, and concurrent Sends wait their turn, so a
// slow peer slows the producers instead of growing memory. Close (a close frame, after the write
// in flight) ends it; a failed write too. Sends after either return false.
template <typename WebSocket>
class Sender {
 public:
  explicit Sender(WebSocket& ws) : ws_(ws), wake_(ws.get_executor()) {}
  asio::awaitable<bool> Send(std::string message);
  asio::awaitable<void> Close(std::string reason = "");
  bool failed() const { return failed_; }

 private:
  asio::awaitable<void> Wait();
  WebSocket& ws_;
  asio::steady_timer wake_;
  bool busy_ = false, failed_ = false;
};

// The next message of `ws` into `out` (replaced); false at the end, with `ec` saying why
// (websocket::error::closed after a close frame).
template <typename WebSocket>
asio::awaitable<bool> Read(WebSocket& ws, std::string& out, boost::system::error_code& ec);

// Runs `a` and `b` (moved from) at once on the calling coroutine's executor (a strand) and
// returns when both ended; `on_first` runs when the first ends (to make the other end: close
// its socket). Named arguments only: GCC 12 mishandles temporaries in a co_await expression.
asio::awaitable<void> Both(asio::awaitable<void>& a, asio::awaitable<void>& b,
                           const std::function<void()>& on_first);

// A wait that another coroutine on the same strand ends: Notify wakes every Wait.
class Event {
 public:
  explicit Event(asio::any_io_executor ex) : timer_(ex) {}
  asio::awaitable<void> Wait();
  void Notify() { timer_.cancel(); }

 private:
  asio::steady_timer timer_;
};

}  // namespace gpucloud::api::ws

#include "api/ws_client_impl.h"

#endif  // GPUCLOUD_API_WS_CLIENT_H_
