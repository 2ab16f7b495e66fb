// Log shipping decisions (pure): how much of a task's log file the agent ships in one pass,
// when it rotates the file, and what it gives up when a task writes faster than the server
// takes its output. The agent, not the executor, rotates a shipped log: only once what is in it
// has been shipped (so rotation never loses unshipped output), or, when the backlog is over
// `max_backlog` (the server is away or slower than the task), by dropping the backlog with a
// marker line that says how many bytes are missing and where they are kept.
//
// The server's log quota (a namespace's logs hold at most so many bytes there) is answered 429
// QuotaExceeded: the server kept the start of the chunk (the size in the answer says how much)
// and refused the rest. The agent neither retries that chunk nor keeps output for later while the
// namespace is full (room comes back only when jobs are deleted): the refused bytes, and all the
// task writes until the server takes a chunk again, are given up and counted; after the answer's
// Retry-After the marker line saying how many is the next chunk sent, and once it is taken,
// shipping goes on with the task's new output. Other tasks' logs ship meanwhile.
//
// Each chunk says when its bytes were read (`time`, unix ms): the server keeps that time per
// chunk for `gpuctl logs --since` and `--timestamps` (see server/log_store.h). Thread-safe
// (pure).
#ifndef GPUCLOUD_AGENT_LOG_SHIPPING_H_
#define GPUCLOUD_AGENT_LOG_SHIPPING_H_

#include <cstdint>
#include <optional>
#include <string>

namespace gpucloud::agent {

struct LogLimits {
  int64_t rotate_bytes = 64 << 20;   // rotate a fully shipped log over this size
  int64_t max_backlog = 256 << 20;   // unshipped bytes kept before they are dropped
  int64_t bytes_per_pass = 8 << 20;  // shipped per task per pass (then the agent heartbeats)
};

struct ShipPlan {
  int64_t ship = 0;     // bytes to ship from `read_pos` in this pass
  int64_t drop = 0;     // bytes from `read_pos` given up (before shipping): the marker says so
  bool rotate = false;  // after shipping (or dropping), rotate the file (and go on at 0)
};

// `size`: the log file's size now; `read_pos`: how far it was shipped (<= size);
// `over_quota`: the server refused this log's last chunk for its namespace's quota and has not
// taken one since (everything unshipped is dropped).
ShipPlan PlanLogShipping(int64_t size, int64_t read_pos, const LogLimits& limits,
                         bool over_quota = false);

// Why output was dropped: the backlog bound, or the server's log quota.
enum class DropCause { kBacklog, kQuota };

// The line shipped in place of `dropped` bytes of the log at `log_path` on `node`.
std::string DroppedLogMarker(int64_t dropped, DropCause cause, const std::string& log_path,
                             const std::string& node);

// The server's answer to a shipped chunk (POST .../logs?offset=O), read.
struct ShipAnswer {
  enum class Kind {
    kStored,     // 200: all of it is there
    kOtherSize,  // 409: the server's log has another length (`size`): follow it
    kOverQuota,  // 429 QuotaExceeded: the log ends at `size`; the rest of the chunk was refused
    kLater,      // the server is busy or failed (other 429s, 5xx): the same chunk later
    kGone,       // the job is gone (404) or the log is refused for good
  };
  Kind kind = Kind::kGone;
  int64_t size = 0;
  int64_t retry_after_s = 0;  // kOverQuota: when to send the next chunk (1 to 600 s)
  std::string message;        // the server's, for the agent's own log
};
ShipAnswer ReadShipAnswer(int status, const std::string& body);

// Where one task's log stands, as the agent tracks it.
struct LogCursor {
  int64_t read_pos = 0;  // how far the file was read (shipped or dropped)
  int64_t shipped = 0;   // the server's log size: where the next chunk goes
  int64_t dropped = 0;   // bytes given up whose marker line is not shipped yet
  DropCause cause = DropCause::kBacklog;
  bool over_quota = false;  // refused for the quota, and no chunk taken since
  bool gone = false;        // the server no longer takes this log
};

// What a shipped chunk is: read from the file at read_pos (which moves with it), a marker line
// (sent whole again until it is taken), or the tail of a rotated file.
enum class ChunkKind { kFile, kMarker, kTail };

// Moves `cursor` by the server's answer to a chunk of `sent` bytes sent at cursor.shipped; true
// when all of it is on the server. Over quota, the part the server kept counts as shipped and
// the rest of a file's chunk or tail as dropped.
bool ApplyShipAnswer(const ShipAnswer& answer, int64_t sent, ChunkKind kind, LogCursor& cursor);

// The time a shipped chunk says (its `time` parameter): `read_ms`, when the agent read it, or
// `written_by_ms` when that is earlier: a time by which all of its bytes were written (the log
// file's modification time when the pass measured the size it ships up to), so that a backlog
// shipped late (the server was away) keeps the time it was written by, not the time it left.
int64_t ShipTimeMs(int64_t read_ms, std::optional<int64_t> written_by_ms);

// The target of a chunk of rank `rank` of attempt `attempt` of job `ns`/`job` that goes at
// `offset` of the server's log, stamped `time_ms` (ShipTimeMs).
std::string LogChunkTarget(const std::string& ns, const std::string& job, int rank, int attempt,
                           int64_t offset, int64_t time_ms);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_LOG_SHIPPING_H_
