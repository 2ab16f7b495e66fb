#include "agent/exit_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace gpucloud::agent {

int OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // pidfds are close-on-exec
  return fd < 0 ? -1 : fd;
#else
  (void)pid;
  return -1;
#endif
}

ExitWatcher::ExitWatcher(std::function<void()> on_exit) : on_exit_(std::move(on_exit)) {
  // pidfd_open on ourselves tells whether this kernel has pidfds at all.
  int probe = OpenPidFd(getpid());
  if (probe < 0) return;
  close(probe);
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  stop_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = stop_;
  if (epoll_ < 0 || stop_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, stop_, &ev) != 0) {
    if (epoll_ >= 0) close(epoll_);
    if (stop_ >= 0) close(stop_);
    epoll_ = stop_ = -1;
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

ExitWatcher::~ExitWatcher() {
  if (epoll_ < 0) return;
  uint64_t one = 1;
  (void)!write(stop_, &one, sizeof one);
  thread_.join();
  close(epoll_);
  close(stop_);
}

bool ExitWatcher::Add(int pidfd) {
  if (epoll_ < 0 || pidfd < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.fd = pidfd;
  return epoll_ctl(epoll_, EPOLL_CTL_ADD, pidfd, &ev) == 0;
}

void ExitWatcher::Loop() {
  epoll_event events[64];
  while (true) {
    int n = epoll_wait(epoll_, events, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    bool ended = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == stop_) return;
      ended = true;
    }
    if (ended && on_exit_) on_exit_();
  }
}

}  // namespace gpucloud::agent
