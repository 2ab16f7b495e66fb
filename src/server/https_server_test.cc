// The HTTPS server with real TLS clients (CTest label `integration`): TLS 1.3 with the server's
// own CA, bearer tokens (401 without), REST through the wire, and a streamed watch.
#include "server/https_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/client.h"
#include "core/private_file.h"
#include "core/text.h"
#include "server/node_certs.h"
#include "server/test_client.h"
#include "store/sqlite_store.h"
#include "testing/pem.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

namespace http = boost::beast::http;

const char* kJob =
    "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"train\"},"
    "\"spec\":{\"tasks\":[{\"name\":\"w\",\"resources\":{\"gpu\":{\"count\":1}}}]}}";

namespace asio = boost::asio;
namespace beast = boost::beast;

asio::ssl::context ClientContext(const std::string& ca_file) {
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.load_verify_file(ca_file);
  return ctx;
}

// A TLS connection to the server (verifying its CA) for requests written by hand; every
// operation on it gives up after 10 s. `ec` says whether connecting and the handshake worked.
struct TlsConnection {
  TlsConnection(uint16_t port, const std::string& ca_file)
      : ctx(ClientContext(ca_file)), stream(io, ctx) {
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
    beast::get_lowest_layer(stream).connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) stream.handshake(asio::ssl::stream_base::client, ec);
  }
  asio::io_context io;
  asio::ssl::context ctx;
  beast::ssl_stream<beast::tcp_stream> stream;
  beast::error_code ec;
};

class HttpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Credentials> c = EnsureCredentials(dir_.string());
    ASSERT_TRUE(c.ok()) << c.status();
    creds_ = *c;
    ASSERT_EQ(creds_.admin_token.size(), 64u);
    ASSERT_TRUE(CommitAdminToken(dir_.string(), creds_.admin_token).ok());
    tokens_ = *TokenBook::Load(dir_.string());
    tenant_token_ = NewToken();
    tokens_.Add(tenant_token_, Identity{"alice", "default", false, false});
    store_ = std::move(*store::OpenSqliteStore((dir_ / "store.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 1);
    StartServer({});
  }
  // (Re)starts the server with `o` (certificates filled in; errors to `log_`).
  void StartServer(HttpsServer::Options o) {
    server_.reset();
    o.cert_path = creds_.cert_path;
    o.key_path = creds_.key_path;
    o.log = [this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_ += line + "\n";
    };
    server_ = std::make_unique<HttpsServer>(*api_, tokens_, *store_, std::move(o));
    ASSERT_TRUE(server_->Start().ok());
  }
  // Sends `raw` over TLS as it is and returns "CODE REASON..." of the answer, or "closed" when
  // the server closed the connection without one (within 10 s, or "timeout").
  std::string TlsExchange(const std::string& raw) {
    TlsConnection c(server_->port(), creds_.ca_cert_path);
    if (c.ec) return "handshake: " + c.ec.message();
    beast::error_code ec;
    asio::write(c.stream, asio::buffer(raw), ec);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(c.stream, buf, res, ec);
    if (ec == beast::error::timeout) return "timeout";
    if (ec) return "closed";
    return Cat(res.result_int(), " ", std::string(res.reason()), " ", res.body());
  }
  std::string Logged() {
    std::lock_guard lock(log_mu_);
    return log_;
  }
  void TearDown() override { server_.reset(); }

  http::response<http::string_body> Call(http::verb verb, const std::string& target,
                                         const std::string& token, const std::string& body = "",
                                         int max_tls = TLS1_3_VERSION) {
    return testing_util::HttpsCall(server_->port(), creds_.ca_cert_path, verb, target, token, body,
                                   max_tls);
  }

  testing_util::TempDir tmp_{"gpucloud-https"};
  const std::filesystem::path& dir_ = tmp_.path();
  Credentials creds_;
  TokenBook tokens_;
  std::string tenant_token_;
  std::mutex log_mu_;
  std::string log_;
  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<HttpsServer> server_;
};

constexpr char kJobs[] = "/apis/gpucloud/v1/namespaces/default/jobs";

TEST_F(HttpsServerTest, TokenRequired) {
  auto r = Call(http::verb::get, kJobs, "");
  EXPECT_EQ(r.result_int(), 401);
  EXPECT_NE(r.body().find("a valid bearer token is required"), std::string::npos);
  EXPECT_EQ(Call(http::verb::get, kJobs, "not-the-token").result_int(), 401);
  EXPECT_EQ(Call(http::verb::get, kJobs, creds_.admin_token).result_int(), 200);
}

TEST_F(HttpsServerTest, Tls12IsRefused) {
  auto r = Call(http::verb::get, kJobs, creds_.admin_token, "", TLS1_2_VERSION);
  EXPECT_EQ(r.result(), http::status::unknown);
  EXPECT_NE(r.body().find("handshake"), std::string::npos);
}

// No client of ours resumes a TLS session (gpuctl runs once, agents keep one connection), so
// the server sends no session tickets: each costs an encryption per connection, and a ticket
// arriving after the handshake made a fresh connection look readable before any answer came.
TEST_F(HttpsServerTest, NoSessionTicketsAreSent) {
  TlsConnection c(server_->port(), creds_.ca_cert_path);
  ASSERT_FALSE(c.ec) << c.ec.message();
  http::request<http::empty_body> req{http::verb::get, kJobs, 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::authorization, "Bearer " + creds_.admin_token);
  beast::error_code ec;
  http::write(c.stream, req, ec);
  ASSERT_FALSE(ec) << ec.message();
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(c.stream, buf, res, ec);  // the tickets, had there been any, came before it
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(SSL_SESSION_is_resumable(SSL_get_session(c.stream.native_handle())), 0);
}

TEST_F(HttpsServerTest, CreateThenGetOverTheWire) {
  auto c = Call(http::verb::post, kJobs, creds_.admin_token, kJob);
  ASSERT_EQ(c.result_int(), 201) << c.body();
  auto g = Call(http::verb::get, std::string(kJobs) + "/train", creds_.admin_token);
  EXPECT_EQ(g.result_int(), 200);
  EXPECT_NE(g.body().find("\"resourceVersion\": \"1\""), std::string::npos) << g.body();
  auto bad = Call(http::verb::post, kJobs, creds_.admin_token, "{\"kind\": 5}");
  EXPECT_EQ(bad.result_int(), 422);
}

// The request's Content-Type reaches the API: a merge patch is applied, a JSON patch refused.
TEST_F(HttpsServerTest, PatchTakesTheContentTypeTheClientSent) {
  ASSERT_EQ(Call(http::verb::post, kJobs, creds_.admin_token, kJob).result_int(), 201);
  const std::string job = std::string(kJobs) + "/train";
  auto json_patch = testing_util::HttpsCall(
      server_->port(), creds_.ca_cert_path, http::verb::patch, job, creds_.admin_token,
      R"([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])", TLS1_3_VERSION,
      "application/json-patch+json");
  EXPECT_EQ(json_patch.result_int(), 415) << json_patch.body();
  EXPECT_NE(json_patch.body().find("application/merge-patch+json"), std::string::npos);
  auto merge =
      testing_util::HttpsCall(server_->port(), creds_.ca_cert_path, http::verb::patch, job,
                              creds_.admin_token, R"({"metadata": {"labels": {"team": "vision"}}})",
                              TLS1_3_VERSION, "application/merge-patch+json");
  EXPECT_EQ(merge.result_int(), 200) << merge.body();
  auto g = Call(http::verb::get, job, creds_.admin_token);
  EXPECT_NE(g.body().find("\"team\": \"vision\""), std::string::npos) << g.body();
}

TEST_F(HttpsServerTest, WatchStreamsChangesMadeWhileItWaits) {
  std::string got;
  std::thread watcher([&] {
    auto w =
        Call(http::verb::get, std::string(kJobs) + "?watch=true&resourceVersion=0&timeoutSeconds=3",
             creds_.admin_token);
    got = w.body();
  });
  // The watch is open (or about to be): a change made now must reach it, whenever it arrives,
  // since the watch starts from revision 0.
  auto c = Call(http::verb::post, kJobs, creds_.admin_token, kJob);
  ASSERT_EQ(c.result_int(), 201);
  watcher.join();
  EXPECT_NE(got.find("\"type\":\"ADDED\""), std::string::npos) << got;
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 1) << got;  // once, not repeated
}

