// HttpsServer: the control plane's HTTPS front (Boost.Beast on Asio, OpenSSL, TLS 1.3 only):
// authenticates the bearer token, hands each request to RestApi and writes its answer; a watch
// (GET ...?watch=true&resourceVersion=R[&timeoutSeconds=S]) is streamed as newline-delimited
// JSON events with chunked transfer until the timeout (default 300 s) or the client leaves.
// GET /metrics (with a token) serves the API's Prometheus metrics (ApiMetrics); GET /healthz
// (without) answers "ok". One thread per connection (keep-alive supported); Start returns once
// it listens.
// Thread-safe; Stop (or the destructor) closes the listener and waits for the connections.
#ifndef GPUCLOUD_SERVER_HTTPS_SERVER_H_
#define GPUCLOUD_SERVER_HTTPS_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/credentials.h"
#include "server/log_store.h"
#include "server/rest.h"
#include "store/store.h"

namespace gpucloud::server {

class HttpsServer {
 public:
  struct Options {
    std::string address = "127.0.0.1";
    uint16_t port = 0;  // 0: any free port
    std::string cert_path;
    std::string key_path;
    // Appended to /metrics (the cluster's gauges from the controller).
    std::function<std::string()> extra_metrics;
    // For followed logs (GET .../logs?follow=true): waits for appends. Optional.
    LogStore* logs = nullptr;
  };
  // Borrows everything; all must outlive the server.
  HttpsServer(RestApi& api, const TokenBook& tokens, store::Store& store, Options options);
  ~HttpsServer();
  absl::Status Start();
  uint16_t port() const;
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_HTTPS_SERVER_H_
