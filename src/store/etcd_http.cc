#include "store/etcd_http.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "core/text.h"

namespace gpucloud::store::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

struct TlsContext {
  asio::ssl::context ssl{asio::ssl::context::tls_client};
};

namespace {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection to a member: a TCP stream, or a TLS stream over one. Beast's operations are
// templates over the stream type, so they run on whichever it is through Visit.
struct Channel {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<TlsStream> tls;
  std::string member;  // "host:port", for messages

  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  template <class F>
  beast::error_code Visit(F f) {
    return tls ? f(*tls) : f(*plain);
  }
  void Close() {
    beast::error_code ec;
    tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  }
};

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::microseconds(absl::ToInt64Microseconds(d));
}

// Runs one asynchronous operation of a beast::tcp_stream to completion on `io` (which has no
// other work) and returns its error. Beast's timeouts (expires_after) apply to asynchronous
// operations only: its synchronous reads would wait forever on a member that does not answer.
template <class Start>
beast::error_code Run(asio::io_context& io, Start start) {
  beast::error_code result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

absl::Status Unreachable(const std::string& what, const beast::error_code& ec) {
  return absl::UnavailableError(Cat("etcd: ", what, ": ", ec.message()));
}

// A TLS handshake with `c.member` that failed with `ec`: OpenSSL's reason, then the certificate
// check's when that was what failed, or `hint`.
absl::Status HandshakeFailed(const Channel& c, const beast::error_code& ec,
                             const std::string& hint = "") {
  std::string why = ec == beast::error::timeout ? "it timed out" : ec.message();
  const long verify = SSL_get_verify_result(c.tls->native_handle());
  if (verify != X509_V_OK) {
    why += Cat(" (", X509_verify_cert_error_string(verify), ")");
  } else if (!hint.empty()) {
    why += Cat(" (", hint, ")");
  }
  return absl::UnavailableError(Cat("etcd: the TLS handshake to ", c.member, " failed: ", why));
}

// What a read or write on `c` that failed with `ec` while doing `what` means. In TLS 1.3 the
// client's half of the handshake ends before the member checks the client's certificate: a
// member that refuses it (or its absence) says so, with an alert, only when the first answer is
// read.
absl::Status IoFailed(const Channel& c, const std::string& what, const beast::error_code& ec) {
  if (c.tls && ec.category() == asio::error::get_ssl_category()) {
    return HandshakeFailed(c, ec,
                           "the member refused this client's certificate, or that none was sent");
  }
  return Unreachable(what, ec);
}

// The gateway's error answer ({"error": ..., "code": N, "message": ...}) as a status with
// etcd's gRPC code.
absl::Status GatewayError(int http_status, const json& body) {
  const json& e = body.contains("error") && body["error"].is_object() ? body["error"] : body;
  std::string message = e.value("message", "");
  if (message.empty() && e.contains("error") && e["error"].is_string()) message = e["error"];
  int code = e.value("code", 0);
  if (code <= 0 || code > 16) code = static_cast<int>(absl::StatusCode::kInternal);
  if (message.empty()) message = Cat("HTTP ", http_status, ": ", body.dump());
  return absl::Status(static_cast<absl::StatusCode>(code), Cat("etcd: ", message));
}

// Asks the TLS session to check that the member's certificate names `host`: an IP address
// must be one of its IP addresses; a host name is sent as SNI and must be one of its DNS names.
absl::Status ExpectPeerName(TlsStream& tls, const std::string& host) {
  SSL* ssl = tls.native_handle();
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  const bool named =
      ec ? SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1
         : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  if (!named) return absl::InvalidArgumentError(Cat("etcd: cannot check TLS names for ", host));
  return absl::OkStatus();
}

// A connected stream to the member (TLS when `tls` is set, its handshake done), with `timeout`
// set for what follows.
absl::StatusOr<Channel> ConnectTo(asio::io_context& io, const Member& m, absl::Duration timeout,
                                  TlsContext* tls) {
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(m.host, m.port, ec);
  if (ec) return Unreachable(Cat("resolving ", m.host), ec);
  Channel c;
  c.member = Cat(m.host, ":", m.port);
  if (tls) {
    c.tls = std::make_unique<TlsStream>(io, tls->ssl);
  } else {
    c.plain = std::make_unique<beast::tcp_stream>(io);
  }
  beast::tcp_stream& tcp = c.tcp();
  tcp.expires_after(ToChrono(timeout));
  ec = Run(io, [&](auto done) { tcp.async_connect(endpoints, done); });
  if (ec) return Unreachable(Cat("connecting to ", c.member), ec);
  tcp.socket().set_option(asio::ip::tcp::no_delay(true), ec);
  if (!tls) return c;
  if (absl::Status s = ExpectPeerName(*c.tls, m.host); !s.ok()) return s;
  ec = Run(io, [&](auto done) { c.tls->async_handshake(asio::ssl::stream_base::client, done); });
  if (ec) return HandshakeFailed(c, ec);
  return c;
}

http::request<http::string_body> Request(const std::string& host, const std::string& path,
                                         const json& body) {
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, host);
  req.set(http::field::content_type, "application/json");
  req.body() = body.dump();
  req.prepare_payload();
  return req;
}

