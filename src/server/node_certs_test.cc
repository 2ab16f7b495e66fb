#include "server/node_certs.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "core/text.h"
#include "server/credentials.h"
#include "store/sqlite_store.h"
#include "testing/pem.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Asker = NodeCertificates::Asker;

std::string Csr(const std::string& cn, bool rsa = false) {
  return testing_util::MakeKeyAndCsr(cn, rsa).csr_pem;
}

// The subject's CN and serial of a PEM certificate, as the HTTPS server reads a peer's.
std::pair<std::string, std::string> Subject(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  std::pair<std::string, std::string> out{CertificateCommonName(cert), CertificateSerial(cert)};
  X509_free(cert);
  return out;
}

class NodeCertificatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(EnsureCredentials(dir_ / "creds").ok());
    store_ = std::move(*store::OpenSqliteStore(dir_ / "s.db"));
    certs_ = std::make_unique<NodeCertificates>(*store_, clock_, dir_ / "creds", absl::Hours(1));
    ASSERT_TRUE(certs_->Load().ok());
  }

  testing_util::TempDir dir_;
  FakeClock clock_{absl::ToUnixMillis(absl::Now())};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeCertificates> certs_;
};

TEST_F(NodeCertificatesTest, ABootstrapTokenJoinsANewNodeWhoseCertificateThenAuthenticatesIt) {
  absl::StatusOr<NodeCertificates::Issued> got =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap);
  ASSERT_TRUE(got.ok()) << got.status();
  auto [cn, serial] = Subject(got->certificate_pem);
  EXPECT_EQ(cn, "node:gpu-1");
  EXPECT_EQ(serial, got->serial);
  EXPECT_NEAR(absl::ToDoubleSeconds(got->not_after - absl::FromUnixMillis(clock_.NowMillis())),
              3600, 2);
  EXPECT_EQ(certs_->Authenticate(cn, serial), "gpu-1");
  // Another serial, another name, or a CN that is not a node's: nobody.
  EXPECT_EQ(certs_->Authenticate(cn, "0123"), std::nullopt);
  EXPECT_EQ(certs_->Authenticate("node:gpu-2", serial), std::nullopt);
  EXPECT_EQ(certs_->Authenticate("gpu-1", serial), std::nullopt);
  // What was issued is in the store: a restarted server knows it.
  NodeCertificates again(*store_, clock_, dir_ / "creds", absl::Hours(1));
  ASSERT_TRUE(again.Load().ok());
  EXPECT_EQ(again.Authenticate(cn, serial), "gpu-1");
}

TEST_F(NodeCertificatesTest, ABootstrapTokenCannotTakeOverANodeWithALiveCertificate) {
  ASSERT_TRUE(certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap).ok());
  absl::StatusOr<NodeCertificates::Issued> stolen =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap);
  ASSERT_TRUE(absl::IsPermissionDenied(stolen.status())) << stolen.status();
  EXPECT_NE(stolen.status().message().find("delete the node first"), std::string::npos);
  // Once every certificate of the node expired (its agent stayed away), it may join again.
  clock_.Advance(absl::ToInt64Milliseconds(absl::Hours(1) + absl::Seconds(1)));
  EXPECT_TRUE(certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap).ok());
}

TEST_F(NodeCertificatesTest, ANodeRenewsOnlyItsOwnAndKeepsThePreviousUntilItExpires) {
  absl::StatusOr<NodeCertificates::Issued> first =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<NodeCertificates::Issued> other =
      certs_->Issue("gpu-2", Csr("node:gpu-2"), Asker::kNode, "gpu-1");
  EXPECT_TRUE(absl::IsPermissionDenied(other.status())) << other.status();
  clock_.Advance(40 * 60 * 1000);
  absl::StatusOr<NodeCertificates::Issued> second =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kNode, "gpu-1");
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<NodeCertificates::Issued> third =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kNode, "gpu-1");
  ASSERT_TRUE(third.ok()) << third.status();
  // The newest kKeptSerials (2) are valid: connections still on the older one work on.
  EXPECT_EQ(certs_->Authenticate("node:gpu-1", third->serial), "gpu-1");
  EXPECT_EQ(certs_->Authenticate("node:gpu-1", second->serial), "gpu-1");
  EXPECT_EQ(certs_->Authenticate("node:gpu-1", first->serial), std::nullopt);
  // An expired certificate authenticates nobody, even before its record is cleaned up.
  clock_.Advance(absl::ToInt64Milliseconds(absl::Hours(2)));
  EXPECT_EQ(certs_->Authenticate("node:gpu-1", third->serial), std::nullopt);
}

