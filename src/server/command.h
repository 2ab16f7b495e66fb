// `gpucloud server`: the control plane — the durable store behind the HTTPS REST API, the
// controller loop (nodes, jobs, the scheduler) and the logs.
//   gpucloud server [--data-dir DIR] [--listen HOST:PORT] [--scheduler-config FILE]
//                   [--heartbeat-timeout S] [--grace S] [--checkpoint-root DIR]
// On first start it creates DIR with a CA, a server certificate, an admin token (written for
// gpuctl to DIR/admin.config, mode 0600) and the agents' bootstrap token (DIR/bootstrap.token).
// It prints the URL it serves and runs until SIGINT or SIGTERM. Exit codes: 0 after a signal,
// 1 on a startup error, 2 usage.
#ifndef GPUCLOUD_SERVER_COMMAND_H_
#define GPUCLOUD_SERVER_COMMAND_H_

#include <iosfwd>
#include <string>

#include "absl/status/statusor.h"
#include "core/sched_config.h"

namespace gpucloud::server {

int RunServer(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// A file holding one SchedulerConfiguration; InvalidArgument naming the file and document.
absl::StatusOr<SchedulerConfig> LoadSchedulerConfig(const std::string& path);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_COMMAND_H_
