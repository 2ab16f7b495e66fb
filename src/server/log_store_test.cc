#include "server/log_store.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpucloud::server
