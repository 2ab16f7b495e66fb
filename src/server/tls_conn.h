// TlsConn: TLS 1.3 driven by hand on a connection's socket, for the control plane's HTTPS
// front (https_server.cc) and the WebSockets of interactive sessions (session_relay.h); and
// TlsStream, the same connection as a Beast stream (AsyncReadStream and AsyncWriteStream), so
// that beast::websocket runs on it. Touched only on its connection's strand: not thread-safe.
// Private to the server's front end.
#ifndef GPUCLOUD_SERVER_TLS_CONN_H_
#define GPUCLOUD_SERVER_TLS_CONN_H_

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp uses std::exchange without it
// clang-format on
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <optional>
#include <string>

#include "server/credentials.h"

namespace gpucloud::server {

namespace tls_detail {
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
// Completion token: no exception for an I/O error, which lands in `ec`.
inline auto Into(beast::error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }
}  // namespace tls_detail

using tls_detail::Into;

// TLS driven on the socket itself: OpenSSL reads and writes the descriptor (non-blocking), and
// the coroutine waits for readiness when it asks to. Unlike asio::ssl::stream (two 17 KB
// buffers of its own and a BIO pair of two more), an idle connection then holds no buffer at
// all (SSL_MODE_RELEASE_BUFFERS): 4,000 agents' connections cost megabytes, not 300 MB.
// Touched only on its connection's strand.
class TlsConn {
 private:
  using tcp = tls_detail::tcp;
  template <typename T>
  using awaitable = boost::asio::awaitable<T>;
  using error_code = boost::beast::error_code;

 public:
  TlsConn(tcp::socket& socket, SSL_CTX* ctx) : socket_(socket), ssl_(SSL_new(ctx)) {
    error_code ec;
    socket_.non_blocking(true, ec);
    if (ssl_ != nullptr) {
      SSL_set_fd(ssl_, socket_.native_handle());
      SSL_set_accept_state(ssl_);
    }
  }
  ~TlsConn() { SSL_free(ssl_); }
  TlsConn(const TlsConn&) = delete;
  TlsConn& operator=(const TlsConn&) = delete;

  awaitable<void> Handshake(error_code& ec) { co_await Drive(Op::kAccept, nullptr, 0, ec); }
  // Some bytes (at most `size`) into `data`; 0 with `ec` set at the end or on an error
  // (boost::asio::error::eof when the client closed).
  awaitable<size_t> ReadSome(void* data, size_t size, error_code& ec) {
    co_return co_await Drive(Op::kRead, data, size, ec);
  }
  awaitable<void> WriteAll(const std::string& data, error_code& ec) {
    if (!data.empty()) co_await Drive(Op::kWrite, const_cast<char*>(data.data()), data.size(), ec);
  }
  // After the handshake: the client certificate's subject CN and serial, when the client gave
  // one and it verified against the CA; nullopt otherwise.
  std::optional<std::pair<std::string, std::string>> PeerCertificate() const {
    if (ssl_ == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) return std::nullopt;
    X509* peer = SSL_get1_peer_certificate(ssl_);
    if (peer == nullptr) return std::nullopt;
    std::pair<std::string, std::string> out{CertificateCommonName(peer), CertificateSerial(peer)};
    X509_free(peer);
    return out;
  }

  // What an OpenSSL error other than WANT_READ/WANT_WRITE means: eof when the peer closed
  // (cleanly, or by just going), connection_aborted otherwise.
  static error_code Failure(int ssl_error) {
    const bool closed = ssl_error == SSL_ERROR_ZERO_RETURN ||
                        (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0);
    if (closed) return boost::asio::error::eof;
    return boost::asio::error::connection_aborted;
  }
  SSL* ssl() const { return ssl_; }
  tcp::socket& socket() const { return socket_; }
  enum class Op { kAccept, kRead, kWrite };

 private:
  // Runs `op` until it makes progress, waiting for the socket as OpenSSL asks.
  awaitable<size_t> Drive(Op op, void* data, size_t size, error_code& ec) {
    if (ssl_ == nullptr) {
      ec = boost::asio::error::no_memory;
      co_return 0;
    }
    const int n_max = static_cast<int>(std::min<size_t>(size, 1 << 30));
    for (;;) {
      ERR_clear_error();
      int n = op == Op::kAccept ? SSL_accept(ssl_)
              : op == Op::kRead ? SSL_read(ssl_, data, n_max)
                                : SSL_write(ssl_, data, n_max);
      if (n > 0) co_return op == Op::kAccept ? 0 : static_cast<size_t>(n);
      int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        co_await socket_.async_wait(
            err == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write,
            Into(ec));
        if (ec) co_return 0;
        continue;
      }
      ec = Failure(err);
      co_return 0;
    }
  }
  tcp::socket& socket_;
  SSL* ssl_;
};

