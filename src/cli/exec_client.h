// The client side of interactive sessions (api/session_wire.h, docs/interactive.md), for
// gpuctl exec, cp, port-forward, notebook and run -it: a WebSocket to the server, carried on an
// Asio loop of the calling thread. Each call blocks until its session ends. Reentrant.
#ifndef GPUCLOUD_CLI_EXEC_CLIENT_H_
#define GPUCLOUD_CLI_EXEC_CLIENT_H_

#include <atomic>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/client.h"
#include "api/session_wire.h"

namespace gpucloud::cli {

struct ExecIo {
  bool tty = false;  // a terminal: fd 0 put in raw mode (when it is one), resizes sent
  // What the command reads: fd `stdin_fd` (-1: nothing), or `input` then end of input.
  int stdin_fd = -1;
  std::string input;
  bool send_input = false;  // `input` is the command's stdin
  std::function<void(std::string_view)> on_stdout, on_stderr;
};

// Runs the exec `target` (api::ExecPath) on the server of `config`: the command's status (its
// exit code, or why it could not run in `error`), or why the session failed (the server's
// refusal with its status: NotFound, FailedPrecondition, PermissionDenied...; Unavailable when
// the connection was lost before the command ended).
absl::StatusOr<api::ExecStatus> RunExec(const api::ClientConfig& config, const std::string& target,
                                        ExecIo& io);

struct ForwardSpec {
  int local = 0;  // 0: any free port
  int remote = 0;
};
// "8888", "9000:8888", ":8888" (any free local port). InvalidArgument naming the spec.
absl::StatusOr<ForwardSpec> ParseForwardSpec(std::string_view spec);

// Listens on `address`:spec.local for each spec and carries every accepted connection to the
// task's port through one session per spec (`target_of(remote)` gives its path). `ready` is
// called with the local ports once all listen. Runs until `stop` is set (checked every 100 ms),
// SIGINT or SIGTERM (when `handle_signals`), or a session ends (then the error says why).
// Connection-level failures (nothing listens on the task's port) are said on `err` and close
// that connection only.
absl::Status PortForward(const api::ClientConfig& config, const std::string& address,
                         const std::vector<ForwardSpec>& specs,
                         const std::function<std::string(int remote)>& target_of,
                         const std::function<void(const std::vector<int>&)>& ready,
                         const std::atomic<bool>* stop, bool handle_signals, std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_EXEC_CLIENT_H_
