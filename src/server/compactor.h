// Compactor: keeps the store's change log bounded. Every `interval` it drops the log entries
// older than the newest `keep_revisions` revisions (as the Kubernetes apiserver compacts etcd
// every five minutes); a watcher that falls further behind gets 410 Gone and lists again.
// Objects are never touched. CompactionTarget is the decision, a pure function; the thread is
// the thin I/O around it.
// Thread-safe: Start once, Stop from any thread (the destructor stops it).
#ifndef GPUCLOUD_SERVER_COMPACTOR_H_
#define GPUCLOUD_SERVER_COMPACTOR_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "store/store.h"

namespace gpucloud::server {

struct CompactionPolicy {
  int64_t keep_revisions = 10'000;  // 0: never compact
  absl::Duration interval = absl::Minutes(1);
};

// The revision to compact up to (inclusive), or 0 when nothing is to be done: the log keeps
// the newest `keep` revisions of `revision`; `compacted` is where it was last cut.
int64_t CompactionTarget(int64_t revision, int64_t compacted, int64_t keep);

class Compactor {
 public:
  // Borrows `store`, which must outlive this.
  Compactor(store::Store& store, CompactionPolicy policy) : store_(store), policy_(policy) {}
  ~Compactor() { Stop(); }
  void Start();
  void Stop();
  // One pass now (what the thread does every interval). Returns the store's error, if any.
  absl::Status RunOnce();

 private:
  store::Store& store_;
  const CompactionPolicy policy_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_COMPACTOR_H_
