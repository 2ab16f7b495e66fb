// Test helper: read a file under /proc/PID of a process that may exit meanwhile. Test-only;
// thread-compatible.
#ifndef GPUCLOUD_TESTING_PROC_H_
#define GPUCLOUD_TESTING_PROC_H_

#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>

namespace gpucloud::testing_util {

// The file's bytes, or "" once its process is gone: libstdc++'s filebuf throws from underflow
// when read(2) fails (ESRCH), and istreambuf_iterator does not catch it.
inline std::string ReadProcFile(const std::filesystem::path& path) {
  try {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return "";
  }
}

}  // namespace gpucloud::testing_util

#endif  // GPUCLOUD_TESTING_PROC_H_
