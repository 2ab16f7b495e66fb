// `gpucloud up`: a whole cluster on one machine, in one command — the control plane (store under
// DATA_DIR, HTTPS on --listen) and one agent for this machine's GPUs (NVML; or simulated ones,
// --simulate, and by default where there is no NVIDIA driver). It prints the URL and how to
// point gpuctl at it, and runs until SIGINT or SIGTERM, when it stops the tasks it started.
//   gpucloud up [--data-dir .gpucloud] [--listen 127.0.0.1:8443] [--simulate 4xH100]
//               [--node-name NAME]
// Exit codes: 0 after a signal, 1 on a startup error, 2 usage.
#ifndef GPUCLOUD_UP_COMMAND_H_
#define GPUCLOUD_UP_COMMAND_H_

#include <iosfwd>

namespace gpucloud::up {

int RunUp(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace gpucloud::up

#endif  // GPUCLOUD_UP_COMMAND_H_
