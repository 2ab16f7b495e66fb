#include "agent/task_times.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

// Writes a status file as the shim would, last modified at `ms`.
std::string StatusFileAt(const testing_util::TempDir& dir, int64_t ms) {
  std::string path = (dir.path() / "exit").string();
  std::ofstream(path) << "exit 0\n";
  struct timespec times[2] = {{ms / 1000, (ms % 1000) * 1'000'000},
                              {ms / 1000, (ms % 1000) * 1'000'000}};
  EXPECT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  return path;
}

TEST(TaskTimes, ATaskEndsWhenItsShimRecordedTheExitNotWhenTheAgentLooked) {
  testing_util::TempDir dir;
  std::string path = StatusFileAt(dir, 1'700'000'000'250);
  EXPECT_EQ(TaskEndedMs(path, 1'700'000'000'200, 1'700'000'000'900), 1'700'000'000'250);
  EXPECT_EQ(TaskEndedMs(path, 0, 1'700'000'000'900), 1'700'000'000'250);
}

TEST(TaskTimes, WithoutARecordTheEndIsWhenTheAgentSawIt) {
  testing_util::TempDir dir;
  EXPECT_EQ(TaskEndedMs((dir.path() / "none").string(), 100, 900), 900);
  EXPECT_EQ(TaskEndedMs("", 100, 900), 900);
}

TEST(TaskTimes, TheEndStaysBetweenTheStartAndTheObservation) {
  testing_util::TempDir dir;
  std::string path = StatusFileAt(dir, 1'700'000'000'250);
  EXPECT_EQ(TaskEndedMs(path, 1'700'000'000'300, 1'700'000'000'900), 1'700'000'000'300);
  EXPECT_EQ(TaskEndedMs(path, 1'700'000'000'000, 1'700'000'000'100), 1'700'000'000'100);
}

}  // namespace
}  // namespace gpucloud::agent
