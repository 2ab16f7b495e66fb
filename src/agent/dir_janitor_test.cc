#include "agent/dir_janitor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;

int Entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// The path is free as soon as the call returns (a task of the same name may start there at
// once); what was there goes on the janitor's thread, and nothing else in the parent is touched.
TEST(DirJanitor, FreesThePathAtOnceAndRemovesTheTreeBehind) {
  testing_util::TempDir tmp("gpucloud-janitor");
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run / "a" / "deep");
  std::ofstream(run / "a" / "deep" / "f") << "x";
  fs::create_directories(run / "b");
  DirJanitor janitor("");
  janitor.RemoveTree((run / "a").string());
  EXPECT_FALSE(fs::exists(run / "a"));
  fs::create_directories(run / "a");  // the next task's
  janitor.Drain();
  EXPECT_TRUE(fs::exists(run / "a"));
  EXPECT_TRUE(fs::exists(run / "b"));
  EXPECT_EQ(Entries(run), 2);                      // nothing .removing- left
  janitor.RemoveTree((run / "missing").string());  // nothing there: nothing to do
  janitor.Drain();
}

// A task's directory goes as its owner (sandbox.h): what the owner may not remove stays.
TEST(DirJanitor, RemovesATaskDirectoryAsItsOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own directories as another user";
  testing_util::TempDir tmp("gpucloud-janitor");
  const fs::path sandbox = tmp.path() / "sandbox";
  fs::create_directories(sandbox / "t" / "work");
  std::ofstream(sandbox / "t" / "work" / "f") << "x";
  for (const fs::path& p : {sandbox / "t", sandbox / "t" / "work", sandbox / "t" / "work" / "f"}) {
    ASSERT_EQ(lchown(p.c_str(), 4242, 4242), 0);
  }
  {
    DirJanitor janitor("");
    janitor.RemoveTaskDir((sandbox / "t").string());
  }  // the destructor finishes what was queued
  EXPECT_EQ(Entries(sandbox), 0);
}

// What a killed agent left half removed is found and removed by the next one.
TEST(DirJanitor, SweepRemovesWhatAnEarlierAgentLeft) {
  testing_util::TempDir tmp("gpucloud-janitor");
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run / ".removing-x-1-1" / "deep");
  std::ofstream(run / ".removing-x-1-1" / "deep" / "f") << "x";
  fs::create_directories(run / "live");
  std::ofstream(run / ".removing-file") << "not a directory: left";
  DirJanitor janitor("");
  janitor.Sweep(run.string());
  janitor.Drain();
  EXPECT_FALSE(fs::exists(run / ".removing-x-1-1"));
  EXPECT_TRUE(fs::exists(run / "live"));
  EXPECT_TRUE(fs::exists(run / ".removing-file"));
  janitor.Sweep((tmp.path() / "absent").string());  // no such directory: nothing
  janitor.Drain();
}

}  // namespace
}  // namespace gpucloud::agent
