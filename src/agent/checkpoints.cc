#include "agent/checkpoints.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "core/log.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;

bool Complete(const std::string& name) {
  return !name.empty() && name[0] != '.' && !name.ends_with(".tmp") &&
         !name.ends_with(".partial") && !name.ends_with(".lock");
}

int64_t UnixMs(fs::file_time_type t) {
  auto sys = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration_cast<std::chrono::milliseconds>(sys.time_since_epoch()).count();
}

}  // namespace

int64_t NewestCheckpointMs(const std::string& dir) {
  std::error_code ec;
  int64_t newest = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!Complete(it->path().filename().string())) continue;
    std::error_code e2;
    fs::file_time_type t = fs::last_write_time(it->path(), e2);
    if (!e2) newest = std::max(newest, UnixMs(t));
  }
  return newest;
}

absl::StatusOr<int> CopyCheckpoints(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::is_directory(from, ec)) return 0;
  fs::create_directories(to, ec);
  if (ec) return absl::InternalError(Cat("checkpoint copy: ", to, ": ", ec.message()));
  // The agent writes only into a directory of its own: one a task owns (a job whose
  // checkpoint.dir names another's replica) could be raced into sending its copies elsewhere.
  struct stat st {};
  if (lstat(to.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        Cat("checkpoint copy: ", to, " is not a directory of the agent's own; nothing copied"));
  }
  int copied = 0;
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!Complete(name)) continue;
    fs::path dst = fs::path(to) / name;
    std::error_code e2;
    if (fs::exists(dst, e2)) continue;
    fs::path tmp = fs::path(to) / (name + ".gpucloud.tmp");
    fs::remove_all(tmp, e2);
    // Symbolic links as links: a task cannot make the agent copy what it may not read.
    fs::copy(it->path(), tmp, fs::copy_options::recursive | fs::copy_options::copy_symlinks, e2);
    if (!e2) fs::last_write_time(tmp, fs::last_write_time(it->path()), e2);
    if (!e2) fs::rename(tmp, dst, e2);
    if (e2) {
      fs::remove_all(tmp, ec);
      return absl::InternalError(
          Cat("checkpoint copy: ", it->path().string(), " -> ", dst.string(), ": ", e2.message()));
    }
    ++copied;
  }
  return copied;
}

CheckpointReplicator::CheckpointReplicator() : thread_([this] { Loop(); }) {}

CheckpointReplicator::~CheckpointReplicator() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointReplicator::Track(const std::string& task, const std::string& local,
                                 const std::string& replica) {
  std::lock_guard lock(mu_);
  Entry& e = tasks_[task];
  e.local = local;
  e.replica = replica;
  e.forget = false;
}

void CheckpointReplicator::Untrack(const std::string& task) {
  std::lock_guard lock(mu_);
  if (auto it = tasks_.find(task); it != tasks_.end()) it->second.forget = true;
  want_pass_ = true;
  cv_.notify_all();
}

int64_t CheckpointReplicator::Replicated(const std::string& task) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(task);
  return it == tasks_.end() ? 0 : it->second.replicated_ms;
}

void CheckpointReplicator::Flush() {
  std::unique_lock lock(mu_);
  uint64_t target = passes_ + (in_pass_ ? 2 : 1);  // one that starts after this call
  want_pass_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return passes_ >= target || stop_; });
}

void CheckpointReplicator::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_ || want_pass_; });
    if (stop_) break;
    want_pass_ = false;
    in_pass_ = true;
    lock.unlock();
    Pass();
    lock.lock();
    in_pass_ = false;
    ++passes_;
    cv_.notify_all();
  }
}

void CheckpointReplicator::Pass() {
  std::map<std::string, Entry> snapshot;
  {
    std::lock_guard lock(mu_);
    snapshot = tasks_;
  }
  for (const auto& [task, e] : snapshot) {
    absl::StatusOr<int> n = CopyCheckpoints(e.local, e.replica);
    if (!n.ok()) {
      log::Warn("agent", "checkpoints not replicated",
                {{"task", task}, {"error", n.status().message()}});
    }
    int64_t replicated = NewestCheckpointMs(e.replica);
    std::lock_guard lock(mu_);
    auto it = tasks_.find(task);
    if (it == tasks_.end()) continue;
    it->second.replicated_ms = replicated;
    if (it->second.forget && e.forget) tasks_.erase(it);
  }
}

}  // namespace gpucloud::agent
