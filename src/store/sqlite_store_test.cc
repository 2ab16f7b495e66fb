#include "store/sqlite_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "testing/temp_dir.h"

namespace gpucloud::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = (dir_ / "store.db").string(); }
  std::unique_ptr<Store> Open(const SqliteStoreOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path_, options);
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

// An unlogged put (the audit log's records) is stored and read like any, but no watch sees it:
// its transaction's other writes are in the change log at the same revision.
TEST_F(SqliteStoreTest, AnUnloggedPutIsStoredButNotInTheChangeLog) {
  std::unique_ptr<Store> s = Open();
  Op record = Put("/audit/records/1", "r1", 0);
  record.unlogged = true;
  ASSERT_EQ(*s->Txn({Put("/jobs/a/x", "v1", 0), record}), 1);
  EXPECT_EQ(s->Get("/audit/records/1")->value, "r1");
  EXPECT_EQ(s->List("/audit/")->items.size(), 1u);
  absl::StatusOr<std::vector<Event>> all = s->Changes("/", 0, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].kv.key, "/jobs/a/x");
  EXPECT_TRUE(s->Changes("/audit/", 0, 100)->empty());
  // Its revision still counts, and a reopened store keeps it.
  s.reset();
  s = Open();
  EXPECT_EQ(s->Revision(), 1);
  EXPECT_EQ(s->Get("/audit/records/1")->value, "r1");
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
  // Count agrees with List, by prefix only ("/jobsx" is not under "/jobs/").
  EXPECT_EQ(*s->Count("/jobs/"), 3);
  EXPECT_EQ(*s->Count("/jobs/b/"), 2);
  EXPECT_EQ(*s->Count("/jobs"), 4);
  EXPECT_EQ(*s->Count("/queues/"), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(s->Count("").status()));
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

TEST_F(SqliteStoreTest, APageOfChangesNeverSplitsARevision) {
  std::unique_ptr<Store> s = Open();
  ASSERT_TRUE(s->Txn({Put("/w/a", "1"), Put("/w/b", "1"), Put("/w/c", "1")}).ok());  // rev 1
  ASSERT_TRUE(s->Txn({Put("/w/d", "1"), Put("/w/e", "1")}).ok());                    // rev 2
  // A limit of 2 would end inside revision 1: the page holds all of it, and stops there.
  absl::StatusOr<std::vector<Event>> page = s->Changes("/w/", 0, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 3u);
  EXPECT_EQ(page->back().revision, 1);
  page = s->Changes("/w/", 1, 2);
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ(page->front().revision, 2);
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

// Corruption: 30 objects of about 3 KB each, one row to a page in each table, so that any page
// past the first holds objects, their log or an index. The store is closed (its WAL folded
// into the file) before the file is damaged.
std::map<std::string, std::string> FillAndClose(const std::string& path) {
  std::map<std::string, std::string> want;
  absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return want;
  for (int i = 0; i < 30; ++i) {
    std::string key = "/jobs/t/j" + std::to_string(100 + i);
    std::string value = std::string(3000, static_cast<char>('a' + i % 26)) + key;
    EXPECT_TRUE((*s)->Txn({Op{Op::Kind::kPut, key, value, 0}}).ok());
    want[key] = value;
  }
  return want;
}

// Overwrites `size` bytes at `offset` with a fixed pattern whose first byte ('g') is no b-tree
// page type, so a whole overwritten page reads as corrupt.
void Overwrite(const std::string& path, int64_t offset, size_t size) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good());
  std::string garbage;
  while (garbage.size() < size) garbage += "garbage!";
  f.seekp(offset);
  f.write(garbage.data(), static_cast<std::streamsize>(size));
  ASSERT_TRUE(f.good());
}

