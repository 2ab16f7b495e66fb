#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace gpucloud::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_ / "store.db").string();
  }
  std::unique_ptr<Store> Open() {
    absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static Op Put(std::string key, std::string value, std::optional<int64_t> expect = {}) {
    return Op{Op::Kind::kPut, std::move(key), std::move(value), expect};
  }
  testing_util::TempDir tmp_{"gpucloud-store"};
  const std::filesystem::path& dir_ = tmp_.path();
  std::string path_;
};

TEST_F(SqliteStoreTest, CreateUpdateDeleteWithRevisions) {
  std::unique_ptr<Store> s = Open();
  EXPECT_EQ(s->Revision(), 0);
  ASSERT_EQ(*s->Txn({Put("/jobs/a/x", "v1", 0)}), 1);
  EXPECT_EQ(s->Txn({Put("/jobs/a/x", "again", 0)}).status().message(), "/jobs/a/x already exists");
  ASSERT_EQ(*s->Txn({Put("/jobs/a/x", "v2", 1)}), 2);
  absl::StatusOr<KeyValue> kv = s->Get("/jobs/a/x");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(*kv, (KeyValue{"/jobs/a/x", "v2", 1, 2, 2}));
  // A stale CAS is a conflict and changes nothing.
  absl::Status stale = s->Txn({Put("/jobs/a/x", "v3", 1)}).status();
  EXPECT_TRUE(absl::IsAborted(stale));
  EXPECT_EQ(stale.message(), "/jobs/a/x was changed: it is at revision 2, not 1");
  EXPECT_EQ(s->Revision(), 2);
  ASSERT_EQ(*s->Txn({Op{Op::Kind::kDelete, "/jobs/a/x", "", 2}}), 3);
  EXPECT_TRUE(absl::IsNotFound(s->Get("/jobs/a/x").status()));
  EXPECT_TRUE(absl::IsNotFound(s->Txn({Op{Op::Kind::kDelete, "/jobs/a/x"}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(s->Txn({}).status()));
}

TEST_F(SqliteStoreTest, TransactionsAreAllOrNothing) {
  std::unique_ptr<Store> s = Open();
  ASSERT_TRUE(s->Txn({Put("/b/1", "x", 0)}).ok());
  // The second op's precondition fails: the first is not applied either.
  absl::Status st = s->Txn({Put("/b/2", "y", 0), Put("/b/1", "z", 0)}).status();
  EXPECT_TRUE(absl::IsAlreadyExists(st));
  EXPECT_TRUE(absl::IsNotFound(s->Get("/b/2").status()));
  EXPECT_EQ(s->Revision(), 1);
  // A gang's bindings in one transaction: one revision for all.
  ASSERT_EQ(*s->Txn({Put("/b/2", "y", 0), Put("/b/3", "w", 0), Put("/b/1", "z", 1)}), 2);
  absl::StatusOr<ListResult> list = s->List("/b/");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 3u);
  EXPECT_EQ(list->revision, 2);
  for (const KeyValue& kv : list->items) EXPECT_EQ(kv.mod_revision, 2);
  EXPECT_EQ(s->Txn({Put("/b/9", "", 0), Put("/b/9", "", 0)}).status().message(),
            "key /b/9 appears twice in a transaction");
}

TEST_F(SqliteStoreTest, ListIsByPrefixInKeyOrder) {
  std::unique_ptr<Store> s = Open();
  for (std::string k : {"/jobs/b/2", "/jobs/a/1", "/jobsx", "/nodes/n1", "/jobs/b/1"}) {
    ASSERT_TRUE(s->Txn({Put(k, "v")}).ok());
  }
  absl::StatusOr<ListResult> list = s->List("/jobs/");
  ASSERT_TRUE(list.ok());
  std::vector<std::string> keys;
  for (const KeyValue& kv : list->items) keys.push_back(kv.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"/jobs/a/1", "/jobs/b/1", "/jobs/b/2"}));
  EXPECT_EQ(s->List("")->items.size(), 5u);
}

