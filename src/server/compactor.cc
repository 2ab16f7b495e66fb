#include "server/compactor.h"

#include "core/log.h"

namespace gpucloud::server {

int64_t CompactionTarget(int64_t revision, int64_t compacted, int64_t keep) {
  if (keep <= 0) return 0;
  int64_t target = revision - keep;
  return target > compacted ? target : 0;
}

absl::Status Compactor::RunOnce() {
  int64_t target =
      CompactionTarget(store_.Revision(), store_.CompactedRevision(), policy_.keep_revisions);
  if (target == 0) return absl::OkStatus();
  return store_.Compact(target);
}

void Compactor::Start() {
  if (policy_.keep_revisions <= 0) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, absl::ToChronoMilliseconds(policy_.interval));
      if (stopping_) break;
      lock.unlock();
      if (absl::Status s = RunOnce(); !s.ok()) {
        log::Error("server", "compaction failed", {{"error", s.message()}});
      }
      lock.lock();
    }
  });
}

void Compactor::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpucloud::server
