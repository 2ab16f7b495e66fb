#include "server/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <string_view>

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

namespace {

// The bytes of the regular files under `dir` (0 when there is none).
int64_t BytesUnder(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      uintmax_t n = it->file_size(size_ec);
      if (!size_ec) total += static_cast<int64_t>(n);
    }
  }
  return total;
}

bool WriteAll(int fd, const char* p, size_t left) {
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= n;
  }
  return true;
}

}  // namespace

LogStore::Usage& LogStore::UsageOf(const std::string& ns) {
  auto [it, added] = usage_.try_emplace(ns);
  if (added) it->second.bytes = BytesUnder(Cat(dir_, "/", ns));
  return it->second;
}

int64_t LogStore::NamespaceBytes(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return UsageOf(ns).bytes;
}

bool LogStore::SweepDue(const std::string& ns, absl::Time now, absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  Usage& u = UsageOf(ns);
  if (now - u.swept < interval) return false;
  u.swept = now;
  return true;
}

absl::StatusOr<LogAppend> LogStore::Append(const LogKey& key, int64_t offset,
                                           const std::string& data) {
  absl::MutexLock lock(&mu_);
  Usage& usage = UsageOf(key.namespace_);
  std::string path = PathOf(key);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return absl::InternalError(Cat("logs: ", path, ": ", ec.message()));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return absl::InternalError(Cat("logs: cannot open ", path));
  struct stat st {};
  fstat(fd, &st);
  LogAppend out{.size = st.st_size};
  if (offset < 0 || offset > out.size) {
    close(fd);
    return absl::InvalidArgumentError(
        Cat("offset: is ", offset, ", past the end of the stored log (", out.size, " bytes)"));
  }
  // What the log lacks of this chunk, and of that what the quota has room for.
  std::string_view fresh(data);
  fresh.remove_prefix(std::min<size_t>(data.size(), out.size - offset));
  int64_t room = max_bytes_per_namespace_ > 0 ? max_bytes_per_namespace_ - usage.bytes
                                              : std::numeric_limits<int64_t>::max();
  int64_t keep = std::min<int64_t>(fresh.size(), std::max<int64_t>(0, room));
  out.refused = static_cast<int64_t>(fresh.size()) - keep;
  if (keep > 0) {
    if (!WriteAll(fd, fresh.data(), keep)) {
      // Some may have gone: count what is there now.
      if (fstat(fd, &st) == 0) usage.bytes += st.st_size - out.size;
      close(fd);
      return absl::InternalError(Cat("logs: cannot write ", path));
    }
    fdatasync(fd);
    out.size += keep;
    usage.bytes += keep;
    ++appends_;
  }
  close(fd);
  out.namespace_bytes = usage.bytes;
  return out;
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

uint64_t LogStore::WaitForMore(uint64_t after, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto more = [this, after]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return appends_ > after; };
  mu_.AwaitWithTimeout(absl::Condition(&more), timeout);
  return appends_;
}

std::vector<std::string> LogStore::Jobs(const std::string& ns) const {
  std::vector<std::string> jobs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Cat(dir_, "/", ns), ec)) {
    std::error_code type_ec;
    if (e.is_directory(type_ec)) jobs.push_back(e.path().filename().string());
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

void LogStore::RemoveJob(const std::string& ns, const std::string& job) {
  absl::MutexLock lock(&mu_);
  Usage& usage = UsageOf(ns);
  const std::string dir = Cat(dir_, "/", ns, "/", job);
  int64_t bytes = BytesUnder(dir);
  std::error_code ec;
  fs::remove_all(dir, ec);
  // What is left (a removal that failed part-way) is still counted.
  usage.bytes = std::max<int64_t>(0, usage.bytes - (bytes - BytesUnder(dir)));
}

}  // namespace gpucloud::server
