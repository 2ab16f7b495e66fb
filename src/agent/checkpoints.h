// Checkpoints as the node agent sees them: the newest complete checkpoint in a task's directory
// (reported to the server, which counts work lost from it), and the copies of node-local
// checkpoints to a second location (spec.checkpoint.replicate) and back (before a task starts
// on a node that lacks them).
//
// A checkpoint is any entry (file or directory) directly in the directory whose name does not
// start with "." and does not end in ".tmp", ".partial" or ".lock": the write-then-rename
// convention, under which an entry with a final name is complete. Its time is its mtime.
// Copies keep that convention (written under NAME.gpucloud.tmp, then renamed) and the mtime.
#ifndef GPUCLOUD_AGENT_CHECKPOINTS_H_
#define GPUCLOUD_AGENT_CHECKPOINTS_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace gpucloud::agent {

// The newest complete checkpoint's mtime in unix ms; 0 when there is none (or no directory).
int64_t NewestCheckpointMs(const std::string& dir);

// Copies the complete checkpoints of `from` that `to` lacks (creating `to`). Returns how many it
// copied; an error names the entry that could not be copied. FailedPrecondition when `to` is not
// a directory of this process's own user (a link, or a task's).
absl::StatusOr<int> CopyCheckpoints(const std::string& from, const std::string& to);

// Replicates tasks' node-local checkpoint directories to their replica directories in the
// background (one thread; a copy never holds up the agent's loop). Thread-safe.
class CheckpointReplicator {
 public:
  CheckpointReplicator();
  ~CheckpointReplicator();  // stops the thread
  CheckpointReplicator(const CheckpointReplicator&) = delete;
  CheckpointReplicator& operator=(const CheckpointReplicator&) = delete;

  void Track(const std::string& task, const std::string& local, const std::string& replica);
  // Copies what is left once more, then forgets the task.
  void Untrack(const std::string& task);
  // The newest checkpoint of the task's that is in its replica directory (unix ms; 0: none).
  int64_t Replicated(const std::string& task) const;
  // Copies now for every task and waits for it (tests; shutdown).
  void Flush();

 private:
  struct Entry {
    std::string local, replica;
    int64_t replicated_ms = 0;
    bool forget = false;
  };
  void Loop();
  void Pass();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> tasks_;  // guarded by mu_
  bool stop_ = false;                   // guarded by mu_
  uint64_t passes_ = 0;                 // guarded by mu_
  bool want_pass_ = false;              // guarded by mu_
  bool in_pass_ = false;                // guarded by mu_
  std::thread thread_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_CHECKPOINTS_H_
