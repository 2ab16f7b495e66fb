// One process as /proc/PID/stat tells it: its state and its start time, which with the pid names
// one process for good (a pid is reused, a pid and start time are not). Pure reads of /proc;
// thread-safe.
#ifndef GPUCLOUD_AGENT_PROC_STAT_H_
#define GPUCLOUD_AGENT_PROC_STAT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace gpucloud::agent {

struct ProcStat {
  char state = '?';
  uint64_t start_time = 0;  // clock ticks after boot
};

// The process' state and start time from /proc/PID/stat; nullopt when it is gone.
std::optional<ProcStat> ReadProcStat(pid_t pid);

// The process is still the one recorded (not a reused pid) and not a zombie.
bool Alive(pid_t pid, uint64_t start_time);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_PROC_STAT_H_
