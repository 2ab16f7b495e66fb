// The executor: runs each task as its own process group (as the user it names, when it names
// one), with the environment from
// BuildTaskEnv, stdout and stderr appended to a log file that is rotated (copy and truncate)
// when it grows past a limit, and CPU, memory and process-count limits through cgroups where
// they can be set. A task inherits only descriptors 0, 1 and 2 (/dev/null, its log, its log):
// everything else the agent has open (its sockets, its files) is closed on exec, and the shim
// closes it too. Logs and status files are created 0600.
// A task's first process is gpucloud-shim, a small static program started with posix_spawn
// (shim_main.cc), where it is installed; elsewhere a fork of the agent. Both run the same
// steps (task_shim.h) and look the same to the executor; the spawn avoids copying the agent's
// page tables for every task.
// Stop is SIGTERM to the whole group, a grace period, then SIGKILL; when a task's leader ends,
// whatever is left of its group is killed and reaped. An ended task reports its
// exit code or signal, and whether the kernel's OOM killer ended it.
// Exits can be announced as they happen: given an ExitWatcher, the executor watches each task's
// leader through a pidfd, and the watcher calls its owner back when one ends (the owner then
// Polls; where pidfds are missing, it polls on its own tick as before).
// Not thread-safe: the agent's task loop owns it (the watcher's callback runs on the watcher's
// thread and must not call the executor).
#ifndef GPUCLOUD_AGENT_EXECUTOR_H_
#define GPUCLOUD_AGENT_EXECUTOR_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/cgroup.h"
#include "agent/exit_watcher.h"
#include "core/quantity.h"

namespace gpucloud::agent {

struct TaskSpecToRun {
  std::string id;  // unique per task attempt, e.g. "team-a.train.worker-0.3"
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the whole environment (plus PATH if absent)
  std::string workdir;                     // "" = the log directory
  std::string log_path;
  int64_t log_max_bytes = 64 << 20;  // 0: never rotated here (the node agent's shipper does)
  int log_keep = 3;                  // rotated files kept: log.1 .. log.N
  std::optional<MilliCpu> cpu;
  std::optional<MiB> memory;
  int64_t pids_max = 0;  // the most processes (and threads) the task may have at once; 0: no limit
  // When set, the group's leader is a small shim (the first process itself) that runs the
  // task as its only child, ignores the stop signals, writes how the task ended to this file
  // ("exit N" or "signal N", via a temporary name and rename) and then ends the same way. So a
  // task that outlives its agent still leaves its exit status for the next one
  // (ReadExitStatus); the executor itself sees the same exit as without the shim.
  std::string status_path;
  // A FIFO the task reads as its stdin (`gpuctl attach -i` writes into it); it is opened
  // read-write, so the task never reads an end of file. "": /dev/null.
  std::string stdin_path;
  // Runs the task as this user and group (no supplementary groups, no new privileges: a setuid
  // program cannot regain root). The shim stays the agent's user, to write the status file
  // where the task cannot. nullopt: the agent's own user.
  std::optional<uid_t> uid;
  gid_t gid = 0;
};

// The status a task's shim wrote (TaskSpecToRun::status_path), or nullopt when there is none
// (the shim was killed, or never ran).
struct TaskExit;
std::optional<TaskExit> ReadExitStatus(const std::string& status_path);

struct TaskExit {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool oom_killed = false;
  bool stopped = false;          // ended by Stop
  std::string Describe() const;  // "exit code 0", "killed by the OOM killer", ...
};

// Why a task without a command cannot start as a host process (a task with an image runs its
// image's entrypoint instead). InvalidArgument; its message begins with the reason,
// "NoCommand: ", which the agent reports as the task's failure.
absl::Status NoCommandError();

// Which gpucloud-shim starts tasks (a small static program spawned with posix_spawn; see
// shim_main.cc): `env` is $GPUCLOUD_SHIM ("none": fork instead; a path: that program), else the
// one next to `self_exe` (this program). An empty path means fork, with the reason in
// `warning` when a shim was looked for and is not there (or not executable).
struct ShimChoice {
  std::string path;
  std::string warning;
};
ShimChoice ChooseShim(const char* env, const std::string& self_exe);

class Executor {
 public:
  // Makes this process a child subreaper (prctl), so that processes a task's leader leaves
  // behind come to it and can be reaped. With `exits` (borrowed; it must outlive the executor),
  // every task started is watched there, so that its end is announced at once. Tasks start
  // through the shim ChooseShim finds ($GPUCLOUD_SHIM, else next to this program), or by fork
  // when there is none (the first Start's warning says so).
  explicit Executor(ExitWatcher* exits = nullptr);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor();  // kills what still runs

  // Starts the task. InvalidArgument for an empty argv (NoCommandError) or a duplicate id; NotFound
  // when the program cannot be executed (with the reason); Internal for fork, spawn or file
  // errors. A warning (cgroups unusable here: the task runs without its limits; no shim: tasks
  // start by fork) goes to `warning` when given.
  absl::Status Start(const TaskSpecToRun& spec, std::string* warning = nullptr);
  pid_t Pid(const std::string& id) const;
  // The exit of a task that has ended (reaped once, then remembered), or nullopt while it runs.
  // Also rotates its log when due.
  std::optional<TaskExit> Poll(const std::string& id);
  // Blocks until the task ends.
  TaskExit Wait(const std::string& id);
  // SIGTERM to the task's process group; SIGKILL after `grace` if it still runs. Returns its
  // exit. NotFound for an unknown id.
  absl::StatusOr<TaskExit> Stop(const std::string& id, absl::Duration grace);
  // The non-blocking halves of Stop, for a loop that cannot wait out a grace period: SIGTERM
  // to the group now (Terminate), SIGKILL later (Kill); Poll reports the exit. NotFound for an
  // unknown id.
  absl::Status Terminate(const std::string& id);
  absl::Status Kill(const std::string& id);
  // Drops an ended task (its id may be used again).
  void Forget(const std::string& id);
  // Lets every task run on without this executor (the agent stops, the next one re-adopts
  // them): nothing is killed on destruction.
  void Detach();
  // The files a process writes "0" to in order to join the task's cgroups (TaskCgroup::
  // JoinFiles); empty for a task without cgroups or an unknown id.
  std::vector<std::string> CgroupJoinFiles(const std::string& id) const;
  // The shim tasks start through ("" = by fork).
  const std::string& shim() const { return shim_; }

 private:
  struct Task {
    TaskSpecToRun spec;
    pid_t pid = 0;
    int pidfd = -1;
    std::unique_ptr<TaskCgroup> cgroup;
    int64_t oom_before = 0;
    bool stopping = false;
    std::optional<TaskExit> exit;
  };
  // Reaps the task if it ended (blocking up to `timeout`); fills Task::exit.
  void Reap(Task& t, absl::Duration timeout);
  std::map<std::string, Task> tasks_;
  ExitWatcher* exits_ = nullptr;
  std::string shim_;          // "" = fork
  std::string shim_warning_;  // for the next Start's warning, once
};

// Rotates `path` when it is larger than `max_bytes` (> 0): path.N-1 -> path.N, ..., path ->
// path.1 (copied), then `path` is truncated (its writer appends, so it goes on at the start).
void RotateLog(const std::string& path, int64_t max_bytes, int keep);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_EXECUTOR_H_