// Every read either fails with DataLoss or answers everything there is, right; and at least
// one fails (the damaged page belongs to a table or an index that some read walks).
void ExpectNoReadServesPartialData(Store& s, const std::map<std::string, std::string>& want) {
  int failed = 0;
  auto failed_with_data_loss = [&](const absl::Status& st) {
    if (st.ok()) return false;
    EXPECT_TRUE(absl::IsDataLoss(st)) << st;
    ++failed;
    return true;
  };
  absl::StatusOr<ListResult> list = s.List("");
  if (!failed_with_data_loss(list.status())) {
    std::map<std::string, std::string> got;
    for (const KeyValue& kv : list->items) got[kv.key] = kv.value;
    EXPECT_EQ(got.size(), want.size()) << "a List served partial data";
    EXPECT_TRUE(got == want) << "a List served wrong data";
  }
  absl::StatusOr<std::vector<Event>> changes = s.Changes("", 0, 1000);
  if (!failed_with_data_loss(changes.status())) {
    EXPECT_EQ(changes->size(), want.size()) << "Changes served a partial log";
  }
  for (const auto& [key, value] : want) {
    absl::StatusOr<KeyValue> kv = s.Get(key);
    if (!failed_with_data_loss(kv.status())) {
      EXPECT_EQ(kv->value, value) << key;
    }
  }
  EXPECT_GT(failed, 0) << "no read noticed the damaged page";
}

int64_t PageAlignedAt(const std::string& path, double fraction) {
  auto size = static_cast<double>(std::filesystem::file_size(path));
  return static_cast<int64_t>(size * fraction) / 4096 * 4096;
}

TEST_F(SqliteStoreTest, ReadsOfCorruptPagesAreErrorsNotPartialData) {
  for (double where : {0.25, 0.5, 0.75}) {
    SCOPED_TRACE(where);
    std::filesystem::remove(path_);
    std::map<std::string, std::string> want = FillAndClose(path_);
    ASSERT_GT(std::filesystem::file_size(path_), 60u * 4096);
    int64_t offset = PageAlignedAt(path_, where);
    ASSERT_GT(offset, 0);
    Overwrite(path_, offset, 4096);
    // Without the integrity check at open, to reach every read path with the damage.
    std::unique_ptr<Store> s = Open({.quick_check = false});
    ASSERT_NE(s, nullptr);
    ExpectNoReadServesPartialData(*s, want);
  }
}

TEST_F(SqliteStoreTest, ACorruptStoreIsRefusedAtOpen) {
  for (double where : {0.25, 0.5, 0.75}) {
    SCOPED_TRACE(where);
    std::filesystem::remove(path_);
    std::map<std::string, std::string> want = FillAndClose(path_);
    Overwrite(path_, PageAlignedAt(path_, where), 4096);
    absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path_);
    ASSERT_FALSE(s.ok()) << "a corrupt store opened";
    EXPECT_TRUE(absl::IsDataLoss(s.status())) << s.status();
    EXPECT_NE(s.status().message().find("integrity check"), absl::string_view::npos) << s.status();
  }
}

TEST_F(SqliteStoreTest, AGarbageHeaderIsRefusedAtOpen) {
  FillAndClose(path_);
  Overwrite(path_, 0, 100);  // the database header
  absl::StatusOr<std::unique_ptr<Store>> s = OpenSqliteStore(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsDataLoss(s.status())) << s.status();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Job environments hold secrets: the database, its WAL and its shared memory are the owner's
// only, whatever the umask.
TEST_F(SqliteStoreTest, FilesAreCreatedOwnerOnly) {
  mode_t old_umask = ::umask(0);
  std::unique_ptr<Store> s = Open();
  ::umask(old_umask);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Txn({Put("/secret", "TOKEN=x")}).ok());
  for (std::string suffix : {"", "-wal", "-shm"}) EXPECT_EQ(ModeOf(path_ + suffix), 0600) << suffix;
}

TEST_F(SqliteStoreTest, ExistingFilesAreRestrictedToTheOwner) {
  { ASSERT_TRUE(Open()->Txn({Put("/secret", "TOKEN=x")}).ok()); }
  // As an older build left them: world-readable, with (empty) WAL and shared-memory files.
  for (std::string suffix : {"-wal", "-shm"}) std::ofstream(path_ + suffix).flush();
  for (std::string suffix : {"", "-wal", "-shm"}) {
    ASSERT_EQ(::chmod((path_ + suffix).c_str(), 0644), 0);
  }
  std::unique_ptr<Store> s = Open();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->Get("/secret")->value, "TOKEN=x");
  ASSERT_TRUE(s->Txn({Put("/secret2", "TOKEN=y")}).ok());
  for (std::string suffix : {"", "-wal", "-shm"}) EXPECT_EQ(ModeOf(path_ + suffix), 0600) << suffix;
}

