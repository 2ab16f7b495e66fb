#include "store/etcd_http.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "core/text.h"

namespace gpucloud::store::etcd {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

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

// A connected stream to the member, with `timeout` set for what follows. The one place a TLS
// session would be made.
absl::StatusOr<std::unique_ptr<beast::tcp_stream>> ConnectTo(asio::io_context& io,
                                                             const std::string& host,
                                                             const std::string& port,
                                                             absl::Duration timeout) {
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Unreachable(Cat("resolving ", host), ec);
  auto stream = std::make_unique<beast::tcp_stream>(io);
  stream->expires_after(ToChrono(timeout));
  ec = Run(io, [&](auto done) { stream->async_connect(endpoints, done); });
  if (ec) return Unreachable(Cat("connecting to ", host, ":", port), ec);
  stream->socket().set_option(asio::ip::tcp::no_delay(true), ec);
  return stream;
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
  HttpWatchStream(std::unique_ptr<asio::io_context> io, std::unique_ptr<beast::tcp_stream> s)
      : io_(std::move(io)), stream_(std::move(s)) {
    parser_.body_limit(boost::none);
  }
  ~HttpWatchStream() override {
    beast::error_code ec;
    stream_->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  }

  absl::Status ReadHeader(absl::Time deadline) {
    beast::error_code ec;
    stream_->expires_after(ToChrono(deadline - absl::Now()));
    ec = Run(*io_, [&](auto done) { http::async_read_header(*stream_, buffer_, parser_, done); });
    if (ec) return Unreachable("reading the watch answer", ec);
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
    beast::error_code ec;
    stream_->expires_after(ToChrono(deadline - absl::Now()));
    ec = Run(*io_, [&](auto done) { http::async_read_some(*stream_, buffer_, parser_, done); });
    if (ec == http::error::need_buffer) ec = {};
    pending_.append(chunk, sizeof chunk - parser_.get().body().size);
    if (ec == beast::error::timeout) return absl::DeadlineExceededError("no watch event in time");
    if (ec) return Unreachable("reading the watch stream", ec);
    return absl::OkStatus();
  }

  std::unique_ptr<asio::io_context> io_;
  std::unique_ptr<beast::tcp_stream> stream_;
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

struct Http::Connection {
  std::unique_ptr<asio::io_context> io;
  std::unique_ptr<beast::tcp_stream> stream;
  std::string host;
  size_t member = 0;
};

void Http::Failed(size_t member) const {
  size_t expected = member;
  current_.compare_exchange_strong(expected, (member + 1) % members_.size());
}

absl::StatusOr<Http::Connection> Http::Connect() const {
  const size_t first = current_.load();
  std::string failures;
  for (size_t i = 0; i < members_.size(); ++i) {
    const size_t at = (first + i) % members_.size();
    const Member& m = members_[at];
    auto io = std::make_unique<asio::io_context>();
    absl::StatusOr<std::unique_ptr<beast::tcp_stream>> stream =
        ConnectTo(*io, m.host, m.port, timeout_);
    if (stream.ok()) {
      current_.store(at);
      return Connection{std::move(io), std::move(*stream), m.host, at};
    }
    failures += Cat(failures.empty() ? "" : "; ", stream.status().message());
  }
  return absl::UnavailableError(Cat("no etcd member answers: ", failures));
}

absl::StatusOr<json> Http::Post(const std::string& path, const json& body) const {
  absl::StatusOr<Connection> c = Connect();
  if (!c.ok()) return c.status();
  asio::io_context& io = *c->io;
  beast::tcp_stream& s = *c->stream;
  auto req = Request(c->host, path, body);
  beast::error_code ec = Run(io, [&](auto done) { http::async_write(s, req, done); });
  if (ec) {
    Failed(c->member);
    return Unreachable(Cat("sending ", path), ec);
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  ec = Run(io, [&](auto done) { http::async_read(s, buffer, parser, done); });
  if (ec) {
    Failed(c->member);  // the next request tries another member
    return Unreachable(Cat("reading the answer to ", path), ec);
  }
  s.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  const auto& res = parser.get();
  json answer = json::parse(res.body(), nullptr, false);
  if (answer.is_discarded()) {
    return absl::InternalError(Cat("etcd: ", path, ": HTTP ", res.result_int(),
                                   ": not JSON: ", res.body().substr(0, 200)));
  }
  if (res.result_int() != 200) return GatewayError(res.result_int(), answer);
  return answer;
}

absl::StatusOr<std::unique_ptr<WatchStream>> Http::Watch(const json& create_request) const {
  absl::StatusOr<Connection> c = Connect();
  if (!c.ok()) return c.status();
  beast::tcp_stream& s = *c->stream;
  auto req = Request(c->host, "/v3/watch", {{"create_request", create_request}});
  beast::error_code ec = Run(*c->io, [&](auto done) { http::async_write(s, req, done); });
  if (ec) {
    Failed(c->member);
    return Unreachable("sending a watch", ec);
  }
  auto watch = std::make_unique<HttpWatchStream>(std::move(c->io), std::move(c->stream));
  if (absl::Status s = watch->ReadHeader(absl::Now() + timeout_); !s.ok()) return s;
  return watch;
}

}  // namespace gpucloud::store::etcd
