// ExitWatcher: tells its owner at once when a watched process ends, so that the agent's loop
// reaps and reports an exit when it happens rather than on its next tick. One thread waits
// (epoll) on a pidfd per process (Linux 5.3+: pidfd_open works for any process, a child or
// one re-adopted from an earlier agent); when one becomes readable (the process ended) it calls
// `on_exit` on that thread. It only announces: reaping stays with whoever owns the process
// (Executor::Poll), and the callback says "something ended", not which, so the owner polls its
// tasks. Each descriptor fires once (EPOLLONESHOT) and leaves the set when its owner closes it.
// Where pidfd_open or epoll is missing, available() is false, Add refuses, and the owner falls
// back to polling on its tick.
// Thread-safe: Add from any thread; on_exit runs on the watcher's thread and must not block.
#ifndef GPUCLOUD_AGENT_EXIT_WATCHER_H_
#define GPUCLOUD_AGENT_EXIT_WATCHER_H_

#include <sys/types.h>

#include <functional>
#include <thread>

namespace gpucloud::agent {

// A pidfd for `pid` (close-on-exec), or -1 where pidfd_open is missing (Linux < 5.3) or the
// process is gone.
int OpenPidFd(pid_t pid);

class ExitWatcher {
 public:
  explicit ExitWatcher(std::function<void()> on_exit);
  ExitWatcher(const ExitWatcher&) = delete;
  ExitWatcher& operator=(const ExitWatcher&) = delete;
  ~ExitWatcher();  // stops the thread; the descriptors stay their owners'

  bool available() const { return epoll_ >= 0; }
  // Watches the process behind `pidfd` (borrowed: the caller closes it, which also ends the
  // watch). on_exit fires once it has ended (at once when it already has). False when not
  // available or the descriptor cannot be watched.
  bool Add(int pidfd);

 private:
  void Loop();
  std::function<void()> on_exit_;
  int epoll_ = -1;
  int stop_ = -1;  // an eventfd: written to stop the thread
  std::thread thread_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_EXIT_WATCHER_H_
