#include "server/wakeup_feed.h"

#include <boost/asio/post.hpp>

namespace gpucloud::server {

WakeupFeed::WakeupFeed(Wait wait, int64_t start, absl::Duration poll, Changes changes)
    : wait_(std::move(wait)),
      changes_(std::move(changes)),
      poll_(poll),
      position_(start),
      floor_(start) {}

WakeupFeed::~WakeupFeed() { Stop(); }

void WakeupFeed::Start() {
  thread_ = std::thread([this] { Run(); });
}

void WakeupFeed::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

bool WakeupFeed::ChangedSince(int64_t after, const std::string& prefix) const {
  if (!changes_) return position_.load() > after;
  if (after < floor_) return true;  // cannot tell
  for (auto it = history_.rbegin(); it != history_.rend() && it->revision > after; ++it) {
    if (it->key.starts_with(prefix)) return true;
  }
  return false;
}

bool WakeupFeed::Register(std::shared_ptr<Timer> timer, int64_t after, const std::string& prefix) {
  std::lock_guard lock(mu_);
  if (ChangedSince(after, prefix)) return false;
  const Timer* key = timer.get();
  by_prefix_[prefix].insert(key);
  waiters_[key] = {std::move(timer), after, prefix};
  return true;
}

void WakeupFeed::Unregister(const Timer* timer) {
  std::lock_guard lock(mu_);
  auto it = waiters_.find(timer);
  if (it == waiters_.end()) return;
  auto p = by_prefix_.find(it->second.prefix);
  p->second.erase(timer);
  if (p->second.empty()) by_prefix_.erase(p);
  waiters_.erase(it);
}

std::optional<int64_t> WakeupFeed::QuietThrough(int64_t after, const std::string& prefix) const {
  std::lock_guard lock(mu_);
  if (!changes_ || ChangedSince(after, prefix)) return std::nullopt;
  return std::max(after, position_.load());
}

size_t WakeupFeed::waiters() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

void WakeupFeed::Run() {
  while (!stopping_) {
    int64_t head = wait_(position_.load(), poll_);
    if (head <= position_.load()) continue;
    if (changes_) {
      ReadChanges(head);
    } else {
      WakeAll(head);
    }
  }
}

void WakeupFeed::ReadChanges(int64_t head) {
  while (!stopping_ && position_.load() < head) {
    std::optional<std::vector<Change>> page = changes_(position_.load());
    if (!page) {  // compacted past us: nobody can be told precisely
      std::vector<std::shared_ptr<Timer>> due;
      {
        std::lock_guard lock(mu_);
        history_.clear();
        floor_ = head;
        WakeAllLocked(head, due);
      }
      Fire(due);
      return;
    }
    // Every revision of the page is whole; a page short of head means more follow.
    const int64_t done = page->empty() ? head : page->back().revision;
    std::vector<std::shared_ptr<Timer>> due;
    {
      std::lock_guard lock(mu_);
      for (Change& c : *page) {
        // Waiters whose prefix this key starts with: look up each of the key's prefixes that
        // ends at a '/' (how watched prefixes end), and the empty one.
        for (size_t n = 0; n <= c.key.size(); ++n) {
          if (n != 0 && c.key[n - 1] != '/') continue;
          auto p = by_prefix_.find(c.key.substr(0, n));
          if (p == by_prefix_.end()) continue;
          for (auto t = p->second.begin(); t != p->second.end();) {
            Waiter& w = waiters_.at(*t);
            if (w.after >= c.revision) {
              ++t;
              continue;
            }
            due.push_back(std::move(w.timer));
            waiters_.erase(*t);
            t = p->second.erase(t);
          }
          if (p->second.empty()) by_prefix_.erase(p);
        }
        history_.push_back(std::move(c));
      }
      while (history_.size() > kHistory) {
        floor_ = history_.front().revision;
        history_.pop_front();
      }
      position_ = std::max(position_.load(), done);
    }
    Fire(due);
  }
}

void WakeupFeed::WakeAll(int64_t position) {
  std::vector<std::shared_ptr<Timer>> due;
  {
    std::lock_guard lock(mu_);
    WakeAllLocked(position, due);
  }
  Fire(due);
}

void WakeupFeed::WakeAllLocked(int64_t position, std::vector<std::shared_ptr<Timer>>& due) {
  position_ = position;  // under the lock: Register sees it or is seen here
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.after >= position) {
      ++it;
      continue;
    }
    due.push_back(std::move(it->second.timer));
    auto p = by_prefix_.find(it->second.prefix);
    p->second.erase(it->first);
    if (p->second.empty()) by_prefix_.erase(p);
    it = waiters_.erase(it);
  }
}

void WakeupFeed::Fire(std::vector<std::shared_ptr<Timer>>& due) {
  // A timer is touched only on its own executor (a connection's strand).
  for (auto& timer : due) {
    boost::asio::post(timer->get_executor(), [timer] { timer->cancel(); });
  }
}

}  // namespace gpucloud::server
