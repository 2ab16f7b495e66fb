// NodeAgent's body (node_agent.h), shared by its implementation files; private to them.
//   node_agent.cc          construction, registration and the node certificate, the watch of
//                          assignments, the main loop (Run)
//   node_agent_tasks.cc    reconciling: which tasks start, stop (SIGTERM, SIGKILL) or are
//                          forgotten; polling their exits
//   node_agent_launch.cc   starting one task: its secrets, directories, image, the executor
//   node_agent_records.cc  task records in STATE_DIR/tasks (re-adoption after a restart), exits
//   node_agent_reports.cc  heartbeats, log shipping, GPU samples and /metrics, images
// Threads: the main loop (Run) owns `tasks` and every field not marked otherwise; the watcher
// thread (Watch) writes `desired` and `arrived` under `mu`; the exit watcher's thread calls
// OnExit; the metrics server's thread reads under `metrics_mu`. Time comes from `clock` only.
#ifndef GPUCLOUD_AGENT_NODE_AGENT_IMPL_H_
#define GPUCLOUD_AGENT_NODE_AGENT_IMPL_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/checkpoints.h"
#include "agent/container.h"
#include "agent/dir_janitor.h"
#include "agent/executor.h"
#include "agent/exit_watcher.h"
#include "agent/exporter.h"
#include "agent/gpu_backend.h"
#include "agent/health.h"
#include "agent/heartbeat_reports.h"
#include "agent/log_shipping.h"
#include "agent/node_agent.h"
#include "agent/node_identity.h"
#include "agent/proc_stat.h"
#include "agent/sandbox.h"
#include "agent/session_manager.h"
#include "agent/task_launch.h"
#include "api/client.h"
#include "api/wire.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/text.h"

namespace gpucloud::agent {
struct NodeAgent::Impl {
  struct Local {
    api::Assignment a;
    std::string exec_id;
    api::TaskReport report;
    bool in_executor = false;
    pid_t adopted_pid = 0;
    uint64_t adopted_start = 0;
    int adopted_pidfd = -1;  // a re-adopted task watched through a pidfd (-1: polled)
    // The gpucloud-shim program that started it ("": a fork of the agent, or not started), kept
    // in its record: a re-adopting agent believes only that program (adopted_target.h).
    std::string shim;
    // How sessions enter a re-adopted host process (adopted_target.h); none when its first
    // process cannot tell.
    std::shared_ptr<const SessionTarget> adopted_session;
    bool stopping = false;
    absl::Time kill_at = absl::InfiniteFuture();
    std::optional<absl::Time> ended_at;
    std::string log_path;
    std::string checkpoint_dir;  // where the task writes them (node-local or the job's)
    absl::Time checkpoint_scanned = absl::InfinitePast();
    LogCursor log;
    absl::Time log_retry_at = absl::InfinitePast();  // over quota: the next chunk not before
    LaunchPlan plan;
    bool waiting_image = false;  // a container whose image is not on the node yet
    // Its secret references' values are not here yet (task_secrets.h): asked for again at
    // secrets_retry_at. Once here, they are in `secrets` (memory only, never in its record).
    bool waiting_secrets = false;
    int secret_failures = 0;
    absl::Time secrets_retry_at = absl::InfinitePast();
    std::optional<api::TaskSecrets> secrets;
    std::string container_name;  // "" for a host process
    bool assigned = true;        // its assignment (job uid and attempt) is still there
    // Its report as the server last acknowledged it (heartbeat_reports.h).
    std::optional<api::TaskReport> acknowledged;
    // An interactive task: when it was last in use (session traffic, a GPU busy), and whether
    // its idle warning went to its terminals in this idle stretch.
    absl::Time last_used = absl::InfinitePast();
    bool idle_announced = false;
  };

