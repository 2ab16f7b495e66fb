// What gpuctl's server commands share: connecting with the client config, sending a request
// and turning a failure into one clear line. Functions are reentrant.
#ifndef GPUCLOUD_CLI_REMOTE_H_
#define GPUCLOUD_CLI_REMOTE_H_

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "api/client.h"

namespace gpucloud::cli {

// The message of a Kubernetes Status answer, or the body.
std::string StatusMessage(const api::HttpResponse& r);
// A client from the config; on failure says why on `err` and returns nullopt.
std::optional<api::Client> Connect(const std::string& config_flag, std::ostream& err);
// The answer when the request went through with a 2xx status; otherwise says why on `err`
// (prefixed with `what` when given) and returns nullopt.
std::optional<api::HttpResponse> Send(const api::Client& client, std::string_view method,
                                      const std::string& path, const std::string& body,
                                      std::ostream& err, const std::string& what = "");

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_REMOTE_H_
