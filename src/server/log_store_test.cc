#include "server/log_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

class LogStoreTest : public ::testing::Test {
 protected:
  std::string Dir() const { return tmp_ / "logs"; }
  testing_util::TempDir tmp_{"gpucloud-logstore"};
};

TEST_F(LogStoreTest, CountsWhatEachNamespaceHoldsAndARepeatedChunkOnce) {
  LogStore logs(Dir());
  ASSERT_EQ(logs.Append({"a", "j1", 0, 0}, 0, "hello\n")->size, 6);
  ASSERT_EQ(logs.Append({"a", "j1", 0, 1}, 0, "rank1\n")->namespace_bytes, 12);
  ASSERT_TRUE(logs.Append({"a", "j2", 1, 0}, 0, "x\n").ok());
  ASSERT_TRUE(logs.Append({"b", "j1", 0, 0}, 0, "other\n").ok());
  // A retry of a chunk the server already has, and one that overlaps: only the new bytes count.
  absl::StatusOr<LogAppend> again = logs.Append({"a", "j1", 0, 0}, 0, "hello\n");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size, 6);
  EXPECT_EQ(again->refused, 0);
  ASSERT_EQ(logs.Append({"a", "j1", 0, 0}, 3, "lo\nmore\n")->size, 11);
  EXPECT_EQ(logs.Read({"a", "j1", 0, 0}, 0, 100), "hello\nmore\n");
  EXPECT_EQ(logs.NamespaceBytes("a"), 11 + 6 + 2);
  EXPECT_EQ(logs.NamespaceBytes("b"), 6);
  EXPECT_EQ(logs.NamespaceBytes("nobody"), 0);
  EXPECT_EQ(logs.Jobs("a"), (std::vector<std::string>{"j1", "j2"}));
  EXPECT_FALSE(logs.Append({"a", "j1", 0, 0}, 99, "gap").ok());
}

TEST_F(LogStoreTest, AnAppendOverTheQuotaKeepsWhatFitsAndRefusesTheRest) {
  LogStore logs(Dir(), /*max_bytes_per_namespace=*/10);
  const LogKey k{"a", "j", 0, 0};
  ASSERT_EQ(logs.Append(k, 0, "12345\n")->refused, 0);
  // 4 bytes of room.
  absl::StatusOr<LogAppend> a = logs.Append(k, 6, "abc\ndefgh\n");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size, 10);
  EXPECT_EQ(a->refused, 6);
  EXPECT_EQ(a->namespace_bytes, 10);
  // The same chunk again (an agent's retry): refused at the same place, nothing written twice.
  a = logs.Append(k, 6, "abc\ndefgh\n");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size, 10);
  EXPECT_EQ(a->refused, 6);
  EXPECT_EQ(logs.Read(k, 0, 100), "12345\nabc\n");
  // A chunk the server has whole is no new byte: 0 refused even at the quota; so is an empty one.
  EXPECT_EQ(logs.Append(k, 6, "abc\n")->refused, 0);
  EXPECT_EQ(logs.Append(k, 10, "")->refused, 0);
  // Another job of the same namespace gets nothing; another namespace is not touched, and
  // exactly the room left is all kept.
  EXPECT_EQ(logs.Append({"a", "k", 0, 0}, 0, "x\n")->refused, 2);
  EXPECT_EQ(logs.Size({"a", "k", 0, 0}), 0);
  EXPECT_EQ(logs.Append({"b", "j", 0, 0}, 0, "0123456789")->refused, 0);
  EXPECT_EQ(logs.Append({"b", "j", 0, 0}, 10, "!")->refused, 1);
}

TEST_F(LogStoreTest, TheCountSurvivesARestart) {
  {
    LogStore before(Dir());
    ASSERT_TRUE(before.Append({"a", "j", 0, 0}, 0, "12345678\n").ok());
    ASSERT_TRUE(before.Append({"a", "j", 1, 3}, 0, "abc\n").ok());
  }
  LogStore after(Dir(), 15);
  EXPECT_EQ(after.NamespaceBytes("a"), 13);
  absl::StatusOr<LogAppend> a = after.Append({"a", "k", 0, 0}, 0, "xy\nzzz\n");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size, 2);
  EXPECT_EQ(a->refused, 5);
}

