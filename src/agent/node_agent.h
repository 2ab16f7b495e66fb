// NodeAgent: the agent's sync loop with the control plane (design.md, "Agent ⇄ server").
//   - registers its node (GPUs from the backend, CPUs, memory, address, labels, pool), again
//     whenever the server says it does not know it (a server that lost its memory);
//   - watches its assignments (list, then watch from the list's revision; reconnects with
//     back-off, lists again when the revision was compacted);
//   - reconciles: starts every assigned task it has not run yet for that (job uid, attempt);
//     stops (SIGTERM, the assignment's grace period, SIGKILL) every task whose assignment is gone
//     or names another attempt — fencing, so that a job never runs twice at once;
//   - heartbeats every second (and at once when a task changes state) with every task's state
//     and the GPUs' health; ended tasks are reported until the server stops assigning them and
//     has acknowledged their reports (heartbeat_reports.h); a task's exit wakes the loop at once
//     (exit_watcher.h: a pidfd per task, re-adopted ones too; the 100 ms tick without pidfds);
//   - ships each task's log to the server as it grows;
//   - samples its GPUs with every heartbeat, for health and for /metrics (MetricsText), where a
//     task's GPUs carry its labels and its energy is summed;
//   - runs each task as an unprivileged user, as a host process (where allowed) or in its
//     container image (Podman), pulling the image first (task_launch.h, sandbox.h, container.h);
//   - keeps STATE_DIR 0711 (tasks pass through to their sandboxes) with its own records, logs
//     and exit files in 0700 directories and 0600 files (a task's environment may hold
//     secrets); writes the CDI spec of its NVIDIA GPUs at start;
//   - remembers its tasks in STATE_DIR/tasks, so an agent that restarts re-adopts those still
//     running (same pid and start time) and reports the others lost — none is orphaned silently.
// Time: every decision that depends on it (a stopping task's SIGKILL after its grace period,
// the back-off of secret fetches and of a log over quota, how long an ended task is kept, the
// certificate's renewal, the heartbeat's period, image ages, the reports' startedMs and
// finishedMs) reads the injected Clock; only waits (the loop's tick, back-off sleeps) are real
// time. With a FakeClock, a test moves the agent's deadlines by moving the clock.
// Run blocks until `stop` becomes true. Thread-safe: Run from one thread; Stop from any.
#ifndef GPUCLOUD_AGENT_NODE_AGENT_H_
#define GPUCLOUD_AGENT_NODE_AGENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/container.h"
#include "agent/gpu_backend.h"
#include "api/client.h"
#include "core/clock.h"
#include "core/node.h"

namespace gpucloud::agent {

struct NodeAgentOptions {
  std::string node_name;  // default: the host name
  std::string address;    // how other nodes reach this one; default: the host name
  std::string pool;
  std::map<std::string, std::string> labels;
  std::string state_dir = ".gpucloud-agent";  // logs, hostfiles, task records
  std::string workdir;  // a task's working directory when its spec names none; "" = the agent's
  absl::Duration heartbeat = absl::Seconds(1);
  int64_t cpu_milli = 0;                        // 0: the machine's
  int32_t max_tasks = kDefaultMaxTasksPerNode;  // tasks the server may place here at most
  int64_t memory_mib = 0;                       // 0: the machine's
  // Kill the tasks when the agent stops (gpucloud up); otherwise they keep running for the
  // next agent to re-adopt.
  bool kill_tasks_on_stop = false;
  // The most processes (and threads) one task may have at once, through its cgroup's pids.max;
  // 0: no limit.
  int64_t task_pids_max = 4096;
  // Tasks without an image run on the host (as their namespace's unprivileged user); off: only
  // containers (gpucloud agent run's default; gpucloud up's demo allows them).
  bool allow_host_processes = false;
  bool allow_root_tasks = false;  // a securityContext may ask for uid or gid 0
  ContainerRuntimeOptions container;
  // Where the CDI spec of this node's NVIDIA GPUs is written ("" = nowhere); Podman reads
  // /etc/cdi and /var/run/cdi.
  std::string cdi_spec_dir = "/var/run/cdi";
  // Image garbage collection: images no task of this node used for this long go (checked once
  // an hour); with a store limit, the least recently used go after each pull until it fits.
  absl::Duration image_gc_age = absl::Hours(24);
  int64_t image_store_max_bytes = 0;  // 0: no limit
};

class NodeAgent {
 public:
  // Borrows `backend` and `clock`. The clock is read from the agent's threads, so it must be
  // thread-safe (SystemClock; a test's fake clock with an atomic now).
  NodeAgent(api::ClientConfig server, GpuBackend& backend, const Clock& clock,
            NodeAgentOptions options);
  ~NodeAgent();
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // Runs until Stop. Returns an error only when it cannot start (discovery failed).
  absl::Status Run();
  void Stop();
  // GPU metrics in dcgm-exporter's names from the last sample, the GPUs of running tasks
  // labelled namespace, job_name and task, and each task's energy
  // (gpucloud_task_energy_joules_total).
  // Thread-safe (for the metrics server's thread).
  std::string MetricsText() const;

  // Test hook: wakes the main loop and blocks until it has run one whole pass (reconcile, the
  // tasks' polls, log shipping and the heartbeat when due) that began after this call; false
  // when none did within `timeout` or the agent is stopping. Every decision of that pass read
  // the clock as it was at the call (or later): a test moves a fake clock, then awaits a pass.
  bool AwaitPassForTest(absl::Duration timeout = absl::Seconds(10));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_NODE_AGENT_H_
