#include "server/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <ranges>
#include <string_view>

#include "absl/time/clock.h"
#include "core/text.h"

namespace gpucloud::server {

namespace fs = std::filesystem;

std::string LogStore::PathOf(const LogKey& k) const {
  return Cat(dir_, "/", k.namespace_, "/", k.job, "/attempt-", k.attempt, "/rank-", k.rank, ".log");
}

std::string LogStore::TimesPathOf(const LogKey& k) const {
  return Cat(dir_, "/", k.namespace_, "/", k.job, "/attempt-", k.attempt, "/rank-", k.rank,
             ".times");
}

int64_t LogStore::Size(const LogKey& key) const {
  struct stat st;
  if (stat(PathOf(key).c_str(), &st) != 0) return 0;
  return st.st_size;
}

namespace {

// The bytes of the logs under `dir` (0 when there is none; their time indexes are not counted).
int64_t BytesUnder(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->path().extension() == ".log" && it->is_regular_file(size_ec)) {
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

int64_t MtimeMs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// The time index's records: 16 bytes, offset then unix ms, each a little-endian int64.
constexpr size_t kRecordBytes = 16;

void PutInt64(int64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
}

int64_t GetInt64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return static_cast<int64_t>(v);
}

std::string EncodeRecords(const std::vector<LogTime>& records) {
  std::string out(records.size() * kRecordBytes, '\0');
  for (size_t i = 0; i < records.size(); ++i) {
    PutInt64(records[i].offset, &out[i * kRecordBytes]);
    PutInt64(records[i].unix_ms, &out[i * kRecordBytes + 8]);
  }
  return out;
}

// An open time index, read in place (a torn last record is not counted). Not thread-safe.
class IndexFile {
 public:
  explicit IndexFile(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_ >= 0 && fstat(fd_, &st) == 0) count_ = static_cast<size_t>(st.st_size) / kRecordBytes;
  }
  ~IndexFile() {
    if (fd_ >= 0) close(fd_);
  }
  IndexFile(const IndexFile&) = delete;
  IndexFile& operator=(const IndexFile&) = delete;

  size_t count() const { return count_; }
  // Records [first, first + n); one that cannot be read reads as past everything.
  std::vector<LogTime> Read(size_t first, size_t n) const {
    std::string buf(n * kRecordBytes, '\0');
    ssize_t got = pread(fd_, buf.data(), buf.size(), static_cast<off_t>(first * kRecordBytes));
    constexpr int64_t kPast = std::numeric_limits<int64_t>::max();
    std::vector<LogTime> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (got < static_cast<ssize_t>((i + 1) * kRecordBytes)) {
        out.push_back({kPast, kPast});
      } else {
        out.push_back({GetInt64(&buf[i * kRecordBytes]), GetInt64(&buf[i * kRecordBytes + 8])});
      }
    }
    return out;
  }
  LogTime At(size_t i) const { return Read(i, 1)[0]; }

 private:
  int fd_;
  size_t count_ = 0;
};

// The first i in [0, n) where `pred(i)` is false (it is true on a prefix), by binary search.
template <typename Pred>
size_t FirstNot(size_t n, Pred pred) {
  auto indices = std::views::iota(size_t{0}, n);
  return *std::ranges::partition_point(indices, pred);
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
  return Append(key, offset, data, std::nullopt, absl::ToUnixMillis(absl::Now()));
}

absl::StatusOr<LogAppend> LogStore::Append(const LogKey& key, int64_t offset,
                                           const std::string& data, std::optional<int64_t> agent_ms,
                                           int64_t now_ms) {
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
  if (keep == 0) {  // nothing new (a retry): no record either
    close(fd);
    out.namespace_bytes = usage.bytes;
    return out;
  }
  if (!WriteAll(fd, fresh.data(), keep)) {
    // Some may have gone: count what is there now.
    if (fstat(fd, &st) == 0) usage.bytes += st.st_size - out.size;
    close(fd);
    return absl::InternalError(Cat("logs: cannot write ", path));
  }
  fdatasync(fd);
  close(fd);
  const int64_t old_size = out.size;
  out.size += keep;
  usage.bytes += keep;
  out.namespace_bytes = usage.bytes;
  ++appends_;
  if (absl::Status indexed = IndexAppend(key, old_size, MtimeMs(st), agent_ms, now_ms);
      !indexed.ok()) {
    return indexed;
  }
  return out;
}

