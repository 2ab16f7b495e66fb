// gpuctl, the user's command-line tool. Offline commands:
//   gpuctl validate -f FILE...   check manifests; print what each object asks for
//   gpuctl convert  -f FILE...   print the normalized gpucloud/v1 form (-o yaml|json)
//   gpuctl catalog               list the GPU types, MIG profiles, speeds and prices
// and commands against the server (config: --config, $GPUCLOUD_CONFIG or ~/.gpucloud/config):
//   gpuctl apply|diff|get|delete ...               as kubectl (cli/object_commands.h)
//   gpuctl version [--client]                       the client's and the server's versions
//   gpuctl run [--gpus N] [--type T] [--replicas R] [--name N] [-n NS] [--queue Q] [--image I]
//              [--dry-run] -- COMMAND ARGS...          submit a job from one line
// and the commands of cli/cluster_commands.h (describe, logs, events, cancel, cordon, top, ...),
// cli/iam_commands.h (create user|group|token|policy, get users|groups|tokens|policies, revoke,
// attach|detach policy, whoami, auth can-i, policy simulate), cli/secret_commands.h (create
// secret generic|docker-registry, describe secret) and cli/audit_commands.h (audit
// verify|query).
// FILE may be a file, a directory (its *.yaml, *.yml and *.json files) or "-" for stdin.
// Exit codes: 0 valid / done, 1 invalid input or an error from the server, 2 usage error (an
// unknown command or resource type, with a "did you mean"; a NAME, JOB, NODE, pool or
// namespace that is not a DNS label too: they go into URL paths). `diff`: 1 when different.
// RunGpuctl is the whole program behind main(); it is reentrant (no global state).
#ifndef GPUCLOUD_CLI_GPUCTL_H_
#define GPUCLOUD_CLI_GPUCTL_H_

#include <iosfwd>

namespace gpucloud::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitUsage = 2;

int RunGpuctl(int argc, const char* const* argv, std::istream& in, std::ostream& out,
              std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_GPUCTL_H_
