// `gpuctl completion bash|zsh`: a shell completion script made from the command tree itself
// (CLI11's subcommands and options), so that it never falls behind the commands: the command
// words, each command's subcommands and flags, and the resource types after get, delete and
// describe. zsh loads the bash function through bashcompinit. Pure functions.
#ifndef GPUCLOUD_CLI_COMPLETION_H_
#define GPUCLOUD_CLI_COMPLETION_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

// InvalidArgument for a shell other than bash and zsh.
absl::StatusOr<std::string> CompletionScript(const CLI::App& app, std::string_view shell);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_COMPLETION_H_