class HttpWatchStream final : public WatchStream {
 public:
  HttpWatchStream(std::unique_ptr<asio::io_context> io, Channel c)
      : io_(std::move(io)), channel_(std::move(c)) {
    parser_.body_limit(boost::none);
  }
  ~HttpWatchStream() override { channel_.Close(); }

  absl::Status ReadHeader(absl::Time deadline) {
    channel_.tcp().expires_after(ToChrono(deadline - absl::Now()));
    beast::error_code ec = channel_.Visit([&](auto& s) {
      return Run(*io_, [&](auto done) { http::async_read_header(s, buffer_, parser_, done); });
    });
    if (ec) return IoFailed(channel_, "reading the watch answer", ec);
    if (parser_.get().result_int() != 200) {
      absl::StatusOr<json> line = Next(deadline);
      if (!line.ok()) return line.status();
      return GatewayError(parser_.get().result_int(), *line);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<json> Next(absl::Time deadline) override {
    for (;;) {
      if (size_t nl = pending_.find('\n'); nl != std::string::npos) {
        std::string line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
        return Parse(line);
      }
      if (parser_.is_done()) {
        if (pending_.empty()) return absl::UnavailableError("etcd: the watch stream ended");
        pending_ += '\n';
        continue;
      }
      if (deadline <= absl::Now()) return absl::DeadlineExceededError("no watch event in time");
      if (absl::Status s = ReadSome(deadline); !s.ok()) return s;
    }
  }

 private:
  absl::StatusOr<json> Parse(const std::string& line) {
    json message = json::parse(line, nullptr, false);
    if (message.is_discarded()) return absl::InternalError(Cat("etcd: not JSON: ", line));
    if (message.contains("error")) return GatewayError(parser_.get().result_int(), message);
    if (parser_.get().result_int() != 200) return message;
    if (!message.contains("result")) return absl::InternalError(Cat("etcd: watch: ", line));
    return message["result"];
  }

  absl::Status ReadSome(absl::Time deadline) {
    char chunk[16384];
    parser_.get().body().data = chunk;
    parser_.get().body().size = sizeof chunk;
    channel_.tcp().expires_after(ToChrono(deadline - absl::Now()));
    beast::error_code ec = channel_.Visit([&](auto& s) {
      return Run(*io_, [&](auto done) { http::async_read_some(s, buffer_, parser_, done); });
    });
    if (ec == http::error::need_buffer) ec = {};
    pending_.append(chunk, sizeof chunk - parser_.get().body().size);
    if (ec == beast::error::timeout) return absl::DeadlineExceededError("no watch event in time");
    if (ec) return IoFailed(channel_, "reading the watch stream", ec);
    return absl::OkStatus();
  }

  std::unique_ptr<asio::io_context> io_;
  Channel channel_;
  beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  std::string pending_;
};

}  // namespace

std::string Base64(const std::string& bytes) { return absl::Base64Escape(bytes); }

absl::StatusOr<std::string> FromBase64(const std::string& text) {
  std::string out;
  if (!absl::Base64Unescape(text, &out)) {
    return absl::InvalidArgumentError("etcd: bad base64 in answer");
  }
  return out;
}

absl::StatusOr<std::vector<Member>> ParseMembers(const std::string& endpoints) {
  std::vector<Member> out;
  for (absl::string_view e : absl::StrSplit(endpoints, ',')) {
    size_t colon = e.rfind(':');
    if (colon == absl::string_view::npos || colon == 0 || colon + 1 == e.size() ||
        e.substr(colon + 1).find_first_not_of("0123456789") != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          Cat("etcd endpoint '", e, "' is not host:port (in '", endpoints, "')"));
    }
    out.push_back({std::string(e.substr(0, colon)), std::string(e.substr(colon + 1))});
  }
  return out;
}

int64_t JsonInt(const json& object, const char* field) {
  if (!object.is_object()) return 0;
  auto it = object.find(field);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    return s.empty() ? 0 : std::stoll(s);
  }
  return 0;
}

namespace {

absl::Status BadTlsFile(const char* what, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(Cat("etcd TLS: the ", what, " ", path, ": ", why));
}

// "" when `path` is a file that can be read, else why not.
std::string Unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return Cat("cannot read it: ", std::strerror(errno));
  std::fclose(f);
  return "";
}

