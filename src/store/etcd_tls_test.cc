// TLS between gpucloud and etcd (etcd_tls.h; issues 14 and 21): a real etcd serving https://
// with --client-cert-auth, certificates from a CA made per test (etcd_test_certs.h). The store
// and the lease client work over TLS 1.3 with a client certificate, watches included; a client
// without a certificate, with one from another CA or an expired one, a wrong CA for the member,
// a member whose certificate does not name the address dialled and a member that offers only
// TLS 1.2 are each refused with Unavailable naming the member and OpenSSL's reason; bad files
// are InvalidArgument naming the file.
#include "store/etcd_tls.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "core/text.h"
#include "store/etcd_lease.h"
#include "store/etcd_store.h"
#include "store/etcd_test_certs.h"
#include "store/etcd_test_server.h"
#include "testing/temp_dir.h"

namespace gpucloud::store {
namespace {

Op Put(std::string key, std::string value, std::optional<int64_t> expect = {}) {
  return Op{Op::Kind::kPut, std::move(key), std::move(value), expect};
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdTestServer::Available()) {
      GTEST_SKIP() << EtcdTestServer::kBinary << " is absent (scripts/install-deps installs it)";
    }
    absl::StatusOr<TestCa> ca = TestCa::Create(tmp_.path().string(), "etcd", now_);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_.emplace(*std::move(ca));
    absl::StatusOr<TestCertificate> client = ca_->IssueClient("client", now_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
  }

  // Starts etcd serving TLS with `member` (default: a certificate for 127.0.0.1 and localhost),
  // trusting client certificates of this test's CA.
  void StartEtcd(std::optional<TestCertificate> member = {}) {
    if (!member) {
      absl::StatusOr<TestCertificate> m = ca_->IssueMember("member", now_);
      ASSERT_TRUE(m.ok()) << m.status();
      member = *m;
    }
    etcd_ = std::make_unique<EtcdTestServer>(tmp_ / "etcd");
    etcd_->ServeTls({member->cert_file, member->key_file, ca_->cert_file()});
    absl::Status started = etcd_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  EtcdTlsOptions Tls() const {
    return {.enabled = true,
            .ca_file = ca_->cert_file(),
            .cert_file = client_.cert_file,
            .key_file = client_.key_file};
  }

  absl::StatusOr<std::unique_ptr<Store>> Open(const EtcdTlsOptions& tls,
                                              std::string endpoint = "") {
    return OpenEtcdStore({.endpoint = endpoint.empty() ? etcd_->endpoint() : endpoint,
                          .request_timeout = absl::Seconds(5),
                          .tls = tls});
  }

  // The member's port as etcd_->endpoint() has it.
  std::string Port() const { return etcd_->endpoint().substr(etcd_->endpoint().rfind(':') + 1); }

  // A CA of nobody's, for the wrong-CA cases.
  TestCa OtherCa() {
    absl::StatusOr<TestCa> other = TestCa::Create(tmp_.path().string(), "other", now_);
    EXPECT_TRUE(other.ok()) << other.status();
    return *std::move(other);
  }

  const absl::Time now_ = absl::Now();
  testing_util::TempDir tmp_{"gpucloud-etcd-tls"};
  std::optional<TestCa> ca_;
  TestCertificate client_;
  std::unique_ptr<EtcdTestServer> etcd_;
};

// Expects `s` to be the refusal of a TLS handshake with `member`, for a reason that contains
// `reason`.
void ExpectHandshakeRefused(const absl::Status& s, const std::string& member,
                            const std::string& reason) {
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("the TLS handshake to " + member + " failed: "), std::string::npos)
      << s;
  EXPECT_NE(s.message().find(reason), std::string::npos) << s;
}

TEST_F(EtcdTlsTest, PutRangeTxnAndWatchWorkOverTlsWithAClientCertificate) {
  StartEtcd();
  absl::StatusOr<std::unique_ptr<Store>> opened = Open(Tls());
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& s = **opened;
  const int64_t base = s.Revision();
  ASSERT_EQ(*s.Txn({Put("/jobs/a/x", "v1", 0)}), base + 1);
  ASSERT_EQ(*s.Txn({Put("/jobs/a/y", "v2", 0)}), base + 2);
  EXPECT_EQ(s.Get("/jobs/a/x")->value, "v1");
  // A compare that fails (the key exists) is etcd's answer, over TLS like the rest.
  EXPECT_TRUE(absl::IsAlreadyExists(s.Txn({Put("/jobs/a/x", "again", 0)}).status()));
  absl::StatusOr<ListResult> list = s.List("/jobs/a/");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1].value, "v2");
  // The watch stream (Changes and WaitForChange read /v3/watch).
  absl::StatusOr<std::vector<Event>> changes = s.Changes("/jobs/", base, 10);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ(changes->back().kv.key, "/jobs/a/y");
  std::atomic<bool> saw{false};
  std::thread waiter([&] { saw = s.WaitForChange(base + 2, absl::Seconds(20)); });
  ASSERT_TRUE(s.Txn({Put("/jobs/a/z", "v3", 0)}).ok());
  waiter.join();
  EXPECT_TRUE(saw);

  absl::StatusOr<std::unique_ptr<LeaseClient>> leases =
      OpenEtcdLeases(etcd_->endpoint(), absl::Seconds(5), Tls());
  ASSERT_TRUE(leases.ok()) << leases.status();
  absl::StatusOr<int64_t> lease = (*leases)->Grant(absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<KeyHolder> holder = (*leases)->CreateIfAbsent("/election", "me", *lease);
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->value, "me");
  EXPECT_EQ((*leases)->Holder("/election")->value().lease, *lease);
}

