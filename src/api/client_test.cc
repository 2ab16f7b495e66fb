#include "api/client.h"

#include <gtest/gtest.h>
#include <openssl/crypto.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "testing/pem.h"
#include "testing/temp_dir.h"

namespace gpucloud::api {
namespace {

// gpuctl makes one request per process, so OpenSSL is not cleaned up at its exit (issue 17: that
// was about 0.5-0.9 ms of each `gpuctl run`). In a fresh process (this test binary run again,
// for this test alone, so that nothing initialized OpenSSL before): a handler registered before
// the client's first connection attempt runs after any clean-up OpenSSL registers then, and
// OpenSSL initializes again only if it was not cleaned up.
TEST(Client, OpenSslIsNotCleanedUpAtExit) {
  if (std::getenv("GPUCLOUD_OPENSSL_EXIT_PROBE") != nullptr) {  // the fresh process
    std::atexit([] { _exit(OPENSSL_init_crypto(0, nullptr) == 1 ? 0 : 3); });
    ClientConfig config;
    config.host = "127.0.0.1";
    config.ca_path = "/nonexistent/ca.crt";  // fails after the TLS context is made
    (void)Client(config).Call("GET", "/version");
    std::exit(0);
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("GPUCLOUD_OPENSSL_EXIT_PROBE", "1", 1);
    execl("/proc/self/exe", "client_probe", "--gtest_filter=Client.OpenSslIsNotCleanedUpAtExit",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "OpenSSL was cleaned up at exit";
}

TEST(ClientConfig, ServerMayNameSeveralServersInOrder) {
  const std::string rest = "certificate-authority: ca.crt\ntoken: t\n";
  for (const std::string& servers :
       {std::string("server: https://a.example:8443, https://b.example,https://[::1]:9443\n"),
        std::string("server:\n  - https://a.example:8443\n  - https://b.example\n"
                    "  - https://[::1]:9443/\n")}) {
    absl::StatusOr<ClientConfig> c = ParseClientConfig(servers + rest, "cfg");
    ASSERT_TRUE(c.ok()) << servers << c.status();
    EXPECT_EQ(c->host, "a.example");
    EXPECT_EQ(c->port, 8443);
    EXPECT_EQ(c->more_servers, (std::vector<ServerAddress>{{"b.example", 443}, {"::1", 9443}}));
  }
  absl::StatusOr<ClientConfig> one = ParseClientConfig("server: https://h:1\n" + rest, "cfg");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->host, "h");
  EXPECT_TRUE(one->more_servers.empty());
}

TEST(ClientConfig, ABadServerIsNamed) {
  const std::string rest = "certificate-authority: ca.crt\ntoken: t\n";
  struct Case {
    std::string server, error;
  };
  for (const Case& c : std::vector<Case>{
           {"server: https://a:1,http://b:2\n",
            "cfg: server: must start with https://, got http://b:2"},
           {"server: https://a:70000\n", "cfg: server: bad port in https://a:70000"},
           {"server: https://a:x\n", "cfg: server: bad port in https://a:x"},
           {"server: https://:1\n", "cfg: server: no host in https://:1"},
           {"server:\n  - [https://a]\n", "cfg: server: a list of https:// URLs"},
           {"server: {a: 1}\n", "cfg: server: a URL or a list of URLs"},
           {"server: ' , '\n", "cfg: server: is required"},
           {"", "cfg: server: is required"},
       }) {
    absl::StatusOr<ClientConfig> got = ParseClientConfig(c.server + rest, "cfg");
    ASSERT_FALSE(got.ok()) << c.server;
    EXPECT_EQ(got.status().message(), c.error) << c.server;
  }
}

// A TLS server on loopback that answers one request with the head of a chunked 200 and `body`,
// then says nothing more until the test ends (a server that froze mid-stream).
class FrozenStreamServer {
 public:
  explicit FrozenStreamServer(std::string body) : body_(std::move(body)) {
    auto [key, cert] = testing_util::MakeKeyAndSelfSignedCert("localhost", 1);
    std::ofstream(dir_ / "ca.crt") << cert;
    ctx_.use_certificate_chain(boost::asio::buffer(cert));
    ctx_.use_private_key(boost::asio::buffer(key), boost::asio::ssl::context::pem);
    acceptor_.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    thread_ = std::thread([this] { Serve(); });
  }
  ~FrozenStreamServer() {
    release_.set_value();
    thread_.join();
  }
  ClientConfig Config() const {
    ClientConfig c;
    c.host = "127.0.0.1";
    c.port = acceptor_.local_endpoint().port();
    c.ca_path = dir_ / "ca.crt";
    return c;
  }

 private:
  void Serve() {
    boost::asio::ssl::stream<boost::asio::ip::tcp::socket> s(io_, ctx_);
    acceptor_.accept(s.next_layer());
    s.handshake(boost::asio::ssl::stream_base::server);
    std::string request;
    char c;
    while (!request.ends_with("\r\n\r\n") &&
           boost::asio::read(s, boost::asio::buffer(&c, 1)) == 1) {
      request += c;
    }
    boost::asio::write(
        s, boost::asio::buffer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body_));
    release_.get_future().wait();
  }

  testing_util::TempDir dir_;
  std::string body_;
  boost::asio::io_context io_;
  boost::asio::ssl::context ctx_{boost::asio::ssl::context::tls_server};
  boost::asio::ip::tcp::acceptor acceptor_{io_, boost::asio::ip::tcp::v4()};
  std::promise<void> release_;
  std::thread thread_;
};

// A stream that stops after a line and half of the next chunk's framing is silent: it ends as
// Unavailable after its idle limit, not by waiting on the socket forever (an agent's watch held
// by a frozen server, found with examples/ha/up.sh).
TEST(Client, AStreamSilentAfterHalfAChunkEndsAfterItsIdleLimit) {
  for (const std::string& rest : {std::string(""), std::string("1"), std::string("6\r\nli")}) {
    auto server = std::make_unique<FrozenStreamServer>("6\r\nline1\n\r\n" + rest);
    std::vector<std::string> lines;
    auto ended = std::async(std::launch::async, [&lines, config = server->Config()] {
      return Client(config).Stream(
          "/watch", [&](const std::string& l) { lines.push_back(l); }, 1);
    });
    const bool on_time = ended.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    server.reset();  // a client still waiting sees the connection close
    ASSERT_TRUE(on_time) << "after '" << rest << "': still waiting on a silent server";
    absl::StatusOr<HttpResponse> r = ended.get();
    EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
    EXPECT_EQ(lines, std::vector<std::string>{"line1"});
  }
}

}  // namespace
}  // namespace gpucloud::api
