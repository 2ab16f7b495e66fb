// WakeupFeed: turns a blocking wait for "the next change" (Store::WaitForChange,
// LogStore::WaitForMore) into wake-ups of asynchronous waiters, so that a thousand watches cost
// a timer each rather than a thread each. One thread of its own calls `wait` in a loop and keeps
// the position it returns (a store's revision; for logs, the count of appends); each waiter
// registers an Asio timer with the position it has seen, and the feed cancels that timer (on the
// timer's own executor) once the position is past it. A waiter whose timer expires first just
// gets no wake-up.
//
// With `changes` (a store's change log as keys), the feed reads each change once and wakes only
// the waiters whose key prefix it touches, and keeps the recent changes' keys (kHistory) so that
// a waiter can ask whether anything under its prefix changed since the revision it has seen
// (QuietThrough): a watch then sends a bookmark without reading the store. This is the
// apiserver's watch cache in small: without it every write woke every watch, and each read the
// change log again (2,000 agents' watches x 500 writes/s).
//
// Race-free when the position is monotonic and `wait(after, ...)` returns as soon as the source
// is past `after`: a change committed before Register is either in the history (Register says
// so and registers nothing) or will be read by the thread's next pass, which then wakes the
// timer. Thread-safe; Stop (or the destructor) joins the thread within about `poll`.
#ifndef GPUCLOUD_SERVER_WAKEUP_FEED_H_
#define GPUCLOUD_SERVER_WAKEUP_FEED_H_

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace gpucloud::server {

class WakeupFeed {
 public:
  using Timer = boost::asio::steady_timer;
  // Blocks until the source is past `after` or `timeout` passes; returns the position then.
  using Wait = std::function<int64_t(int64_t after, absl::Duration timeout)>;
  struct Change {
    int64_t revision = 0;
    std::string key;
  };
  // The changes after `after`, oldest first, a revision's changes together, at most about a
  // page; nullopt when they cannot be had (compacted): every waiter is then woken.
  using Changes = std::function<std::optional<std::vector<Change>>(int64_t after)>;
  // Changes' keys kept for Register and QuietThrough.
  static constexpr size_t kHistory = 1 << 16;

  // `start`: the position now. `poll`: the longest one wait lasts (how soon Stop returns).
  WakeupFeed(Wait wait, int64_t start, absl::Duration poll = absl::Milliseconds(50),
             Changes changes = nullptr);
  ~WakeupFeed();
  WakeupFeed(const WakeupFeed&) = delete;
  WakeupFeed& operator=(const WakeupFeed&) = delete;

  void Start();
  void Stop();
  int64_t position() const { return position_.load(); }
  // Arranges for `timer`'s waits to be cancelled once a change under `prefix` (any change
  // without `changes`) is past `after`. False (and nothing registered) when one already is, or
  // the feed cannot tell: the caller should read instead of waiting. The feed holds `timer`
  // until it fires it or Unregister.
  bool Register(std::shared_ptr<Timer> timer, int64_t after, const std::string& prefix = "");
  void Unregister(const Timer* timer);
  // With `changes`: the position P when nothing under `prefix` changed in (after, P] (a watch
  // at `after` is then caught up to P); nullopt when something did or the feed cannot tell.
  std::optional<int64_t> QuietThrough(int64_t after, const std::string& prefix) const;
  size_t waiters() const;

 private:
  struct Waiter {
    std::shared_ptr<Timer> timer;
    int64_t after;
    std::string prefix;
  };
  void Run();
  void ReadChanges(int64_t head);
  bool ChangedSince(int64_t after, const std::string& prefix) const;  // mu_ held
  void WakeAll(int64_t position);
  void WakeAllLocked(int64_t position, std::vector<std::shared_ptr<Timer>>& due);  // mu_ held
  void Fire(std::vector<std::shared_ptr<Timer>>& due);

  const Wait wait_;
  const Changes changes_;
  const absl::Duration poll_;
  std::atomic<int64_t> position_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::map<const Timer*, Waiter> waiters_;                   // guarded by mu_
  std::map<std::string, std::set<const Timer*>> by_prefix_;  // guarded by mu_
  std::deque<Change> history_;                               // guarded by mu_
  int64_t floor_;  // guarded by mu_: changes at or below it may be missing from history_
  std::thread thread_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_WAKEUP_FEED_H_
