// Sender's template bodies (ws_client.h); included by it only.
#ifndef GPUCLOUD_API_WS_CLIENT_IMPL_H_
#define GPUCLOUD_API_WS_CLIENT_IMPL_H_

#include <boost/asio/buffer.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace gpucloud::api::ws {

template <typename WebSocket>
asio::awaitable<void> Sender<WebSocket>::Wait() {
  wake_.expires_at(asio::steady_timer::time_point::max());
  boost::system::error_code ec;
  co_await wake_.async_wait(Into(ec));
}

template <typename WebSocket>
asio::awaitable<bool> Sender<WebSocket>::Send(std::string message) {
  while (busy_ && !failed_) co_await Wait();
  if (failed_) co_return false;
  busy_ = true;
  boost::system::error_code ec;
  ws_.binary(true);
  co_await ws_.async_write(asio::buffer(message), Into(ec));
  busy_ = false;
  if (ec) failed_ = true;
  wake_.cancel();
  co_return !ec;
}

template <typename WebSocket>
asio::awaitable<void> Sender<WebSocket>::Close(std::string reason) {
  while (busy_ && !failed_) co_await Wait();
  if (failed_) co_return;
  busy_ = true;
  boost::system::error_code ec;
  beast::websocket::close_reason why(beast::websocket::close_code::normal);
  why.reason = reason.substr(0, 120);  // a close frame holds at most 123 bytes of reason
  co_await ws_.async_close(why, Into(ec));
  failed_ = true;  // nothing more goes after a close
  busy_ = false;
  wake_.cancel();
}

template <typename WebSocket>
asio::awaitable<bool> Read(WebSocket& ws, std::string& out, boost::system::error_code& ec) {
  beast::flat_buffer buffer;
  co_await ws.async_read(buffer, Into(ec));
  if (ec) co_return false;
  out = beast::buffers_to_string(buffer.data());
  co_return true;
}

}  // namespace gpucloud::api::ws

#endif  // GPUCLOUD_API_WS_CLIENT_IMPL_H_
