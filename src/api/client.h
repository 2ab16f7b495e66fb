// The API client gpuctl (and later the agent) uses: HTTPS to the control plane, verifying the
// server against the CA in the client config, with a bearer token. Config file (like a
// kubeconfig), from --config, $GPUCLOUD_CONFIG or ~/.gpucloud/config:
//   server: https://127.0.0.1:8443
//   certificate-authority: /path/to/ca.crt
//   token: 64-hex-digit token
// The paths of objects (ObjectPath) follow the server's REST API. Thread-compatible.
#ifndef GPUCLOUD_API_CLIENT_H_
#define GPUCLOUD_API_CLIENT_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace gpucloud::api {

struct ClientConfig {
  std::string host;
  int port = 443;
  std::string ca_path;
  std::string token;
};

// Reads a config file; InvalidArgument naming the file and the missing or bad field.
absl::StatusOr<ClientConfig> LoadClientConfig(const std::string& path);
// --config if given, else $GPUCLOUD_CONFIG, else ~/.gpucloud/config.
std::string DefaultConfigPath(const std::string& flag);

struct HttpResponse {
  int status = 0;
  std::string body;
};

class Client {
 public:
  explicit Client(ClientConfig config) : config_(std::move(config)) {}
  // One request; Unavailable when the server cannot be reached or its certificate is not
  // signed by the configured CA.
  absl::StatusOr<HttpResponse> Call(std::string_view method, const std::string& target,
                                    const std::string& body = "") const;
  // GET `target` (a watch) and hand each newline-delimited line of the streamed answer to
  // `on_line` as it arrives, until the server ends the stream. A non-200 answer comes back as
  // its HttpResponse (with the whole body); a 200 stream as status 200 with an empty body.
  absl::StatusOr<HttpResponse> Stream(const std::string& target,
                                      const std::function<void(const std::string&)>& on_line) const;

 private:
  ClientConfig config_;
};

// "/apis/gpucloud/v1/namespaces/{ns}/jobs/{name}" and the like for an object; `collection`
// leaves the name out.
std::string ObjectPath(const manifest::Object& object, bool collection = false);
// The collection of `resource` ("jobs", "queues", "nodepools"; singular forms and "job" too),
// or "" for an unknown resource.
std::string CollectionPath(std::string_view resource, const std::string& namespace_);

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_CLIENT_H_
