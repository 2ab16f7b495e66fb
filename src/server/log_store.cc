#include "server/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/text.h"

namespace gpucloud::server {

namespace fs = std::filesystem;

std::string LogStore::PathOf(const LogKey& k) const {
  return Cat(dir_, "/", k.namespace_, "/", k.job, "/attempt-", k.attempt, "/rank-", k.rank, ".log");
}

int64_t LogStore::Size(const LogKey& key) const {
  struct stat st;
  if (stat(PathOf(key).c_str(), &st) != 0) return 0;
  return st.st_size;
}

absl::StatusOr<int64_t> LogStore::Append(const LogKey& key, int64_t offset,
                                         const std::string& data) {
  absl::MutexLock lock(&mu_);
  std::string path = PathOf(key);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return absl::InternalError(Cat("logs: ", path, ": ", ec.message()));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return absl::InternalError(Cat("logs: cannot open ", path));
  struct stat st;
  fstat(fd, &st);
  int64_t size = st.st_size;
  if (offset > size) {
    close(fd);
    return absl::InvalidArgumentError(
        Cat("offset: is ", offset, ", past the end of the stored log (", size, " bytes)"));
  }
  int64_t skip = size - offset;
  if (skip < static_cast<int64_t>(data.size())) {
    const char* p = data.data() + skip;
    size_t left = data.size() - skip;
    while (left > 0) {
      ssize_t n = write(fd, p, left);
      if (n < 0) {
        close(fd);
        return absl::InternalError(Cat("logs: cannot write ", path));
      }
      p += n;
      left -= n;
      size += n;
    }
    fdatasync(fd);
    ++appends_;
  }
  close(fd);
  return size;
}

std::string LogStore::Read(const LogKey& key, int64_t offset, int64_t max_bytes) const {
  int fd = open(PathOf(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  // What is there, never more than asked or than one chunk: the buffer is sized by the file,
  // not by the caller's number.
  struct stat st {};
  int64_t available = fstat(fd, &st) == 0 ? std::max<int64_t>(0, st.st_size - offset) : 0;
  std::string out(std::min({std::max<int64_t>(0, max_bytes), available, kMaxReadBytes}), '\0');
  ssize_t n = out.empty() ? 0 : pread(fd, out.data(), out.size(), offset);
  close(fd);
  out.resize(n > 0 ? n : 0);
  return out;
}

std::vector<int> LogStore::Ranks(const std::string& ns, const std::string& job, int attempt) const {
  std::vector<int> ranks;
  std::error_code ec;
  for (const auto& e :
       fs::directory_iterator(Cat(dir_, "/", ns, "/", job, "/attempt-", attempt), ec)) {
    std::string name = e.path().filename().string();
    if (name.starts_with("rank-") && name.ends_with(".log")) {
      ranks.push_back(std::atoi(name.c_str() + 5));
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

void LogStore::WaitForMore(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  uint64_t seen = appends_;
  auto more = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return appends_ != seen; };
  mu_.AwaitWithTimeout(absl::Condition(&more), timeout);
}

void LogStore::RemoveJob(const std::string& ns, const std::string& job) {
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  fs::remove_all(Cat(dir_, "/", ns, "/", job), ec);
}

}  // namespace gpucloud::server
