#include "core/private_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace gpucloud {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(WritePrivateFile, Creates0600AndReplacesWhole) {
  testing_util::TempDir dir("gpucloud-private-file");
  mode_t old = umask(0);
  std::string path = (dir.path() / "record.json").string();
  { std::ofstream(path + ".tmp") << "stale"; }  // a leftover, 0666 under this umask
  absl::Status first = WritePrivateFile(path, "{\"a\":1}");
  absl::Status second = WritePrivateFile(path, "{\"a\":2}", FileSync::kDurable);
  umask(old);
  ASSERT_TRUE(first.ok()) << first;
  ASSERT_TRUE(second.ok()) << second;
  EXPECT_EQ(Slurp(path), "{\"a\":2}");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_TRUE(absl::IsInternal(WritePrivateFile((dir.path() / "no/such/dir/f").string(), "x")));
}

}  // namespace
}  // namespace gpucloud
