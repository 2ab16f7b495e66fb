#include "api/client.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "api/paths.h"
#include "core/text.h"

namespace gpucloud::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

}  // namespace

std::string DefaultConfigPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("GPUCLOUD_CONFIG"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return Cat(home ? home : ".", "/.gpucloud/config");
}

absl::StatusOr<ClientConfig> LoadClientConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    return absl::InvalidArgumentError(Cat(path,
                                          ": cannot read the client config (set one up "
                                          "from the server's admin.config)"));
  }
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return ParseClientConfig(text, path);
}

namespace {

// "https://HOST[:PORT][/...]": the port is 443 when not given.
absl::StatusOr<ServerAddress> ParseServerUrl(std::string_view url, const std::string& path) {
  if (!url.starts_with("https://")) {
    return absl::InvalidArgumentError(Cat(path, ": server: must start with https://, got ", url));
  }
  std::string hostport(url.substr(8));
  if (size_t slash = hostport.find('/'); slash != std::string::npos) hostport.resize(slash);
  ServerAddress a;
  size_t colon = hostport.rfind(':');
  // "[::1]:8443" and "[::1]": the colon inside the brackets is not the port's.
  if (colon != std::string::npos && hostport.find(']', colon) != std::string::npos) {
    colon = std::string::npos;
  }
  a.host = hostport.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') {
    a.host = a.host.substr(1, a.host.size() - 2);
  }
  if (a.host.empty()) return absl::InvalidArgumentError(Cat(path, ": server: no host in ", url));
  if (colon != std::string::npos) {
    std::string port = hostport.substr(colon + 1);
    if (!absl::SimpleAtoi(port, &a.port) || a.port < 1 || a.port > 65535) {
      return absl::InvalidArgumentError(Cat(path, ": server: bad port in ", url));
    }
  }
  return a;
}