  api::Client client;
  api::Client watch_client;
  const api::ClientConfig bootstrap_config;  // as given: the bootstrap token's, or a certificate
  NodeCertificateInfo credential;            // the node certificate the clients present
  absl::Time renew_retry_at = absl::InfinitePast();
  GpuBackend& backend;
  const Clock& clock;  // every decision's time (deadlines, back-offs, reports); never waits
  NodeAgentOptions o;
  std::mutex mu;
  std::condition_variable wake;
  bool exited = false;  // guarded by mu: a task ended (ExitWatcher), poll the tasks now
  // Declared before the executor and after what its callback touches (destroyed in reverse).
  ExitWatcher exits{[this] { OnExit(); }};
  Executor exec{&exits};
  DirJanitor janitor{exec.shim()};  // forgotten tasks' directories, off the main loop
  LaunchPolicy launch_policy;
  ImagePuller puller;
  absl::Time collected_at;  // the last image collection (the constructor's now at first)
  bool pulled_since_gc = false;
  std::map<std::string, int64_t> image_last_used;  // image -> unix s of its last pull or start
  std::map<std::string, int> pulls_logged;         // image -> ImagePuller::State::pulls logged
  std::set<std::string> pre_pulled;                // the operator's prePull images, once each
  std::atomic<bool> stop{false};
  // The last heartbeat was not taken (MainLoop's thread only): logged once when that starts,
  // and once when heartbeats are taken again (with the server that took them).
  bool heartbeat_failing = false;

  std::map<std::string, api::Assignment> desired;  // guarded by mu
  bool desired_known = false;                      // guarded by mu: listed at least once
  bool dirty = false;                              // guarded by mu
  // guarded by mu: the main loop's passes begun and finished (AwaitPassForTest)
  int64_t passes_begun = 0;
  int64_t passes_done = 0;
  std::condition_variable pass_done;

  std::map<std::string, Local> tasks;  // the main loop's
  // Interactive sessions (session_manager.h), from registration on; and the running tasks they
  // may enter, by "assignment/attempt", published by the main loop (PublishSessionTargets).
  std::unique_ptr<SessionManager> sessions;
  std::mutex targets_mu;
  std::map<std::string, std::shared_ptr<const SessionTarget>> session_targets;  // targets_mu
  std::string published_targets;  // the main loop's: what was published
  void StartSessions();
  void PublishSessionTargets();
  std::thread watcher;
  std::string cwd;
  std::map<std::string, absl::Time> arrived;  // guarded by mu: "name/attempt" -> when it came
  HealthMonitor health;                       // the main loop's
  CheckpointReplicator replicator;
  int gpu_count = 0;
  std::optional<int64_t> health_reset_seen;  // the server's reset generation, once heard

  // What /metrics shows, from the main loop's samples.
  mutable std::mutex metrics_mu;
  NodeGpus discovered;                  // guarded by metrics_mu
  std::vector<GpuSample> last_samples;  // guarded by metrics_mu
  std::multimap<int, GpuOwner> owners;  // guarded by metrics_mu
  // guarded by metrics_mu; health's, for /metrics, from the first heartbeat on
  std::optional<std::map<int, GpuCondition>> shown_health;
  struct Energy {
    std::string ns, job, task;
    int rank = 0, attempt = 0;
    double joules = 0;
  };
  std::map<std::string, Energy> energy;  // guarded by metrics_mu; by exec id

  Impl(api::ClientConfig server, GpuBackend& b, const Clock& c, NodeAgentOptions opts);

  // The injected clock's now: what every time-dependent decision reads (waits use real time).
  absl::Time Now() const { return absl::FromUnixMillis(clock.NowMillis()); }

  void Log(const std::string& line, log::Level level = log::Level::kInfo) {
    log::Write(level, "agent", line, {{"node", o.node_name}});
  }

  // On the exit watcher's thread: a task (or a re-adopted process) ended.
  void OnExit();

  // What heartbeat_reports.h decides from, for one task.
  static ReportedTask Reported(const Local& t, absl::Time now);

  // Everything the task wrote is on the server (or given up).
  static bool LogShipped(const Local& t);

  // Sleeps up to `d`; returns false when stopping.
  bool Sleep(absl::Duration d);

  // --- registration --------------------------------------------------------------------------

  absl::StatusOr<std::string> RegistrationBody();

  // --- the node's certificate (node_identity.h) ---------------------------------------------

  // Authenticates with the node certificate in the state directory when it is this node's and
  // has not expired; else asks for one with the bootstrap token, again and again (the server may
  // be down, or refuse while another agent holds the name). False when stopping.
  bool EnsureCredential();

  void UseCredential(const NodeCertificateInfo& info);

