#include "agent/checkpoints.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text, int64_t unix_s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  auto t =
      std::chrono::file_clock::from_sys(std::chrono::sys_seconds(std::chrono::seconds(unix_s)));
  fs::last_write_time(p, t);
}

TEST(Checkpoints, TheNewestCompleteEntryCountsPartialOnesAndLocksDoNot) {
  testing_util::TempDir dir;
  fs::path d = dir.path() / "ckpt";
  EXPECT_EQ(NewestCheckpointMs(d.string()), 0);  // no directory: none
  Write(d / "rank0-step00000010.json", "{}", 1'700'000'000);
  Write(d / "rank0-step00000020.json", "{}", 1'700'000'100);
  Write(d / "rank0-step00000030.json.tmp", "{", 1'700'000'200);
  Write(d / "rank0.lock", "", 1'700'000'300);
  Write(d / ".hidden", "", 1'700'000'400);
  Write(d / "step-40" / "shard0", "x", 1'700'000'050);  // a directory checkpoint
  fs::last_write_time(d / "step-40", fs::last_write_time(d / "step-40" / "shard0"));
  EXPECT_EQ(NewestCheckpointMs(d.string()), 1'700'000'100'000);
}

TEST(Checkpoints, CopiesWhatIsMissingKeepingTimesAndNeverPartialNames) {
  testing_util::TempDir dir;
  fs::path from = dir.path() / "local", to = dir.path() / "replica";
  Write(from / "a.json", "A", 1'700'000'000);
  Write(from / "b.json", "B", 1'700'000'100);
  Write(from / "c.json.tmp", "C", 1'700'000'200);
  Write(from / "d" / "x", "D", 1'700'000'300);
  Write(to / "a.json", "old A", 1'600'000'000);  // already there: left alone
  absl::StatusOr<int> n = CopyCheckpoints(from.string(), to.string());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2);  // b.json and d/
  std::ifstream a(to / "a.json"), b(to / "b.json"), x(to / "d" / "x");
  std::string sa, sb, sx;
  a >> sa >> sa;
  b >> sb;
  x >> sx;
  EXPECT_EQ(sb, "B");
  EXPECT_EQ(sx, "D");
  EXPECT_FALSE(fs::exists(to / "c.json.tmp"));
  EXPECT_EQ(fs::last_write_time(to / "b.json"), fs::last_write_time(from / "b.json"));
  EXPECT_EQ(*CopyCheckpoints(from.string(), to.string()), 0);  // nothing new
  EXPECT_EQ(*CopyCheckpoints((dir.path() / "none").string(), to.string()), 0);
}

TEST(CheckpointReplicator, CopiesInTheBackgroundAndSaysHowFarItGot) {
  testing_util::TempDir dir;
  fs::path local = dir.path() / "local", replica = dir.path() / "replica";
  CheckpointReplicator r;
  r.Track("t", local.string(), replica.string());
  Write(local / "s1.json", "1", 1'700'000'000);
  r.Flush();
  EXPECT_TRUE(fs::exists(replica / "s1.json"));
  EXPECT_EQ(r.Replicated("t"), 1'700'000'000'000);
  Write(local / "s2.json", "2", 1'700'000'060);
  r.Untrack("t");  // one last copy, then forgotten
  r.Flush();
  EXPECT_TRUE(fs::exists(replica / "s2.json"));
  EXPECT_EQ(r.Replicated("t"), 0);
  EXPECT_EQ(r.Replicated("never"), 0);
}

}  // namespace
}  // namespace gpucloud::agent
