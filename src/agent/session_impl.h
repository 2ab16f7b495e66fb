// SessionManager's body (session_manager.h), shared by session_manager.cc (the tunnel,
// port-forwarding) and session_exec.cc (exec); private to them. Everything but the fields under
// `mu` is touched on the manager's thread only.
#ifndef GPUCLOUD_AGENT_SESSION_IMPL_H_
#define GPUCLOUD_AGENT_SESSION_IMPL_H_

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <memory>
#include <set>
#include <vector>

#include "agent/session_manager.h"
#include "api/ws_client.h"

namespace gpucloud::agent {

namespace asio = boost::asio;

struct SessionManager::Impl {
  Impl(Options o, const Clock& c) : options(std::move(o)), clock(c) {}

  Options options;
  const Clock& clock;
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;
  bool stopping = false;  // manager's thread

  // The tunnel to one server of the control plane. An agent keeps one to each server it knows,
  // so that a client's session meets the node on whichever server the client reached (several
  // servers on etcd; a load balancer in front of them); a session is dialled back to the server
  // whose tunnel asked for it.
  struct Tunnel {
    Tunnel(asio::io_context& io, api::ClientConfig s) : server(std::move(s)), retry(io) {}
    api::ClientConfig server;         // options.server with this server alone
    asio::steady_timer retry;         // its back-off
    api::ws::Stream* open = nullptr;  // while open
  };
  std::vector<std::unique_ptr<Tunnel>> tunnels;  // made by Start; the manager's thread after

  // A session as Stop and Announce see it.
  struct Entry {
    std::string assignment;
    std::function<void()> abort;                       // closes its WebSocket
    std::function<void(const std::string&)> announce;  // writes to its stderr (exec only)
  };
  std::map<uint64_t, Entry> entries;  // manager's thread
  uint64_t next_entry = 0;

  mutable std::mutex mu;
  std::condition_variable idle;                     // entries ended
  int open_total = 0;                               // guarded by mu
  std::map<std::string, absl::Time> last_activity;  // guarded by mu
  std::set<pid_t> children;                         // guarded by mu: exec'd, not reaped yet

  void Log(const std::string& line, bool warn = false) const;
  void Touch(const std::string& assignment);
  uint64_t Register(Entry e);
  void Unregister(uint64_t id);

  asio::awaitable<void> TunnelLoop(Tunnel& t);
  // Dials back to `server` (the one whose tunnel sent `request`) and serves the session.
  asio::awaitable<void> Serve(api::SessionRequest request, std::shared_ptr<asio::ssl::context> ctx,
                              api::ClientConfig server);
  // Ends session `id` (its WebSocket closed, after a line to its stderr) once its task no
  // longer runs here: checked every second while `alive`.
  asio::awaitable<void> Watch(uint64_t id, std::string assignment, int attempt,
                              std::shared_ptr<bool> alive);
  // session_exec.cc
  asio::awaitable<void> Exec(api::ws::Stream& ws, const api::SessionRequest& r,
                             const SessionTarget& target, uint64_t entry);
  // session_manager.cc
  asio::awaitable<void> Forward(api::ws::Stream& ws, const api::SessionRequest& r);
  // session_exec.cc: the client's stdin into the task's stdin FIFO.
  asio::awaitable<void> Attach(api::ws::Stream& ws, const api::SessionRequest& r,
                               const SessionTarget& target);
};

// Ends an exec or attach session with `s` as its last message (session_exec.cc). Callers pass a
// named status, never a temporary built in the co_await's expression: GCC 12 destroys such a
// temporary twice.
asio::awaitable<void> FinishWithStatus(api::ws::Sender<api::ws::Stream>& sender,
                                       const api::ExecStatus& s);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_SESSION_IMPL_H_