  // Renews the certificate with itself once two thirds of its life are gone (retrying each
  // minute); one that expired regardless (the server was away) is asked for again with the
  // bootstrap token. The clients pick up the new file on their next connection.
  void MaybeRenewCredential();

  bool Register();

  // --- assignments (watcher thread) ----------------------------------------------------------

  // Lists, then watches from the list's revision (again after a failure, with back-off; at once
  // when the revision was compacted).
  void Watch();
  // GETs the assignments into `desired`: the list's revision, or nullopt when it failed.
  std::optional<int64_t> ListAssignments();
  // One line of the watch into `desired`; `rev` follows the events' revisions.
  void OnWatchLine(const std::string& line, int64_t& rev);

  // --- tasks (main loop) ---------------------------------------------------------------------

  std::string RecordPath(const std::string& exec_id) const {
    return Cat(o.state_dir, "/tasks/", exec_id, ".json");
  }

  void SaveRecord(const Local& t);

  // Tasks a previous agent left: re-adopted when still running, else reported lost (or as they
  // ended, when that was recorded).
  void LoadRecords();
  // One record as a task (its checkpoint directory not yet set); nullopt for a record that is
  // unreadable or of a task that never ran (removed: it starts again from its assignment).
  std::optional<Local> ReadRecord(const std::string& path);
  // A task recorded as running: re-adopted when its process (`pid`, started at `start`) still
  // runs, else ended as its exit file says, or lost.
  void Readopt(Local& t, pid_t pid, uint64_t start);

  // The agent's own directory for a task (0700 under STATE_DIR/run): its exit file, its
  // Volcano files.
  std::string RunDir(const Local& t) const { return Cat(o.state_dir, "/run/", t.exec_id); }

  // Where the task's shim writes how it ended (TaskSpecToRun::status_path).
  std::string StatusPath(const Local& t) const { return RunDir(t) + "/exit"; }
  std::string StdinPath(const Local& t) const { return RunDir(t) + "/stdin"; }

  // A task's exit: a container's read through Podman's codes, and the container removed should
  // its `podman run` have been killed (the container lives on in conmon, outside the group).
  void Ended(Local& t, TaskExit e);

  void RemoveContainer(const Local& t);

  void SetExit(Local& t, TaskExit e);

  // The task's checkpoint directory: the job's, or with nodeLocal one on this node, replicated
  // to the job's when asked.
  void SetCheckpointDir(Local& t);

  // The CUDA device of a MIG instance (its "MIG-..." UUID), from discovery.
  std::string MigUuid(const api::AssignedGpu& g);

  LaunchInput Launch(const Local& t);

  std::string VolcanoDir(const Local& t) const { return RunDir(t) + "/volcano"; }

  std::string SandboxPath(const Local& t) const { return Cat(o.state_dir, "/sandbox/", t.exec_id); }

  void StartTask(const api::Assignment& a);

  // Its directories, then its image, then the task itself.
  void Prepare(Local& t);

  static bool Waiting(const Local& t) { return t.waiting_image || t.waiting_secrets; }

  // A task with secret references: their values from the server, then on as any task. Until
  // they come, it is Starting with the server's reason, asked again with back-off (5 s to
  // 5 min). Returns true when the task changed (started preparing, or its message did).
  bool StartWhenSecretsFetched(Local& t);

  void Fail(Local& t, std::string why);

  // The sandbox, the checkpoint directory (node-local ones restored from their replica) and the
  // hostfile, all the task's own. What the agent writes there, it writes while the directory is
  // root's, through descriptors: no task of the same user can plant a link in its way.
  absl::Status PrepareDirs(Local& t);

  static absl::Status WriteTaskFile(int dirfd, const char* name, const std::string& content,
                                    const TaskIdentity& id);

  // The checkpoint directory, taken back from its task's user while the agent restores replicas
  // into it (a restart after a lost node), then given to the task.
  absl::Status PrepareCheckpointDir(const Local& t);

  // Volcano's <task>.host files for a host process: in its sandbox's volcano/, its user's.
  static absl::Status WriteSandboxVolcanoFiles(int sandbox, const Local& t);

  // Volcano's /etc/volcano/<task>.host files, for a container (mounted read-only: the directory
  // and files readable by its user; the run directory above them is the agent's).
  absl::Status WriteVolcanoFiles(const Local& t);

