// The --log-level and --log-format flags every daemon takes (gpucloud server, gpucloud agent run
// and serve, gpucloud up), on its CLI11 app, and the log configured from them (core/log.h).
// Header-only, for the daemons' commands (which link CLI11); stateless.
#ifndef GPUCLOUD_CORE_LOG_FLAGS_H_
#define GPUCLOUD_CORE_LOG_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "absl/status/status.h"
#include "core/log.h"

namespace gpucloud::log {

struct Flags {
  std::string level = "info";
  std::string format = "text";
};

inline void AddFlags(CLI::App& app, Flags& flags) {
  app.add_option("--log-level", flags.level,
                 "the least severe records logged: trace, debug, info, warn or error (default "
                 "info)");
  app.add_option("--log-format", flags.format,
                 "text (default) or json (one object per line); the log goes to stderr");
}

// Configures the process's log from parsed flags; InvalidArgument naming the flag otherwise.
inline absl::Status ConfigureFromFlags(const Flags& flags) {
  absl::StatusOr<Options> o = OptionsFromFlags(flags.level, flags.format);
  if (!o.ok()) return o.status();
  Configure(*o);
  return absl::OkStatus();
}

}  // namespace gpucloud::log

#endif  // GPUCLOUD_CORE_LOG_FLAGS_H_
