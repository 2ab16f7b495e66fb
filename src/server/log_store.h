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
// Thread-safe.
#ifndef GPUCLOUD_SERVER_LOG_STORE_H_
#define GPUCLOUD_SERVER_LOG_STORE_H_

#include <cstdint>
#include <map>
#include <string>
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
  // Writes `data` at `offset`; the part before the file's current end is skipped (already
  // there), and of the rest what the quota leaves room for (see above). InvalidArgument when
  // `offset` is past the end (a gap); Internal when the file cannot be written.
  absl::StatusOr<LogAppend> Append(const LogKey& key, int64_t offset, const std::string& data);
  // The most one Read returns, whatever `max_bytes` says: readers page on with the offset.
  static constexpr int64_t kMaxReadBytes = 4 << 20;
  // Up to min(`max_bytes`, kMaxReadBytes) from `offset` ("" at the end or when there is no such
  // log). Memory is bounded by what is read, not by `max_bytes`.
  std::string Read(const LogKey& key, int64_t offset, int64_t max_bytes) const;
  int64_t Size(const LogKey& key) const;
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
  // The namespace's usage, counted from disk the first time.
  Usage& UsageOf(const std::string& namespace_) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string dir_;
  const int64_t max_bytes_per_namespace_;

  mutable absl::Mutex mu_;
  uint64_t appends_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_LOG_STORE_H_
