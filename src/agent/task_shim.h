// The steps of a task's first process between its creation and exec, shared by the executor's
// fork path and (to come) the gpucloud-shim helper binary, so there is one implementation of
// them. Plain C++ and libc only (no absl, no allocation after fork): every function here is
// async-signal-safe unless it says otherwise, and may run in a forked child of a
// multi-threaded process. Not a public interface: src/agent/executor.cc is its user.
#ifndef GPUCLOUD_AGENT_TASK_SHIM_H_
#define GPUCLOUD_AGENT_TASK_SHIM_H_

#include <sys/types.h>

namespace gpucloud::agent::shim {

// Who a task runs as (TaskSpecToRun::uid; `set` false: the agent's user) and where. The working
// directory is entered as the task's user (a path the user could not reach stays closed).
// Pointers are borrowed from the caller.
struct Creds {
  bool set = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const char* workdir = nullptr;  // always given
};

// Everything a task's first process needs, built before fork (the strings and arrays are
// borrowed and must outlive the call).
struct TaskChild {
  int log_fd = -1;          // becomes stdout and stderr
  int go_fd = -1;           // one byte from the parent once it has placed the child
  int failed_fd = -1;       // close-on-exec; gets exec's errno, or minus a cgroup-join errno
  int sweep_limit = 65536;  // from DescriptorSweepLimit(), read before fork
  Creds creds;
  const char* status_path = nullptr;  // null or "": no shim process, exec directly
  const char* stdin_path = nullptr;   // null or "": /dev/null on 0; else this FIFO, read-write
  const char* status_tmp = nullptr;
  const char* const* join_paths = nullptr;  // v1 cgroup `tasks` files, null-terminated
  char* const* argv = nullptr;
  char* const* envp = nullptr;
};

// The highest descriptor worth sweeping when close_range is missing (not async-signal-safe:
// call it before fork).
int DescriptorSweepLimit();

// The child's side, in order: own process group, empty signal mask and default dispositions
// for PIPE/TERM/INT/HUP/CHLD, join the cgroups, wait for "go", log on 1 and 2, /dev/null (or
// the stdin FIFO, opened read-write so that the task never reads an end of file) on 0,
// everything above 2 close-on-exec, chdir, then either RunShim (a status path) or drop
// privileges and exec. Failures are written to failed_fd and end the process with 127.
[[noreturn]] void RunTaskChild(const TaskChild& c);

}  // namespace gpucloud::agent::shim

#endif  // GPUCLOUD_AGENT_TASK_SHIM_H_