// The member's certificate names localhost and 127.0.0.1: dialled by name it is checked against
// its DNS names (the name sent as SNI).
TEST_F(EtcdTlsTest, AMemberDialledByHostNameIsCheckedAgainstItsDnsNames) {
  StartEtcd();
  absl::StatusOr<std::unique_ptr<Store>> opened = Open(Tls(), "localhost:" + Port());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE((*opened)->Txn({Put("/k", "v")}).ok());
}

TEST_F(EtcdTlsTest, AClientWithoutACertificateIsRefused) {
  StartEtcd();
  EtcdTlsOptions tls = Tls();
  tls.cert_file = tls.key_file = "";
  // Go's TLS (etcd 3.4.23, go1.19) answers a missing certificate with a bad_certificate alert.
  ExpectHandshakeRefused(Open(tls).status(), etcd_->endpoint(),
                         "bad certificate (the member refused this client's certificate");
}

TEST_F(EtcdTlsTest, AClientCertificateFromAnotherCaIsRefused) {
  StartEtcd();
  absl::StatusOr<TestCertificate> stranger = OtherCa().IssueClient("stranger", now_);
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  EtcdTlsOptions tls = Tls();
  tls.cert_file = stranger->cert_file;
  tls.key_file = stranger->key_file;
  ExpectHandshakeRefused(Open(tls).status(), etcd_->endpoint(), "bad certificate");
}

TEST_F(EtcdTlsTest, AnExpiredClientCertificateIsRefused) {
  StartEtcd();
  absl::StatusOr<TestCertificate> expired =
      ca_->Issue("expired", {.common_name = "gpucloud",
                             .key_usages = "clientAuth",
                             .not_before = now_ - absl::Hours(3),
                             .not_after = now_ - absl::Hours(2)});
  ASSERT_TRUE(expired.ok()) << expired.status();
  EtcdTlsOptions tls = Tls();
  tls.cert_file = expired->cert_file;
  tls.key_file = expired->key_file;
  ExpectHandshakeRefused(Open(tls).status(), etcd_->endpoint(), "bad certificate");
}

TEST_F(EtcdTlsTest, AMemberThatAnotherCaSignedIsRefused) {
  StartEtcd();
  EtcdTlsOptions tls = Tls();
  tls.ca_file = OtherCa().cert_file();
  ExpectHandshakeRefused(Open(tls).status(), etcd_->endpoint(),
                         "certificate verify failed (unable to get local issuer certificate)");
  // The lease client is refused alike.
  absl::StatusOr<std::unique_ptr<LeaseClient>> leases =
      OpenEtcdLeases(etcd_->endpoint(), absl::Seconds(5), tls);
  ASSERT_TRUE(leases.ok()) << leases.status();
  ExpectHandshakeRefused((*leases)->Grant(absl::Seconds(5)).status(), etcd_->endpoint(),
                         "certificate verify failed");
}

