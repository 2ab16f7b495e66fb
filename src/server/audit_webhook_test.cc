// AuditWebhook against a real HTTP receiver on loopback (Boost.Beast, started by the test): order,
// batches, retries while the receiver is down or refusing, and resuming from the cursor.
#include "server/audit_webhook.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/client.h"
#include "core/clock.h"
#include "core/text.h"
#include "server/audit_chain.h"
#include "server/control_plane.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr int64_t kStart = 1'764'600'000'000;

// An HTTP receiver on 127.0.0.1: records every POST's lines, answers with `answer(n)` for the
// n-th request (0-based). Waits are on a condition variable with a deadline.
class Receiver {
 public:
  explicit Receiver(uint16_t port = 0, std::function<int(int)> answer = nullptr)
      : answer_(answer ? std::move(answer) : [](int) { return 200; }) {
    acceptor_.open(tcp::v4());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), port});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  ~Receiver() { Stop(); }
  // Stops accepting: wakes the blocked accept with a connection of its own.
  void Stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    asio::io_context io;
    tcp::socket s(io);
    beast::error_code ec;
    s.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
    thread_.join();
    acceptor_.close(ec);
  }
  uint16_t port() const { return port_; }
  std::string url() const { return Cat("http://127.0.0.1:", port_, "/audit?x=1"); }

  // Every seq received, in order (refused batches included), and those answered 2xx.
  std::vector<int64_t> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  std::vector<int64_t> acked() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  std::vector<std::string> acked_lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_lines_;
  }
  std::vector<http::request<http::string_body>> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // Until `pred` holds for this receiver, or 10 s.
  bool Await(const std::function<bool(Receiver&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] {
      lock.unlock();
      bool ok = pred(*this);
      lock.lock();
      return ok;
    });
  }
  bool AwaitAcked(int64_t seq) {
    return Await([seq](Receiver& r) {
      std::vector<int64_t> a = r.acked();
      return !a.empty() && a.back() >= seq;
    });
  }

 private:
  void Serve() {
    while (true) {
      tcp::socket socket(io_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) return;
      beast::flat_buffer buf;
      http::request<http::string_body> req;
      http::read(socket, buf, req, ec);
      if (ec) continue;
      std::vector<int64_t> seqs;
      std::vector<std::string> lines;
      std::istringstream body(req.body());
      for (std::string line; std::getline(body, line);) {
        lines.push_back(line);
        seqs.push_back(nlohmann::json::parse(line).at("seq").get<int64_t>());
      }
      int code = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        code = answer_(static_cast<int>(requests_.size()));
        requests_.push_back(req);
        received_.insert(received_.end(), seqs.begin(), seqs.end());
        if (code / 100 == 2) {
          acked_.insert(acked_.end(), seqs.begin(), seqs.end());
          acked_lines_.insert(acked_lines_.end(), lines.begin(), lines.end());
        }
      }
      http::response<http::string_body> res{static_cast<http::status>(code), 11};
      res.prepare_payload();
      http::write(socket, res, ec);
      cv_.notify_all();
    }
  }

  std::function<int(int)> answer_;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> received_, acked_;
  std::vector<std::string> acked_lines_;
  std::vector<http::request<http::string_body>> requests_;
};

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t s = from; s <= to; ++s) out.push_back(s);
  return out;
}

