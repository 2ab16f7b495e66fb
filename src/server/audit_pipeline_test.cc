// The audit log's pipelined commits (audit_log.h, point 1): a transaction of the chain is built
// while the one before it is still in the store's hands, and a failure there leaves no gap.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/text.h"
#include "server/audit_chain.h"
#include "server/audit_log.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using store::Op;

AuditRecord Req(const std::string& user) {
  AuditRecord r;
  r.audit_id = "req-" + user;
  r.request_uri = "/apis/gpucloud/v1/namespaces/a/jobs";
  r.verb = "create";
  r.username = user;
  r.action = "jobs:Create";
  r.resource = "gpucloud:job/a/" + user;
  r.response_code = 0;
  return r;
}

Op Create(const std::string& key) { return Op{Op::Kind::kPut, key, "{}", 0}; }

// A store that orders its transactions as TxnQueued promises (each applied in the order its
// `queued` ran) and can hold the first one back after it was queued, as a slow fsync would.
class OrderedHeldStore : public store::Store {
 public:
  explicit OrderedHeldStore(store::Store& s) : s_(s) {}
  absl::StatusOr<store::KeyValue> Get(const std::string& k) override { return s_.Get(k); }
  absl::StatusOr<store::ListResult> List(const std::string& p) override { return s_.List(p); }
  absl::StatusOr<int64_t> Count(const std::string& p) override { return s_.Count(p); }
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override {
    return TxnQueued(ops, [] {});
  }
  absl::StatusOr<int64_t> TxnQueued(const std::vector<Op>& ops,
                                    absl::FunctionRef<void()> queued) override {
    std::unique_lock<std::mutex> lock(mu_);
    const int ticket = next_++;
    calls_.push_back(ops);
    queued();
    cv_.notify_all();
    cv_.wait(lock, [&] { return turn_ == ticket && (ticket > 0 || released_); });
    lock.unlock();
    absl::StatusOr<int64_t> rev = s_.Txn(ops);
    lock.lock();
    results_.push_back(rev.status());
    ++turn_;
    cv_.notify_all();
    return rev;
  }
  absl::StatusOr<std::vector<store::Event>> Changes(const std::string& p, int64_t after,
                                                    int limit) override {
    return s_.Changes(p, after, limit);
  }
  absl::Status Compact(int64_t r) override { return s_.Compact(r); }
  int64_t CompactedRevision() override { return s_.CompactedRevision(); }
  int64_t Revision() override { return s_.Revision(); }
  bool WaitForChange(int64_t after, absl::Duration t) override {
    return s_.WaitForChange(after, t);
  }

  // Waits (at most 10 s: a failure, not a pace) until `n` transactions were queued.
  bool WaitForCalls(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_.size() >= n; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

  store::Store& s_;
  std::mutex mu_;
  std::condition_variable cv_;
  int next_ = 0;  // guarded by mu_
  int turn_ = 0;  // guarded by mu_
  bool released_ = false;
  std::vector<std::vector<Op>> calls_;  // guarded by mu_
  std::vector<absl::Status> results_;   // guarded by mu_, in commit order
};

class AuditPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<store::Store>> s = store::OpenSqliteStore(tmp_ / "store.db");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  VerifyReport Verify(AuditLog& log) {
    absl::StatusOr<VerifyReport> r = log.Verify();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : VerifyReport{};
  }

  testing_util::TempDir tmp_{"gpucloud-audit-pipeline"};
  std::unique_ptr<store::Store> store_;
  FakeClock clock_{1'764'600'000'000};
  AuditKey key_ = AuditKey::Generate();
};

