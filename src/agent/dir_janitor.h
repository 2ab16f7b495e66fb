// DirJanitor: removes the directories of tasks the agent has forgotten on a thread of its own,
// so that the agent's loop, which starts the next tasks, does not wait for them (a sandbox is
// emptied as its owner by a child process the removal waits for; a run directory is a tree of
// small files). Each directory is first renamed out of its place, to
// PARENT/.removing-NAME-TOKEN-N (TOKEN random per janitor), in the caller's thread: its path is
// free at once, and nothing reads half of it. One that cannot be renamed is removed in the
// caller's thread, before the call returns.
// An agent that stops with removals queued finishes them first (the destructor); one that is
// killed leaves .removing-* directories, which Sweep queues again at the next start.
// Thread-safe.
#ifndef GPUCLOUD_AGENT_DIR_JANITOR_H_
#define GPUCLOUD_AGENT_DIR_JANITOR_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace gpucloud::agent {

class DirJanitor {
 public:
  // `shim`: gpucloud-shim's path for RemoveTaskDir ("" forks).
  explicit DirJanitor(std::string shim);
  ~DirJanitor();  // finishes the queued removals, then joins
  DirJanitor(const DirJanitor&) = delete;
  DirJanitor& operator=(const DirJanitor&) = delete;

  // Queues the removal of a task's directory (sandbox.h's RemoveTaskDir: as its owner).
  // Nothing when there is none.
  void RemoveTaskDir(const std::string& dir);
  // Queues the removal of a directory of the agent's own (every file in it, as the agent).
  void RemoveTree(const std::string& dir);
  // Queues every .removing-* directory directly under `parent` that an earlier agent left,
  // task directories (owned by another user) as such.
  void Sweep(const std::string& parent);
  // Blocks until every removal queued so far is done (tests; a clean stop).
  void Drain();

 private:
  struct Item {
    std::string dir;
    bool as_owner;
  };
  void Queue(const std::string& dir, bool as_owner);
  void RemoveNow(const Item& item);
  void Run();

  const std::string shim_;
  const std::string token_;  // in this janitor's .removing- names
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;  // guarded by mu_
  int64_t queued_ = 0;      // guarded by mu_: items ever queued
  int64_t done_ = 0;        // guarded by mu_: items ever removed
  uint64_t seq_ = 0;        // guarded by mu_: for unique .removing- names
  bool stop_ = false;       // guarded by mu_
  std::thread thread_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_DIR_JANITOR_H_