// Until `pred` holds or 10 s pass, looking every millisecond (for the exporter's counters).
bool Eventually(const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class AuditWebhookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<store::Store>> s = store::OpenSqliteStore(tmp_ / "store.db");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    log_ = std::make_unique<AuditLog>(*store_, clock_, key_);
    ASSERT_TRUE(log_->Open().ok());
    log_->SetObserver([this](const AuditRecord&) {
      std::lock_guard<std::mutex> lock(hook_mu_);
      if (hook_ != nullptr) hook_->Notify();
    });
  }
  void TearDown() override { StopHook(); }
  void Add(int n) {
    for (int i = 0; i < n; ++i) {
      clock_.Advance(1000);
      AuditRecord r;
      r.audit_id = Cat("req-", i);
      r.verb = "get";
      r.username = "alice";
      r.action = "jobs:Get";
      r.response_code = 200;
      ASSERT_TRUE(log_->Record(r).ok());
    }
    ASSERT_TRUE(log_->Flush().ok());
  }
  void StartHook(const std::string& url, int max_batch = 10, std::string token = "") {
    absl::StatusOr<WebhookUrl> u = ParseWebhookUrl(url);
    ASSERT_TRUE(u.ok()) << u.status();
    auto hook = std::make_unique<AuditWebhook>(
        *log_, MakeWebhookPoster(*u, {.token = token, .timeout_seconds = 5}),
        AuditWebhookOptions{.cursor_path = tmp_ / "cursor",
                            .max_batch = max_batch,
                            .min_backoff_ms = 5,
                            .max_backoff_ms = 50});
    ASSERT_TRUE(hook->Start().ok());
    std::lock_guard<std::mutex> lock(hook_mu_);
    hook_ = std::move(hook);
  }
  void StopHook() {
    std::unique_ptr<AuditWebhook> hook;
    {
      std::lock_guard<std::mutex> lock(hook_mu_);
      hook = std::move(hook_);
    }
    if (hook) hook->Stop();
  }
  AuditWebhook& hook() { return *hook_; }
  std::vector<std::string> StoredLines() {
    std::ostringstream out;
    EXPECT_TRUE(log_->ExportJsonLines(out, {}).ok());
    std::vector<std::string> lines;
    std::istringstream in(out.str());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }

  testing_util::TempDir tmp_{"gpucloud-audit-webhook"};
  FakeClock clock_{kStart};
  AuditKey key_ = AuditKey::Generate();
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<AuditLog> log_;
  std::mutex hook_mu_;
  std::unique_ptr<AuditWebhook> hook_;
};

TEST(WebhookUrlTest, HttpsOrLoopbackHttpOnly) {
  absl::StatusOr<WebhookUrl> u = ParseWebhookUrl("https://audit.example.com:8443/in?t=1");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "audit.example.com");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->target, "/in?t=1");
  u = ParseWebhookUrl("https://siem.example.com");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/");
  u = ParseWebhookUrl("http://[::1]:9000/x");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_TRUE(ParseWebhookUrl("http://localhost/x").ok());
  for (const char* bad :
       {"http://audit.example.com/x", "ftp://x", "audit.example.com", "https://", "https://h:0/",
        "https://h:99999", "https://h:8x", "https://user@h/", "https://[::1/"}) {
    EXPECT_FALSE(ParseWebhookUrl(bad).ok()) << bad;
  }
  EXPECT_NE(ParseWebhookUrl("http://10.0.0.1/x").status().message().find("loopback"),
            std::string::npos);
}

// A receiver that accepts a connection, reads what comes, writes `reply` (maybe nothing) and
// then stalls: the POST must give up within its timeout. The stall ends when the test does (the
// connection is closed), so a sender that waits forever fails the test instead of hanging it.
void ExpectStallBounded(bool tls, const std::string& reply) {
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  const uint16_t port = acceptor.local_endpoint().port();
  tcp::socket peer(io);
  std::thread stall([&] {
    beast::error_code ec;
    acceptor.accept(peer, ec);
    if (ec) return;
    char buf[4096];
    peer.read_some(asio::buffer(buf), ec);
    if (!reply.empty()) asio::write(peer, asio::buffer(reply), ec);
  });
  absl::StatusOr<WebhookUrl> url =
      ParseWebhookUrl(Cat(tls ? "https" : "http", "://127.0.0.1:", port, "/in"));
  ASSERT_TRUE(url.ok());
  auto done = std::make_shared<std::promise<absl::StatusOr<int>>>();
  std::future<absl::StatusOr<int>> answer = done->get_future();
  std::thread post([url = *url, done] {
    done->set_value(MakeWebhookPoster(url, {.timeout_seconds = 1})("{}\n"));
  });
  const bool bounded = answer.wait_for(15s) == std::future_status::ready;
  stall.join();
  beast::error_code ec;
  peer.close(ec);  // ends a sender that still waits
  post.join();
  ASSERT_TRUE(bounded) << "the POST waited for a stalled receiver past its timeout";
  absl::StatusOr<int> got = answer.get();
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
}

