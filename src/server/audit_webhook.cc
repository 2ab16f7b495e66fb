#include "server/audit_webhook.h"

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <charconv>
#include <chrono>
#include <fstream>
#include <optional>

#include "core/log.h"
#include "core/private_file.h"
#include "core/prom_text.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost";
}

// Runs one asynchronous operation on `io` to its end and returns its error. Every operation is
// on a beast::tcp_stream whose deadline the caller set: when it passes, the stream is closed and
// the operation ends with beast::error::timeout, whatever the other side does (a receiver that
// stalls in the TLS handshake or halfway through its answer cannot hold the sender).
template <typename Start>
beast::error_code RunOne(asio::io_context& io, Start start) {
  beast::error_code result = asio::error::would_block;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

// The request and its answer over `stream` (a tcp_stream or a TLS stream over one): the write
// and the whole answer each within `timeout`.
template <typename Stream>
absl::StatusOr<int> Exchange(asio::io_context& io, Stream& stream,
                             http::request<http::string_body>& req, std::chrono::seconds timeout) {
  beast::get_lowest_layer(stream).expires_after(timeout);
  beast::error_code ec =
      RunOne(io, [&](auto handler) { http::async_write(stream, req, std::move(handler)); });
  if (ec) return absl::UnavailableError(Cat("write: ", ec.message()));
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  beast::get_lowest_layer(stream).expires_after(timeout);
  ec = RunOne(io, [&](auto handler) { http::async_read(stream, buf, parser, std::move(handler)); });
  if (ec == beast::error::timeout) return absl::UnavailableError("no whole answer in time");
  if (ec) return absl::UnavailableError(Cat("read: ", ec.message()));
  return static_cast<int>(parser.get().result_int());
}

absl::StatusOr<int> Post(const WebhookUrl& url, const WebhookPosterOptions& o,
                         const std::string& body) {
  const std::chrono::seconds timeout(o.timeout_seconds);
  asio::io_context io;
  beast::error_code ec;
  // The name lookup is the system resolver's (getaddrinfo), bounded by its own settings
  // (resolv.conf's timeout and attempts), not by `timeout`.
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
  beast::tcp_stream tcp_stream(io);
  if (!ec) {
    tcp_stream.expires_after(timeout);
    ec = RunOne(io, [&](auto handler) { tcp_stream.async_connect(endpoints, std::move(handler)); });
  }
  if (ec)
    return absl::UnavailableError(
        Cat("cannot reach ", url.host, ":", url.port, ": ", ec.message()));
  http::request<http::string_body> req{http::verb::post, url.target, 11};
  req.set(http::field::host, url.host);
  req.set(http::field::content_type, "application/x-ndjson");
  req.set(http::field::user_agent, "gpucloud-audit-webhook");
  if (!o.token.empty()) req.set(http::field::authorization, "Bearer " + o.token);
  req.body() = body;
  req.prepare_payload();
  if (!url.tls) return Exchange(io, tcp_stream, req, timeout);
  asio::ssl::context ctx{asio::ssl::context::tls_client};
  if (o.ca_path.empty()) {
    ctx.set_default_verify_paths(ec);
  } else {
    ctx.load_verify_file(o.ca_path, ec);
  }
  if (ec) return absl::InvalidArgumentError(Cat(o.ca_path, ": ", ec.message()));
  ctx.set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp_stream), ctx);
  SSL_set_tlsext_host_name(tls.native_handle(), url.host.c_str());
  tls.set_verify_callback(asio::ssl::host_name_verification(url.host));
  beast::get_lowest_layer(tls).expires_after(timeout);
  ec = RunOne(io, [&](auto handler) {
    tls.async_handshake(asio::ssl::stream_base::client, std::move(handler));
  });
  if (ec == beast::error::timeout) return absl::UnavailableError("TLS handshake timed out");
  if (ec) return absl::UnavailableError(Cat("TLS with ", url.host, ": ", ec.message()));
  return Exchange(io, tls, req, timeout);
}

}  // namespace