  // A container's image: the task starts once it is on the node; until then it is Starting,
  // its message says why (pulling, or the last pull's failure and when the next one is).
  // Returns true when the task changed (started, or its message did).
  bool StartWhenPulled(Local& t);

  void Exec(Local& t);

  void StopTask(Local& t, bool hard);

  // The tasks against the assignments (once listed): StartAssigned, then StopAndForget.
  // Returns true when a task changed state.
  bool Reconcile();
  // Starts each assigned task not yet run for its job uid and attempt (kMaxStartsPerPass at
  // most; the next pass goes on at once), stopping an older attempt first. True when one started.
  bool StartAssigned(const std::map<std::string, api::Assignment>& want);
  // Stops each task whose assignment is gone (SIGTERM, SIGKILL once its kill_at has passed by
  // `now`) and forgets those ended tasks heartbeat_reports.h says it may.
  void StopAndForget(const std::map<std::string, api::Assignment>& want, absl::Time now);

  bool PollTasks();

  // Ships what each task wrote since the last pass, at most LogLimits::bytes_per_pass each;
  // true when some is left for the next pass. Rotation is decided here (PlanLogShipping): a
  // log is rotated once shipped, and a backlog the server could not take (or output its
  // namespace's log quota has no room for) is dropped with a marker line that says how much and
  // where it is kept.
  bool ShipLogs();

  static std::string ReadAt(const std::string& path, int64_t offset, int64_t max);

  // POSTs `data` at the shipped offset, stamped with the time it was read (or `written_by_ms`,
  // when all of it was written by then: ShipTimeMs). False when it did not all go (the server
  // is away or full, or the log is gone).
  bool ShipChunk(Local& t, const std::string& data, ChunkKind kind,
                 std::optional<int64_t> written_by_ms = std::nullopt);

  // Keeps the sample for /metrics; adds each running task's share of its GPUs' energy since
  // the previous sample (whole GPUs fully, shared ones by their fraction; MIG instances are not
  // metered separately by NVML and are left out).
  void RecordSamples(const std::vector<GpuSample>& samples);

  std::string MetricsText() const;

  // The GPUs the running tasks hold (for the simulated backend's readings).
  std::set<int> BusyGpus() const;
  // An interactive task's idleness into its report (TaskReport::idle_ms), and its warning to
  // its terminals once kIdleWarningFraction of the timeout has passed.
  void UpdateIdleness(Local& t, absl::Time now);

  // POSTs the heartbeat: the tasks' reports (HeartbeatTasks) and the GPUs' health and usage
  // from a fresh sample (HeartbeatGpus); registers again when the server does not know the node.
  void Heartbeat();
  // The reports the heartbeat carries (InHeartbeat), their checkpoints looked at first.
  std::vector<api::TaskReport> HeartbeatTasks(absl::Time now);
  // Samples the GPUs (for /metrics too) and says each one's health and usage.
  std::vector<api::GpuHealth> HeartbeatGpus();
  // The server's answer: the operator's health reset, acknowledged reports, images to pre-pull.
  void ReadHeartbeatAnswer(const std::string& body);

  // Xid events since the last look; true when a GPU's health changed (report it at once).
  bool PollXids();

  // Containers of this node that no task record names any more (an agent killed with its
  // records lost, a kill before the record was saved) go: nothing runs unaccounted for.
  void RemoveOrphanContainers();

  // The CDI spec of the node's NVIDIA GPUs, for containers.
  void WriteCdi(const NodeGpus& gpus);

  // Image garbage collection (PlanImageEviction): once an hour the images unused for
  // image_gc_age go; with image_store_max_bytes, also after each pull, the least recently used
  // until the store fits. Never an image a task of this node runs or waits for.
  void CollectImages();

  // Discovery, the state directory, the records, registration; then the main loop until Stop.
  absl::Status Run();
  // Each pass: reconcile, poll the tasks, collect images, look for Xids; ship logs and
  // heartbeat when due (at once after a change, else every `o.heartbeat` by the clock). Woken
  // by a change of the assignments or a task's exit, else on a 100 ms tick.
  void MainLoop();
  bool AwaitPass(absl::Duration timeout);
  // On stop: the tasks killed (kill_tasks_on_stop) or left running for the next agent.
  void Leave();
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_NODE_AGENT_IMPL_H_
