// gpuctl's identity and policy commands (issue 14), against the server's API under
// /apis/gpucloud/v1 (users, groups, tokens, policies, whoami, authorize):
//   create user NAME [--group G]... [--policy P]... [--namespace NS]
//   create group NAME [--policy P]...
//   create policy -f FILE [--name N]   (checked here first, as strictly as the server does)
//   create token --user U | --service-account NS/NAME [--ttl 30d] [--name N] [-o json]
//   create namespace NAME [--owner USER] [-l KEY=VALUE]...
//   create serviceaccount NAME -n NS [--policy P]...
//   get users|groups|tokens|policies [NAME] [-o table|json|yaml]   (through `gpuctl get`)
//   revoke token NAME
//   attach|detach policy P --user U | --group G   (read, change spec.policies, PUT with the
//                                                  resourceVersion read; redone on a 409)
//   whoami [-o json]
//   auth can-i VERB RESOURCE [NAME] [-n NS] [--gpu-type T] [--gpus N] [--mig-profile P]
//              [--queue Q] [--as USER]          yes (exit 0) or no (exit 1), and the statement
//   policy simulate --policy FILE... --action A --resource R [--context KEY=VALUE]...
//                   [--user NAME] [--group G]...  local (no server), exit 0 allow, 1 deny
// The commands reach the server through a CallFn (api::Client::Call in gpuctl, a fake in tests);
// the parsing, mapping and formatting below are pure. IamCommands is thread-compatible (it
// holds the flags CLI11 writes); the free functions are reentrant.
#ifndef GPUCLOUD_CLI_IAM_COMMANDS_H_
#define GPUCLOUD_CLI_IAM_COMMANDS_H_

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/client.h"
#include "api/paths.h"
#include "cli/remote.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

inline constexpr std::string_view kApiRoot = api::kApiRoot;

// --- Pure parts -----------------------------------------------------------------------------

// Whether `gpuctl get RESOURCE` is one of these commands' (users, groups, tokens, policies and
// their singular forms).
bool IsIamResource(std::string_view resource);
// A token lifetime as the server takes it: a positive whole number and m, h or d ("90m",
// "12h", "30d"). InvalidArgument saying so otherwise.
absl::Status ValidateTtl(std::string_view ttl);

struct CanIRequest {
  std::string verb;      // "create", "get", "list", "drain", ...
  std::string resource;  // "jobs", "job", "nodes", "nodepools", "audit", ...
  std::string name;      // empty: the collection (or, for audit and cluster, "default")
  std::string namespace_;
};
// The IAM action and resource of `kubectl auth can-i`-style words: ("create", "jobs", "",
// "team-a") -> ("jobs:Create", "gpucloud:job/team-a/*"). The verb may be written in any case
// and with '-' between words ("get-assignments"). InvalidArgument for an unknown resource or a
// verb the resource has no action for (naming the verbs it has).
struct ActionAndResource {
  std::string action;
  std::string resource;
};
absl::StatusOr<ActionAndResource> MapVerbAndResource(const CanIRequest& request);

// The body of POST users / groups / tokens.
nlohmann::json UserBody(const std::string& name, const std::vector<std::string>& groups,
                        const std::vector<std::string>& policies, const std::string& namespace_);
nlohmann::json GroupBody(const std::string& name, const std::vector<std::string>& policies);
// The body of POST namespaces (`owner`: a user's name, "" for none; `labels` KEY=VALUE, checked
// by the server) and of POST namespaces/NS/serviceaccounts.
nlohmann::json NamespaceBody(const std::string& name, const std::string& owner,
                             const std::map<std::string, std::string>& labels);
nlohmann::json ServiceAccountBody(const std::string& name, const std::string& namespace_,
                                  const std::vector<std::string>& policies);
// `subject` is "user" or "serviceAccount" (NS/NAME); empty ttl and name are left out.
nlohmann::json TokenRequestBody(const std::string& subject, const std::string& who,
                                const std::string& ttl, const std::string& name);
// The lines printed for a new token (its secret, once, and a line saying it is not shown
// again); InvalidArgument when `answer` is not a Token with status.token.
absl::StatusOr<std::string> FormatNewToken(const nlohmann::json& answer);
// Adds (attach) or removes (detach) `policy` in object.spec.policies; false when there was
// nothing to do (already attached, or not attached).
bool ChangePolicies(nlohmann::json& object, const std::string& policy, bool attach);
// The table of `get users|groups|tokens|policies`; `resource` as IsIamResource takes it.
void PrintIamTable(std::string_view resource, const std::vector<nlohmann::json>& items,
                   std::ostream& out);
// whoami's answer, one "field: value" line each.
std::string FormatWhoami(const nlohmann::json& answer);
// The second line of can-i and simulate: "allowed by policy p, statement 0 (Sid S)",
// "denied by policy ...", or "denied: no statement allows it (implicit deny)".
std::string DecisionLine(bool allowed, const std::string& policy, const std::string& sid,
                         int statement_index);

// --- Commands -------------------------------------------------------------------------------

// gpuctl get users|groups|tokens|policies [NAME] with -o table|json|yaml.
int GetIamObjects(const CallFn& call, const std::string& resource, const std::string& name,
                  const std::string& format, std::ostream& out, std::ostream& err);

struct SimulateOptions {
  std::vector<std::string> policy_files;
  std::string action, resource, user;
  std::vector<std::string> context;  // KEY=VALUE
  std::vector<std::string> groups;
};
// gpuctl policy simulate: reads the files from disk; exit 0 allow, 1 deny or bad input, 2 bad
// flags (an unknown action, a malformed resource or context entry).
int SimulatePolicies(const SimulateOptions& o, std::ostream& out, std::ostream& err);

// Declares the commands above (but `get`) on `app` and runs the one that was parsed. The
// object must outlive app.parse(): CLI11 writes the flags into it.
class IamCommands {
 public:
  explicit IamCommands(CLI::App& app);
  IamCommands(const IamCommands&) = delete;
  IamCommands& operator=(const IamCommands&) = delete;

  // Whether app.parse() chose one of these commands.
  bool parsed() const;
  // Runs it; `connect` gives the transport (nullopt: it has said why on `err`) and is called
  // only by commands that need the server. Returns the exit code.
  int Run(const std::function<std::optional<CallFn>()>& connect, std::ostream& out,
          std::ostream& err);

 private:
  struct Flags;
  std::optional<int> CheckFlags(nlohmann::json& authorize, std::ostream& err) const;
  std::shared_ptr<Flags> flags_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_IAM_COMMANDS_H_
