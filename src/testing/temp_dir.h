// Test helper: a fresh directory per test, named after the test and the process, removed when
// the object goes away. Test-only; thread-compatible.
#ifndef GPUCLOUD_TESTING_TEMP_DIR_H_
#define GPUCLOUD_TESTING_TEMP_DIR_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace gpucloud::testing_util {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "gpucloud") {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "-" + std::to_string(::getpid()) + "-" + (t ? t->name() : "x"));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace gpucloud::testing_util

#endif  // GPUCLOUD_TESTING_TEMP_DIR_H_