// TlsConn as a Beast stream (AsyncReadStream, AsyncWriteStream): what
// beast::websocket::stream<TlsStream> reads and writes. A copy refers to the same connection.
// Each operation completes on its handler's executor (the calling coroutine's strand).
class TlsStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  explicit TlsStream(TlsConn& conn) : conn_(&conn) {}
  executor_type get_executor() const { return conn_->socket().get_executor(); }
  TlsConn& conn() const { return *conn_; }

  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    boost::asio::mutable_buffer b = First<boost::asio::mutable_buffer>(buffers);
    return boost::asio::async_initiate<Token, void(boost::beast::error_code, std::size_t)>(
        [conn = conn_, b](auto handler) {
          Op<std::decay_t<decltype(handler)>>{conn, TlsConn::Op::kRead, b.data(), b.size(),
                                              std::move(handler)}();
        },
        token);
  }
  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    boost::asio::const_buffer b = First<boost::asio::const_buffer>(buffers);
    return boost::asio::async_initiate<Token, void(boost::beast::error_code, std::size_t)>(
        [conn = conn_, b](auto handler) {
          Op<std::decay_t<decltype(handler)>>{conn, TlsConn::Op::kWrite,
                                              const_cast<void*>(b.data()), b.size(),
                                              std::move(handler)}();
        },
        token);
  }

 private:
  // The first non-empty buffer of a sequence (an operation may move fewer bytes than asked).
  template <typename Buffer, typename Buffers>
  static Buffer First(const Buffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      Buffer b(*it);
      if (b.size() > 0) return b;
    }
    return Buffer();
  }

  // One read or write: OpenSSL tried, the socket awaited as it asks, again until progress.
  template <typename Handler>
  // A read takes every record already there (up to `size`), not one: a bulk stream through the
  // relay is then a completion per socket read, not per 16 KiB record.
  struct Op {
    TlsConn* conn;
    TlsConn::Op op;
    void* data;
    size_t size;
    Handler handler;
    size_t done = 0;         // bytes read so far
    bool initiating = true;  // still inside async_read_some / async_write_some
    using executor_type = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
    executor_type get_executor() const {
      return boost::asio::get_associated_executor(handler, conn->socket().get_executor());
    }
    void operator()(boost::beast::error_code ec = {}) {
      if (!ec && size == 0) return Complete(ec, 0);
      while (!ec) {
        const int n_max = static_cast<int>(std::min<size_t>(size - done, 1 << 30));
        char* at = static_cast<char*>(data) + done;
        ERR_clear_error();
        int n = op == TlsConn::Op::kRead ? SSL_read(conn->ssl(), at, n_max)
                                         : SSL_write(conn->ssl(), at, n_max);
        if (n > 0) {
          done += static_cast<size_t>(n);
          if (op == TlsConn::Op::kWrite || done == size) return Complete(ec, done);
          continue;  // more records may be there already
        }
        int err = SSL_get_error(conn->ssl(), n);
        if (err == SSL_ERROR_WANT_READ && done > 0) return Complete(ec, done);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          auto wait = err == SSL_ERROR_WANT_READ ? tls_detail::tcp::socket::wait_read
                                                 : tls_detail::tcp::socket::wait_write;
          initiating = false;
          conn->socket().async_wait(wait, std::move(*this));
          return;
        }
        ec = TlsConn::Failure(err);
        if (done > 0) return Complete({}, done);  // the error comes with the next read
      }
      Complete(ec, 0);
    }
    // Inside the initiating call the handler must not run at once (Asio's rule): posted; after
    // a wait, this already runs on the handler's executor: dispatched, without a hop.
    void Complete(boost::beast::error_code ec, size_t n) {
      executor_type ex = get_executor();
      if (initiating) {
        boost::asio::post(ex, [h = std::move(handler), ec, n]() mutable { h(ec, n); });
      } else {
        boost::asio::dispatch(ex, [h = std::move(handler), ec, n]() mutable { h(ec, n); });
      }
    }
  };

  TlsConn* conn_;
};

// Closes the connection's socket (Beast's WebSocket timeouts call it).
inline void beast_close_socket(TlsStream& s) {
  boost::beast::error_code ec;
  s.conn().socket().close(ec);
}

// The WebSocket's end: the TLS close_notify sent if it can go at once, the socket shut.
inline void teardown(boost::beast::role_type, TlsStream& s, boost::beast::error_code& ec) {
  ERR_clear_error();
  if (s.conn().ssl() != nullptr) SSL_shutdown(s.conn().ssl());
  s.conn().socket().shutdown(tls_detail::tcp::socket::shutdown_both, ec);
  ec = {};
}
template <typename Handler>
void async_teardown(boost::beast::role_type role, TlsStream& s, Handler&& handler) {
  boost::beast::error_code ec;
  teardown(role, s, ec);
  auto ex = boost::asio::get_associated_executor(handler, s.get_executor());
  boost::asio::post(ex, [h = std::forward<Handler>(handler), ec]() mutable { h(ec); });
}

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_TLS_CONN_H_
