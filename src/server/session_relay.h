// SessionRelay: interactive sessions through the control plane (api/session_wire.h,
// docs/interactive.md). A client's WebSocket (gpuctl exec, cp, port-forward), once RestApi has
// authorized it and said which node runs the task, is paired with a WebSocket the task's agent
// dials back, and every message is relayed between the two unchanged. The agent learns of a
// session on its tunnel: a WebSocket it keeps open to the server, on which the server sends
// SessionRequests (text messages). Session ids are 128 random bits; an agent may dial
// back only for a session of its own node. Ends: the first side to close has its close (and reason)
// passed to the other; a side that breaks off closes the other with a reason, and both connections
// are shut 5 s later if the other does not answer. An agent that does not dial back within
// `dial_timeout` closes the client's WebSocket with that reason. Used by HttpsServer on its
// connections' strands; the coroutines of one session run on the client's strand, while the agent's
// connection waits, idle, on its own. Thread-safe.
#ifndef GPUCLOUD_SERVER_SESSION_RELAY_H_
#define GPUCLOUD_SERVER_SESSION_RELAY_H_

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/time.h"
#include "api/session_wire.h"
#include "server/tls_conn.h"

namespace gpucloud::server {

class SessionRelay {
 public:
  using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
  using Timer = std::shared_ptr<boost::asio::steady_timer>;
  struct Options {
    absl::Duration dial_timeout = absl::Seconds(10);
    std::function<void(const std::string&)> log;
  };
  explicit SessionRelay(Options options);
  ~SessionRelay();

  // Whether `node`'s agent holds a tunnel now (else a session for it would wait in vain).
  bool HasTunnel(const std::string& node) const;
  // Sessions relayed now, and tunnels open (for /metrics).
  int sessions() const { return sessions_.load(); }
  int tunnels() const;

  // The client's side: accepts the upgrade `req`, asks `node`'s agent for `request` (its id is
  // set here) and relays until the session ends. `wake` is the connection's timer (Stop cancels
  // it); `stopping` the server's flag.
  boost::asio::awaitable<void> ServeClient(TlsConn& tls, const HttpRequest& req,
                                           const std::string& node,
                                           const api::SessionRequest& request, Timer wake,
                                           const std::atomic<bool>& stopping);
  // The agent's tunnel from `node`: accepted, then kept until either side ends it (a newer
  // tunnel from the same node replaces it).
  boost::asio::awaitable<void> ServeTunnel(TlsConn& tls, const HttpRequest& req,
                                           const std::string& node);
  // The agent of `node` dialling back for session `id`: accepted, handed to the client's side,
  // held until the session ends. `own(false)` is called when the client's side takes the
  // connection (its socket is then not this coroutine's to close), `own(true)` when it gives it
  // back. A session that is not pending, or not of `node`, gets 404.
  boost::asio::awaitable<bool> ServeDialBack(TlsConn& tls, const HttpRequest& req,
                                             const std::string& node, const std::string& id,
                                             Timer wake, const std::function<void(bool)>& own);
  // Whether session `id` waits for `node`'s agent (else a dial-back is answered 404).
  bool Pending(const std::string& node, const std::string& id) const;

 private:
  struct Waiting;
  struct Tunnel;
  bool SendToTunnel(const std::string& node, std::string message);
  void Log(const std::string& line) const;

  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Waiting>> waiting_;  // guarded by mu_; by session id
  std::map<std::string, std::shared_ptr<Tunnel>> tunnels_;   // guarded by mu_; by node
  std::atomic<int> sessions_{0};
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SESSION_RELAY_H_
