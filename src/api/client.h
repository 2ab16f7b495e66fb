// The API client gpuctl (and later the agent) uses: HTTPS to the control plane, verifying the
// server against the CA in the client config, with a bearer token. Config file (like a
// kubeconfig), from --config, $GPUCLOUD_CONFIG or ~/.gpucloud/config:
//   server: https://127.0.0.1:8443
//   certificate-authority: /path/to/ca.crt
// `server` may name several servers of one control plane (an HA control plane on etcd), as a
// YAML list or separated by commas ("https://a:8443,https://b:8443"): the client talks to one
// at a time and fails over to the next (see Client::Call).
//   token: 64-hex-digit token
// or, instead of the token, a client certificate (mutual TLS):
//   client-certificate: /path/to/node.crt
//   client-key: /path/to/node.key
// The paths of objects (ObjectPath) follow the server's REST API.
// Not thread-safe, const methods included: Call is const (a request does not change what the
// client talks to) yet reuses, opens and drops the one kept-alive connection the client holds,
// so two threads must not use one Client at once; Stream, which opens a connection of its own
// each time, may move the client to another server. Give each thread its own copy: a copy
// shares nothing (it starts without a connection, with the server the original was on).
#ifndef GPUCLOUD_API_CLIENT_H_
#define GPUCLOUD_API_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "manifest/manifest.h"

namespace gpucloud::api {

struct ServerAddress {
  std::string host;
  int port = 443;
  bool operator==(const ServerAddress&) const = default;
};

struct ClientConfig {
  std::string host;  // the first server
  int port = 443;
  std::string ca_path;
  std::string token;  // sent as "Authorization: Bearer" when not empty
  // A client certificate and its key (PEM files; an agent's node certificate): presented in the
  // TLS handshake when set. A Client reconnects when the certificate file is replaced (renewed).
  std::string cert_path;
  std::string key_path;
  // Further servers of the same control plane, tried in this order after the first (all share
  // the CA and the credentials above).
  std::vector<ServerAddress> more_servers;
  // How long a sent request may wait for the answer's first byte (a stream: for its head).
  int answer_seconds = 30;
  // How long a connection may take to be accepted, then to finish its TLS handshake: a dead
  // machine, or one cut off, must not hold the caller long before the next server is tried.
  int connect_seconds = 3;
  int handshake_seconds = 5;
};

// Reads a config file; InvalidArgument naming the file and the missing or bad field.
absl::StatusOr<ClientConfig> LoadClientConfig(const std::string& path);
// The same from text; `path` names the source in errors.
absl::StatusOr<ClientConfig> ParseClientConfig(const std::string& text, const std::string& path);
// --config if given, else $GPUCLOUD_CONFIG, else ~/.gpucloud/config.
std::string DefaultConfigPath(const std::string& flag);

struct HttpResponse {
  int status = 0;
  std::string body;
};

struct Connection;

class Client {
 public:
  explicit Client(ClientConfig config);
  ~Client();
  Client(const Client& other);
  Client& operator=(const Client&) = delete;
  const ClientConfig& config() const { return config_; }
  // The server the client talks to now (the one that last answered, or the next to try).
  ServerAddress server() const;
  // Talks with `config` from now on (a new connection).
  void SetConfig(ClientConfig config);
  // One request (on a kept-alive connection); Unavailable when the server cannot be reached
  // (no TCP connection within 3 s, no TLS handshake within 5 s: a dead or frozen server costs
  // seconds, not minutes), does not answer within config.answer_seconds, or its certificate is
  // not signed by the configured CA.
  // With several servers, the client keeps to the one that last answered, and moves on to the
  // next (in the config's order, round) when that one cannot be reached, or answers 503 (a
  // standby that does not take this request, or a server that lost its store); it gives up once
  // each was tried, with the last error or 503. A request that was sent and got no answer is
  // sent to the next server only when it is idempotent (GET, HEAD, PUT, DELETE): a POST may
  // have been carried out, and comes back as Unavailable.
  absl::StatusOr<HttpResponse> Call(std::string_view method, const std::string& target,
                                    const std::string& body = "") const;
  // GET `target` (a watch) and hand each newline-delimited line of the streamed answer to
  // `on_line` as it arrives, until the server ends the stream. A non-200 answer comes back as
  // its HttpResponse (with the whole body); a 200 stream as status 200 with an empty body.
  // With `idle_seconds` > 0, a stream silent for that long ends as Unavailable (a partition;
  // ask for bookmarks so that a healthy one is never silent). With `cancel`, the stream ends
  // after the first line that arrives once it is set.
  // Fails over as Call does until a server answers 200; a stream that then ends or breaks is
  // the caller's to open again (from its last revision), which starts with the same server,
  // or with the next one when the stream went silent.
  absl::StatusOr<HttpResponse> Stream(const std::string& target,
                                      const std::function<void(const std::string&)>& on_line,
                                      int idle_seconds = 0,
                                      const std::atomic<bool>* cancel = nullptr) const;

 private:
  ClientConfig config_;
  void FailOver() const;
  absl::StatusOr<HttpResponse> CallOne(std::string_view method, const std::string& target,
                                       const std::string& body, bool* sent) const;
  absl::StatusOr<HttpResponse> StreamOne(const std::string& target,
                                         const std::function<void(const std::string&)>& on_line,
                                         int idle_seconds, const std::atomic<bool>* cancel,
                                         bool* streaming) const;
  // Kept alive between Calls. Mutable: the connection is a cache, not part of what the client
  // is (its config), so Call stays const; this is why const methods are not thread-safe here.
  mutable std::unique_ptr<Connection> conn_;
  // Which server conn_ is (or will be) to: 0 is {host, port}, i > 0 is more_servers[i - 1].
  mutable size_t current_ = 0;
};

// "/apis/gpucloud/v1/namespaces/{ns}/jobs/{name}" and the like for an object; `collection`
// leaves the name out.
std::string ObjectPath(const manifest::Object& object, bool collection = false);
// The collection of `resource` ("jobs", "queues", "nodepools"; singular forms and "job" too),
// or "" for an unknown resource.
std::string CollectionPath(std::string_view resource, const std::string& namespace_);

}  // namespace gpucloud::api

#endif  // GPUCLOUD_API_CLIENT_H_
