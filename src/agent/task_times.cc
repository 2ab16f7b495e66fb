#include "agent/task_times.h"

#include <sys/stat.h>

#include <algorithm>

namespace gpucloud::agent {

int64_t TaskEndedMs(const std::string& status_path, int64_t started_ms, int64_t observed_ms) {
  struct stat st;
  if (status_path.empty() || stat(status_path.c_str(), &st) != 0) return observed_ms;
  int64_t written = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  return std::clamp(written, std::min(started_ms, observed_ms), observed_ms);
}

}  // namespace gpucloud::agent