// A certificate of the right CA, but for another address: dialled at 127.0.0.1, the member's
// IP addresses must include it.
TEST_F(EtcdTlsTest, AMemberWhoseCertificateDoesNotNameTheAddressIsRefused) {
  absl::StatusOr<TestCertificate> misnamed =
      ca_->Issue("misnamed", {.common_name = "etcd",
                              .alt_names = "IP:10.1.2.3,DNS:etcd.example",
                              .key_usages = "serverAuth,clientAuth",
                              .not_before = now_ - absl::Hours(1),
                              .not_after = now_ + absl::Hours(1)});
  ASSERT_TRUE(misnamed.ok()) << misnamed.status();
  StartEtcd(*misnamed);
  ExpectHandshakeRefused(Open(Tls()).status(), etcd_->endpoint(), "IP address mismatch");
  ExpectHandshakeRefused(Open(Tls(), "localhost:" + Port()).status(), "localhost:" + Port(),
                         "hostname mismatch");
}

// A member that offers TLS 1.2 at most: the client asks for 1.3 only.
TEST_F(EtcdTlsTest, AMemberThatOffersOnlyTls12IsRefused) {
  namespace asio = boost::asio;
  absl::StatusOr<TestCertificate> member = ca_->IssueMember("member", now_);
  ASSERT_TRUE(member.ok()) << member.status();
  asio::io_context io;
  asio::ssl::context server(asio::ssl::context::tls_server);
  server.use_certificate_chain_file(member->cert_file);
  server.use_private_key_file(member->key_file, asio::ssl::context::pem);
  SSL_CTX_set_max_proto_version(server.native_handle(), TLS1_2_VERSION);
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ssl::stream<asio::ip::tcp::socket> peer(io, server);
  acceptor.async_accept(peer.next_layer(), [&](boost::system::error_code ec) {
    if (!ec) peer.async_handshake(asio::ssl::stream_base::server, [](auto) {});
  });
  std::thread serving([&] { io.run(); });
  const std::string endpoint = Cat("127.0.0.1:", acceptor.local_endpoint().port());
  absl::Status refused = Open(Tls(), endpoint).status();
  io.stop();
  serving.join();
  ExpectHandshakeRefused(refused, endpoint, "protocol version");
}

TEST(EtcdTlsOptionsTest, BadFilesAreRefusedNamingTheFile) {
  testing_util::TempDir tmp("gpucloud-etcd-tls-options");
  const absl::Time now = absl::Now();
  absl::StatusOr<TestCa> ca = TestCa::Create(tmp.path().string(), "etcd", now);
  ASSERT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<TestCertificate> a = ca->IssueClient("a", now);
  absl::StatusOr<TestCertificate> b = ca->IssueClient("b", now);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string junk = tmp / "junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  const std::string absent = tmp / "absent.pem";
  const std::string& cacert = ca->cert_file();
  const std::vector<std::pair<EtcdTlsOptions, std::string>> bad = {
      {{.enabled = true}, "etcd TLS: no CA file"},
      {{.enabled = true, .ca_file = absent},
       "etcd TLS: the CA file " + absent + ": cannot read it: No such file or directory"},
      {{.enabled = true, .ca_file = junk}, "etcd TLS: the CA file " + junk + ": "},
      {{.enabled = true, .ca_file = cacert, .cert_file = a->cert_file},
       "etcd TLS: a client certificate without its key"},
      {{.enabled = true, .ca_file = cacert, .key_file = a->key_file},
       "etcd TLS: a client key without its certificate"},
      {{.enabled = true, .ca_file = cacert, .cert_file = junk, .key_file = a->key_file},
       "etcd TLS: the client certificate " + junk + ": "},
      {{.enabled = true, .ca_file = cacert, .cert_file = a->cert_file, .key_file = junk},
       "etcd TLS: the client key " + junk + ": "},
      {{.enabled = true, .ca_file = cacert, .cert_file = a->cert_file, .key_file = b->key_file},
       "etcd TLS: the client key " + b->key_file + ": does not match the client certificate " +
           a->cert_file},
      {{.enabled = false, .ca_file = cacert}, "etcd TLS: files are given but TLS is off"},
  };
  for (const auto& [options, message] : bad) {
    absl::Status s = CheckEtcdTls(options);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), message)) << s << "\nwanted: " << message;
    // Nothing is dialled: the store refuses the same options before connecting.
    absl::Status open = OpenEtcdStore({.endpoint = "127.0.0.1:1", .tls = options}).status();
    EXPECT_EQ(open, s);
  }
  EXPECT_TRUE(CheckEtcdTls({.enabled = true, .ca_file = cacert}).ok());
  EXPECT_TRUE(
      CheckEtcdTls(
          {.enabled = true, .ca_file = cacert, .cert_file = a->cert_file, .key_file = a->key_file})
          .ok());
  EXPECT_TRUE(CheckEtcdTls({}).ok());
}

}  // namespace
}  // namespace gpucloud::store
