// SessionManager: the agent's side of interactive sessions (api/session_wire.h,
// docs/interactive.md). It keeps a WebSocket "tunnel" open to each server of the control plane it
// knows (Options::server and its more_servers; each reconnecting with back-off of its own), so
// that a client's session finds the node through whichever server the client reached; for each
// SessionRequest a server sends there, it dials back a WebSocket of its own to that same server
// for that session and serves it:
//   exec         runs the command inside the task: a host process with the task's environment,
//                working directory, user and cgroups; a container's through `podman exec`. With
//                a terminal (a pseudo-terminal the command leads: resize, Ctrl-C as the line
//                discipline makes it), or with pipes for stdin, stdout and stderr. Ends with the
//                command's exit status; a client that leaves has the command's process group
//                killed.
//   portforward  TCP connections to the task's port on the node's loopback (tasks share the
//                node's network: host processes, and containers run with --network host).
//   attach       the client's stdin channel into the task's own stdin (an interactive task's
//                FIFO); the task's output is its log, which the client follows through the
//                server. Ends when the client leaves or the task ends.
// Every process it starts is killed and reaped when its session ends or the manager stops; every
// descriptor is closed with its session. Traffic counts as activity of the task (LastActivity),
// which an interactive job's idle timeout reads.
// One thread of its own runs every session (Asio, single-threaded). Thread-safe: Start, Stop and
// the accessors from any thread.
#ifndef GPUCLOUD_AGENT_SESSION_MANAGER_H_
#define GPUCLOUD_AGENT_SESSION_MANAGER_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/client.h"
#include "api/session_wire.h"
#include "core/clock.h"

namespace gpucloud::agent {

// A running task as a session enters it.
struct SessionTarget {
  std::string exec_id;
  std::string container;                   // its container's name; "" for a host process
  std::vector<std::string> podman;         // Podman and its global flags (a container's)
  std::map<std::string, std::string> env;  // a host process's whole environment
  std::string workdir;                     // a host process's working directory
  std::optional<uid_t> uid;                // as whom a host process runs (nullopt: the agent)
  gid_t gid = 0;
  std::vector<std::string> cgroup_join;  // Executor::CgroupJoinFiles
  std::string stdin_path;                // the task's stdin FIFO ("": it reads /dev/null)
};

// The program and arguments an exec runs for `target`: the command itself for a host process
// (its program found on the task's PATH when it has no '/'), or `podman exec -i [-t]
// CONTAINER COMMAND...` for a container (Podman found on `agent_path`, the agent's PATH).
// NotFound "command not found: NAME" when the program is not there.
absl::StatusOr<std::vector<std::string>> ExecArgv(const SessionTarget& target,
                                                  const api::SessionRequest& request,
                                                  const std::string& agent_path);

// `name` found on `path` (a PATH value) as an executable regular file; a name with '/' as it is.
std::optional<std::string> FindOnPath(const std::string& name, const std::string& path);

class SessionManager {
 public:
  struct Options {
    std::string node;
    api::ClientConfig server;  // the node's certificate: the tunnel authenticates as the node
    // The running task of an assignment in an attempt (null: none here, or not running), shared
    // rather than copied: each open session asks again every second whether its task still runs.
    // Called on the manager's thread.
    std::function<std::shared_ptr<const SessionTarget>(const std::string& assignment, int attempt)>
        find;
    absl::Duration max_backoff = absl::Seconds(10);
  };
  // Borrows `clock` (thread-safe), which stamps activity.
  SessionManager(Options options, const Clock& clock);
  ~SessionManager();  // Stop
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  void Start();
  // Ends every session (their processes killed and reaped) and the tunnels; joins the thread.
  void Stop();
  // When a session of `assignment` last carried a byte (or opened); nullopt: never.
  std::optional<absl::Time> LastActivity(const std::string& assignment) const;
  // Writes `text` to the stderr of every exec session of `assignment`, e.g. an idle warning.
  void Announce(const std::string& assignment, const std::string& text);

  struct Impl;  // session_manager.cc; public for its helpers there

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_SESSION_MANAGER_H_
