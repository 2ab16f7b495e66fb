// `gpucloud agent`: the node agent's command. This build has the offline subcommands
//   gpucloud agent discover [--simulate SPEC] [--nvml-library PATH]   the node's GPUs, as JSON
//   gpucloud agent metrics  [--simulate SPEC] [--nvml-library PATH]   one dcgm-exporter scrape
//   gpucloud agent serve    [--listen HOST:PORT] [...]    /metrics over HTTP until SIGTERM
// Without --simulate it loads NVML; a machine without the driver is reported in one line on
// standard error and has no GPUs. Exit codes: 0 done, 1 GPU backend error, 2 usage error.
// Reentrant.
#ifndef GPUCLOUD_AGENT_COMMAND_H_
#define GPUCLOUD_AGENT_COMMAND_H_

#include <iosfwd>

namespace gpucloud::agent {

int RunAgent(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_COMMAND_H_