TEST_F(LogStoreTest, RemovingAJobGivesItsBytesBack) {
  LogStore logs(Dir(), 10);
  ASSERT_EQ(logs.Append({"a", "old", 0, 0}, 0, "123456\n")->refused, 0);
  ASSERT_EQ(logs.Append({"a", "old", 1, 1}, 0, "ab\n")->refused, 0);
  EXPECT_EQ(logs.Append({"a", "new", 0, 0}, 0, "x\n")->refused, 2);
  logs.RemoveJob("a", "old");
  EXPECT_EQ(logs.NamespaceBytes("a"), 0);
  EXPECT_EQ(logs.Jobs("a"), std::vector<std::string>{"new"});
  EXPECT_EQ(logs.Append({"a", "new", 0, 0}, 0, "x\n")->refused, 0);
  // Removing a job with no logs, or one counted before this process, keeps the count true.
  logs.RemoveJob("a", "never");
  EXPECT_EQ(logs.NamespaceBytes("a"), 2);
  LogStore restarted(Dir(), 10);
  restarted.RemoveJob("a", "new");
  EXPECT_EQ(restarted.NamespaceBytes("a"), 0);
}

TEST_F(LogStoreTest, ConcurrentAppendsNeverPassTheQuota) {
  constexpr int64_t kQuota = 1000;  // even: 2-byte lines fill it exactly
  LogStore logs(Dir(), kQuota);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&logs, rank] {
      const LogKey k{"a", "j", 0, rank};
      for (int i = 0; i < 200; ++i) {
        absl::StatusOr<LogAppend> a = logs.Append(k, logs.Size(k), "x\n");
        if (!a.ok() || a->refused > 0) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t total = 0;
  for (int rank = 0; rank < 4; ++rank) total += logs.Size({"a", "j", 0, rank});
  EXPECT_EQ(total, kQuota);
  EXPECT_EQ(logs.NamespaceBytes("a"), kQuota);
}

TEST_F(LogStoreTest, ASweepIsDueOncePerInterval) {
  LogStore logs(Dir(), 10);
  const absl::Time t0 = absl::FromUnixSeconds(1'000'000);
  EXPECT_TRUE(logs.SweepDue("a", t0, absl::Seconds(30)));
  EXPECT_FALSE(logs.SweepDue("a", t0 + absl::Seconds(29), absl::Seconds(30)));
  EXPECT_TRUE(logs.SweepDue("b", t0, absl::Seconds(30)));
  EXPECT_TRUE(logs.SweepDue("a", t0 + absl::Seconds(30), absl::Seconds(30)));
}

// ---- Time index ----

constexpr int64_t kT0 = 1'764'657'000'000;  // 2025-12-02T06:30:00Z

TEST_F(LogStoreTest, EachChunkIsIndexedAtItsTimeAndTheIndexSurvivesAReopen) {
  const LogKey k{"a", "j", 0, 0};
  {
    LogStore logs(Dir());
    ASSERT_TRUE(logs.Append(k, 0, "one\n", kT0, kT0 + 50).ok());
    ASSERT_TRUE(logs.Append(k, 4, "two\n", kT0 + 5'000, kT0 + 5'050).ok());
    ASSERT_TRUE(logs.Append(k, 8, "three\n", std::nullopt, kT0 + 9'000).ok());  // the server's
  }
  const std::vector<LogTime> want = {{0, kT0}, {4, kT0 + 5'000}, {8, kT0 + 9'000}};
  LogStore reopened(Dir());
  EXPECT_EQ(reopened.Times(k, 0, 14), want);
  // A window gets the record at or before its start, then those inside it.
  EXPECT_EQ(reopened.Times(k, 5, 8), std::vector<LogTime>({{4, kT0 + 5'000}}));
  EXPECT_EQ(reopened.Times(k, 6, 14), std::vector<LogTime>({want[1], want[2]}));
  EXPECT_EQ(reopened.SinceOffset(k, kT0 + 4'000), 4);
  EXPECT_EQ(reopened.SinceOffset(k, kT0), 0);
  EXPECT_EQ(reopened.SinceOffset(k, kT0 + 9'001), 14);
  // The reopened store goes on from the last record.
  ASSERT_TRUE(reopened.Append(k, 14, "four\n", kT0 + 20'000, kT0 + 20'000).ok());
  EXPECT_EQ(reopened.Times(k, 14, 19), std::vector<LogTime>({{14, kT0 + 20'000}}));
  EXPECT_EQ(std::filesystem::file_size(tmp_ / "logs/a/j/attempt-0/rank-0.times"), 4u * 16);
  // The index is not the log's bytes: neither the quota nor Ranks counts it.
  EXPECT_EQ(LogStore(Dir()).NamespaceBytes("a"), 19);
  EXPECT_EQ(reopened.Ranks("a", "j", 0), std::vector<int>{0});
  EXPECT_TRUE(reopened.Times({"a", "j", 0, 9}, 0, 10).empty());  // no such log
}

TEST_F(LogStoreTest, ARetriedChunkAddsNoRecord) {
  LogStore logs(Dir());
  const LogKey k{"a", "j", 0, 0};
  ASSERT_TRUE(logs.Append(k, 0, "hello\n", kT0, kT0).ok());
  // The same chunk later (its answer was lost), read again at a later time: nothing new.
  ASSERT_EQ(logs.Append(k, 0, "hello\n", kT0 + 60'000, kT0 + 60'000)->size, 6);
  EXPECT_EQ(logs.Times(k, 0, 6), std::vector<LogTime>({{0, kT0}}));
  // One that overlaps: its new bytes only, at the log's old end.
  ASSERT_EQ(logs.Append(k, 3, "lo\nmore\n", kT0 + 61'000, kT0 + 61'000)->size, 11);
  EXPECT_EQ(logs.Times(k, 0, 11), std::vector<LogTime>({{0, kT0}, {6, kT0 + 61'000}}));
  // A chunk refused for the quota keeps no record either.
  LogStore full(Dir() + "-full", 6);
  ASSERT_TRUE(full.Append(k, 0, "hello\n", kT0, kT0).ok());
  ASSERT_EQ(full.Append(k, 6, "over\n", kT0 + 5'000, kT0 + 5'000)->refused, 5);
  EXPECT_EQ(full.Times(k, 0, 6), std::vector<LogTime>({{0, kT0}}));
}

TEST_F(LogStoreTest, ChunksCloserThanASecondShareARecord) {
  LogStore logs(Dir());
  const LogKey k{"a", "j", 0, 0};
  ASSERT_TRUE(logs.Append(k, 0, "a\n", kT0, kT0).ok());
  ASSERT_TRUE(logs.Append(k, 2, "b\n", kT0 + 300, kT0 + 300).ok());
  ASSERT_TRUE(logs.Append(k, 4, "c\n", kT0 + 999, kT0 + 999).ok());
  ASSERT_TRUE(logs.Append(k, 6, "d\n", kT0 + 1'000, kT0 + 1'000).ok());
  ASSERT_TRUE(logs.Append(k, 8, "e\n", kT0 + 1'500, kT0 + 1'500).ok());
  EXPECT_EQ(logs.Times(k, 0, 10), std::vector<LogTime>({{0, kT0}, {6, kT0 + 1'000}}));
  // A hundred chunks in a second: still one record.
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(logs.Append(k, 10 + i, "x", kT0 + 1'900, kT0 + 1'900).ok());
  EXPECT_EQ(std::filesystem::file_size(tmp_ / "logs/a/j/attempt-0/rank-0.times"), 2u * 16);
}

TEST_F(LogStoreTest, TimesNeverGoBackNorComeFromTheFuture) {
  LogStore logs(Dir());
  const LogKey k{"a", "j", 0, 0};
  // An agent's clock an hour ahead of the server's: the server's time.
  ASSERT_TRUE(logs.Append(k, 0, "ahead\n", kT0 + 3'600'000, kT0).ok());
  // Then one behind the last record: the last record's time (so it shares the record).
  ASSERT_TRUE(logs.Append(k, 6, "behind\n", kT0 - 60'000, kT0 + 10'000).ok());
  ASSERT_TRUE(logs.Append(k, 13, "later\n", kT0 + 12'000, kT0 + 12'000).ok());
  EXPECT_EQ(logs.Times(k, 0, 19), std::vector<LogTime>({{0, kT0}, {13, kT0 + 12'000}}));
}

TEST_F(LogStoreTest, ALogWithoutAnIndexHasItsFilesTime) {
  const LogKey k{"a", "j", 0, 0};
  const std::filesystem::path log = tmp_ / "logs/a/j/attempt-0/rank-0.log";
  std::filesystem::create_directories(log.parent_path());
  std::ofstream(log) << "written before there was an index\n";  // 34 bytes
  struct stat st {};
  ASSERT_EQ(stat(log.c_str(), &st), 0);
  const int64_t mtime_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  LogStore logs(Dir());
  EXPECT_EQ(logs.Times(k, 0, 34), std::vector<LogTime>({{0, mtime_ms}}));
  EXPECT_EQ(logs.SinceOffset(k, mtime_ms), 0);
  EXPECT_EQ(logs.SinceOffset(k, mtime_ms + 1), 34);
  // Its first append records the old bytes' time first.
  ASSERT_TRUE(logs.Append(k, 34, "new\n", mtime_ms + 5'000, mtime_ms + 5'000).ok());
  EXPECT_EQ(logs.Times(k, 0, 38), std::vector<LogTime>({{0, mtime_ms}, {34, mtime_ms + 5'000}}));
}

TEST_F(LogStoreTest, ATornRecordIsIgnoredAndOverwritten) {
  LogStore logs(Dir());
  const LogKey k{"a", "j", 0, 0};
  ASSERT_TRUE(logs.Append(k, 0, "one\n", kT0, kT0).ok());
  const std::string index = tmp_ / "logs/a/j/attempt-0/rank-0.times";
  std::ofstream(index, std::ios::app | std::ios::binary) << "torn";  // a crash mid-record
  EXPECT_EQ(logs.Times(k, 0, 4), std::vector<LogTime>({{0, kT0}}));
  ASSERT_TRUE(logs.Append(k, 4, "two\n", kT0 + 2'000, kT0 + 2'000).ok());
  EXPECT_EQ(std::filesystem::file_size(index), 2u * 16);
  EXPECT_EQ(logs.Times(k, 0, 8), std::vector<LogTime>({{0, kT0}, {4, kT0 + 2'000}}));
}

// ---- Log times (pure) ----

TEST(ChunkTimeMs, TheAgentsTimeKeptOutOfTheFutureAndInOrder) {
  struct Case {
    std::optional<int64_t> agent, last;
    int64_t now, want;
  };
  for (const Case& c : std::vector<Case>{
           {100, std::nullopt, 200, 100},           // the agent's read time
           {std::nullopt, std::nullopt, 200, 200},  // none sent: the server's clock
           {500, std::nullopt, 200, 200},           // from the future: now
           {100, 150, 200, 150},                    // before the last record: the last record's
           {std::nullopt, 300, 200, 300},           // the server's clock went back: still in order
       }) {
    EXPECT_EQ(ChunkTimeMs(c.agent, c.now, c.last), c.want)
        << c.agent.value_or(-1) << " " << c.now << " " << c.last.value_or(-1);
  }
}

TEST(SinceChunkOffset, TheFirstChunkOfTheCutoffOrLater) {
  const std::vector<LogTime> index = {{0, 1'000}, {10, 2'000}, {25, 2'000}, {40, 5'000}};
  struct Case {
    int64_t cutoff, want;
  };
  for (const Case& c : std::vector<Case>{
           {0, 0},  // all of it
           {1'000, 0},
           {1'001, 10},  // the first record after the cutoff
           {2'000, 10},  // equal times: the first of them
           {2'001, 40},
           {5'000, 40},
           {5'001, 60},  // all older: the end
       }) {
    EXPECT_EQ(SinceChunkOffset(index, 60, c.cutoff), c.want) << c.cutoff;
  }
  EXPECT_EQ(SinceChunkOffset(std::span<const LogTime>(), 0, 1), 0);
}

TEST(LineStartAtOrAfter, ALineStartsAtZeroAndAfterEachNewline) {
  struct Case {
    std::string text;
    int64_t text_offset, at, want;
  };
  for (const Case& c : std::vector<Case>{
           {"ab\ncd\n", 0, 0, 0},
           {"ab\ncd\n", 0, 3, 3},  // right after a newline
           {"ab\ncd\n", 0, 1, 3},  // within a line: the next one
           {"ab\ncd\n", 0, 4, 6},  // within the last line: the end
           {"b\ncd", 9, 10, 11},   // from at - 1 = 9 (a window of the log)
           {"\ncd", 9, 10, 10},
           {"bcd", 9, 10, 12},  // no newline: nothing starts there
           {"abc", 0, 7, 3},    // past the end
       }) {
    EXPECT_EQ(LineStartAtOrAfter(c.text, c.text_offset, c.at), c.want) << c.text << " " << c.at;
  }
}

TEST(LogTimestamp, IsKubernetesRfc3339NanoInUtc) {
  EXPECT_EQ(LogTimestamp(kT0 + 123), "2025-12-02T06:30:00.123000000Z");
  EXPECT_EQ(LogTimestamp(0), "1970-01-01T00:00:00.000000000Z");
}

TEST(PrefixLines, EachLineTakesTheTimeOfTheChunkItStartsIn) {
  const std::vector<LogTime> times = {{0, kT0}, {6, kT0 + 1'000}, {9, kT0 + 2'000}};
  const std::string a = "2025-12-02T06:30:00.000000000Z ";
  const std::string b = "2025-12-02T06:30:01.000000000Z ";
  const std::string c = "2025-12-02T06:30:02.000000000Z ";
  ASSERT_EQ(a.size(), 31u);
  struct Case {
    std::string text;
    int64_t offset;
    bool at_line_start;
    int64_t max;
    std::string want;
    int64_t consumed;
  };
  // The log: "one\ntw" "o\nt" "hree\nfour" (chunks at 0, 6 and 9): "two" starts in the first
  // chunk, "three" in the second, "four" in the third.
  const std::string log = "one\ntwo\nthree\nfour";
  for (const Case& k : std::vector<Case>{
           {log, 0, true, 1 << 20, a + "one\n" + a + "two\n" + b + "three\n" + c + "four", 18},
           {"", 0, true, 100, "", 0},
           // The rest of a line another answer began: no prefix until the next line.
           {log.substr(5), 5, false, 1 << 20, "wo\n" + b + "three\n" + c + "four", 13},
           {log.substr(8), 8, true, 1 << 20, b + "three\n" + c + "four", 10},
           // limitBytes counts the prefixes; a cut within a line holds what fits of it...
           {log, 0, true, 31 + 2, a + "on", 2},
           // ...and a line of which nothing fits after its prefix is left to the next page (from
           // 4), where it is prefixed once...
           {log, 0, true, 35 + 10, a + "one\n", 4},
           {log, 0, true, 35 + 31, a + "one\n", 4},
           {log, 0, true, 35 + 32, a + "one\n" + a + "t", 5},
           // ...unless it is the first: then the prefix is cut as Kubernetes cuts it.
           {log, 0, true, 10, a.substr(0, 10), 0},
           {log, 0, true, 31, a, 0},
           {log, 0, true, 0, "", 0},
       }) {
    PrefixedLog got = PrefixLines(k.text, k.offset, k.at_line_start, times, k.max);
    EXPECT_EQ(got.text, k.want) << k.offset << " " << k.max;
    EXPECT_EQ(got.consumed, k.consumed) << k.offset << " " << k.max;
  }
}

}  // namespace
}  // namespace gpucloud::server
