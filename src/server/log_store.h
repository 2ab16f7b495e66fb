// LogStore: the tasks' stdout and stderr as the agents ship them, one file per job, attempt and
// rank under DIR/{namespace}/{job}/attempt-{A}/rank-{R}.log. Agents send chunks with the offset
// they start at, so a chunk sent twice (a retry after a lost answer) is written once; an append
// is on disk (fdatasync) before it is acknowledged. Readers wait for more with WaitForMore
// (`gpuctl logs -f`).
//
// Quota: with `max_bytes_per_namespace` > 0 the logs of one namespace hold at most that many
// bytes (an operator's bound, so that one tenant's chatty jobs cannot fill the server's disk).
// A namespace's bytes are counted from its files the first time this process writes or removes
// its logs (so the count survives a restart), then kept by Append and RemoveJob. An append that
// does not fit keeps what fits of its new bytes (the namespace is then exactly full) and reports
// the rest as refused: the log's size says how far it goes, so the same chunk sent again is
// refused at the same place, never written twice. Removing a job's logs gives its bytes back.
//
// Times (`logs?sinceSeconds=`, `timestamps=true`): beside each log, rank-{R}.times is its time
// index, a sequence of 16-byte records (offset, unix ms; each a little-endian int64): the bytes
// from `offset` to the next record's offset (or the log's end) arrived in a chunk the agent read
// at that time. Offsets strictly increase and times never decrease. An append that adds bytes
// adds a record at the log's old end after the bytes are durable (then fdatasyncs the index),
// unless its time is less than kCoalesce after the last record's (its bytes then take that
// record's time, at most 1 s early): the index grows by at most 16 bytes per second of a log's
// output (1.4 MB a day), and is not counted in the quota. A chunk the log has already adds no
// record. A log without an index (written before there was one) has unknown times: all its
// bytes read as the file's modification time, and its first append after that records it for
// offset 0 first. A torn last record (a crash mid-write) is ignored and overwritten; records
// out of order are skipped when read. Thread-safe.
#ifndef GPUCLOUD_SERVER_LOG_STORE_H_
#define GPUCLOUD_SERVER_LOG_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpucloud::server {

struct LogKey {
  std::string namespace_;
  std::string job;
  int attempt = 0;
  int rank = 0;
};

// One record of a log's time index (see above).
struct LogTime {
  int64_t offset = 0;
  int64_t unix_ms = 0;
  bool operator==(const LogTime&) const = default;
};

// What one Append did.
struct LogAppend {
  int64_t size = 0;             // the log's size after it
  int64_t refused = 0;          // new bytes not written because the namespace's quota is full
  int64_t namespace_bytes = 0;  // what the namespace's logs hold after it
};

class LogStore {
 public:
  // `max_bytes_per_namespace`: the quota (0: no limit).
  explicit LogStore(std::string dir, int64_t max_bytes_per_namespace = 0)
      : dir_(std::move(dir)), max_bytes_per_namespace_(max_bytes_per_namespace) {}
  // Records closer in time than this are one (see above).
  static constexpr int64_t kCoalesceMs = 1000;
  // Writes `data` at `offset`; the part before the file's current end is skipped (already
  // there), and of the rest what the quota leaves room for (see above). The new bytes are
  // indexed at ChunkTimeMs(`agent_ms`, `now_ms`, the last record's time): when the agent read
  // them, never in the future, never before the log's earlier bytes. InvalidArgument when
  // `offset` is past the end (a gap); Internal when the log or its index cannot be written (an
  // index that cannot be written after the bytes were: they are stored, and read as the last
  // record's time).
  absl::StatusOr<LogAppend> Append(const LogKey& key, int64_t offset, const std::string& data,
                                   std::optional<int64_t> agent_ms, int64_t now_ms);
  // The same at the wall clock's time (for callers without a clock: tests, tools).
  absl::StatusOr<LogAppend> Append(const LogKey& key, int64_t offset, const std::string& data);
  // The most one Read returns, whatever `max_bytes` says: readers page on with the offset.
  static constexpr int64_t kMaxReadBytes = 4 << 20;
  // Up to min(`max_bytes`, kMaxReadBytes) from `offset` ("" at the end or when there is no such
  // log). Memory is bounded by what is read, not by `max_bytes`.
  std::string Read(const LogKey& key, int64_t offset, int64_t max_bytes) const;
  int64_t Size(const LogKey& key) const;
  // The most records one Times returns: a window with more is thinned to every k-th record (its
  // lines then show an earlier record's time). 65,536 records cover over 18 hours of output.
  static constexpr size_t kMaxTimes = 1 << 16;
  // The records that give the times of the bytes from `from` to `to`: the last one at or before
  // `from` (or the first one, when none is), then those before `to`, in order. A log without an
  // index: {0, its modification time}. Empty when there is no such log or it is empty.
  std::vector<LogTime> Times(const LogKey& key, int64_t from, int64_t to) const;
  // Where the log's bytes of time `cutoff_ms` or later start (SinceChunkOffset over its index):
  // a record's offset (not always at the start of a line), or Size when all are older.
  int64_t SinceOffset(const LogKey& key, int64_t cutoff_ms) const;
  // Ranks with a log for the attempt, ascending.
  std::vector<int> Ranks(const std::string& namespace_, const std::string& job, int attempt) const;
  // Jobs of the namespace that have logs here, ascending.
  std::vector<std::string> Jobs(const std::string& namespace_) const;
  // Waits until more than `after` appends were made (anywhere; counted from this store's start)
  // or `timeout` passes; returns the count then.
  uint64_t WaitForMore(uint64_t after, absl::Duration timeout);
  // Removes every log of the job and gives its bytes back to the namespace's quota.
  void RemoveJob(const std::string& namespace_, const std::string& job);