TEST_F(HttpsServerTest, MetricsAndHealth) {
  EXPECT_EQ(Call(http::verb::get, "/healthz", "").body(), "ok\n");
  ASSERT_EQ(Call(http::verb::post, kJobs, creds_.admin_token, kJob).result_int(), 201);
  EXPECT_EQ(Call(http::verb::get, kJobs, "").result_int(), 401);
  EXPECT_EQ(Call(http::verb::get, "/metrics", "").result_int(), 401);
  auto m = Call(http::verb::get, "/metrics", creds_.admin_token);
  ASSERT_EQ(m.result_int(), 200);
  const std::string& text = m.body();
  EXPECT_NE(
      text.find("gpucloud_api_requests_total{method=\"POST\",resource=\"jobs\",code=\"201\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("gpucloud_api_requests_total{method=\"GET\",resource=\"jobs\",code=\"401\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("gpucloud_api_request_duration_seconds_count{method=\"POST\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpucloud_store_revision 1\n"), std::string::npos);
  // Every sample line is NAME{LABELS} VALUE or NAME VALUE, after its HELP and TYPE.
  for (const std::string& line :
       {std::string("# TYPE gpucloud_api_requests_total counter"),
        std::string("# TYPE gpucloud_api_request_duration_seconds histogram")}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

// The web console's files need no token (console_assets_test.cc tests what is answered); the
// API beside them still does.
TEST_F(HttpsServerTest, TheConsoleIsServedWithoutAToken) {
  auto index = Call(http::verb::get, "/ui/", "");
  ASSERT_EQ(index.result_int(), 200);
  EXPECT_EQ(index[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_NE(index.body().find("gpucloud console"), std::string::npos);
  EXPECT_NE(index["Content-Security-Policy"].find("default-src 'none'"), beast::string_view::npos);
  EXPECT_EQ(Call(http::verb::get, "/ui/js/api.js", "").result_int(), 200);
  EXPECT_EQ(Call(http::verb::get, "/ui/missing.js", "").result_int(), 404);
  EXPECT_EQ(Call(http::verb::get, kJobs, "").result_int(), 401);
}

TEST_F(HttpsServerTest, MadeUpMethodsWithoutATokenAddNoMetricSeries) {
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(TlsExchange(Cat("X", i,
                              "Y /apis/gpucloud/v1/namespaces/default/jobs HTTP/1.1\r\n"
                              "Host: localhost\r\n\r\n"))
                  .substr(0, 3),
              "401");
  }
  auto m = Call(http::verb::get, "/metrics", creds_.admin_token);
  ASSERT_EQ(m.result_int(), 200);
  EXPECT_NE(
      m.body().find(
          "gpucloud_api_requests_total{method=\"OTHER\",resource=\"jobs\",code=\"401\"} 20\n"),
      std::string::npos)
      << m.body();
  EXPECT_EQ(m.body().find("X1Y"), std::string::npos) << m.body();
}

TEST_F(HttpsServerTest, CredentialsAreKeptAcrossRestarts) {
  absl::StatusOr<Credentials> again = EnsureCredentials(dir_.string());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->admin_token.empty());  // issued once
  std::ifstream f(dir_ / "tokens");
  std::string tokens((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(tokens.find(creds_.admin_token), std::string::npos);  // stored hashed only
  EXPECT_NE(tokens.find(Sha256Hex(creds_.admin_token) + " admin - admin\n"), std::string::npos);
  EXPECT_EQ(
      std::filesystem::status(dir_ / "ca.key").permissions() & std::filesystem::perms::others_read,
      std::filesystem::perms::none);
}

// --- a careless or hostile client -----------------------------------------------------------

// A plain TCP connection to the server (no TLS), with a receive timeout so that a test never
// hangs on a server that fails to close it.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() { close(fd_); }
  bool connected() const { return connected_; }
  void Send(const std::string& data) { (void)!send(fd_, data.data(), data.size(), MSG_NOSIGNAL); }
  // Everything until the server closes; `closed` says whether it did (rather than the timeout).
  std::string ReadAll(bool* closed) {
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        out.append(buf, n);
        continue;
      }
      *closed = n == 0 || errno == ECONNRESET;
      return out;
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

TEST_F(HttpsServerTest, PlainHttpOnTheTlsPortIsAnswered400) {
  RawConnection c(server_->port());
  ASSERT_TRUE(c.connected());
  c.Send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
  bool closed = false;
  std::string answer = c.ReadAll(&closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 Bad Request\r\n")) << answer;
  EXPECT_NE(answer.find("HTTP request to an HTTPS server"), std::string::npos) << answer;
}

TEST_F(HttpsServerTest, SilentAndSlowClientsAreCutOff) {
  StartServer(
      {.handshake_timeout = absl::Milliseconds(300), .read_timeout = absl::Milliseconds(500)});
  // No handshake at all.
  RawConnection silent(server_->port());
  ASSERT_TRUE(silent.connected());
  bool closed = false;
  silent.ReadAll(&closed);
  EXPECT_TRUE(closed) << "the server kept a connection that never said anything";
  // A slowloris: TLS, then half a header, never finished.
  std::string answer = TlsExchange("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: 1\r\n");
  EXPECT_EQ(answer, "closed") << answer;
  // Meanwhile and afterwards, real clients are served.
  EXPECT_EQ(Call(http::verb::get, "/healthz", "").body(), "ok\n");
}

TEST_F(HttpsServerTest, OversizedHeaderIs431AndGarbageIs400) {
  std::string big =
      Cat("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ", std::string(100 << 10, 'a'),
          "\r\n\r\n");
  EXPECT_TRUE(TlsExchange(big).starts_with("431 ")) << TlsExchange(big).substr(0, 200);
  EXPECT_TRUE(TlsExchange("NOT HTTP AT ALL\r\n\r\n").starts_with("400 "));
}

int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

// Asynchronous I/O: connections and their watches cost no thread, and every watch still hears
// of a change at once.
TEST_F(HttpsServerTest, ThreadsAreIndependentOfConnectionsAndWatches) {
  const int before = ThreadsOfThisProcess();
  constexpr int kWatches = 150;
  std::vector<std::unique_ptr<TlsConnection>> watches;
  std::vector<beast::flat_buffer> buffers(kWatches);
  for (int i = 0; i < kWatches; ++i) {
    auto c = std::make_unique<TlsConnection>(server_->port(), creds_.ca_cert_path);
    ASSERT_FALSE(c->ec) << c->ec.message();
    http::request<http::empty_body> req{http::verb::get,
                                        std::string(kJobs) + "?watch=true&timeoutSeconds=30", 11};
    req.set(http::field::host, "localhost");
    req.set(http::field::authorization, "Bearer " + creds_.admin_token);
    http::write(c->stream, req);
    http::response_parser<http::empty_body> head;
    http::read_header(c->stream, buffers[i], head);
    ASSERT_EQ(head.get().result_int(), 200);
    watches.push_back(std::move(c));
  }
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 150; ++i) idle.push_back(std::make_unique<RawConnection>(server_->port()));
  // The test's clients are synchronous: every thread added here is the server's.
  EXPECT_LE(ThreadsOfThisProcess(), before + 2) << "threads grew with connections";
  ASSERT_EQ(Call(http::verb::post, kJobs, creds_.admin_token, kJob).result_int(), 201);
  for (int i = 0; i < kWatches; ++i) {
    // Each watch's next chunk is the new job (the wake-up, not a poll, brought it).
    std::string seen;
    beast::error_code ec;
    while (seen.find("\"ADDED\"") == std::string::npos && !ec) {
      char chunk[4096];
      size_t n = watches[i]->stream.read_some(asio::buffer(chunk), ec);
      seen.append(chunk, n);
    }
    EXPECT_NE(seen.find("\"name\":\"train\""), std::string::npos) << i << ": " << seen;
  }
}

TEST_F(HttpsServerTest, ConnectionsOverTheMaximumAreClosedAtOnce) {
  StartServer({.max_connections = 2});
  RawConnection a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.connected() && b.connected());
  RawConnection third(server_->port());  // accepted after a and b: over the maximum
  bool closed = false;
  third.ReadAll(&closed);
  EXPECT_TRUE(closed);
}

TEST_F(HttpsServerTest, ATenantsStreamsAreBoundedAndAdminsAreExempt) {
  StartServer({.max_streams_per_tenant = 1});
  // The tenant's one watch is open once its answer's header arrived (the server holds the
  // tenant's stream slot from before it writes that header until the watch ends).
  TlsConnection c(server_->port(), creds_.ca_cert_path);
  ASSERT_FALSE(c.ec) << c.ec.message();
  auto& first = c.stream;
  http::request<http::empty_body> req{http::verb::get,
                                      std::string(kJobs) + "?watch=true&timeoutSeconds=2", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::authorization, "Bearer " + tenant_token_);
  http::write(first, req);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> head;
  http::read_header(first, buf, head);
  ASSERT_EQ(head.get().result_int(), 200);

  auto second =
      Call(http::verb::get, std::string(kJobs) + "?watch=true&timeoutSeconds=1", tenant_token_);
  EXPECT_EQ(second.result_int(), 429) << second.body();
  EXPECT_EQ(second[http::field::retry_after], "1");
  // Plain requests of the same tenant, and the admin's watches, are not held back by it.
  EXPECT_EQ(Call(http::verb::get, kJobs, tenant_token_).result_int(), 200);
  EXPECT_EQ(
      Call(http::verb::get, std::string(kJobs) + "?watch=true&timeoutSeconds=1", creds_.admin_token)
          .result_int(),
      200);
  // Once the first watch ended, the tenant may watch again (its slot was released just after
  // the stream's last chunk went out).
  http::read(first, buf, head);
  http::response<http::string_body> again;
  for (int i = 0; i < 100 && again.result_int() != 200; ++i) {
    again =
        Call(http::verb::get, std::string(kJobs) + "?watch=true&timeoutSeconds=0", tenant_token_);
  }
  EXPECT_EQ(again.result_int(), 200);
}

TEST_F(HttpsServerTest, ATenantOverItsRequestRateIsTold429) {
  StartServer({.tenant_requests_per_second = 0.01, .tenant_request_burst = 3});
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(Call(http::verb::get, kJobs, tenant_token_).result_int(), 200);
  auto r = Call(http::verb::get, kJobs, tenant_token_);
  EXPECT_EQ(r.result_int(), 429) << r.body();
  EXPECT_EQ(r[http::field::retry_after], "100");  // one token per 100 s
  EXPECT_EQ(Call(http::verb::get, kJobs, creds_.admin_token).result_int(), 200);  // exempt
}

TEST_F(HttpsServerTest, AnExceptionInOneRequestIsItsOwn500) {
  // A stored document the handler cannot read (metadata is not an object): nlohmann throws.
  ASSERT_TRUE(
      store_->Txn({{store::Op::Kind::kPut, "/jobs/default/bad", "{\"metadata\":\"x\"}", 0}}).ok());
  auto r = Call(http::verb::get, std::string(kJobs) + "/bad", creds_.admin_token);
  EXPECT_EQ(r.result_int(), 500) << r.body();
  EXPECT_NE(Logged().find("failed"), std::string::npos) << Logged();
  EXPECT_EQ(Call(http::verb::get, "/healthz", "").body(), "ok\n");  // still serving
}

TEST_F(HttpsServerTest, HostileFieldValuesDoNotBlindAWatch) {
  // A tenant's free-form key named resourceVersion, after the object's own, with a revision
  // from the far future (the server once read batches' revisions out of their text).
  const char* hostile =
      "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"evil\"},"
      "\"spec\":{\"nodeSelector\":{\"resourceVersion\":\"99999999\"},\"tasks\":[{\"name\":"
      "\"w\",\"env\":[{\"name\":\"resourceVersion\",\"value\":\"99999999\"}],"
      "\"resources\":{\"gpu\":{\"count\":1}}}]}}";
  ASSERT_EQ(Call(http::verb::post, kJobs, creds_.admin_token, hostile).result_int(), 201);
  std::string got;
  std::thread watcher([&] {
    got =
        Call(http::verb::get, std::string(kJobs) + "?watch=true&resourceVersion=0&timeoutSeconds=3",
             creds_.admin_token)
            .body();
  });
  // Whenever the watch starts, the second job is after what it has seen: it must arrive.
  ASSERT_EQ(Call(http::verb::post, kJobs, creds_.admin_token, kJob).result_int(), 201);
  watcher.join();
  EXPECT_NE(got.find("\"name\":\"evil\""), std::string::npos) << got;
  EXPECT_NE(got.find("\"name\":\"train\""), std::string::npos) << got;
}

TEST_F(HttpsServerTest, EveryNamespaceWatchSendsEventsNotLists) {
  ASSERT_EQ(Call(http::verb::post, kJobs, creds_.admin_token, kJob).result_int(), 201);
  auto w = Call(http::verb::get, "/apis/gpucloud/v1/jobs?watch=true&timeoutSeconds=2",
                creds_.admin_token);
  ASSERT_EQ(w.result_int(), 200);
  // One ADDED event for the one job, not the list again every second.
  EXPECT_EQ(std::count(w.body().begin(), w.body().end(), '\n'), 1) << w.body();
  EXPECT_NE(w.body().find("\"type\":\"ADDED\""), std::string::npos) << w.body();
}

}  // namespace
}  // namespace gpucloud::server

namespace gpucloud::server {
namespace {

// Issue 14: agents authenticate with their own client certificates (mutual TLS), and a node
// acts on itself alone (NodeRestriction); the bootstrap token only asks for a certificate.
class NodeTlsTest : public HttpsServerTest {
 protected:
  void SetUp() override {
    HttpsServerTest::SetUp();
    // Certificates are valid from the API's clock on, and TLS checks them against the real one.
    clock_.Set(absl::ToUnixMillis(absl::Now()));
    certs_ = std::make_unique<NodeCertificates>(*store_, clock_, dir_.string(), absl::Hours(1));
    ASSERT_TRUE(certs_->Load().ok());
    api_->AttachNodeCertificates(certs_.get());
    bootstrap_token_ = NewToken();
    Identity bootstrap{"system:bootstrap"};
    bootstrap.bootstrap = true;
    tokens_.Add(bootstrap_token_, bootstrap);
    StartServer({.node_certs = certs_.get(), .client_ca_path = creds_.ca_cert_path});
  }
  api::ClientConfig Config() const {
    return {"127.0.0.1", server_->port(), creds_.ca_cert_path, ""};
  }
  // Joins node `name` with the bootstrap token, as an agent does: its key and certificate in
  // one file, and a client that presents it.
  absl::StatusOr<api::Client> Join(const std::string& name) {
    api::ClientConfig c = Config();
    c.token = bootstrap_token_;
    testing_util::KeyAndCsr k = testing_util::MakeKeyAndCsr("node:" + name);
    absl::StatusOr<api::HttpResponse> r =
        api::Client(c).Call("POST", Cat(kNodes, "/", name, "/certificate"), k.csr_pem);
    if (!r.ok()) return r.status();
    if (r->status != 201) return absl::PermissionDeniedError(Cat(r->status, " ", r->body));
    nlohmann::json doc = nlohmann::json::parse(r->body);
    std::string path = (dir_ / (name + ".pem")).string();
    if (absl::Status s =
            WritePrivateFile(path, k.key_pem + doc["status"]["certificate"].get<std::string>());
        !s.ok()) {
      return s;
    }
    c.token.clear();
    c.cert_path = c.key_path = path;
    return api::Client(c);
  }
  static constexpr char kNodes[] = "/apis/gpucloud/v1/nodes";
  std::unique_ptr<NodeCertificates> certs_;
  std::string bootstrap_token_;
};

int StatusOf(const absl::StatusOr<api::HttpResponse>& r) { return r.ok() ? r->status : -1; }

TEST_F(NodeTlsTest, ANodeCertificateActsOnItsOwnNodeOnly) {
  absl::StatusOr<api::Client> a = Join("gpu-a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(Join("gpu-b").ok());
  EXPECT_EQ(StatusOf(a->Call("GET", Cat(kNodes, "/gpu-a/assignments"))), 200);
  absl::StatusOr<api::HttpResponse> other = a->Call("GET", Cat(kNodes, "/gpu-b/assignments"));
  ASSERT_EQ(StatusOf(other), 403);
  EXPECT_NE(other->body.find("node gpu-a may not nodes:GetAssignments on gpucloud:node/gpu-b"),
            std::string::npos)
      << other->body;
  EXPECT_EQ(StatusOf(a->Call("POST", Cat(kNodes, "/gpu-b/heartbeat"), "{}")), 403);
  EXPECT_EQ(StatusOf(a->Call("PUT", Cat(kNodes, "/gpu-b"), "{}")), 403);
  // Nor does it reach tenants' objects, or sign itself another node's certificate.
  EXPECT_EQ(StatusOf(a->Call("GET", kJobs)), 403);
  EXPECT_EQ(StatusOf(a->Call("POST", Cat(kNodes, "/gpu-b/certificate"),
                             testing_util::MakeKeyAndCsr("node:gpu-b").csr_pem)),
            403);
}

TEST_F(NodeTlsTest, TheBootstrapTokenOnlyJoinsAndCannotTakeOverALiveNode) {
  api::ClientConfig c = Config();
  c.token = bootstrap_token_;
  api::Client bootstrap(c);
  EXPECT_EQ(StatusOf(bootstrap.Call("GET", Cat(kNodes, "/gpu-a/assignments"))), 403);
  EXPECT_EQ(StatusOf(bootstrap.Call("POST", Cat(kNodes, "/gpu-a/heartbeat"), "{}")), 403);
  EXPECT_EQ(StatusOf(bootstrap.Call("GET", kJobs)), 403);
  ASSERT_TRUE(Join("gpu-a").ok());
  absl::StatusOr<api::Client> again = Join("gpu-a");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("403"), std::string::npos) << again.status();
  // A CSR for another name than the path's is refused, naming the field.
  absl::StatusOr<api::HttpResponse> bad = bootstrap.Call(
      "POST", Cat(kNodes, "/gpu-c/certificate"), testing_util::MakeKeyAndCsr("admin").csr_pem);
  ASSERT_EQ(StatusOf(bad), 422);
  EXPECT_NE(bad->body.find("body: the request asks for CN \\\"admin\\\""), std::string::npos)
      << bad->body;
}

TEST_F(NodeTlsTest, DeletingTheNodeRevokesItsCertificateOnOpenConnections) {
  absl::StatusOr<api::Client> a = Join("gpu-a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(StatusOf(a->Call("GET", Cat(kNodes, "/gpu-a/assignments"))), 200);
  ASSERT_TRUE(store_->Txn({NodeCertificates::ForgetOp("gpu-a")}).ok());
  certs_->Forget("gpu-a");
  // The same kept-alive connection: refused from the next request on, saying why.
  absl::StatusOr<api::HttpResponse> r = a->Call("GET", Cat(kNodes, "/gpu-a/assignments"));
  ASSERT_EQ(StatusOf(r), 401);
  EXPECT_NE(r->body.find("the node certificate for node:gpu-a is no longer valid"),
            std::string::npos)
      << r->body;
}

TEST_F(NodeTlsTest, ACertificateFromAnotherCaFailsTheHandshake) {
  testing_util::TempDir other("gpucloud-other-ca");
  absl::StatusOr<Credentials> foreign = EnsureCredentials(other.path().string());
  ASSERT_TRUE(foreign.ok());
  // The other CA's server certificate and key, presented as a client certificate.
  api::ClientConfig c = Config();
  c.cert_path = foreign->cert_path;
  c.key_path = foreign->key_path;
  absl::StatusOr<api::HttpResponse> r =
      api::Client(c).Call("GET", Cat(kNodes, "/gpu-a/assignments"));
  EXPECT_TRUE(!r.ok() || r->status == 401) << (r.ok() ? r->body : r.status().ToString());
}

}  // namespace
}  // namespace gpucloud::server
