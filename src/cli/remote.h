// What gpuctl's server commands share: connecting with the client config, sending a request
// and turning a failure into one clear line. Functions are reentrant.
#ifndef GPUCLOUD_CLI_REMOTE_H_
#define GPUCLOUD_CLI_REMOTE_H_

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/client.h"

namespace gpucloud::cli {

// The message of a Kubernetes Status answer, or the body.
std::string StatusMessage(const api::HttpResponse& r);
// A client from the config; on failure says why on `err` and returns nullopt.
std::optional<api::Client> Connect(const std::string& config_flag, std::ostream& err);
// One request to the server, as api::Client::Call makes it: Unavailable and the like when it
// could not be made, else the answer whatever its status (a fake server's in tests).
using CallFn = std::function<absl::StatusOr<api::HttpResponse>(
    std::string_view method, const std::string& target, const std::string& body)>;
// A CallFn over its own copy of `client`.
CallFn ClientCall(const api::Client& client);
// The answer when the request went through with a 2xx status; otherwise says why on `err`
// ("gpuctl: ", then `what` when given, then the Status message) and returns nullopt.
std::optional<api::HttpResponse> SendRequest(const CallFn& call, std::string_view method,
                                             const std::string& path, const std::string& body,
                                             std::ostream& err, const std::string& what = "");
// The same through `client` (on its kept-alive connection).
std::optional<api::HttpResponse> Send(const api::Client& client, std::string_view method,
                                      const std::string& path, const std::string& body,
                                      std::ostream& err, const std::string& what = "");

// Names go into URL paths, so each is checked to be one DNS label before anything is sent: a
// '/', '?', "%2F" or ".." in one would name another object (`gpuctl get job x/events` printed
// x's events as if they were jobs). (what the usage calls it, the value) pairs; on the first
// bad one, says which and why on `err` and returns false.
bool NamesAreLabels(const std::vector<std::pair<std::string_view, std::string>>& names,
                    std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_REMOTE_H_
