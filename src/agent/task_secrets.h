// A task's secrets on the node (docs/secrets.md, "Secrets in tasks"): the agent asks the server
// for the values of the task's references just before it starts it (api::TaskSecretsPath; the
// server answers the node the task is assigned to, and only it), keeps them in memory, writes
// the secret volumes' files into the task's sandbox and pulls its image with its pull
// secrets. Until the values come, the task is Starting with the server's reason
// ("CreateContainerConfigError: secret \"db\" not found ...") and is asked for again with
// back-off; it never counts as a failed attempt. Free functions; thread-safe (no shared state).
#ifndef GPUCLOUD_AGENT_TASK_SECRETS_H_
#define GPUCLOUD_AGENT_TASK_SECRETS_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/container.h"
#include "agent/sandbox.h"
#include "api/client.h"
#include "api/wire.h"

namespace gpucloud::agent {

// GETs the values of assignment `a` on node `node`. The error's message is the server's reason
// (FailedPrecondition for a secret that is missing or unusable, Unavailable when the server is
// away, NotFound when the assignment is gone, PermissionDenied when it is another node's).
absl::StatusOr<api::TaskSecrets> FetchTaskSecrets(const api::Client& client,
                                                  const std::string& node,
                                                  const api::Assignment& a);

// Writes the secret volumes' files under the sandbox (open as `sandbox_fd`, still the agent's):
// secrets/VOLUME/FILE, each file 0400 and each directory 0500, all the task user's, created
// without following any link. Every volume of `a` gets its directory, empty when its optional
// secret is missing. Files of volumes `a` does not name are an error.
absl::Status WriteSecretFiles(int sandbox_fd, const api::Assignment& a,
                              const api::TaskSecrets& secrets, const TaskIdentity& id);

// The credentials to pull `a`'s image with: its pull secrets' (scope "NS:name,name") when it
// names any, else the node's.
PullAuth PullAuthOf(const api::Assignment& a, const api::TaskSecrets& secrets);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_TASK_SECRETS_H_