// `server:` as one URL, URLs separated by commas, or a YAML list of URLs.
absl::StatusOr<std::vector<ServerAddress>> ParseServers(const YAML::Node& node,
                                                        const std::string& path) {
  std::vector<std::string> urls;
  if (node && node.IsScalar()) {
    for (std::string u : SplitAny(node.Scalar(), ",")) {
      std::string trimmed(absl::StripAsciiWhitespace(u));
      if (!trimmed.empty()) urls.push_back(std::move(trimmed));
    }
  } else if (node && node.IsSequence()) {
    for (const YAML::Node& u : node) {
      if (!u.IsScalar()) {
        return absl::InvalidArgumentError(Cat(path, ": server: a list of https:// URLs"));
      }
      urls.push_back(u.Scalar());
    }
  } else if (node && !node.IsNull()) {
    return absl::InvalidArgumentError(Cat(path, ": server: a URL or a list of URLs"));
  }
  std::vector<ServerAddress> out;
  for (const std::string& u : urls) {
    absl::StatusOr<ServerAddress> a = ParseServerUrl(u, path);
    if (!a.ok()) return a.status();
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace

absl::StatusOr<ClientConfig> ParseClientConfig(const std::string& text, const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(Cat(path, ": invalid YAML: ", e.msg));
  }
  ClientConfig c;
  auto given = [&](const char* key) {
    return doc.IsMap() && doc[key] && doc[key].IsScalar() && !doc[key].Scalar().empty();
  };
  const bool certificate = given("client-certificate") || given("client-key");
  absl::StatusOr<std::vector<ServerAddress>> servers =
      doc.IsMap() ? ParseServers(doc["server"], path) : std::vector<ServerAddress>{};
  if (!servers.ok()) return servers.status();
  if (servers->empty()) return absl::InvalidArgumentError(Cat(path, ": server: is required"));
  for (const char* key : {"certificate-authority", certificate ? "client-certificate" : "token"}) {
    if (!given(key)) return absl::InvalidArgumentError(Cat(path, ": ", key, ": is required"));
  }
  if (certificate) {
    if (!given("client-key")) {
      return absl::InvalidArgumentError(
          Cat(path, ": client-key: is required with client-certificate"));
    }
    c.cert_path = doc["client-certificate"].Scalar();
    c.key_path = doc["client-key"].Scalar();
  }
  c.host = servers->front().host;
  c.port = servers->front().port;
  c.more_servers.assign(servers->begin() + 1, servers->end());
  c.ca_path = doc["certificate-authority"].Scalar();
  if (given("token")) c.token = doc["token"].Scalar();
  return c;
}

// A file's inode and modification time (ns): what changes when it is replaced.
std::pair<ino_t, int64_t> FileIdentity(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_ino, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// Initializes OpenSSL, once, without its clean-up at exit: that freed every table OpenSSL had
// built, about 0.5-0.9 ms of each one-request gpuctl process (issue 17), for memory the process
// gives back as it exits anyway. The first initialization in a process decides, so a Connection
// runs this before it makes its TLS context (and a process that never connects pays nothing).
struct OpenSslInit {
  OpenSslInit() {
    static const bool initialized = OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
    (void)initialized;  // on failure, making the context below fails and says so
  }
};

// One TLS 1.3 connection to the configured server, verified against its CA.
struct Connection {
  OpenSslInit openssl;  // first: before `ctx`
  asio::io_context io;
  asio::ssl::context ctx{asio::ssl::context::tls_client};
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream;

  // The client certificate file's identity when it was loaded (a renewal replaces the file).
  std::pair<ino_t, int64_t> cert_file{};

  // Connects to `a` within connect_seconds and shakes hands within handshake_seconds (a dead
  // machine or a hung server must not hold the caller for minutes: the next server waits).
  absl::Status Open(const ClientConfig& c, const ServerAddress& a) {
    beast::error_code ec;
    ctx.load_verify_file(c.ca_path, ec);
    if (ec) return absl::InvalidArgumentError(Cat(c.ca_path, ": ", ec.message()));
    if (!c.cert_path.empty()) {
      cert_file = FileIdentity(c.cert_path);
      ctx.use_certificate_chain_file(c.cert_path, ec);
      if (ec) return absl::InvalidArgumentError(Cat(c.cert_path, ": ", ec.message()));
      ctx.use_private_key_file(c.key_path, asio::ssl::context::pem, ec);
      if (ec) return absl::InvalidArgumentError(Cat(c.key_path, ": ", ec.message()));
    }
    ctx.set_verify_mode(asio::ssl::verify_peer);
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
    stream.emplace(io, ctx);
    std::string sni = a.host == "127.0.0.1" ? "localhost" : a.host;
    SSL_set_tlsext_host_name(stream->native_handle(), sni.c_str());
    stream->set_verify_callback(asio::ssl::host_name_verification(sni));
    asio::ip::tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(a.host, std::to_string(a.port), ec);
    beast::tcp_stream& tcp = beast::get_lowest_layer(*stream);
    if (!ec) {
      tcp.expires_after(std::chrono::seconds(c.connect_seconds));
      tcp.async_connect(endpoints, [&ec](beast::error_code e, const auto&) { ec = e; });
      RunPending();
    }
    if (ec) {
      return absl::UnavailableError(Cat("cannot reach ", a.host, ":", a.port, ": ", ec.message()));
    }
    // Without it, the request written right after the handshake's last flight waits for that
    // flight's ACK, which a server with nothing to send (no session tickets) delays by 40 ms.
    boost::system::error_code nodelay_ec;
    tcp.socket().set_option(asio::ip::tcp::no_delay(true), nodelay_ec);
    tcp.expires_after(std::chrono::seconds(c.handshake_seconds));
    stream->async_handshake(asio::ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
    RunPending();
    if (ec) return absl::UnavailableError(Cat("TLS with ", a.host, ": ", ec.message()));
    tcp.expires_never();  // the synchronous reads and writes that follow have their own bounds
    return absl::OkStatus();
  }

  void RunPending() {
    io.run();
    io.restart();
  }
};

Client::Client(ClientConfig config) : config_(std::move(config)) {}
Client::~Client() = default;
Client::Client(const Client& other) : config_(other.config_), current_(other.current_) {}

void Client::SetConfig(ClientConfig config) {
  config_ = std::move(config);
  conn_.reset();
  current_ = 0;
}

ServerAddress Client::server() const {
  if (current_ == 0 || current_ > config_.more_servers.size()) return {config_.host, config_.port};
  return config_.more_servers[current_ - 1];
}

void Client::FailOver() const {
  conn_.reset();
  current_ = (current_ + 1) % (1 + config_.more_servers.size());
}

namespace {

// Waits until the connection has something to read, for at most `seconds`; false when it stays
// silent (a partitioned or hung peer). Asio's blocking reads would wait forever. Decrypted bytes
// OpenSSL holds count; what the caller has buffered and not parsed does not (it needs more).
template <typename Stream>
bool SocketReadable(Stream& stream, int seconds) {
  if (SSL_pending(stream.native_handle()) > 0) return true;
  pollfd p{beast::get_lowest_layer(stream).socket().native_handle(), POLLIN, 0};
  return poll(&p, 1, seconds * 1000) > 0;
}

// Whether a request that may have been carried out can be sent again (RFC 9110 9.2.2).
bool Idempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE";
}

}  // namespace

absl::StatusOr<HttpResponse> Client::Stream(const std::string& target,
                                            const std::function<void(const std::string&)>& on_line,
                                            int idle_seconds,
                                            const std::atomic<bool>* cancel) const {
  const size_t n = 1 + config_.more_servers.size();
  absl::StatusOr<HttpResponse> r;
  for (size_t tried = 0; tried < n; ++tried) {
    bool streaming = false;
    r = StreamOne(target, on_line, idle_seconds, cancel, &streaming);
    if (streaming) {
      // The stream ended or broke: the caller opens it again. One that went silent (a hung or
      // partitioned server) is opened again on the next server.
      if (!r.ok() && n > 1) FailOver();
      return r;
    }
    bool fail_over = r.ok() ? r->status == 503 : absl::IsUnavailable(r.status());
    if (!fail_over) return r;
    FailOver();
  }
  return r;
}

absl::StatusOr<HttpResponse> Client::StreamOne(
    const std::string& target, const std::function<void(const std::string&)>& on_line,
    int idle_seconds, const std::atomic<bool>* cancel, bool* streaming) const {
  const ServerAddress server = this->server();
  Connection conn;
  if (absl::Status s = conn.Open(config_, server); !s.ok()) return s;
  auto& stream = *conn.stream;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, server.host);
  if (!config_.token.empty()) req.set(http::field::authorization, "Bearer " + config_.token);
  beast::error_code ec;
  http::write(stream, req, ec);
  if (ec) return absl::UnavailableError(Cat("request to ", server.host, ": ", ec.message()));
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (!SocketReadable(stream, config_.answer_seconds)) ec = asio::error::timed_out;
  if (!ec) http::read_header(stream, buf, parser, ec);
  if (ec) return absl::UnavailableError(Cat("request to ", server.host, ": ", ec.message()));
  if (parser.get().result_int() != 200) {
    http::read(stream, buf, parser, ec);
    return HttpResponse{static_cast<int>(parser.get().result_int()), parser.get().body()};
  }
  *streaming = true;
  std::string pending;
  auto on_chunk = [&](std::uint64_t, beast::string_view data, beast::error_code&) -> std::size_t {
    pending.append(data.data(), data.size());
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      on_line(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
    return data.size();
  };
  parser.on_chunk_body(on_chunk);
  while (!parser.is_done()) {
    // What came with earlier reads is parsed before the socket is waited on. Bytes left over
    // that do not parse yet (half a chunk's framing) are not progress: counting them as
    // readable sent the next read to wait on a silent server with no limit (an agent's
    // assignment watch held by a frozen server for minutes).
    if (buf.size() > 0) {
      size_t used = parser.put(buf.data(), ec);
      buf.consume(used);
      if (ec == http::error::need_more) ec = {};
      if (ec) break;
      if (used > 0) continue;
    }
    if (idle_seconds > 0 && !SocketReadable(stream, idle_seconds)) {
      return absl::UnavailableError(
          Cat("watch on ", server.host, ": silent for ", idle_seconds, " s"));
    }
    http::read_some(stream, buf, parser, ec);
    if (ec) break;
    if (cancel != nullptr && cancel->load()) break;
  }
  return HttpResponse{200, ""};
}

absl::StatusOr<HttpResponse> Client::Call(std::string_view method, const std::string& target,
                                          const std::string& body) const {
  const size_t n = 1 + config_.more_servers.size();
  absl::StatusOr<HttpResponse> r;
  for (size_t tried = 0; tried < n; ++tried) {
    bool sent = false;
    r = CallOne(method, target, body, &sent);
    bool fail_over = r.ok() ? r->status == 503
                            : absl::IsUnavailable(r.status()) && (!sent || Idempotent(method));
    if (!fail_over || n == 1) return r;
    FailOver();
  }
  return r;
}

// One request to the current server. `sent`: whether it may have reached the server (then a
// failure may have come after the server carried it out).
absl::StatusOr<HttpResponse> Client::CallOne(std::string_view method, const std::string& target,
                                             const std::string& body, bool* sent) const {
  const ServerAddress server = this->server();
  http::request<http::string_body> req{http::string_to_verb(std::string(method)), target, 11};
  req.set(http::field::host, server.host);
  if (!config_.token.empty()) req.set(http::field::authorization, "Bearer " + config_.token);
  req.set(http::field::content_type, "application/yaml");
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  // A kept-alive connection may have been closed by the server meanwhile: then the request
  // never arrived (nothing was read back), and it is sent once more on a new connection.
  for (int round = 0; round < 2; ++round) {
    if (conn_ && !config_.cert_path.empty() &&
        conn_->cert_file != FileIdentity(config_.cert_path)) {
      conn_.reset();  // the certificate was renewed: present the new one
    }
    bool reused = conn_ != nullptr;
    if (!conn_) {
      auto c = std::make_unique<Connection>();
      if (absl::Status s = c->Open(config_, server); !s.ok()) return s;
      conn_ = std::move(c);
    }
    auto& stream = *conn_->stream;
    beast::error_code ec;
    *sent = true;
    http::write(stream, req, ec);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    if (!ec && !SocketReadable(stream, config_.answer_seconds)) ec = asio::error::timed_out;
    if (!ec) http::read(stream, buf, parser, ec);
    if (ec) {
      bool nothing_back = !parser.got_some();
      conn_.reset();
      if (reused && nothing_back && ec != asio::error::timed_out) continue;
      return absl::UnavailableError(Cat("request to ", server.host, ": ", ec.message()));
    }
    HttpResponse out{static_cast<int>(parser.get().result_int()), parser.get().body()};
    if (!parser.get().keep_alive()) conn_.reset();
    return out;
  }
  return absl::UnavailableError(Cat("request to ", server.host, ": the connection keeps closing"));
}

std::string CollectionPath(std::string_view resource, const std::string& namespace_) {
  if (resource == "jobs" || resource == "job") return JobsPath(namespace_);
  if (resource == "queues" || resource == "queue") return ClusterScopedPath("queues");
  if (resource == "nodes" || resource == "node") return NodesPath();
  if (resource == "nodepools" || resource == "nodepool") return ClusterScopedPath("nodepools");
  if (resource == "runtimeclasses" || resource == "runtimeclass") {
    return ClusterScopedPath("runtimeclasses");
  }
  if (resource == "inferenceservices" || resource == "inferenceservice") {
    return NamespacedPath(namespace_, "inferenceservices");
  }
  return "";
}

std::string ObjectPath(const manifest::Object& object, bool collection) {
  const ObjectMeta& meta = manifest::MetaOf(object);
  std::string kind = ToLower(manifest::KindOf(object));
  std::string path = CollectionPath(kind, meta.namespace_);
  if (path.empty()) return "";
  return collection ? path : Cat(path, "/", meta.name);
}

}  // namespace gpucloud::api
