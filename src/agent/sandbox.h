// Where a task lives on its node and as whom it runs (docs/agent.md, "Isolation").
//
// Every task runs as an unprivileged user: its namespace's (NamespaceUid, the same on every
// node, so a job's shared checkpoint directory has one owner), or the runAsUser/runAsGroup of
// its securityContext when it has an image. Root only where the operator allows it.
//
// What a task may touch, under the agent's state directory (0711: others may pass through, not
// list), whose own files (task records, logs, exit records) stay in 0700 directories:
//   sandbox/<task id>/                  0700, the task's: its scratch space, HOME, TMPDIR, the
//                                       hostfile; the default working directory
//   checkpoints/<namespace>/<job>/      0700, the task's: node-local checkpoints
// and the job's own checkpoint directory under the server's checkpoint root, made 0700 and the
// task's. Directories leading there that the agent creates are 0711. A host process starts in
// one of these (or the operator's --workdir) and, as its own user, can write nowhere else of the
// node's it is not given; a container sees only these, mounted.
// Pure functions, but for the directory functions at the end (file system I/O; the agent's
// user). Thread-safe.
#ifndef GPUCLOUD_AGENT_SANDBOX_H_
#define GPUCLOUD_AGENT_SANDBOX_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::agent {

// The user (and group) a namespace's tasks run as by default: 1,000,000,000 plus a hash of the
// name, below 1,100,000,000 — clear of login users and of the subordinate ranges rootless
// containers use. Two namespaces share one only by a hash collision (about 1 in 10^8 a pair).
uid_t NamespaceUid(std::string_view ns);

struct TaskIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
};

// As whom a task runs: its securityContext's user and group when it has an image, else its
// namespace's. InvalidArgument naming the field for root without `allow_root`, and for a
// runAsUser or runAsGroup on a host process that is not its namespace's (as another user or
// group a host process could read what is theirs: another namespace's files, a disk device).
absl::StatusOr<TaskIdentity> ResolveTaskIdentity(std::string_view ns, bool has_image,
                                                 std::optional<int64_t> run_as_user,
                                                 std::optional<int64_t> run_as_group,
                                                 bool allow_root);

// A host process's working directory: `requested` ("" = `operator_default`, or the sandbox
// when that is ""); a relative one inside the sandbox; an absolute one only inside the sandbox,
// the checkpoint directory or the operator's --workdir. InvalidArgument naming
// spec.tasks[].workingDir otherwise ("..", or a path of the host's).
absl::StatusOr<std::string> ResolveHostWorkdir(const std::string& requested,
                                               const std::string& sandbox,
                                               const std::string& checkpoint_dir,
                                               const std::string& operator_default);

// Whether `path` lies inside `dir` (lexically, after normalisation; `dir` itself counts).
bool PathInside(const std::string& path, const std::string& dir);

// The agent's STATE_DIR: 0711, so that tasks reach their sandboxes and node-local checkpoints
// through it, with the agent's own records, logs, exit files and pull credentials in 0700
// directories (tasks/, logs/, run/, pull/). With `for_other_users` (tasks run as other users),
// every directory above it must let others pass: FailedPrecondition naming the one that does not.
// Internal on I/O errors.
absl::Status PrepareStateDir(const std::string& state_dir, bool for_other_users);

// Opens `dir` (a descriptor the caller closes), creating it 0700 and the missing directories
// above it 0711, all root's. Walks it a component at a time and follows no symbolic link that is
// not root's: a task that owns a directory on the way (a job's checkpoint directory holding
// another's) cannot send the agent elsewhere. Internal naming the path on failure.
absl::StatusOr<int> OpenTaskDir(const std::string& dir);

// Makes the directory open at `fd` 0700 and the identity's (fchown: whatever its path names by
// now). Internal naming `dir` on failure.
absl::Status GiveTaskDir(int fd, const std::string& dir, const TaskIdentity& id);

// Removes a task's directory: its contents as the directory's owner, the task's user (in a child
// process that became it, so a link the task left there, or one it plants meanwhile, reaches only
// what is its own), then the directory itself. Nothing when there is none. Best effort.
// `shim`: gpucloud-shim's path; the child is then that program (--remove-contents), started
// with posix_spawn, instead of a fork of the caller (which copies a large agent's page tables
// and costs it copy-on-write faults afterwards). "" forks.
// The child gets `timeout_ms` (< 0: no bound): one still at it then (a hung file system, a
// tree the task grows as fast as it goes) is killed and the rest left, so that a caller (the
// agent's janitor thread, its shutdown) never waits for ever; the directory stays for the next
// try. Returns false when the removal was cut off so.
inline constexpr int kRemoveTaskDirTimeoutMs = 10 * 60 * 1000;
bool RemoveTaskDir(const std::string& dir, const std::string& shim = "",
                   int timeout_ms = kRemoveTaskDirTimeoutMs);

// OpenTaskDir then GiveTaskDir.
absl::Status PrepareTaskDir(const std::string& dir, const TaskIdentity& id);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_SANDBOX_H_
