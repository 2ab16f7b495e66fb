// The agent's /metrics endpoint over real HTTP (CTest label `integration`), on simulated GPUs:
// scrapes, idle and slow clients, the connection limit, and fault injection only when asked.
#include "agent/metrics_server.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <future>

#include "agent/simulated_backend.h"

namespace gpucloud::agent {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

http::response<http::string_body> Get(uint16_t port, const std::string& target,
                                      http::verb method = http::verb::get) {
  asio::io_context io;
  beast::tcp_stream s(io);
  s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> req{method, target, 11};
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

// A connected client that sends nothing.
struct IdleClient {
  explicit IdleClient(uint16_t port) : socket(io) {
    socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  asio::io_context io;
  asio::ip::tcp::socket socket;
};

TEST(MetricsServer, AnIdleConnectionDoesNotHoldUpAScrape) {
  std::unique_ptr<GpuBackend> backend = std::move(*MakeSimulatedBackend("1xH100"));
  MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
  ASSERT_TRUE(server.Start().ok());
  auto idle = std::make_unique<IdleClient>(server.port());  // accepted first, sends nothing
  std::future<unsigned> scrape =
      std::async(std::launch::async, [&] { return Get(server.port(), "/metrics").result_int(); });
  bool answered = scrape.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  idle.reset();  // a server stuck on the idle client gets its end-of-file and goes on
  EXPECT_TRUE(answered) << "the scrape waited for the idle connection";
  EXPECT_EQ(scrape.get(), 200u);
  server.Stop();
}

TEST(MetricsServer, DropsAClientThatSendsNoRequestInTime) {
  std::unique_ptr<GpuBackend> backend = std::move(*MakeSimulatedBackend("1xH100"));
  MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
  server.SetLimits(absl::Milliseconds(100), 64);
  ASSERT_TRUE(server.Start().ok());
  IdleClient idle(server.port());
  char byte;
  boost::system::error_code ec;
  size_t n = idle.socket.read_some(asio::buffer(&byte, 1), ec);  // returns when the server closes
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
  server.Stop();
}

TEST(MetricsServer, AnswersBusyBeyondItsConnectionLimitAndStopsWithClientsConnected) {
  std::unique_ptr<GpuBackend> backend = std::move(*MakeSimulatedBackend("1xH100"));
  MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
  server.SetLimits(absl::Seconds(60), 2);
  ASSERT_TRUE(server.Start().ok());
  IdleClient first(server.port()), second(server.port());  // accepted in order: both held
  IdleClient third(server.port());
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(third.socket, buf, res);  // the answer comes without a request
  EXPECT_EQ(res.result_int(), 503);
  EXPECT_EQ(res.body(), "too many connections\n");
  server.Stop();  // does not wait out the idle clients' 60 s
}

TEST(MetricsServer, InjectsFaultsOnlyWithTheHandler) {
  std::unique_ptr<GpuBackend> backend = std::move(*MakeSimulatedBackend("2xH100"));
  {
    MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
    ASSERT_TRUE(server.Start().ok());
    EXPECT_EQ(Get(server.port(), "/inject?gpu=1&xid=79", http::verb::post).result_int(), 404);
    EXPECT_TRUE(backend->TakeXids().empty());  // nothing changed
  }
  MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
  server.SetHandler(FaultInjectionHandler(*backend));
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(Get(server.port(), "/inject?gpu=1&xid=79").result_int(), 405);
  auto res = Get(server.port(), "/inject?gpu=1&xid=79", http::verb::post);
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "injected xid on GPU 1\n");
  std::vector<XidEvent> xids = backend->TakeXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].gpu, 1);
  EXPECT_EQ(xids[0].xid, 79);
  EXPECT_EQ(Get(server.port(), "/inject?xid=79", http::verb::post).result_int(), 400);
}

TEST(MetricsServer, InjectionReadsItsQueryAsTheServerDoes) {
  std::unique_ptr<GpuBackend> backend = std::move(*MakeSimulatedBackend("2xH100"));
  MetricsServer server(*backend, "127.0.0.1", 0, "node-1");
  server.SetHandler(FaultInjectionHandler(*backend));
  ASSERT_TRUE(server.Start().ok());
  // A number that is not one is 400 naming the parameter, never GPU 0 or Xid 0.
  for (const char* target : {"/inject?gpu=abc&xid=79", "/inject?gpu=&xid=79",
                             "/inject?gpu=-1&xid=79", "/inject?gpu=4294967297&xid=79"}) {
    auto res = Get(server.port(), target, http::verb::post);
    EXPECT_EQ(res.result_int(), 400) << target;
    EXPECT_EQ(res.body(), "gpu: must be a whole number from 0 to 2147483647\n") << target;
  }
  auto bad_xid = Get(server.port(), "/inject?gpu=1&xid=7x", http::verb::post);
  EXPECT_EQ(bad_xid.result_int(), 400);
  EXPECT_EQ(bad_xid.body(), "xid: must be a whole number from 0 to 2147483647\n");
  EXPECT_TRUE(backend->TakeXids().empty());  // nothing changed
  // Names and values are percent-decoded.
  auto res = Get(server.port(), "/inject?gp%75=%31&xid=%37%39", http::verb::post);
  EXPECT_EQ(res.result_int(), 200) << res.body();
  EXPECT_EQ(res.body(), "injected xid on GPU 1\n");
  std::vector<XidEvent> xids = backend->TakeXids();
  ASSERT_EQ(xids.size(), 1u);
  EXPECT_EQ(xids[0].gpu, 1);
  EXPECT_EQ(xids[0].xid, 79);
}

}  // namespace
}  // namespace gpucloud::agent