TEST_F(NodeCertificatesTest, ForgettingANodeRevokesItsCertificatesAtOnce) {
  absl::StatusOr<NodeCertificates::Issued> got =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(store_->Txn({NodeCertificates::ForgetOp("gpu-1")}).ok());
  certs_->Forget("gpu-1");
  EXPECT_EQ(certs_->Authenticate("node:gpu-1", got->serial), std::nullopt);
  NodeCertificates again(*store_, clock_, dir_ / "creds", absl::Hours(1));
  ASSERT_TRUE(again.Load().ok());
  EXPECT_EQ(again.Authenticate("node:gpu-1", got->serial), std::nullopt);
  // And the name may be joined again at once.
  EXPECT_TRUE(certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap).ok());
}

// Issue 21: several servers on one store sign and revoke each other's certificates. A shared
// mirror learns a certificate another server signed on first sight, and a revocation made
// elsewhere from the store's changes (Follow); an older event never undoes a newer write. One
// that is not shared knows only its own writes.
TEST_F(NodeCertificatesTest, ASharedMirrorFollowsAnotherServersIssuesAndRevocations) {
  NodeCertificates shared(*store_, clock_, dir_ / "creds", absl::Hours(1));
  NodeCertificates alone(*store_, clock_, dir_ / "creds", absl::Hours(1));
  ASSERT_TRUE(shared.Load().ok());
  ASSERT_TRUE(alone.Load().ok());
  shared.SetShared(true);
  absl::StatusOr<NodeCertificates::Issued> got =
      certs_->Issue("gpu-1", Csr("node:gpu-1"), Asker::kBootstrap);
  ASSERT_TRUE(got.ok()) << got.status();
  auto [cn, serial] = Subject(got->certificate_pem);
  EXPECT_EQ(shared.Authenticate(cn, serial), "gpu-1");
  EXPECT_EQ(alone.Authenticate(cn, serial), std::nullopt);
  // Revoked through the first server (the node deleted): valid here until its change is
  // followed, then not.
  absl::StatusOr<int64_t> deleted = store_->Txn({NodeCertificates::ForgetOp("gpu-1")});
  ASSERT_TRUE(deleted.ok());
  certs_->Forget("gpu-1", *deleted);
  EXPECT_EQ(shared.Authenticate(cn, serial), "gpu-1");
  absl::StatusOr<std::vector<store::Event>> events =
      store_->Changes("/nodecerts/", shared.loaded_revision(), 1000);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);  // the issue, then the revocation
  shared.Follow(*events);
  EXPECT_EQ(shared.Authenticate(cn, serial), std::nullopt);
  EXPECT_EQ(certs_->Authenticate(cn, serial), std::nullopt);
  // The issue's event again, alone and late: the revocation stands.
  shared.Follow({events->front()});
  certs_->Follow({events->front()});
  clock_.Advance(NodeCertificates::kMissRereadMs);
  EXPECT_EQ(shared.Authenticate(cn, serial), std::nullopt);
  EXPECT_EQ(certs_->Authenticate(cn, serial), std::nullopt);
}

TEST_F(NodeCertificatesTest, BadRequestsAreRefusedAndNothingIsRecorded) {
  struct Case {
    std::string csr, want;
  };
  for (const Case& c : {Case{"not a CSR", "not a PEM certificate signing request"},
                        Case{Csr("node:gpu-2"), "asks for CN \"node:gpu-2\""},
                        Case{Csr("admin"), "asks for CN \"admin\""},
                        Case{Csr("node:gpu-1", /*rsa=*/true), "EC key on P-256"}}) {
    absl::StatusOr<NodeCertificates::Issued> got = certs_->Issue("gpu-1", c.csr, Asker::kBootstrap);
    ASSERT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
    EXPECT_NE(got.status().message().find(c.want), std::string::npos) << got.status();
  }
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/nodecerts/gpu-1").status()));
  // A CSR whose signature was not made by its key: one byte of the signature changed.
  std::string csr = Csr("node:gpu-1");
  size_t end = csr.find("-----END");
  csr[end - 6] = csr[end - 6] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(certs_->Issue("gpu-1", csr, Asker::kBootstrap).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/nodecerts/gpu-1").status()));
}

}  // namespace
}  // namespace gpucloud::server
