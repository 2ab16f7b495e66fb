// gpuctl's commands for Secrets (docs/secrets.md), with kubectl's syntax:
//   create secret generic NAME [-n NS] [--from-literal=KEY=VALUE]... [--from-file=[KEY=]PATH]...
//                         [--type T] [--dry-run]
//   create secret docker-registry NAME [-n NS] [--docker-server=HOST[:PORT]]
//                         --docker-username=U --docker-password=P [--docker-email=E] [--dry-run]
//   describe secret NAME [-n NS]        its type, keys and sizes: never a value
// and the table of `get secrets` (NAME TYPE DATA AGE); get and delete themselves are
// object_commands.h's. The server never answers a value, so nothing here prints one except
// --dry-run, which prints the request the user's own flags make (as kubectl --dry-run -o yaml).
// Flag errors (a literal without '=', an unreadable file, a key given twice, a bad key) are
// refused before anything is sent; messages name the flag and key, never a value.
// Building the request is pure (files are read through a ReadFileFn); SecretCommands is
// thread-compatible (it holds the flags CLI11 writes), the free functions are reentrant.
#ifndef GPUCLOUD_CLI_SECRET_COMMANDS_H_
#define GPUCLOUD_CLI_SECRET_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/remote.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

inline constexpr std::string_view kSecretTypeOpaque = "Opaque";
inline constexpr std::string_view kSecretTypeDockerConfigJson = "kubernetes.io/dockerconfigjson";
inline constexpr std::string_view kDockerConfigJsonKey = ".dockerconfigjson";
// Docker Hub, as kubectl names it when --docker-server is not given.
inline constexpr std::string_view kDefaultDockerServer = "https://index.docker.io/v1/";
// The most a Secret holds, all values together (the server's limit).
inline constexpr size_t kMaxSecretFileBytes = 1 << 20;

// --- Pure parts -----------------------------------------------------------------------------

// A file's bytes, or an error naming the path and why (a read error, a directory, too large).
using ReadFileFn = std::function<absl::StatusOr<std::string>(const std::string& path)>;
// Reads a regular file of at most kMaxSecretFileBytes.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

struct GenericSecretOptions {
  std::string name, ns, type = std::string(kSecretTypeOpaque);
  std::vector<std::string> literals;  // KEY=VALUE
  std::vector<std::string> files;     // [KEY=]PATH; KEY defaults to PATH's base name
};
// The body of POST .../secrets: every value (literal or file bytes) in `data`, base64.
// InvalidArgument naming the flag for a literal without '=', an empty KEY or PATH, a key that
// is not 1 to 253 of [-._a-zA-Z0-9] (not . or ..), a key given twice, or a file `read`
// refuses. No value at all is a secret with no keys, as kubectl allows. Messages never hold a
// value.
absl::StatusOr<nlohmann::ordered_json> GenericSecretBody(const GenericSecretOptions& o,
                                                         const ReadFileFn& read);

struct DockerRegistryOptions {
  std::string name, ns, server = std::string(kDefaultDockerServer), username, password, email;
};
// The .dockerconfigjson value byte for byte as kubectl writes it (Go's json.Marshal):
// {"auths":{"SERVER":{"username":U,"password":P,"email":E,"auth":base64(U:P)}}}, empty fields
// left out, and <, >, &, U+2028 and U+2029 escaped as \u003c ... as Go escapes them.
std::string DockerConfigJson(const std::string& server, const std::string& username,
                             const std::string& password, const std::string& email);
// The body of POST .../secrets: type kubernetes.io/dockerconfigjson; InvalidArgument for an
// empty --docker-server, --docker-username or --docker-password.
absl::StatusOr<nlohmann::ordered_json> DockerRegistrySecretBody(const DockerRegistryOptions& o);

// `get secrets`: NAME TYPE DATA AGE (NAMESPACE first with `with_namespace`), as kubectl; DATA is
// the number of keys (status.data), AGE from metadata.creationTimestamp at `now_ms`.
void PrintSecretsTable(const std::vector<nlohmann::json>& secrets, bool with_namespace,
                       int64_t now_ms, std::ostream& out);
// `describe secret`, as kubectl prints it: name, namespace, labels, type, then each key and its
// size in bytes.
void PrintSecretDescription(const nlohmann::json& secret, std::ostream& out);

// --- Commands -------------------------------------------------------------------------------

// gpuctl describe secret NAME: GET the secret and print its description.
int DescribeSecret(const CallFn& call, const std::string& ns, const std::string& name,
                   std::ostream& out, std::ostream& err);

// Declares `secret generic` and `secret docker-registry` under `create` (the `create` command
// IamCommands declares) and runs the one that was parsed. The object must outlive
// app.parse(): CLI11 writes the flags into it.
class SecretCommands {
 public:
  explicit SecretCommands(CLI::App& create);
  SecretCommands(const SecretCommands&) = delete;
  SecretCommands& operator=(const SecretCommands&) = delete;

  bool parsed() const;
  // `connect` gives the transport (nullopt: it has said why on `err`); called only once the
  // flags are checked and the files read, and not at all with --dry-run.
  int Run(const std::function<std::optional<CallFn>()>& connect, std::ostream& out,
          std::ostream& err);

 private:
  struct Flags;
  std::shared_ptr<Flags> flags_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_SECRET_COMMANDS_H_
