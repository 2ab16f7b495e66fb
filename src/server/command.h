// `gpucloud server`: the control plane, as far as it goes today — the durable store behind the
// HTTPS REST API.
//   gpucloud server --data-dir DIR [--listen HOST:PORT]
// On first start it creates DIR with a CA, a server certificate and an admin token (printed
// once, and written for gpuctl to DIR/admin.config, mode 0600). It prints the URL it serves and
// runs until SIGINT or SIGTERM. Exit codes: 0 after a signal, 1 on a startup error, 2 usage.
#ifndef GPUCLOUD_SERVER_COMMAND_H_
#define GPUCLOUD_SERVER_COMMAND_H_

#include <iosfwd>

namespace gpucloud::server {

int RunServer(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_COMMAND_H_
