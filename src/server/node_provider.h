// Node providers: how the autoscaler's provisioning requests become machines, per pool
// (NodePoolSpec::provider). A created machine runs `gpucloud agent run --pool POOL` and joins
// with the bootstrap token like any other; the autoscaler only starts it and, later, deletes it.
//
//   local          agents with simulated GPUs as processes on this machine, started by the
//                  server (for `gpucloud up`, the demo and the tests). The pool's labels
//                  gpucloud.io/boot-delay (a duration, e.g. "2s") delays each start, and
//                  gpucloud.io/boot-fail-first (a count) makes that many first machines never
//                  come up (a stock-out to try things on). Processes are stopped with SIGTERM
//                  on Delete and when the provider is destroyed.
//   exec:SCRIPT    an operator's script, like Slurm's ResumeProgram/SuspendProgram: run as
//                  `SCRIPT create` or `SCRIPT delete` with a JSON description on stdin (pool,
//                  gpuType, gpusPerNode, billing, nodes, labels, server, caFile,
//                  bootstrapTokenFile), within 5 minutes (then it and its process group are
//                  killed). Exit 0 is success; `create` may print
//                  {"nodes": [...]}, the machines it did create (fewer than asked is an error).
//
// Thread-safe: calls may come from any thread (the autoscaler calls from one worker).
#ifndef GPUCLOUD_SERVER_NODE_PROVIDER_H_
#define GPUCLOUD_SERVER_NODE_PROVIDER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/node_pool.h"

namespace gpucloud::server {

class NodeProvider {
 public:
  virtual ~NodeProvider() = default;
  // Starts creating `nodes` (their names) of `pool`; returns once they are on their way, not
  // when they are Ready. An error says why (a script's exit status and its last output).
  virtual absl::Status Create(const NodePool& pool, const std::vector<std::string>& nodes) = 0;
  // Deletes `nodes` of `pool`, up or still booting; OK for names it never created.
  virtual absl::Status Delete(const NodePool& pool, const std::vector<std::string>& nodes) = 0;
};

// What a created machine needs to join this control plane.
struct JoinInfo {
  std::string server_url;
  std::string ca_file;
  std::string bootstrap_token_file;
};

struct LocalProviderOptions {
  std::string agent_binary;  // the gpucloud binary (`gpucloud agent run ...`)
  std::string state_root;    // each agent's state in {state_root}/{node}, its log {node}.log
  JoinInfo join;
  // Extra arguments for every agent (e.g. --allow-host-processes, --workdir DIR).
  std::vector<std::string> agent_args;
};

class LocalProvider : public NodeProvider {
 public:
  explicit LocalProvider(LocalProviderOptions options) : options_(std::move(options)) {}
  ~LocalProvider() override;  // stops every agent it started
  absl::Status Create(const NodePool& pool, const std::vector<std::string>& nodes) override;
  absl::Status Delete(const NodePool& pool, const std::vector<std::string>& nodes) override;

 private:
  LocalProviderOptions options_;
  std::mutex mu_;
  std::map<std::string, pid_t> pids_;   // by node
  std::map<std::string, int> created_;  // machines asked of each pool so far
};

class ExecProvider : public NodeProvider {
 public:
  ExecProvider(std::string script, JoinInfo join, absl::Duration timeout = absl::Minutes(5))
      : script_(std::move(script)), join_(std::move(join)), timeout_(timeout) {}
  absl::Status Create(const NodePool& pool, const std::vector<std::string>& nodes) override;
  absl::Status Delete(const NodePool& pool, const std::vector<std::string>& nodes) override;

 private:
  // Runs `script_ action` with `input` on stdin; its stdout, or an error naming the script,
  // its exit status and the end of its stderr.
  absl::StatusOr<std::string> Run(const std::string& action, const std::string& input) const;
  std::string script_;
  JoinInfo join_;
  absl::Duration timeout_;
};

// The provider a pool names: "local" (needs `local`), "exec:/path/to/script"; InvalidArgument
// naming the pool and the field otherwise ("static" pools have none: they never change).
absl::StatusOr<std::unique_ptr<NodeProvider>> MakeNodeProvider(const NodePool& pool,
                                                               const LocalProviderOptions* local,
                                                               const JoinInfo& join);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_NODE_PROVIDER_H_