absl::Status LogStore::IndexAppend(const LogKey& key, int64_t old_size, int64_t log_mtime_ms,
                                   std::optional<int64_t> agent_ms, int64_t now_ms) {
  const std::string path = TimesPathOf(key);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return absl::InternalError(Cat("logs: cannot open ", path));
  struct stat st {};
  fstat(fd, &st);
  const size_t count = static_cast<size_t>(st.st_size) / kRecordBytes;
  // A torn last record (a crash mid-write) goes: the next one takes its place.
  if (static_cast<size_t>(st.st_size) != count * kRecordBytes &&
      ftruncate(fd, static_cast<off_t>(count * kRecordBytes)) != 0) {
    close(fd);
    return absl::InternalError(Cat("logs: cannot truncate ", path));
  }
  std::vector<LogTime> add;
  std::optional<LogTime> last;
  char buf[kRecordBytes];
  if (count > 0 && pread(fd, buf, kRecordBytes, static_cast<off_t>((count - 1) * kRecordBytes)) ==
                       static_cast<ssize_t>(kRecordBytes)) {
    last = LogTime{GetInt64(buf), GetInt64(buf + 8)};
  } else if (count == 0 && old_size > 0) {
    // Bytes from before there was an index: they have the file's time.
    last = LogTime{0, log_mtime_ms};
    add.push_back(*last);
  }
  const int64_t time_ms =
      ChunkTimeMs(agent_ms, now_ms, last ? std::optional(last->unix_ms) : std::nullopt);
  if (!last || (old_size > last->offset && time_ms - last->unix_ms >= kCoalesceMs)) {
    add.push_back({old_size, time_ms});
  }
  absl::Status s = absl::OkStatus();
  const std::string bytes = EncodeRecords(add);
  if (!add.empty() && !WriteAll(fd, bytes.data(), bytes.size())) {
    s = absl::InternalError(Cat("logs: cannot write ", path));
  } else if (!add.empty() && fdatasync(fd) != 0) {
    s = absl::InternalError(Cat("logs: cannot sync ", path));
  }
  close(fd);
  return s;
}

std::vector<LogTime> LogStore::Times(const LogKey& key, int64_t from, int64_t to) const {
  struct stat log_st {};
  if (stat(PathOf(key).c_str(), &log_st) != 0 || log_st.st_size == 0) return {};
  IndexFile index(TimesPathOf(key));
  const size_t n = index.count();
  if (n == 0) return {{0, MtimeMs(log_st)}};
  // From the last record at or before `from` (or the first) to the last one before `to`.
  size_t first = FirstNot(n, [&](size_t i) { return index.At(i).offset <= from; });
  first = first == 0 ? 0 : first - 1;
  size_t end = FirstNot(n, [&](size_t i) { return index.At(i).offset < to; });
  end = std::max(end, first + 1);
  std::vector<LogTime> read;
  if (end - first <= kMaxTimes) {
    read = index.Read(first, end - first);
  } else {
    const size_t stride = (end - first + kMaxTimes - 1) / kMaxTimes;
    for (size_t i = first; i < end; i += stride) read.push_back(index.At(i));
  }
  // What a damaged index has out of order is skipped; times never go back.
  std::vector<LogTime> out;
  for (const LogTime& t : read) {
    if (!out.empty() && (t.offset <= out.back().offset || t.offset >= log_st.st_size)) continue;
    out.push_back({t.offset, out.empty() ? t.unix_ms : std::max(t.unix_ms, out.back().unix_ms)});
  }
  return out;
}

