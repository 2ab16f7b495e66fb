// gpuctl's commands about running work and the machines it runs on:
//   describe job|node NAME        everything about one object, with its events
//   describe secret NAME          (secret_commands.h) its keys and sizes
//   logs JOB [--rank R] [--attempt A] [-f] [--tail N] [--since 5m] [--timestamps] [--previous]
//   events JOB
//   cancel JOB                    stop its tasks (grace period), keep the job
//   cordon|uncordon|drain NODE    (admins; drain --timeout T then waits for its jobs to move)
//   reclaim NODE --in S           a spot notice: the node's jobs checkpoint and requeue (admins)
//   top [nodes]                   GPUs per node: allocated, out of service, free, by which jobs,
//                                 with their utilization and memory (top_format.h)
//   top jobs [-n NS]              GPUs per job, with their utilization and memory
// and the tables of `get jobs` and `get nodes`, and human ages. Functions are reentrant.
#ifndef GPUCLOUD_CLI_CLUSTER_COMMANDS_H_
#define GPUCLOUD_CLI_CLUSTER_COMMANDS_H_

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "api/client.h"
#include "cli/remote.h"
#include "core/clock.h"

namespace gpucloud::cli {

// `wide` (-o wide) adds a job's queue and GPUs, a node's pool and driver.
void PrintJobsTable(const std::vector<nlohmann::json>& jobs, bool with_namespace, std::ostream& out,
                    bool wide = false);
void PrintNodesTable(const std::vector<nlohmann::json>& nodes, std::ostream& out,
                     bool wide = false);

int Describe(const api::Client& client, const std::string& resource, const std::string& name,
             const std::string& ns, std::ostream& out, std::ostream& err);
struct LogsOptions {
  std::string job, ns;
  int rank = 0;
  int attempt = 0;  // 0: the current one
  bool follow = false;
  int tail = -1;      // --tail N: the last N lines (-1: all)
  std::string since;  // --since 5m: a duration (s, m, h), as sinceSeconds
  bool timestamps = false, previous = false;
};
// The logs request, with Kubernetes' names for the query parameters (tailLines, sinceSeconds,
// timestamps, previous); InvalidArgument for a --since that is not a positive duration.
absl::StatusOr<std::string> LogsTarget(const LogsOptions& o);
int Logs(const api::Client& client, const LogsOptions& o, std::ostream& out, std::ostream& err);
int Events(const api::Client& client, const std::string& job, const std::string& ns,
           std::ostream& out, std::ostream& err);
int Cancel(const api::Client& client, const std::string& job, const std::string& ns,
           std::ostream& out, std::ostream& err);
// cordon, uncordon, drain, or reclaim (a spot notice: the node goes away in `seconds`).
// A spot reclamation notice for every node of a pool.
int ReclaimPool(const api::Client& client, const std::string& pool, int seconds, std::ostream& out,
                std::ostream& err);
// gpuctl images pull --pool POOL IMAGE: every node of the pool pulls IMAGE ahead of its tasks.
int PrePullPool(const api::Client& client, const std::string& pool, const std::string& image,
                std::ostream& out, std::ostream& err);
int NodeVerb(const api::Client& client, const std::string& verb, const std::string& node,
             std::ostream& out, std::ostream& err, int seconds = 0);
// kExitInvalid when a list cannot be read (the server's message on `err`). TopNodes reads
// every job (admins); TopJobs too, or with `ns` that namespace's only.
int TopNodes(const api::Client& client, std::ostream& out, std::ostream& err);
int TopJobs(const api::Client& client, const std::string& ns, std::ostream& out, std::ostream& err);

// One node's GPUs in `top`: all of them, those jobs hold (`held`: their indexes), those out of
// service and not held (unhealthy, or expected to fail: the node object's live health, as the
// scheduler sees it) and the rest, free.
struct GpuCounts {
  int total = 0, used = 0, out = 0, free = 0;
};
GpuCounts CountGpus(const nlohmann::json& node, const std::set<int>& held);

// After `drain NODE --timeout T`: polls the jobs (every second, through `sleep`) until none runs
// on `node` ("node n1 drained") or `timeout` has passed by `clock` (kExitInvalid, naming the
// jobs still there). `call` as remote.h's; `sleep` waits (absl::SleepFor, or a fake clock's
// Advance in tests).
int WaitForDrain(const CallFn& call, const std::string& node, absl::Duration timeout,
                 const Clock& clock, const std::function<void(absl::Duration)>& sleep,
                 std::ostream& out, std::ostream& err);

// Human times, as kubectl prints ages: "45s", "5m30s" (under 10 minutes), "15m", "2h3m", "3d4h".
std::string HumanDuration(int64_t seconds);
// "5m ago" for a time in Unix milliseconds, "-" for none (<= 0).
std::string HumanAge(int64_t then_ms, int64_t now_ms);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_CLUSTER_COMMANDS_H_
