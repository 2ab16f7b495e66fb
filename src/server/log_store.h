// LogStore: the tasks' stdout and stderr as the agents ship them, one file per job, attempt and
// rank under DIR/{namespace}/{job}/attempt-{A}/rank-{R}.log. Agents send chunks with the offset
// they start at, so a chunk sent twice (a retry after a lost answer) is written once; an append
// is on disk (fdatasync) before it is acknowledged. Readers wait for more with WaitForMore
// (`gpuctl logs -f`). Thread-safe.
#ifndef GPUCLOUD_SERVER_LOG_STORE_H_
#define GPUCLOUD_SERVER_LOG_STORE_H_

#include <cstdint>
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

class LogStore {
 public:
  explicit LogStore(std::string dir) : dir_(std::move(dir)) {}
  // Writes `data` at `offset`; the part before the file's current end is skipped (already
  // there). Returns the file's new size. InvalidArgument when `offset` is past the end (a gap).
  absl::StatusOr<int64_t> Append(const LogKey& key, int64_t offset, const std::string& data);
  // The most one Read returns, whatever `max_bytes` says: readers page on with the offset.
  static constexpr int64_t kMaxReadBytes = 4 << 20;
  // Up to min(`max_bytes`, kMaxReadBytes) from `offset` ("" at the end or when there is no such
  // log). Memory is bounded by what is read, not by `max_bytes`.
  std::string Read(const LogKey& key, int64_t offset, int64_t max_bytes) const;
  int64_t Size(const LogKey& key) const;
  // Ranks with a log for the attempt, ascending.
  std::vector<int> Ranks(const std::string& namespace_, const std::string& job, int attempt) const;
  // Waits until something is appended anywhere or `timeout` passes.
  void WaitForMore(absl::Duration timeout);
  // Removes every log of the job.
  void RemoveJob(const std::string& namespace_, const std::string& job);

 private:
  std::string PathOf(const LogKey& key) const;
  std::string dir_;
  mutable absl::Mutex mu_;
  uint64_t appends_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_LOG_STORE_H_