TEST(WebhookPosterTest, AReceiverThatStallsInTheTlsHandshakeIsGivenUpOn) {
  ExpectStallBounded(/*tls=*/true, "");
}

TEST(WebhookPosterTest, AReceiverThatStallsMidAnswerIsGivenUpOn) {
  ExpectStallBounded(/*tls=*/false, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
}

TEST_F(AuditWebhookTest, RecordsArriveInOrderInBatchesAsStored) {
  Receiver receiver;
  Add(7);
  StartHook(receiver.url(), /*max_batch=*/10, "secret-token");
  Add(18);  // 25 in all
  ASSERT_TRUE(receiver.AwaitAcked(25));
  EXPECT_EQ(receiver.acked(), Range(1, 25));
  EXPECT_EQ(receiver.acked_lines(), StoredLines());  // byte for byte
  for (const auto& req : receiver.requests()) {
    EXPECT_EQ(req.method(), http::verb::post);
    EXPECT_EQ(req.target(), "/audit?x=1");
    EXPECT_EQ(req[http::field::content_type], "application/x-ndjson");
    EXPECT_EQ(req[http::field::authorization], "Bearer secret-token");
    EXPECT_LE(std::count(req.body().begin(), req.body().end(), '\n'), 10);
  }
  ASSERT_TRUE(Eventually([&] { return hook().acked_seq() == 25; }));
  EXPECT_EQ(hook().sent(), 25);
  EXPECT_EQ(hook().failures(), 0);
  EXPECT_EQ(hook().lag(), 0);
  std::string metrics = hook().RenderMetrics();
  EXPECT_NE(metrics.find("gpucloud_audit_webhook_sent_total 25\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpucloud_audit_webhook_failures_total 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("gpucloud_audit_webhook_lag_records 0\n"), std::string::npos);
}

TEST_F(AuditWebhookTest, AReceiverThatIsDownGetsEveryRecordOnceItIsBack) {
  uint16_t port = 0;
  {
    Receiver probe;  // a free port, closed again: nothing listens there now
    port = probe.port();
  }
  StartHook(Cat("http://127.0.0.1:", port, "/"), /*max_batch=*/4);
  Add(15);
  ASSERT_TRUE(Eventually([&] { return hook().failures() >= 3; }));
  EXPECT_EQ(hook().acked_seq(), 0);
  EXPECT_EQ(hook().lag(), 15);
  EXPECT_NE(hook().RenderMetrics().find("gpucloud_audit_webhook_lag_records 15\n"),
            std::string::npos);
  Receiver receiver(port);
  ASSERT_TRUE(receiver.AwaitAcked(15));
  EXPECT_EQ(receiver.received(), Range(1, 15));  // nothing reached it while it was down
  EXPECT_EQ(receiver.acked(), Range(1, 15));
}

TEST_F(AuditWebhookTest, ARefusedBatchIsSentAgainAndOnlyIt) {
  // The first two POSTs are answered 503, the fourth 500.
  Receiver receiver(0, [](int n) { return n < 2 ? 503 : n == 3 ? 500 : 200; });
  Add(12);
  StartHook(receiver.url(), /*max_batch=*/5);
  ASSERT_TRUE(receiver.AwaitAcked(12));
  EXPECT_EQ(receiver.acked(), Range(1, 12));
  std::vector<int64_t> expected;
  for (int i = 0; i < 3; ++i) {  // 1-5 refused twice, then acknowledged
    for (int64_t s : Range(1, 5)) expected.push_back(s);
  }
  for (int i = 0; i < 2; ++i) {  // 6-10 refused once
    for (int64_t s : Range(6, 10)) expected.push_back(s);
  }
  for (int64_t s : Range(11, 12)) expected.push_back(s);
  EXPECT_EQ(receiver.received(), expected);
  ASSERT_TRUE(Eventually([&] { return hook().acked_seq() == 12; }));
  EXPECT_EQ(hook().failures(), 3);
}

TEST_F(AuditWebhookTest, ARestartResumesAfterTheCursor) {
  Receiver receiver;
  Add(10);
  StartHook(receiver.url(), /*max_batch=*/4);
  ASSERT_TRUE(receiver.AwaitAcked(10));
  ASSERT_TRUE(Eventually([&] { return hook().acked_seq() == 10; }));
  StopHook();
  std::ifstream cursor(tmp_ / "cursor");
  std::string text;
  std::getline(cursor, text);
  EXPECT_EQ(text, "10");
  Add(10);
  StartHook(receiver.url(), /*max_batch=*/4);
  ASSERT_TRUE(receiver.AwaitAcked(20));
  EXPECT_EQ(receiver.received(), Range(1, 20));  // nothing twice
  ASSERT_TRUE(Eventually([&] { return hook().acked_seq() == 20; }));
  EXPECT_EQ(hook().sent(), 10);
}

TEST_F(AuditWebhookTest, ARestartResendsOnlyTheUnacknowledgedBatch) {
  // Records 1-4 are acknowledged; every later POST is refused until the exporter restarts.
  std::atomic<bool> refuse{true};
  Receiver receiver(0, [&](int n) { return n == 0 || !refuse ? 200 : 500; });
  Add(9);
  StartHook(receiver.url(), /*max_batch=*/4);
  ASSERT_TRUE(Eventually([&] { return hook().failures() >= 1; }));
  StopHook();
  EXPECT_EQ(hook_, nullptr);
  refuse = false;
  StartHook(receiver.url(), /*max_batch=*/4);
  ASSERT_TRUE(receiver.AwaitAcked(9));
  EXPECT_EQ(receiver.acked(), Range(1, 9));
  // Beyond what was acknowledged, only the batch after the cursor (5-8) came more than once.
  std::vector<int64_t> got = receiver.received();
  for (int64_t s = 1; s <= 9; ++s) {
    int64_t n = std::count(got.begin(), got.end(), s);
    if (s >= 5 && s <= 8) {
      EXPECT_GE(n, 2) << s;
    } else {
      EXPECT_EQ(n, 1) << s;
    }
  }
}

TEST_F(AuditWebhookTest, ReadAfterResumesAtTheOldestRecordRetentionKept) {
  Add(10);
  absl::StatusOr<int64_t> gone = log_->Retain({.max_records = 4});
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_EQ(*gone, 6);
  absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> r = log_->ReadAfter(2, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].first, 7);
  EXPECT_EQ((*r)[2].first, 9);
  r = log_->ReadAfter(8, 100);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].first, 10);
  EXPECT_TRUE(log_->ReadAfter(10, 100)->empty());
}

