#include "api/ws_client.h"

#include <openssl/ssl.h>
#include <sys/resource.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gpucloud::api::ws {
namespace {

namespace websocket = beast::websocket;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The server's message in a refusal's body (a Kubernetes Status), else the body itself.
std::string RefusalMessage(int status, const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  std::string text = body.empty() ? Cat("HTTP ", status) : body;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// One try at `a`: the stream, or why not (and whether another server may be tried).
asio::awaitable<absl::StatusOr<std::unique_ptr<Stream>>> OpenOne(asio::any_io_executor ex,
                                                                 asio::ssl::context& ctx,
                                                                 const ClientConfig& config,
                                                                 const ServerAddress& a,
                                                                 const std::string& target) {
  auto ws = std::make_unique<Stream>(ex, ctx);
  const std::string sni = a.host == "127.0.0.1" ? "localhost" : a.host;
  SSL_set_tlsext_host_name(ws->next_layer().native_handle(), sni.c_str());
  ws->next_layer().set_verify_callback(asio::ssl::host_name_verification(sni));
  boost::system::error_code ec;
  tcp::resolver resolver(ex);
  auto endpoints = co_await resolver.async_resolve(a.host, std::to_string(a.port), Into(ec));
  beast::tcp_stream& tcp_layer = beast::get_lowest_layer(*ws);
  if (!ec) {
    tcp_layer.expires_after(std::chrono::seconds(3));
    co_await tcp_layer.async_connect(endpoints, Into(ec));
  }
  if (ec) {
    co_return absl::UnavailableError(Cat("cannot reach ", a.host, ":", a.port, ": ", ec.message()));
  }
  tcp_layer.socket().set_option(tcp::no_delay(true), ec);
  tcp_layer.expires_after(std::chrono::seconds(10));
  co_await ws->next_layer().async_handshake(asio::ssl::stream_base::client, Into(ec));
  if (ec) co_return absl::UnavailableError(Cat("TLS with ", a.host, ": ", ec.message()));
  tcp_layer.expires_never();  // the WebSocket's own timeouts from here
  websocket::stream_base::timeout t;
  t.handshake_timeout = std::chrono::seconds(10);
  t.idle_timeout = std::chrono::seconds(60);
  t.keep_alive_pings = true;
  ws->set_option(t);
  const std::string token = config.token;
  ws->set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
    req.set(http::field::user_agent, "gpuctl");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  }));
  ws->read_message_max(16 << 20);
  // A message goes as one frame, masked through a buffer as large as our messages (Beast's
  // defaults, 4 KiB fragments, cost a TLS record and a syscall each: a tenth of the throughput).
  ws->auto_fragment(false);
  ws->write_buffer_bytes(256 << 10);
  websocket::response_type res;
  co_await ws->async_handshake(res, sni, target, Into(ec));
  if (ec) {
    if (res.result_int() != 0 && res.result_int() != 101) {
      co_return absl::Status(CodeOfHttpStatus(res.result_int()),
                             RefusalMessage(res.result_int(), res.body()));
    }
    co_return absl::UnavailableError(Cat("WebSocket with ", a.host, ": ", ec.message()));
  }
  co_return ws;
}

}  // namespace

void RaiseDescriptorLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 65536);
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

absl::StatusCode CodeOfHttpStatus(int status) {
  switch (status) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kUnknown;
  }
}

absl::StatusOr<std::shared_ptr<asio::ssl::context>> TlsContext(const ClientConfig& c) {
  OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, nullptr);
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->load_verify_file(c.ca_path, ec);
  if (ec) return absl::InvalidArgumentError(Cat(c.ca_path, ": ", ec.message()));
  if (!c.cert_path.empty()) {
    ctx->use_certificate_chain_file(c.cert_path, ec);
    if (ec) return absl::InvalidArgumentError(Cat(c.cert_path, ": ", ec.message()));
    ctx->use_private_key_file(c.key_path, asio::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(Cat(c.key_path, ": ", ec.message()));
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_3_VERSION);
  return ctx;
}

asio::awaitable<absl::StatusOr<std::unique_ptr<Stream>>> Open(asio::any_io_executor ex,
                                                              asio::ssl::context& ctx,
                                                              const ClientConfig& config,
                                                              std::string target) {
  std::vector<ServerAddress> servers{{config.host, config.port}};
  servers.insert(servers.end(), config.more_servers.begin(), config.more_servers.end());
  absl::Status last = absl::UnavailableError("no server configured");
  for (const ServerAddress& a : servers) {
    absl::StatusOr<std::unique_ptr<Stream>> ws = co_await OpenOne(ex, ctx, config, a, target);
    if (ws.ok() || !absl::IsUnavailable(ws.status())) co_return ws;
    last = ws.status();
  }
  co_return last;
}

asio::awaitable<void> Both(asio::awaitable<void>& a, asio::awaitable<void>& b,
                           const std::function<void()>& on_first) {
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  struct State {
    explicit State(asio::any_io_executor e) : done(e) {}
    int running = 2;
    Event done;
  };
  auto state = std::make_shared<State>(ex);
  auto ended = [state, on_first](std::exception_ptr) {
    if (--state->running == 1 && on_first) on_first();
    state->done.Notify();
  };
  asio::co_spawn(ex, std::move(a), ended);
  asio::co_spawn(ex, std::move(b), ended);
  while (state->running > 0) co_await state->done.Wait();
}

asio::awaitable<void> Event::Wait() {
  timer_.expires_at(asio::steady_timer::time_point::max());
  boost::system::error_code ec;
  co_await timer_.async_wait(Into(ec));
}

}  // namespace gpucloud::api::ws
