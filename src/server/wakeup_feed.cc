#include "server/wakeup_feed.h"

#include <boost/asio/post.hpp>
#include <vector>

namespace gpucloud::server {

WakeupFeed::WakeupFeed(Wait wait, int64_t start, absl::Duration poll)
    : wait_(std::move(wait)), poll_(poll), position_(start) {}

WakeupFeed::~WakeupFeed() { Stop(); }

void WakeupFeed::Start() {
  thread_ = std::thread([this] { Run(); });
}

void WakeupFeed::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

bool WakeupFeed::Register(std::shared_ptr<boost::asio::steady_timer> timer, int64_t after) {
  std::lock_guard lock(mu_);
  if (position_.load() > after) return false;
  const boost::asio::steady_timer* key = timer.get();
  waiters_[key] = {std::move(timer), after};
  return true;
}

void WakeupFeed::Unregister(const boost::asio::steady_timer* timer) {
  std::lock_guard lock(mu_);
  waiters_.erase(timer);
}

size_t WakeupFeed::waiters() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

void WakeupFeed::Run() {
  while (!stopping_) {
    int64_t now = wait_(position_.load(), poll_);
    if (now > position_.load()) WakeUpTo(now);
  }
}

void WakeupFeed::WakeUpTo(int64_t position) {
  std::vector<std::shared_ptr<boost::asio::steady_timer>> due;
  {
    std::lock_guard lock(mu_);
    position_ = position;  // under the lock: Register sees it or is seen here
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.second < position) {
        due.push_back(std::move(it->second.first));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // A timer is touched only on its own executor (a connection's strand).
  for (auto& timer : due) {
    boost::asio::post(timer->get_executor(), [timer] { timer->cancel(); });
  }
}

}  // namespace gpucloud::server
