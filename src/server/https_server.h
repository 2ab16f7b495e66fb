// HttpsServer: the control plane's HTTPS front (Boost.Beast on Asio, OpenSSL, TLS 1.3 only):
// authenticates the bearer token or an agent's client certificate, hands each request to
// RestApi and writes its answer; a watch (GET ...?watch=true&resourceVersion=R
// [&timeoutSeconds=S]) is streamed as newline-delimited JSON events with chunked transfer until
// the timeout (default 300 s) or the client leaves.
// GET /metrics (with a token) serves the API's Prometheus metrics (ApiMetrics); GET /healthz
// (without) answers "ok"; /ui/ (without) serves the web console's files (console_assets.h).
// An interactive session (GET .../jobs/{name}/exec|portforward, an agent's nodes/{n}/tunnel and
// nodes/{n}/sessions/{id}) is decided by the API and then upgraded to a WebSocket that
// SessionRelay serves (session_relay.h); it counts as one of its tenant's streams.
// Keep-alive supported; Start returns once it listens.
//
// Asynchronous (Asio's C++20 coroutines): a connection costs a socket, a coroutine and a timer,
// not a thread. A few I/O threads (`io_threads`) run every connection; the blocking work (the
// API and the store) runs on one of four pools of `handler_threads`: nodes', admins', tenants'
// and one for the reads of agents' and admins' watches and followed logs, so that neither a
// tenant's flood, nor an admin's slow writes, nor hundreds of watch reads on a slow store (etcd
// under load) can delay an agent's heartbeat. Watches and
// followed logs wait for news on a timer that a WakeupFeed cancels: a watch only when a change
// falls under its prefix (the feed reads the change log once for all watches), and a quiet
// watch's bookmark needs no read of the store. Threads are independent of the number of
// connections.
//
// Bounds, for clients that are careless or hostile (Options): at most `max_connections` open
// connections (more are closed at once); a TLS handshake must finish within
// `handshake_timeout`, a request (idle time before it included) arrive within `read_timeout`,
// and every write finish within `write_timeout`, or the connection is closed. A header over
// `max_header_bytes` is answered 431, a body over kMaxBodyBytes 413, plain HTTP on the TLS port
// 400, a request the parser rejects 400. A tenant (neither admin, node nor bootstrap token)
// has at most `max_requests_per_tenant` requests and `max_streams_per_tenant` watches or
// followed logs in flight, and makes `tenant_requests_per_second` on average (bursts of
// `tenant_request_burst`); more are answered 429 with Retry-After, so one tenant's flood
// cannot take the threads and the store that agents' heartbeats need. An exception thrown while
// serving a request is that request's 500 (logged), never the process's end. A failed accept (out
// of descriptors) is logged and retried with back-off. Thread-safe; Stop (or the destructor) closes
// the listener and waits for the connections.
#ifndef GPUCLOUD_SERVER_HTTPS_SERVER_H_
#define GPUCLOUD_SERVER_HTTPS_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/audit_log.h"
#include "server/credentials.h"
#include "server/log_store.h"
#include "server/node_certs.h"
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
    // Nodes' client certificates (mutual TLS): with `node_certs`, a client may present a
    // certificate signed by the CA at `client_ca_path`; a request without a bearer token is
    // then the node that certificate names, if NodeCertificates still knows it.
    NodeCertificates* node_certs = nullptr;
    std::string client_ca_path;
    // The audit log (audited_store.h): every request but /healthz gets a record, and its id as
    // the answer's `Audit-Id` header; the API's Txns commit with it. Optional.
    AuditLog* audit = nullptr;
    int max_connections = 4096;
    absl::Duration handshake_timeout = absl::Seconds(10);
    absl::Duration read_timeout = absl::Seconds(60);
    absl::Duration write_timeout = absl::Seconds(60);
    size_t max_header_bytes = 32 << 10;
    int max_requests_per_tenant = 32;
    // Each tenant's request rate (a token bucket; admins and nodes exempt; 0: no limit).
    double tenant_requests_per_second = 50;
    double tenant_request_burst = 200;
    int max_streams_per_tenant = 16;
    // Where the server says what went wrong (a request's exception, accept errors); stderr if
    // unset. Called from any connection's thread.
    std::function<void(const std::string&)> log;
    // Threads that run the connections' I/O (0: one per core, 2 to 8), and threads for blocking
    // calls into the API, in each of four pools: nodes', admins', tenants' and non-tenant streams'.
    int io_threads = 0;
    int handler_threads = 8;
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
