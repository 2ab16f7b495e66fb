// FencedStore: the store as a leader's controllers see it. Every transaction gets a check
// (store::Op::Kind::kCheck) that the election key is still at the revision of this leader's term,
// put first, so a deposed leader (paused, partitioned, not yet aware) changes nothing once its
// key has expired or another server's has taken its place: its writes fail with
// FailedPrecondition naming the key. Reads, watches and compaction pass straight through (a
// compaction is harmless from any server). The API's writes do not go through here: any server
// may serve users.
// Borrows the store, which must outlive it. Thread-safe as the store is; the token is constant.
#ifndef GPUCLOUD_SERVER_FENCED_STORE_H_
#define GPUCLOUD_SERVER_FENCED_STORE_H_

#include <string>

#include "store/store.h"

namespace gpucloud::server {

// The server's election key, as a key of the store; in etcd it is under the store's namespace
// (PREFIX/data/meta/leader), so that the fence is a check of the store's own. Its value says who
// leads: {"url": "https://...", "pid": N}.
inline constexpr char kLeaderKey[] = "/meta/leader";

class FencedStore final : public store::Store {
 public:
  // `key`: the election key as a key of `store`; `token`: its mod_revision in this term.
  FencedStore(store::Store& store, std::string key, int64_t token)
      : store_(store), key_(std::move(key)), token_(token) {}

  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override;

  absl::StatusOr<store::KeyValue> Get(const std::string& key) override { return store_.Get(key); }
  absl::StatusOr<store::ListResult> List(const std::string& prefix) override {
    return store_.List(prefix);
  }
  absl::StatusOr<store::ListResult> ListPage(const std::string& prefix,
                                             const std::string& after_key, int64_t limit,
                                             int64_t* remaining) override {
    return store_.ListPage(prefix, after_key, limit, remaining);
  }
  absl::StatusOr<int64_t> Count(const std::string& prefix) override { return store_.Count(prefix); }
  absl::StatusOr<std::vector<store::Event>> Changes(const std::string& prefix, int64_t after,
                                                    int limit) override {
    return store_.Changes(prefix, after, limit);
  }
  absl::Status Compact(int64_t revision) override { return store_.Compact(revision); }
  int64_t CompactedRevision() override { return store_.CompactedRevision(); }
  int64_t Revision() override { return store_.Revision(); }
  bool WaitForChange(int64_t after, absl::Duration timeout) override {
    return store_.WaitForChange(after, timeout);
  }

  int64_t token() const { return token_; }

 private:
  store::Store& store_;
  const std::string key_;
  const int64_t token_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_FENCED_STORE_H_