TEST_F(SqliteStoreTest, WatchResumesFromARevisionWithoutLossOrDuplicates) {
  std::unique_ptr<Store> s = Open();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(s->Txn({Put("/w/" + std::to_string(i % 3), std::to_string(i))}).ok());
  }
  ASSERT_TRUE(s->Txn({Op{Op::Kind::kDelete, "/w/0"}}).ok());
  // Read in pages of 4 from revision 0, resuming from the last revision seen.
  std::vector<int64_t> seen;
  int64_t after = 0;
  for (;;) {
    absl::StatusOr<std::vector<Event>> page = s->Changes("/w/", after, 4);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const Event& e : *page) seen.push_back(e.revision);
    after = page->back().revision;
  }
  std::vector<int64_t> want;
  for (int64_t r = 1; r <= 11; ++r) want.push_back(r);
  EXPECT_EQ(seen, want);
  absl::StatusOr<std::vector<Event>> last = s->Changes("/w/", 10, 10);
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].kind, Event::Kind::kDelete);
  EXPECT_EQ((*last)[0].kv.value, "9");  // the deleted object's last value
  // Compaction: older revisions are gone, and a watcher is told to list again.
  ASSERT_TRUE(s->Compact(5).ok());
  EXPECT_TRUE(absl::IsOutOfRange(s->Changes("/w/", 4, 10).status()));
  EXPECT_EQ(s->Changes("/w/", 5, 100)->size(), 6u);
  EXPECT_TRUE(absl::IsInvalidArgument(s->Compact(99)));
}

TEST_F(SqliteStoreTest, WaitForChangeWakesOnAWrite) {
  std::unique_ptr<Store> s = Open();
  EXPECT_FALSE(s->WaitForChange(0, absl::Milliseconds(10)));  // nothing happens: times out
  std::thread writer([&] { ASSERT_TRUE(s->Txn({Put("/x", "1")}).ok()); });
  EXPECT_TRUE(s->WaitForChange(0, absl::Seconds(30)));
  writer.join();
  EXPECT_TRUE(s->WaitForChange(0, absl::ZeroDuration()));  // already past
}

TEST_F(SqliteStoreTest, ConcurrentCompareAndSwapOneWins) {
  std::unique_ptr<Store> s = Open();
  for (int round = 0; round < 20; ++round) {
    std::string key = "/c/" + std::to_string(round);
    int64_t rev = *s->Txn({Put(key, "base", 0)});
    std::atomic<int> won{0}, conflicts{0};
    auto apply = [&](std::string value) {
      absl::Status st = s->Txn({Put(key, value, rev)}).status();
      if (st.ok()) ++won;
      if (absl::IsAborted(st)) ++conflicts;
    };
    std::thread a(apply, "a"), b(apply, "b");
    a.join();
    b.join();
    EXPECT_EQ(won.load(), 1);
    EXPECT_EQ(conflicts.load(), 1);
  }
}

TEST_F(SqliteStoreTest, StateSurvivesReopening) {
  {
    std::unique_ptr<Store> s = Open();
    ASSERT_TRUE(s->Txn({Put("/p", "1", 0)}).ok());
    ASSERT_TRUE(s->Txn({Put("/p", "2", 1)}).ok());
    ASSERT_TRUE(s->Compact(1).ok());
  }
  std::unique_ptr<Store> s = Open();
  EXPECT_EQ(s->Revision(), 2);
  EXPECT_EQ(s->Get("/p")->value, "2");
  EXPECT_TRUE(absl::IsOutOfRange(s->Changes("", 0, 10).status()));
  EXPECT_EQ(*s->Txn({Put("/q", "", 0)}), 3);
}

TEST_F(SqliteStoreTest, NotAStoreIsRefused) {
  { std::ofstream(path_) << "this is not a database, just some text that is long enough\n"; }
  absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path_);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsDataLoss(s.status())) << s.status();
  EXPECT_TRUE(absl::IsUnavailable(OpenSqliteStore("/nonexistent/dir/store.db").status()));
}

// A writer process is killed with SIGKILL after N acknowledged writes; every acknowledged write
// is there when the store is opened again. Three rounds on the same file.
TEST_F(SqliteStoreTest, AcknowledgedWritesSurviveKillNine) {
  int64_t total_acked = 0;
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path_);
      if (!s.ok()) _exit(2);
      for (int i = 0;; ++i) {
        std::string key = "/k/" + std::to_string(round) + "/" + std::to_string(i);
        if (!(*s)->Txn({Op{Op::Kind::kPut, key, "v", 0}}).ok()) _exit(3);
        if (write(fds[1], &i, sizeof i) != sizeof i) _exit(4);  // acknowledged
      }
    }
    close(fds[1]);
    int acked = -1, i = 0;
    while (acked < 49 && read(fds[0], &i, sizeof i) == sizeof i) acked = i;
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    // Drain what was acknowledged before the kill landed.
    while (read(fds[0], &i, sizeof i) == sizeof i) acked = i;
    close(fds[0]);
    ASSERT_GE(acked, 49);
    std::unique_ptr<Store> s = Open();
    for (int k = 0; k <= acked; ++k) {
      ASSERT_TRUE(s->Get("/k/" + std::to_string(round) + "/" + std::to_string(k)).ok())
          << "round " << round << ": acknowledged write " << k << " of " << acked << " is lost";
    }
    total_acked += acked + 1;
    EXPECT_GE(s->Revision(), total_acked);
  }
}

}  // namespace
}  // namespace gpucloud::store
