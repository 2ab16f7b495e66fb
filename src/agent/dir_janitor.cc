#include "agent/dir_janitor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

#include "agent/sandbox.h"
#include "core/log.h"
#include "core/text.h"

namespace gpucloud::agent {

namespace fs = std::filesystem;

namespace {
constexpr const char* kPrefix = ".removing-";
}  // namespace

DirJanitor::DirJanitor(std::string shim)
    : shim_(std::move(shim)),
      token_(std::to_string(uint64_t{std::random_device{}()} << 32 | std::random_device{}())) {
  thread_ = std::thread([this] { Run(); });
}

DirJanitor::~DirJanitor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DirJanitor::RemoveTaskDir(const std::string& dir) { Queue(dir, true); }

void DirJanitor::RemoveTree(const std::string& dir) { Queue(dir, false); }

void DirJanitor::Queue(const std::string& dir, bool as_owner) {
  std::unique_lock lock(mu_);
  const fs::path path(dir);
  const std::string name = path.filename().string();
  // Already out of its place (Sweep), or renamed now: the path is free for a new task at once.
  std::string moved = dir;
  if (name.rfind(kPrefix, 0) != 0) {
    bool renamed = false;
    // A name this janitor never used (its token is random: a restarted agent with the same pid
    // does not meet an earlier one's leftovers), tried again should one be there all the same.
    for (int attempt = 0; attempt < 3 && !renamed; ++attempt) {
      moved = (path.parent_path() / Cat(kPrefix, name, "-", token_, "-", ++seq_)).string();
      renamed = std::rename(dir.c_str(), moved.c_str()) == 0;
      if (!renamed && errno == ENOENT) return;  // nothing there
      if (!renamed && errno != EEXIST && errno != ENOTEMPTY) break;
    }
    if (!renamed) {
      // It cannot be moved away, and a new task may be given this path at once: removed here,
      // before the caller goes on, never later behind its back.
      lock.unlock();
      RemoveNow({dir, as_owner});
      return;
    }
  }
  queue_.push_back({std::move(moved), as_owner});
  ++queued_;
  lock.unlock();
  cv_.notify_all();
}

void DirJanitor::Sweep(const std::string& parent) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    struct stat st {};
    if (lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    Queue(e.path().string(), st.st_uid != geteuid());
  }
}

void DirJanitor::Drain() {
  std::unique_lock lock(mu_);
  const int64_t target = queued_;
  cv_.wait(lock, [&] { return done_ >= target; });
}

void DirJanitor::RemoveNow(const Item& item) {
  if (item.as_owner) {
    if (!agent::RemoveTaskDir(item.dir, shim_)) {
      log::Warn("agent", "a task directory's removal did not end in time: left for the next start",
                {{"dir", item.dir}});
    }
  } else {
    std::error_code ec;
    fs::remove_all(item.dir, ec);
  }
}

void DirJanitor::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued is done
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    RemoveNow(item);
    lock.lock();
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace gpucloud::agent
