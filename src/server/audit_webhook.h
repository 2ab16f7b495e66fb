// AuditWebhook: exports the audit log (audit_log.h) to an HTTP(S) receiver, at least once, in
// seq order, without ever holding up a request.
// 1. A background thread reads the committed records after the cursor from the log, by seq
//    (AuditLog::ReadAfter: the records are durable in the store, so nothing is queued in memory
//    but the batch in flight), and POSTs up to max_batch of them as one body: the stored lines
//    byte for byte (the Kubernetes audit.k8s.io/v1 Event shape of the file export), one record
//    a line, Content-Type application/x-ndjson. Lines as stored keep the chain: a receiver can
//    verify what it got with the digests (docs/audit.md).
// 2. A 2xx answer acknowledges the whole batch: the cursor (the last acknowledged seq) is
//    written to cursor_path (0600, durable) before the next batch is read. A restart resumes
//    after the cursor, so a receiver sees each record at least once and a record twice only
//    when its batch was sent but not acknowledged (a crash, a lost answer, a non-2xx).
// 3. Anything else (no connection, a timeout, a TLS failure, a non-2xx) is a failure: the same
//    batch is sent again after a back-off that doubles from min_backoff_ms to max_backoff_ms.
// 4. Notify() (from the log's observer) wakes the thread when records are committed; without
//    it the thread looks every poll_ms.
// Thread-safe: Start/Stop from one thread, Notify and the counters from any.
#ifndef GPUCLOUD_SERVER_AUDIT_WEBHOOK_H_
#define GPUCLOUD_SERVER_AUDIT_WEBHOOK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/audit_log.h"

namespace gpucloud::server {

// Where the records go: parsed from --audit-webhook.
struct WebhookUrl {
  bool tls = true;
  std::string host;
  int port = 443;
  std::string target = "/";  // the path and query
};
// https://HOST[:PORT][/PATH]; http:// only to a loopback host (127.0.0.1, [::1], localhost),
// for tests and a receiver on the same machine. InvalidArgument naming what is wrong.
absl::StatusOr<WebhookUrl> ParseWebhookUrl(const std::string& url);

// POSTs one body and returns the HTTP status; Unavailable when no answer came.
using WebhookSender = std::function<absl::StatusOr<int>(const std::string& body)>;

struct WebhookPosterOptions {
  std::string ca_path;  // the CA that signs the receiver's certificate ("": system roots)
  std::string token;    // sent as "Authorization: Bearer" when not empty
  // For each step: the connection, the TLS handshake, the request's write and the whole answer
  // (a receiver that stalls in any of them is given up on). The name lookup is the system
  // resolver's, bounded by its own settings.
  int timeout_seconds = 10;
};
// The real sender: a new connection a POST, TLS 1.2 or later verifying the receiver's
// certificate and host name.
WebhookSender MakeWebhookPoster(WebhookUrl url, WebhookPosterOptions options);

struct AuditWebhookOptions {
  std::string cursor_path;  // where the acknowledged seq is kept (DATA_DIR/audit-webhook.cursor)
  int max_batch = 500;
  int64_t min_backoff_ms = 500;
  int64_t max_backoff_ms = 30'000;
  int64_t poll_ms = 1000;
};

class AuditWebhook {
 public:
  // `log` must outlive this.
  AuditWebhook(AuditLog& log, WebhookSender sender, AuditWebhookOptions options);
  ~AuditWebhook();  // Stop()
  AuditWebhook(const AuditWebhook&) = delete;
  AuditWebhook& operator=(const AuditWebhook&) = delete;

  // Reads the cursor (none: from the start) and starts the thread. InvalidArgument for a cursor
  // file that is not a number.
  absl::Status Start();
  // Ends the thread after the POST in flight, if any (what it sends is not waited for again).
  void Stop();
  // Records were committed: look now.
  void Notify();

  int64_t acked_seq() const { return acked_.load(); }
  int64_t sent() const { return sent_.load(); }          // records acknowledged
  int64_t failures() const { return failures_.load(); }  // POSTs that failed
  int64_t lag() const;                                   // committed records not acknowledged
  // gpucloud_audit_webhook_sent_total, _failures_total and _lag_records (prom_text.h).
  std::string RenderMetrics() const;

 private:
  void Run(std::stop_token stop);
  bool Wait(std::stop_token& stop, int64_t ms, bool wake_on_notify);

  // Constant after construction.
  AuditLog& log_;
  const WebhookSender sender_;
  const AuditWebhookOptions options_;

  std::atomic<int64_t> acked_{0};
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> failures_{0};
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool notified_ = false;  // guarded by mu_
  std::jthread thread_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_AUDIT_WEBHOOK_H_