// The server wired to a receiver: its requests' records arrive, with the server's metrics.
TEST(AuditWebhookServerTest, TheServersRecordsReachTheReceiver) {
  testing_util::TempDir tmp("gpucloud-audit-webhook-server");
  Receiver receiver;
  ControlPlaneOptions o;
  o.data_dir = tmp / "data";
  o.port = 0;
  o.audit_webhook_url = receiver.url();
  ControlPlane cp(o);
  ASSERT_TRUE(cp.Start().ok());
  std::string port = cp.url().substr(cp.url().rfind(':') + 1);
  api::Client anonymous({.host = "127.0.0.1", .port = std::stoi(port), .ca_path = cp.ca_path()});
  absl::StatusOr<api::HttpResponse> r =
      anonymous.Call("GET", "/apis/gpucloud/v1/namespaces/team-a/jobs");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 401);
  ASSERT_TRUE(receiver.Await([](Receiver& rc) {
    for (const std::string& line : rc.acked_lines()) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["requestURI"] == "/apis/gpucloud/v1/namespaces/team-a/jobs" &&
          j["responseStatus"]["code"] == 401) {
        return true;
      }
    }
    return false;
  }));
  std::vector<int64_t> acked = receiver.acked();
  EXPECT_EQ(acked, Range(1, static_cast<int64_t>(acked.size())));
  cp.Stop();
  std::ifstream cursor(tmp / "data/audit-webhook.cursor");
  int64_t seq = 0;
  cursor >> seq;
  EXPECT_GE(seq, acked.back());
}

}  // namespace
}  // namespace gpucloud::server
