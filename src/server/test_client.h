// Test helper: one HTTPS request over a fresh TLS connection that verifies the server against
// a CA file (as gpuctl will). Test-only; thread-compatible.
#ifndef GPUCLOUD_SERVER_TEST_CLIENT_H_
#define GPUCLOUD_SERVER_TEST_CLIENT_H_

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <string>

namespace gpucloud::testing_util {

inline boost::beast::http::response<boost::beast::http::string_body> HttpsCall(
    uint16_t port, const std::string& ca_file, boost::beast::http::verb verb,
    const std::string& target, const std::string& token, const std::string& body = "",
    int max_tls = TLS1_3_VERSION, const std::string& content_type = "application/json") {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.load_verify_file(ca_file);
  ctx.set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_max_proto_version(ctx.native_handle(), max_tls);
  beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
  SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
  stream.set_verify_callback(asio::ssl::host_name_verification("localhost"));
  http::response<http::string_body> res;
  beast::error_code ec;
  beast::get_lowest_layer(stream).connect(
      asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  if (!ec) stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) {
    res.result(http::status::unknown);
    res.body() = "connect or handshake: " + ec.message();
    return res;
  }
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "localhost");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  req.set(http::field::content_type, content_type);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  beast::flat_buffer buf;
  if (!ec) http::read(stream, buf, res, ec);
  if (ec) {
    res.result(http::status::unknown);
    res.body() = "request: " + ec.message();
  }
  return res;
}

}  // namespace gpucloud::testing_util

#endif  // GPUCLOUD_SERVER_TEST_CLIENT_H_