// OpenSSL's reason for the latest error of this thread; clears them all.
std::string OpenSslReason() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e == 0 ? nullptr : ERR_reason_error_string(e);
  ERR_clear_error();
  return reason ? reason : "not PEM";
}

absl::Status CheckFileOptions(const EtcdTlsOptions& o) {
  if (!o.enabled) {
    if (!o.ca_file.empty() || !o.cert_file.empty() || !o.key_file.empty()) {
      return absl::InvalidArgumentError("etcd TLS: files are given but TLS is off");
    }
    return absl::OkStatus();
  }
  if (o.ca_file.empty()) return absl::InvalidArgumentError("etcd TLS: no CA file");
  if (o.cert_file.empty() != o.key_file.empty()) {
    return absl::InvalidArgumentError(o.cert_file.empty()
                                          ? "etcd TLS: a client key without its certificate"
                                          : "etcd TLS: a client certificate without its key");
  }
  const std::pair<const char*, const std::string*> files[] = {
      {"CA file", &o.ca_file}, {"client certificate", &o.cert_file}, {"client key", &o.key_file}};
  for (const auto& [what, path] : files) {
    if (path->empty()) continue;
    if (std::string why = Unreadable(*path); !why.empty()) return BadTlsFile(what, *path, why);
  }
  return absl::OkStatus();
}

// Loads the client certificate and its key into `ssl`; the key must be the certificate's.
absl::Status LoadClientCertificate(asio::ssl::context& ssl, const EtcdTlsOptions& o) {
  beast::error_code ec;
  ssl.use_certificate_chain_file(o.cert_file, ec);
  if (ec) return BadTlsFile("client certificate", o.cert_file, ec.message());
  std::FILE* f = std::fopen(o.key_file.c_str(), "r");
  if (!f) return BadTlsFile("client key", o.key_file, std::strerror(errno));
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (!key) return BadTlsFile("client key", o.key_file, OpenSslReason());
  const bool matches = SSL_CTX_use_PrivateKey(ssl.native_handle(), key) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    ERR_clear_error();
    return BadTlsFile("client key", o.key_file,
                      Cat("does not match the client certificate ", o.cert_file));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<TlsContext>> MakeTlsContext(const EtcdTlsOptions& o) {
  if (absl::Status s = CheckFileOptions(o); !s.ok()) return s;
  if (!o.enabled) return std::shared_ptr<TlsContext>();
  auto tls = std::make_shared<TlsContext>();
  asio::ssl::context& ssl = tls->ssl;
  beast::error_code ec;
  ssl.load_verify_file(o.ca_file, ec);
  if (ec) return BadTlsFile("CA file", o.ca_file, ec.message());
  if (!o.cert_file.empty()) {
    if (absl::Status s = LoadClientCertificate(ssl, o); !s.ok()) return s;
  }
  ssl.set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_min_proto_version(ssl.native_handle(), TLS1_3_VERSION);
  return tls;
}

Http::Http(std::vector<Member> members, absl::Duration timeout, std::shared_ptr<TlsContext> tls)
    : members_(std::move(members)), timeout_(timeout), tls_(std::move(tls)) {}
Http::~Http() = default;

// Moved, never move-assigned: assignment would destroy `io` before the streams in `channel`
// that use it (members are assigned in order).
struct Http::Connection {
  std::unique_ptr<asio::io_context> io;
  Channel channel;
  std::string host;
  size_t member = 0;
  std::chrono::steady_clock::time_point idle_since{};

  Connection(std::unique_ptr<asio::io_context> i, Channel c, std::string h, size_t m)
      : io(std::move(i)), channel(std::move(c)), host(std::move(h)), member(m) {}
  Connection(Connection&&) = default;
  Connection& operator=(Connection&&) = delete;
};

namespace {

constexpr size_t kMaxIdle = 16;
constexpr std::chrono::seconds kIdleReuse{10};

// Whether a kept-alive connection can carry another request: nothing is waiting to be read on
// it (a member that closed it, or said anything unasked, makes it readable) and it has not hung
// up. What a member did after this check is what any request risks: it fails as Unavailable.
bool StillOpen(Channel& c) {
  if (c.tls && SSL_pending(c.tls->native_handle()) > 0) return false;
  pollfd p{c.tcp().socket().native_handle(), POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) == 0;
}

}  // namespace

absl::StatusOr<Http::Connection> Http::Take(absl::Time deadline) const {
  const auto now = std::chrono::steady_clock::now();
  const size_t member = current_.load();
  std::vector<std::unique_ptr<Connection>> stale;  // closed outside the lock
  std::unique_ptr<Connection> found;
  {
    std::lock_guard lock(idle_mu_);
    while (!idle_.empty() && !found) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      if (c->member == member && now - c->idle_since < kIdleReuse && StillOpen(c->channel)) {
        found = std::move(c);
      } else {
        stale.push_back(std::move(c));
      }
    }
  }
  for (std::unique_ptr<Connection>& c : stale) c->channel.Close();
  if (found) return std::move(*found);
  return Connect(deadline);
}