// Compaction in batches of about 7 rows: revisions of 3 rows each never split, and the log,
// the compaction point and Changes agree afterwards and after reopening.
TEST_F(SqliteStoreTest, CompactionInBatchesDropsWholeRevisions) {
  {
    std::unique_ptr<Store> s = Open({.compaction_batch_rows = 7});
    for (int rev = 1; rev <= 20; ++rev) {
      std::vector<Op> ops;
      for (int k = 0; k < 3; ++k)
        ops.push_back(Put("/c/" + std::to_string(k), std::to_string(rev)));
      ASSERT_EQ(*s->Txn(ops), rev);
    }
    EXPECT_EQ(s->CompactedRevision(), 0);
    ASSERT_TRUE(s->Compact(13).ok());
    EXPECT_EQ(s->CompactedRevision(), 13);
    EXPECT_TRUE(s->Compact(13).ok());  // at or below the compaction point: nothing to do
    EXPECT_TRUE(s->Compact(2).ok());
    EXPECT_EQ(s->CompactedRevision(), 13);
    absl::Status beyond = s->Compact(21);
    EXPECT_TRUE(absl::IsInvalidArgument(beyond)) << beyond;
  }
  std::unique_ptr<Store> s = Open();
  EXPECT_EQ(s->CompactedRevision(), 13);
  EXPECT_TRUE(absl::IsOutOfRange(s->Changes("", 12, 100).status()));
  absl::StatusOr<std::vector<Event>> left = s->Changes("", 13, 100);
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_EQ(left->size(), 7u * 3);
  EXPECT_EQ(left->front().revision, 14);
  EXPECT_EQ(left->back().revision, 20);
  EXPECT_EQ(s->List("/c/")->items.size(), 3u);  // objects are kept
}

TEST_F(SqliteStoreTest, CompactionTruncatesTheWal) {
  std::unique_ptr<Store> s = Open();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(s->Txn({Put("/w/" + std::to_string(i % 10), std::string(2000, 'x'))}).ok());
  }
  ASSERT_GT(std::filesystem::file_size(path_ + "-wal"), 0u);
  ASSERT_TRUE(s->Compact(s->Revision()).ok());
  EXPECT_EQ(std::filesystem::file_size(path_ + "-wal"), 0u);
  EXPECT_EQ(s->Changes("", s->Revision(), 10)->size(), 0u);
  // Writing goes on after the checkpoint.
  ASSERT_TRUE(s->Txn({Put("/w/after", "1")}).ok());
  EXPECT_EQ(s->Get("/w/after")->value, "1");
}

// Compaction in many small batches while another thread writes: every write is acknowledged
// and kept, and the log holds exactly what is after the compaction point.
TEST_F(SqliteStoreTest, CompactionAndWritesGoOnTogether) {
  std::unique_ptr<Store> s = Open({.compaction_batch_rows = 2});
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(s->Txn({Put("/p/" + std::to_string(i % 7), "v")}).ok());
  absl::Status compacted;
  std::thread compactor([&] { compacted = s->Compact(300); });
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(s->Txn({Put("/q/" + std::to_string(i), "v", 0)}).ok());
  compactor.join();
  ASSERT_TRUE(compacted.ok()) << compacted;
  EXPECT_EQ(s->CompactedRevision(), 300);
  EXPECT_EQ(s->Revision(), 350);
  EXPECT_EQ(s->List("/q/")->items.size(), 50u);
  absl::StatusOr<std::vector<Event>> left = s->Changes("", 300, 1000);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(left->size(), 50u);
}

// A List's items and revision are of one snapshot, also while writes go on: each write creates
// one key at the next revision, so a list at revision R holds exactly R keys, none newer.
TEST_F(SqliteStoreTest, ListItemsAndRevisionAreOneSnapshot) {
  std::unique_ptr<Store> s = Open();
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i)
      ASSERT_TRUE(s->Txn({Put("/s/" + std::to_string(i), "v", 0)}).ok());
  });
  for (int n = 0; n < 200; ++n) {
    absl::StatusOr<ListResult> list = s->List("/s/");
    ASSERT_TRUE(list.ok()) << list.status();
    ASSERT_EQ(static_cast<int64_t>(list->items.size()), list->revision);
    for (const KeyValue& kv : list->items) ASSERT_LE(kv.mod_revision, list->revision);
  }
  writer.join();
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
