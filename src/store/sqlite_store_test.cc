// SQLite-only behaviour: its files and their modes, corruption, the WAL, batched compaction,
// kill -9. Everything store.h promises of every backend is in store_conformance_test.cc, which
// runs it on SQLite and on etcd.
#include "store/sqlite_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
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

// A TxnTail for the tests: Make calls `make`, and every call is logged ("make R", then the
// settled status).
class LoggedTail final : public TxnTail {
 public:
  explicit LoggedTail(std::function<absl::StatusOr<std::vector<Op>>(int64_t)> make)
      : make_(std::move(make)) {}
  absl::StatusOr<std::vector<Op>> Make(int64_t revision) override {
    log.push_back("make " + std::to_string(revision));
    return make_(revision);
  }
  void Settled(const absl::Status& status) override {
    log.push_back(status.ok() ? "settled ok" : "settled " + status.ToString());
  }
  std::vector<std::string> log;

 private:
  std::function<absl::StatusOr<std::vector<Op>>(int64_t)> make_;
};

// Concurrent transactions with tails: each tail is made once its transaction's ops hold, in
// commit order, at its transaction's revision: a counter the tails increment without a lock of
// their own numbers them 1..N in revision order, with no number lost to a failed transaction.
TEST_F(SqliteStoreTest, TailsAreMadeOneAtATimeInCommitOrder) {
  std::unique_ptr<Store> s = Open();
  ASSERT_TRUE(s->HasTxnTails());
  ASSERT_TRUE(s->Txn({Put("/jobs/taken", "x", 0)}).ok());
  constexpr int kThreads = 8, kEach = 30;
  int next = 0;  // the tails' own state: the store calls them one at a time
  std::atomic<int> settled_ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        // Every fifth transaction's own create fails: its tail must not be made.
        std::string key = i % 5 == 4 ? "/jobs/taken" : fmt::format("/jobs/{}-{}", t, i);
        int mine = 0;
        LoggedTail tail([&](int64_t) -> absl::StatusOr<std::vector<Op>> {
          mine = ++next;
          return std::vector<Op>{Put(fmt::format("/chain/{:06d}", mine), key, 0)};
        });
        absl::StatusOr<int64_t> rev = s->TxnWithTail({Put(key, "v", 0)}, tail);
        if (i % 5 == 4) {
          EXPECT_TRUE(absl::IsAlreadyExists(rev.status())) << rev.status();
          EXPECT_TRUE(tail.log.empty());
          continue;
        }
        ASSERT_TRUE(rev.ok()) << rev.status();
        ASSERT_EQ(tail.log.size(), 2u);
        EXPECT_EQ(tail.log[0], "make " + std::to_string(*rev));
        EXPECT_EQ(tail.log[1], "settled ok");
        EXPECT_EQ(s->Get(fmt::format("/chain/{:06d}", mine))->mod_revision, *rev);
        ++settled_ok;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const int made = kThreads * kEach * 4 / 5;
  EXPECT_EQ(next, made);
  EXPECT_EQ(settled_ok, made);
  absl::StatusOr<ListResult> chain = s->List("/chain/");
  ASSERT_TRUE(chain.ok());
  ASSERT_EQ(chain->items.size(), static_cast<size_t>(made));
  for (size_t n = 1; n < chain->items.size(); ++n) {
    EXPECT_GT(chain->items[n].mod_revision, chain->items[n - 1].mod_revision) << n;
  }
}