absl::StatusOr<WebhookUrl> ParseWebhookUrl(const std::string& url) {
  WebhookUrl out;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    out.tls = false;
    out.port = 80;
    rest.remove_prefix(7);
  } else {
    return absl::InvalidArgumentError(Cat("--audit-webhook \"", url, "\": not an https:// URL"));
  }
  size_t end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, end);
  if (end != std::string_view::npos) {
    out.target = std::string(rest.substr(end));
    if (out.target.front() == '?') out.target = "/" + out.target;
  }
  std::string_view port;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(Cat("--audit-webhook \"", url, "\": unclosed '['"));
    }
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') {
      return absl::InvalidArgumentError(Cat("--audit-webhook \"", url, "\": bad host"));
    }
    if (!authority.empty()) port = authority.substr(1);
  } else {
    size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty() || out.host.find('@') != std::string::npos) {
    return absl::InvalidArgumentError(Cat("--audit-webhook \"", url, "\": no host"));
  }
  if (!port.empty() || authority.ends_with(":")) {
    int p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p < 1 || p > 65535) {
      return absl::InvalidArgumentError(Cat("--audit-webhook \"", url, "\": bad port"));
    }
    out.port = p;
  }
  if (!out.tls && !IsLoopback(out.host)) {
    return absl::InvalidArgumentError(
        Cat("--audit-webhook \"", url,
            "\": http:// only to a loopback host; audit records leave the machine over https"));
  }
  return out;
}

WebhookSender MakeWebhookPoster(WebhookUrl url, WebhookPosterOptions options) {
  return [url = std::move(url), options = std::move(options)](const std::string& body) {
    return Post(url, options, body);
  };
}

AuditWebhook::AuditWebhook(AuditLog& log, WebhookSender sender, AuditWebhookOptions options)
    : log_(log), sender_(std::move(sender)), options_(std::move(options)) {}

AuditWebhook::~AuditWebhook() { Stop(); }

absl::Status AuditWebhook::Start() {
  std::ifstream f(options_.cursor_path);
  std::string text;
  if (f && std::getline(f, text)) {
    int64_t seq = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seq);
    if (ec != std::errc() || ptr != text.data() + text.size() || seq < 0) {
      return absl::InvalidArgumentError(
          Cat(options_.cursor_path, ": not a record number: \"", text, "\""));
    }
    acked_ = seq;
  }
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
  return absl::OkStatus();
}

void AuditWebhook::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
}

void AuditWebhook::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
  }
  cv_.notify_all();
}

// Waits `ms`, or until stopped, or (with wake_on_notify) until Notify. False when stopped.
bool AuditWebhook::Wait(std::stop_token& stop, int64_t ms, bool wake_on_notify) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, stop, std::chrono::milliseconds(ms),
               [&] { return wake_on_notify && notified_; });
  notified_ = false;
  return !stop.stop_requested();
}

void AuditWebhook::Run(std::stop_token stop) {
  int64_t backoff = options_.min_backoff_ms;
  while (!stop.stop_requested()) {
    absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> batch =
        log_.ReadAfter(acked_.load(), options_.max_batch);
    if (!batch.ok() || batch->empty()) {
      if (!batch.ok()) {
        log::Warn("audit-webhook", "cannot read the audit log",
                  {{"error", batch.status().ToString()}});
      }
      if (!Wait(stop, options_.poll_ms, /*wake_on_notify=*/true)) break;
      continue;
    }
    std::string body;
    for (const auto& [seq, text] : *batch) body += text + "\n";
    absl::StatusOr<int> code = sender_(body);
    if (code.ok() && *code >= 200 && *code < 300) {
      const int64_t last = batch->back().first;
      if (absl::Status s =
              WritePrivateFile(options_.cursor_path, Cat(last, "\n"), FileSync::kDurable);
          !s.ok()) {
        log::Warn("audit-webhook", "cannot save the cursor", {{"error", s.ToString()}});
      }
      sent_ += static_cast<int64_t>(batch->size());
      acked_ = last;
      backoff = options_.min_backoff_ms;
      continue;
    }
    ++failures_;
    log::Warn("audit-webhook", "delivery failed, retrying",
              {{"error", code.ok() ? Cat("HTTP ", *code) : code.status().ToString()},
               {"from_seq", batch->front().first},
               {"retry_ms", backoff}});
    if (!Wait(stop, backoff, /*wake_on_notify=*/false)) break;
    backoff = std::min(options_.max_backoff_ms, backoff * 2);
  }
}

int64_t AuditWebhook::lag() const { return std::max<int64_t>(0, log_.head_seq() - acked_.load()); }

std::string AuditWebhook::RenderMetrics() const {
  PromText t;
  t.Family("gpucloud_audit_webhook_sent_total", "counter",
           "Audit records the webhook receiver acknowledged")
      .Sample(static_cast<double>(sent()));
  t.Family("gpucloud_audit_webhook_failures_total", "counter",
           "Audit webhook POSTs that failed (no answer or not 2xx)")
      .Sample(static_cast<double>(failures()));
  t.Family("gpucloud_audit_webhook_lag_records", "gauge",
           "Committed audit records the webhook receiver has not acknowledged")
      .Sample(static_cast<double>(lag()));
  return t.Take();
}

}  // namespace gpucloud::server
