// The agent's /metrics endpoint over real HTTP (CTest label `integration`), on simulated GPUs.
#include "agent/metrics_server.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "agent/simulated_backend.h"

namespace gpucloud::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

http::response<http::string_body> Get(uint16_t port, const std::string& target) {
  asio::io_context io;
  beast::tcp_stream s(io);
  s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "localhost");
  http::write(s, req);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  return res;
}

TEST(MetricsServer, ServesAFreshScrape) {
  std::unique_ptr<GpuBackend> backend = std::move(*MakeSimulatedBackend("2xH100"));
  MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
  ASSERT_TRUE(server.Start().ok());
  auto first = Get(server.port(), "/metrics");
  ASSERT_EQ(first.result_int(), 200);
  EXPECT_NE(first.body().find("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"), std::string::npos);
  EXPECT_NE(first.body().find("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"GPU-simulated-1\""),
            std::string::npos)
      << first.body();
  EXPECT_NE(first.body().find("Hostname=\"node-1\""), std::string::npos);
  // Each scrape samples anew: the energy counter grows.
  auto second = Get(server.port(), "/metrics");
  EXPECT_NE(first.body(), second.body());
  EXPECT_EQ(Get(server.port(), "/healthz").body(), "ok\n");
  EXPECT_EQ(Get(server.port(), "/other").result_int(), 404);
  server.Stop();
}

}  // namespace
}  // namespace gpucloud::agent