int64_t LogStore::SinceOffset(const LogKey& key, int64_t cutoff_ms) const {
  struct stat log_st {};
  if (stat(PathOf(key).c_str(), &log_st) != 0) return 0;
  const int64_t size = log_st.st_size;
  IndexFile index(TimesPathOf(key));
  if (index.count() == 0) return MtimeMs(log_st) >= cutoff_ms ? 0 : size;
  return SinceChunkOffset(
      index.count(), [&](size_t i) { return index.At(i); }, size, cutoff_ms);
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

// ---- Log times (pure) ----

int64_t ChunkTimeMs(std::optional<int64_t> agent_ms, int64_t now_ms,
                    std::optional<int64_t> last_ms) {
  const int64_t t = std::min(agent_ms.value_or(now_ms), now_ms);
  return last_ms ? std::max(t, *last_ms) : t;
}

int64_t SinceChunkOffset(size_t count, const std::function<LogTime(size_t)>& at, int64_t size,
                         int64_t cutoff_ms) {
  const size_t i = FirstNot(count, [&](size_t j) { return at(j).unix_ms < cutoff_ms; });
  if (i == count) return size;
  if (i == 0) return 0;
  return std::clamp<int64_t>(at(i).offset, 0, size);
}

int64_t SinceChunkOffset(std::span<const LogTime> index, int64_t size, int64_t cutoff_ms) {
  return SinceChunkOffset(
      index.size(), [&](size_t i) { return index[i]; }, size, cutoff_ms);
}

int64_t LineStartAtOrAfter(std::string_view text, int64_t text_offset, int64_t at) {
  if (at <= 0) return 0;
  const int64_t end = text_offset + static_cast<int64_t>(text.size());
  if (at >= end) return end;
  const size_t rel = static_cast<size_t>(std::max<int64_t>(0, at - text_offset));
  if (rel > 0 && text[rel - 1] == '\n') return at;
  const size_t nl = text.find('\n', rel);
  return nl == std::string_view::npos ? end : text_offset + static_cast<int64_t>(nl) + 1;
}

std::string LogTimestamp(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E9SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

PrefixedLog PrefixLines(std::string_view text, int64_t offset, bool at_line_start,
                        std::span<const LogTime> times, int64_t max_bytes) {
  PrefixedLog out;
  const size_t max = static_cast<size_t>(std::max<int64_t>(0, max_bytes));
  size_t record = 0;
  int64_t stamped_ms = std::numeric_limits<int64_t>::min();
  std::string stamp;
  size_t i = 0;
  bool line_start = at_line_start;
  while (i < text.size() && out.text.size() < max) {
    if (line_start) {
      const int64_t pos = offset + static_cast<int64_t>(i);
      while (record + 1 < times.size() && times[record + 1].offset <= pos) ++record;
      const int64_t ms = times.empty() ? 0 : times[record].unix_ms;
      if (ms != stamped_ms) {
        stamp = LogTimestamp(ms) + " ";
        stamped_ms = ms;
      }
      const size_t room = max - out.text.size();
      if (room <= stamp.size()) {
        // No byte of the line fits: it is not begun (the next page prefixes it), unless nothing
        // else is in the answer, which is then cut within the prefix as Kubernetes cuts it.
        if (out.text.empty()) out.text.append(stamp, 0, room);
        break;
      }
      out.text += stamp;
    }
    const size_t nl = text.find('\n', i);
    const size_t line_end = nl == std::string_view::npos ? text.size() : nl + 1;
    const size_t take = std::min(line_end - i, max - out.text.size());
    out.text.append(text.substr(i, take));
    i += take;
    line_start = true;
  }
  out.consumed = static_cast<int64_t>(i);
  return out;
}

}  // namespace gpucloud::server
