// Test helper: run a command line through the shell, as a user would, and collect its exit code
// and output (stdout and stderr together). Test-only; thread-compatible.
#ifndef GPUCLOUD_TESTING_SHELL_H_
#define GPUCLOUD_TESTING_SHELL_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace gpucloud::testing_util {

struct ShellResult {
  int code;
  std::string output;  // stdout and stderr together
};

inline ShellResult Shell(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  int status = pclose(pipe.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace gpucloud::testing_util

#endif  // GPUCLOUD_TESTING_SHELL_H_
