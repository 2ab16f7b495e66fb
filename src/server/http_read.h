// ReadHttpRequest: one HTTP/1.1 request read from a TLS connection into Beast's parser, fed by
// hand from a buffer that keeps what follows it (a pipelined request's start). Shared by the
// API's front (https_server.cc) and the inference gateway (gateway_proxy.cc); the caller
// bounds the time it takes (its connection's deadline). Touched only on the connection's
// strand: not thread-safe.
#ifndef GPUCLOUD_SERVER_HTTP_READ_H_
#define GPUCLOUD_SERVER_HTTP_READ_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/tls_conn.h"

namespace gpucloud::server {

// Reads until `parser` has a whole request or fails: `ec` is then the parser's error
// (body_limit, header_limit, a malformed request), end_of_stream when the client closed
// between requests, partial_message when it closed inside one, or the read's error.
inline boost::asio::awaitable<void> ReadHttpRequest(
    TlsConn& tls, boost::beast::flat_buffer& buffer,
    boost::beast::http::request_parser<boost::beast::http::string_body>& parser,
    boost::beast::error_code& ec) {
  namespace http = boost::beast::http;
  for (;;) {
    if (buffer.size() > 0) {
      size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
      } else if (ec || parser.is_done()) {
        co_return;
      } else if (used > 0) {
        continue;
      }
    }
    auto space = buffer.prepare(16 << 10);
    size_t got = co_await tls.ReadSome(space.data(), space.size(), ec);
    if (ec) {
      if (ec == boost::asio::error::eof) {
        ec = parser.got_some() ? http::error::partial_message : http::error::end_of_stream;
      }
      co_return;
    }
    buffer.commit(got);
  }
}

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_HTTP_READ_H_
