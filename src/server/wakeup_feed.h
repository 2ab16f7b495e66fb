// WakeupFeed: turns a blocking wait for "the next change" (Store::WaitForChange,
// LogStore::WaitForMore) into wake-ups of asynchronous waiters, so that a thousand watches cost
// a timer each rather than a thread each. One thread of its own calls `wait` in a loop and keeps
// the position it returns (a store's revision; for logs, a count of appends seen); each waiter
// registers an Asio timer with the position it has seen, and the feed cancels that timer (on the
// timer's own executor) once the position is past it. A waiter whose timer expires first just
// gets no wake-up: it re-reads and registers again.
//
// Race-free when the position is monotonic and `wait(after, ...)` returns as soon as the source
// is past `after`: a change committed before Register is either already in position() (Register
// says so and registers nothing) or will be seen by the thread's next wait, which then wakes the
// timer. Thread-safe; Stop (or the destructor) joins the thread within about `poll`.
#ifndef GPUCLOUD_SERVER_WAKEUP_FEED_H_
#define GPUCLOUD_SERVER_WAKEUP_FEED_H_

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace gpucloud::server {

class WakeupFeed {
 public:
  // Blocks until the source is past `after` or `timeout` passes; returns the position then.
  using Wait = std::function<int64_t(int64_t after, absl::Duration timeout)>;
  // `start`: the position now. `poll`: the longest one wait lasts (how soon Stop returns).
  WakeupFeed(Wait wait, int64_t start, absl::Duration poll = absl::Milliseconds(50));
  ~WakeupFeed();
  WakeupFeed(const WakeupFeed&) = delete;
  WakeupFeed& operator=(const WakeupFeed&) = delete;

  void Start();
  void Stop();
  int64_t position() const { return position_.load(); }
  // Arranges for `timer`'s waits to be cancelled once the position is past `after`. False (and
  // nothing registered) when it already is: the caller should not wait. The feed holds `timer`
  // until it fires it or Unregister.
  bool Register(std::shared_ptr<boost::asio::steady_timer> timer, int64_t after);
  void Unregister(const boost::asio::steady_timer* timer);
  size_t waiters() const;

 private:
  void Run();
  void WakeUpTo(int64_t position);

  const Wait wait_;
  const absl::Duration poll_;
  std::atomic<int64_t> position_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::map<const boost::asio::steady_timer*,
           std::pair<std::shared_ptr<boost::asio::steady_timer>, int64_t>>
      waiters_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_WAKEUP_FEED_H_