void Http::GiveBack(Connection c) const {
  c.idle_since = std::chrono::steady_clock::now();
  auto kept = std::make_unique<Connection>(std::move(c));
  std::unique_ptr<Connection> oldest;  // closed outside the lock
  {
    std::lock_guard lock(idle_mu_);
    if (idle_.size() >= kMaxIdle) {
      oldest = std::move(idle_.front());
      idle_.erase(idle_.begin());
    }
    idle_.push_back(std::move(kept));
  }
  if (oldest) oldest->channel.Close();
}

void Http::Failed(size_t member) const {
  size_t expected = member;
  current_.compare_exchange_strong(expected, (member + 1) % members_.size());
}

absl::StatusOr<Http::Connection> Http::Connect(absl::Time deadline) const {
  const size_t first = current_.load();
  // A member that does not answer SYNs must not take the whole call: each gets its share.
  const absl::Duration share = timeout_ / static_cast<int64_t>(members_.size());
  std::string failures;
  for (size_t i = 0; i < members_.size(); ++i) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    const size_t at = (first + i) % members_.size();
    const Member& m = members_[at];
    auto io = std::make_unique<asio::io_context>();
    absl::StatusOr<Channel> channel = ConnectTo(*io, m, std::min(share, left), tls_.get());
    if (channel.ok()) {
      current_.store(at);
      return Connection{std::move(io), std::move(*channel), m.host, at};
    }
    Failed(at);
    failures += Cat(failures.empty() ? "" : "; ", channel.status().message());
  }
  if (failures.empty()) failures = "out of time";
  return absl::UnavailableError(Cat("no etcd member answers: ", failures));
}

absl::StatusOr<json> Http::Post(const std::string& path, const json& body) const {
  const absl::Time deadline = absl::Now() + timeout_;
  absl::StatusOr<Connection> c = Take(deadline);
  if (!c.ok()) return c.status();
  asio::io_context& io = *c->io;
  auto req = Request(c->host, path, body);
  c->channel.tcp().expires_after(ToChrono(std::max(deadline - absl::Now(), absl::ZeroDuration())));
  beast::error_code ec = c->channel.Visit(
      [&](auto& s) { return Run(io, [&](auto done) { http::async_write(s, req, done); }); });
  if (ec) {
    Failed(c->member);
    return IoFailed(c->channel, Cat("sending ", path), ec);
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  ec = c->channel.Visit([&](auto& s) {
    return Run(io, [&](auto done) { http::async_read(s, buffer, parser, done); });
  });
  if (ec) {
    Failed(c->member);  // the next request tries another member
    return IoFailed(c->channel, Cat("reading the answer to ", path), ec);
  }
  const auto& res = parser.get();
  if (res.keep_alive()) {
    c->channel.tcp().expires_never();
    GiveBack(std::move(*c));
  } else {
    c->channel.Close();
  }
  json answer = json::parse(res.body(), nullptr, false);
  if (answer.is_discarded()) {
    return absl::InternalError(Cat("etcd: ", path, ": HTTP ", res.result_int(),
                                   ": not JSON: ", res.body().substr(0, 200)));
  }
  if (res.result_int() != 200) return GatewayError(res.result_int(), answer);
  return answer;
}

absl::StatusOr<std::unique_ptr<WatchStream>> Http::Watch(const json& create_request) const {
  const absl::Time deadline = absl::Now() + timeout_;
  absl::StatusOr<Connection> c = Connect(deadline);
  if (!c.ok()) return c.status();
  auto req = Request(c->host, "/v3/watch", {{"create_request", create_request}});
  c->channel.tcp().expires_after(ToChrono(std::max(deadline - absl::Now(), absl::ZeroDuration())));
  beast::error_code ec = c->channel.Visit(
      [&](auto& s) { return Run(*c->io, [&](auto done) { http::async_write(s, req, done); }); });
  if (ec) {
    Failed(c->member);
    return IoFailed(c->channel, "sending a watch", ec);
  }
  auto watch = std::make_unique<HttpWatchStream>(std::move(c->io), std::move(c->channel));
  if (absl::Status s = watch->ReadHeader(deadline); !s.ok()) return s;
  return watch;
}

}  // namespace gpucloud::store::etcd

namespace gpucloud::store {

absl::Status CheckEtcdTls(const EtcdTlsOptions& options) {
  return etcd::MakeTlsContext(options).status();
}

}  // namespace gpucloud::store