TEST_F(AuditPipelineTest, TheNextTransactionIsChainedWhileOneIsInFlightAndRedoneAfterItFails) {
  ASSERT_TRUE(store_->Txn({Create("/jobs/a/taken")}).ok());
  OrderedHeldStore held(*store_);
  AuditLog log(held, clock_, key_);
  ASSERT_TRUE(log.Open().ok());
  absl::StatusOr<int64_t> a, b;
  std::thread ta([&] { a = log.CommitWith(Req("a"), {Create("/jobs/a/taken")}); });
  ASSERT_TRUE(held.WaitForCalls(1));
  std::thread tb([&] { b = log.CommitWith(Req("b"), {Create("/jobs/a/b")}); });
  // b's transaction reaches the store while a's is still held there: the chain was not locked
  // for the whole of a's write.
  const bool pipelined = held.WaitForCalls(2);
  held.Release();
  ta.join();
  tb.join();
  ASSERT_TRUE(pipelined);
  EXPECT_TRUE(absl::IsAlreadyExists(a.status())) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(store_->Get("/jobs/a/b").ok());
  // b was chained after a's record 1 and checked that it exists; a failed, so b's first try
  // failed on that check and b was chained again, as record 1.
  std::lock_guard<std::mutex> lock(held.mu_);
  ASSERT_EQ(held.calls_.size(), 3u);
  EXPECT_EQ(held.calls_[1][0].kind, Op::Kind::kCheck);
  EXPECT_EQ(held.calls_[1][0].key, "/audit/records/00000000000000000001");
  EXPECT_TRUE(absl::IsFailedPrecondition(held.results_[1])) << held.results_[1];
  EXPECT_TRUE(held.results_[2].ok());
  EXPECT_EQ(held.calls_[2][0].kind, Op::Kind::kPut);  // nothing in flight: no check
  VerifyReport r = Verify(log);
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.records, 1);
  absl::StatusOr<std::vector<AuditRecord>> all = log.Query({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].username, "b");
  EXPECT_EQ(log.head_seq(), 1);
}

// Many callers at once on SQLite, a quarter of them refused (their key exists): every accepted
// mutation has its record and no refused one has, the chain verifies, and the observer sees
// every record once, in seq order.
TEST_F(AuditPipelineTest, ConcurrentCommitsWithRefusalsKeepTheChainWholeAndInOrder) {
  ASSERT_TRUE(store_->Txn({Create("/jobs/a/taken")}).ok());
  AuditLog log(*store_, clock_, key_);
  ASSERT_TRUE(log.Open().ok());
  std::mutex seen_mu;
  std::vector<int64_t> seen;
  log.SetObserver([&](const AuditRecord& r) {
    std::lock_guard<std::mutex> lock(seen_mu);
    seen.push_back(r.seq);
  });
  constexpr int kThreads = 8, kEach = 60;
  std::atomic<int> accepted{0}, refused{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const bool clash = i % 4 == 0;
        std::string user = Cat("t", t, "-", i);
        absl::StatusOr<int64_t> rev =
            log.CommitWith(Req(user), {Create(clash ? "/jobs/a/taken" : "/jobs/a/" + user)});
        if (i % 5 == 0 && !log.Record(Req("read-" + user)).ok()) ++wrong;
        if (rev.ok() && !clash) {
          ++accepted;
        } else if (!rev.ok() && clash && absl::IsAlreadyExists(rev.status())) {
          ++refused;
        } else {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(log.Flush().ok());
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(accepted, kThreads * kEach * 3 / 4);
  EXPECT_EQ(refused, kThreads * kEach / 4);
  VerifyReport r = Verify(log);
  EXPECT_TRUE(r.ok) << r.what;
  absl::StatusOr<std::vector<AuditRecord>> all = log.Query({});
  ASSERT_TRUE(all.ok());
  const int reads = kThreads * ((kEach + 4) / 5);
  EXPECT_EQ(static_cast<int>(all->size()), accepted + reads);
  for (const AuditRecord& rec : *all) {
    if (rec.username.starts_with("read-")) continue;
    EXPECT_TRUE(store_->Get("/jobs/a/" + rec.username).ok()) << rec.username;
  }
  std::lock_guard<std::mutex> lock(seen_mu);
  ASSERT_EQ(seen.size(), all->size());
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], static_cast<int64_t>(i) + 1);
}

}  // namespace
}  // namespace gpucloud::server
