// What a task's secret references resolve to (docs/secrets.md, "Secrets in tasks"). The node
// that runs a task asks for its values just before it starts it (GET api::TaskSecretsPath);
// ResolveTaskSecrets is the decision, a pure function over a lookup of the namespace's
// Secrets, so the values exist only in that answer: never in a job, an assignment, a log, an
// event or the audit log. Thread-safe (pure).
#ifndef GPUCLOUD_SERVER_TASK_SECRETS_H_
#define GPUCLOUD_SERVER_TASK_SECRETS_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "api/wire.h"

namespace gpucloud::server {

inline constexpr char kDockerConfigJsonType[] = "kubernetes.io/dockerconfigjson";
inline constexpr char kDockerConfigJsonKey[] = ".dockerconfigjson";
// Linux's limit on one "NAME=value" string handed to exec (MAX_ARG_STRLEN).
inline constexpr size_t kMaxEnvStringBytes = 128 * 1024;

struct RevealedSecret {
  std::string type;  // "Opaque", kDockerConfigJsonType
  std::map<std::string, std::string> values;
};

// A Secret of the assignment's namespace by name: NotFound when there is none; any other
// error is passed on as it is.
using SecretLookup = std::function<absl::StatusOr<RevealedSecret>(const std::string& name)>;

// The values `a` refers to:
//  - env: every key of each envFrom secret (prefix + key; a later one wins), less the names
//    the task's plain env sets (it wins over envFrom, as in Kubernetes), then each secretEnv
//    variable. The node applies the plain env, then this map.
//  - files: each secret volume's keys (all, or its items under their paths), in volume order.
//  - pull_auth: the imagePullSecrets' `auths` merged, the first secret naming a registry
//    winning, as {"auths": {...}}; "" when it names none.
// A missing secret or key that is `optional` is left out (an optional volume is empty).
// Otherwise FailedPrecondition, its message starting "CreateContainerConfigError: " and naming
// the secret and key (`secret "db" not found`, `secret "db" has no key "password"`, a pull
// secret of another type, a value too long for an environment variable); the lookup's other
// errors are passed on with the secret named.
absl::StatusOr<api::TaskSecrets> ResolveTaskSecrets(const api::Assignment& a,
                                                    const SecretLookup& lookup);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_TASK_SECRETS_H_