  int64_t max_bytes_per_namespace() const { return max_bytes_per_namespace_; }
  // What the namespace's logs hold (counted from its files on first use).
  int64_t NamespaceBytes(const std::string& namespace_);
  // True at most once per `interval` for a namespace: RestApi looks for the logs of deleted
  // jobs when a namespace is over its quota, but not on every refused chunk.
  bool SweepDue(const std::string& namespace_, absl::Time now, absl::Duration interval);

 private:
  struct Usage {
    int64_t bytes = 0;
    absl::Time swept = absl::InfinitePast();
  };
  std::string PathOf(const LogKey& key) const;
  std::string TimesPathOf(const LogKey& key) const;
  // Adds the record for the bytes appended at `old_size` (see above); `log_mtime_ms`: the log's
  // modification time before the append (for a log that had no index).
  absl::Status IndexAppend(const LogKey& key, int64_t old_size, int64_t log_mtime_ms,
                           std::optional<int64_t> agent_ms, int64_t now_ms);
  // The namespace's usage, counted from disk the first time.
  Usage& UsageOf(const std::string& namespace_) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string dir_;
  const int64_t max_bytes_per_namespace_;

  mutable absl::Mutex mu_;
  uint64_t appends_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
};

// ---- Log times (pure): the decisions behind sinceSeconds and timestamps=true ----

// The time of a chunk the agent shipped: the time it read it (`agent_ms`, the chunk's `time`
// parameter; the server's `now_ms` when it sent none), no later than `now_ms` (an agent's clock
// ahead of the server's) and no earlier than the log's last record (`last_ms`), so that a log's
// times never go back.
int64_t ChunkTimeMs(std::optional<int64_t> agent_ms, int64_t now_ms,
                    std::optional<int64_t> last_ms);

// Where the bytes of time `cutoff_ms` or later start, in an index of `count` records read by
// `at(i)` (times non-decreasing; found by binary search, so that a long log's index is read in
// a few records): the first record at or after the cutoff's offset, 0 when that is the first
// record (what precedes it has its time), `size` when every record is older.
int64_t SinceChunkOffset(size_t count, const std::function<LogTime(size_t)>& at, int64_t size,
                         int64_t cutoff_ms);
int64_t SinceChunkOffset(std::span<const LogTime> index, int64_t size, int64_t cutoff_ms);

// Where the first line that starts at or after `at` starts, given `text`, the log's bytes from
// `text_offset` (at most `at`; from at - 1 to tell whether `at` starts a line), or the end of
// `text` when no line starts there. A line starts at 0 and after every '\n'.
int64_t LineStartAtOrAfter(std::string_view text, int64_t text_offset, int64_t at);

// A time as Kubernetes' timestamps=true writes it: RFC 3339, UTC, nine fractional digits
// ("2026-12-02T06:30:00.123000000Z").
std::string LogTimestamp(int64_t unix_ms);

// What PrefixLines made: the answer, and how many bytes of the log it holds.
struct PrefixedLog {
  std::string text;
  int64_t consumed = 0;
};
// `text` (the log from `offset`) with each line that starts in it prefixed by the time of the
// record holding its start (`times` as LogStore::Times gives them) and a space, as Kubernetes
// writes timestamps=true. `at_line_start`: whether `text` starts a line (not the rest of one a
// previous answer began). At most `max_bytes` (Kubernetes' limitBytes counts the prefixes): the
// answer is cut there, but not within a prefix: a line of which no byte fits after its prefix is
// left to the next page (from `consumed`, the log bytes the answer holds), unless it is the
// first, which is then cut within its prefix as Kubernetes cuts it (`consumed` 0).
PrefixedLog PrefixLines(std::string_view text, int64_t offset, bool at_line_start,
                        std::span<const LogTime> times, int64_t max_bytes);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_LOG_STORE_H_
