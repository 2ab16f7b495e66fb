// The wire of interactive sessions (docs/interactive.md): `gpuctl exec`, `gpuctl cp` and
// `gpuctl port-forward` open a WebSocket to the server, which asks the task's agent (over the
// agent's own WebSocket, its "tunnel") to dial back with one for the session, and relays the
// messages between the two unchanged. Every message is binary:
//   exec:          [channel (1 byte)][data], after Kubernetes' v4.channel.k8s.io: stdin (0,
//                  client to task; an empty one closes stdin), stdout (1), stderr (2), status
//                  (3, task to client, JSON ExecStatus, the last message), resize (4, client to
//                  task, JSON {"width","height"}).
//   port-forward:  [frame type (1)][connection id (4, big-endian)][payload]: many TCP
//                  connections over one session. open (client to task), data (either way),
//                  close (either way; its payload is why, when it is an error).
// The server's request to an agent (SessionRequest) is a text message on the tunnel.
// Pure functions and plain structs; thread-safe.
#ifndef GPUCLOUD_API_SESSION_WIRE_H_
#define GPUCLOUD_API_SESSION_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::api {

enum class ExecChannel : uint8_t { kStdin = 0, kStdout = 1, kStderr = 2, kStatus = 3, kResize = 4 };

// One exec message: the channel byte, then `data`.
std::string ExecMessage(ExecChannel channel, std::string_view data);

// How an exec'd command ended: its exit code, the signal that ended it, or why it could not
// run (then exit_code is 126 or 127, as a shell says, or -1 for the platform's own failure).
struct ExecStatus {
  int exit_code = 0;
  int signal = 0;
  std::string error;  // "" when the command ran
};
std::string ExecStatusJson(const ExecStatus& s);
absl::StatusOr<ExecStatus> ParseExecStatus(std::string_view json);

struct TerminalSize {
  int width = 80;
  int height = 24;
};
std::string TerminalSizeJson(const TerminalSize& s);
// InvalidArgument for anything but {"width": 1..65535, "height": 1..65535} (a terminal that
// sends garbage is refused, not obeyed).
absl::StatusOr<TerminalSize> ParseTerminalSize(std::string_view json);

enum class ForwardFrame : uint8_t { kOpen = 1, kData = 2, kClose = 3 };
struct ForwardMessage {
  ForwardFrame type = ForwardFrame::kData;
  uint32_t connection = 0;
  std::string_view payload;  // into the decoded message
};
std::string EncodeForward(ForwardFrame type, uint32_t connection, std::string_view payload = {});
// nullopt for a message shorter than 5 bytes or of an unknown type.
std::optional<ForwardMessage> DecodeForward(std::string_view message);

// What the server asks an agent for: a session `id` (128 random bits, hex) for the task of
// `assignment` ("{ns}.{job}.{rank}") in `attempt`, to be dialled back at SessionPath.
struct SessionRequest {
  std::string id;
  std::string kind;  // "exec", "portforward" or "attach"
  std::string assignment;
  int attempt = 0;
  std::vector<std::string> command;  // exec
  bool tty = false;                  // exec: a terminal
  bool stdin = false;                // exec: the client sends stdin
  int port = 0;                      // portforward: the task's port
  std::string user;                  // who asked (for the agent's log)
};
std::string SessionRequestJson(const SessionRequest& r);
// InvalidArgument naming the field.
absl::StatusOr<SessionRequest> ParseSessionRequest(std::string_view json);

// "/apis/gpucloud/v1/namespaces/{ns}/jobs/{job}/exec?rank=R&command=JSON[&tty=true][&stdin=true]"
// (the command is one JSON array, percent-encoded).
std::string ExecPath(std::string_view ns, std::string_view job, int rank,
                     const std::vector<std::string>& command, bool tty, bool stdin);
// ".../jobs/{job}/portforward?rank=R&port=P".
std::string PortForwardPath(std::string_view ns, std::string_view job, int rank, int port);
// ".../jobs/{job}/attach?rank=R": the client's stdin channel into the task's own stdin (exec's
// channels; the agent answers a status only when it cannot attach).
std::string AttachPath(std::string_view ns, std::string_view job, int rank);
// The agent's tunnel, and where it dials back for a session.
std::string TunnelPath(const std::string& node);
std::string SessionPath(const std::string& node, const std::string& id);

// `s` with every byte but unreserved ones (RFC 3986: A-Z a-z 0-9 - . _ ~) as %XX.
std::string PercentEncode(std::string_view s);

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_SESSION_WIRE_H_