// A tail refused (its create finds the key, or Make says no) fails its transaction alone: none
// of it is written, no revision is taken, and the tail is told at once. A transaction that
// writes nothing takes no revision either. Bad ops are refused before any tail is made.
TEST_F(SqliteStoreTest, ARefusedTailFailsItsTransactionAlone) {
  std::unique_ptr<Store> s = Open();
  ASSERT_TRUE(s->Txn({Put("/chain/1", "someone else's", 0)}).ok());
  const int64_t rev = s->Revision();
  LoggedTail exists([](int64_t) {
    return std::vector<Op>{Op{Op::Kind::kPut, "/chain/1", "mine", 0}};
  });
  absl::StatusOr<int64_t> r = s->TxnWithTail({Put("/jobs/a", "v", 0)}, exists);
  EXPECT_TRUE(absl::IsAlreadyExists(r.status())) << r.status();
  EXPECT_EQ(exists.log, (std::vector<std::string>{"make " + std::to_string(rev + 1),
                                                  "settled " + r.status().ToString()}));
  EXPECT_TRUE(absl::IsNotFound(s->Get("/jobs/a").status()));
  EXPECT_EQ(s->Get("/chain/1")->value, "someone else's");
  LoggedTail no([](int64_t) { return absl::UnavailableError("the chain is broken"); });
  r = s->TxnWithTail({Put("/jobs/a", "v", 0)}, no);
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_EQ(no.log.back(), "settled " + r.status().ToString());
  EXPECT_TRUE(absl::IsNotFound(s->Get("/jobs/a").status()));
  EXPECT_EQ(s->Revision(), rev);
  LoggedTail nothing([](int64_t) { return std::vector<Op>{}; });
  EXPECT_EQ(*s->TxnWithTail({}, nothing), rev);
  EXPECT_EQ(nothing.log.back(), "settled ok");
  EXPECT_EQ(s->Revision(), rev);
  LoggedTail only([](int64_t) { return std::vector<Op>{Op{Op::Kind::kPut, "/chain/2", "r", 0}}; });
  EXPECT_EQ(*s->TxnWithTail({}, only), rev + 1);  // a tail alone is a transaction
  EXPECT_EQ(s->Get("/chain/2")->mod_revision, rev + 1);
  LoggedTail unused([](int64_t) { return std::vector<Op>{}; });
  EXPECT_TRUE(absl::IsInvalidArgument(
      s->TxnWithTail({Put("/jobs/b", "1"), Put("/jobs/b", "2")}, unused).status()));
  EXPECT_TRUE(unused.log.empty());
}

// The group commit under many writers, with compaction taking its turns (in batches of a few
// rows, so that compaction and writes alternate batch by batch) and a watcher: every caller
// gets its own answer and revision (the revisions 1..N, none twice), compaction gets the
// writer while writes keep coming, and a watcher woken by WaitForChange sees every revision,
// in order (compaction never passes it), while they are written. A lost hand-off hangs it.
TEST_F(SqliteStoreTest, ManyWritersCompactionAndAWatcherEachGetTheirTurn) {
  std::unique_ptr<Store> s = Open({.compaction_batch_rows = 8});
  constexpr int kThreads = 16, kEach = 400;
  constexpr int64_t kTotal = int64_t{kThreads} * kEach;
  std::atomic<int> writers_left{kThreads};
  std::atomic<int64_t> seen{0};  // the watcher's last revision
  std::vector<std::vector<int64_t>> revisions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        absl::StatusOr<int64_t> rev = s->Txn({Put(fmt::format("/w/{}/{}", t, i), "v", 0)});
        EXPECT_TRUE(rev.ok()) << rev.status();
        if (!rev.ok()) break;
        revisions[t].push_back(*rev);
        // Every tenth also tries to create a key it made: refused alone, no revision taken.
        if (i % 10 == 9) {
          EXPECT_TRUE(
              absl::IsAlreadyExists(s->Txn({Put(fmt::format("/w/{}/{}", t, i), "v", 0)}).status()));
        }
      }
      --writers_left;
    });
  }
  int compactions_during_writes = 0;
  std::thread compactor([&] {
    while (writers_left > 0) {
      const int64_t upto = std::min(s->Revision() - 5, seen.load());
      if (upto > s->CompactedRevision()) {
        EXPECT_TRUE(s->Compact(upto).ok());
        if (writers_left > 0) ++compactions_during_writes;
      }
      std::this_thread::yield();
    }
  });
  std::string watch_error;
  std::thread watcher([&] {
    while (seen < kTotal) {
      if (!s->WaitForChange(seen, absl::Seconds(30))) {
        watch_error = fmt::format("no change after revision {} for 30 s", seen.load());
        return;
      }
      absl::StatusOr<std::vector<Event>> events = s->Changes("/w/", seen, 1000);
      if (!events.ok()) {
        watch_error = events.status().ToString();  // OutOfRange too: compaction passed it
        return;
      }
      for (const Event& e : *events) {
        if (e.revision != seen + 1) {
          watch_error = fmt::format("revision {} after {}", e.revision, seen.load());
          return;
        }
        seen = e.revision;
      }
    }
  });
  for (std::thread& th : threads) th.join();
  compactor.join();
  watcher.join();
  EXPECT_EQ(watch_error, "");
  EXPECT_EQ(seen, kTotal);
  std::vector<int64_t> all;
  for (const std::vector<int64_t>& r : revisions) {
    EXPECT_TRUE(std::is_sorted(r.begin(), r.end()));
    all.insert(all.end(), r.begin(), r.end());
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kTotal));
  for (int64_t n = 0; n < kTotal; ++n) ASSERT_EQ(all[n], n + 1);
  EXPECT_EQ(s->Revision(), kTotal);
  EXPECT_GT(compactions_during_writes, 0);
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
