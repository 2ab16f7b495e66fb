// The parts of gpuctl's command line that are about gpuctl itself: an unknown command's
// "did you mean" (exit 2, as kubectl), and `gpuctl version` (the client's, and the server's from
// GET /version when it can be reached). Reentrant.
#ifndef GPUCLOUD_CLI_USAGE_H_
#define GPUCLOUD_CLI_USAGE_H_

#include <iosfwd>
#include <optional>
#include <string>

#include "api/client.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

inline constexpr std::string_view kClientVersion = "v0.1.0";

// When the command word of argv (the first argument that is neither an option of `app` nor an
// option's value) is not one of app's subcommands: says
//   gpuctl: unknown command "gett" for "gpuctl"; did you mean "get"?
// on `err` and returns kExitUsage. nullopt otherwise (no command word at all included: CLI11's
// own message says one is required).
std::optional<int> RefuseUnknownCommand(const CLI::App& app, int argc, const char* const* argv,
                                        std::ostream& err);

// "Client Version: v0.1.0", then (unless `client_only`) "Server Version: ..." from GET /version
// (its gitVersion), or an error line and kExitInvalid when the server cannot say.
int Version(const std::optional<api::Client>& client, bool client_only, std::ostream& out,
            std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_USAGE_H_
