// The HTTPS server with real TLS clients (CTest label `integration`): TLS 1.3 with the server's
// own CA, bearer tokens (401 without), REST through the wire, and a streamed watch.
#include "server/https_server.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "server/test_client.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

namespace http = boost::beast::http;

const char* kJob =
    "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"train\"},"
    "\"spec\":{\"tasks\":[{\"name\":\"w\",\"resources\":{\"gpu\":{\"count\":1}}}]}}";

class HttpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Credentials> c = EnsureCredentials(dir_.string());
    ASSERT_TRUE(c.ok()) << c.status();
    creds_ = *c;
    ASSERT_EQ(creds_.admin_token.size(), 64u);
    tokens_ = *TokenBook::Load(dir_.string());
    store_ = std::move(*store::OpenSqliteStore((dir_ / "store.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 1);
    server_ = std::make_unique<HttpsServer>(
        *api_, tokens_, *store_,
        HttpsServer::Options{.cert_path = creds_.cert_path, .key_path = creds_.key_path});
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_.reset(); }

  http::response<http::string_body> Call(http::verb verb, const std::string& target,
                                         const std::string& token, const std::string& body = "",
                                         int max_tls = TLS1_3_VERSION) {
    return testing_util::HttpsCall(server_->port(), creds_.ca_cert_path, verb, target, token,
                                   body, max_tls);
  }

  testing_util::TempDir tmp_{"gpucloud-https"};
  const std::filesystem::path& dir_ = tmp_.path();
  Credentials creds_;
  TokenBook tokens_;
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

TEST_F(HttpsServerTest, CreateThenGetOverTheWire) {
  auto c = Call(http::verb::post, kJobs, creds_.admin_token, kJob);
  ASSERT_EQ(c.result_int(), 201) << c.body();
  auto g = Call(http::verb::get, std::string(kJobs) + "/train", creds_.admin_token);
  EXPECT_EQ(g.result_int(), 200);
  EXPECT_NE(g.body().find("\"resourceVersion\": \"1\""), std::string::npos) << g.body();
  auto bad = Call(http::verb::post, kJobs, creds_.admin_token, "{\"kind\": 5}");
  EXPECT_EQ(bad.result_int(), 422);
}

TEST_F(HttpsServerTest, WatchStreamsChangesMadeWhileItWaits) {
  std::string got;
  std::thread watcher([&] {
    auto w = Call(http::verb::get,
                  std::string(kJobs) + "?watch=true&resourceVersion=0&timeoutSeconds=3",
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
  EXPECT_NE(text.find("gpucloud_api_requests_total{method=\"POST\",resource=\"jobs\",code=\"201\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpucloud_api_requests_total{method=\"GET\",resource=\"jobs\",code=\"401\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpucloud_api_request_duration_seconds_count{method=\"POST\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpucloud_store_revision 1\n"), std::string::npos);
  // Every sample line is NAME{LABELS} VALUE or NAME VALUE, after its HELP and TYPE.
  for (const std::string& line : {std::string("# TYPE gpucloud_api_requests_total counter"),
                                  std::string("# TYPE gpucloud_api_request_duration_seconds histogram")}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

TEST_F(HttpsServerTest, CredentialsAreKeptAcrossRestarts) {
  absl::StatusOr<Credentials> again = EnsureCredentials(dir_.string());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->admin_token.empty());  // issued once
  std::string tokens;
  std::getline(std::ifstream(dir_ / "tokens"), tokens);
  EXPECT_EQ(tokens.find(creds_.admin_token), std::string::npos);  // stored hashed only
  EXPECT_EQ(tokens.substr(0, 64), Sha256Hex(creds_.admin_token));
  EXPECT_EQ(std::filesystem::status(dir_ / "ca.key").permissions() &
                std::filesystem::perms::others_read,
            std::filesystem::perms::none);
}

}  // namespace
}  // namespace gpucloud::server
