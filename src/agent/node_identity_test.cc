#include "agent/node_identity.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/pem.h"
#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

std::pair<std::string, std::string> KeyAndCert(const std::string& cn, long days) {
  return testing_util::MakeKeyAndSelfSignedCert(cn, days);
}

TEST(NodeIdentityTest, RenewalIsDueOnceTwoThirdsOfTheLifeAreGone) {
  const absl::Time start = absl::FromUnixSeconds(1'800'000'000);
  const absl::Time end = start + absl::Hours(24);
  EXPECT_FALSE(RenewalDue(start, end, start));
  EXPECT_FALSE(RenewalDue(start, end, start + absl::Hours(16) - absl::Seconds(1)));
  EXPECT_TRUE(RenewalDue(start, end, start + absl::Hours(16)));
  EXPECT_TRUE(RenewalDue(start, end, end + absl::Hours(1)));  // expired: all the more
}

TEST(NodeIdentityTest, ACredentialIsAKeyWithItsCertificateInOneFile) {
  testing_util::TempDir dir("node-identity");
  const std::string path = NodeCredentialPath(dir.path().string());
  EXPECT_EQ(path, dir.path().string() + "/node.pem");
  EXPECT_TRUE(absl::IsNotFound(ReadNodeCredential(path).status()));
  auto [key, cert] = KeyAndCert("node:gpu-1", 1);
  std::ofstream(path) << key << cert;
  absl::StatusOr<NodeCertificateInfo> info = ReadNodeCredential(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->common_name, "node:gpu-1");
  EXPECT_NEAR(absl::ToDoubleHours(info->not_after - info->not_before), 24, 0.01);
  // Another key than the certificate's (a crash between two files could leave that): refused.
  auto [other_key, unused] = KeyAndCert("node:gpu-1", 1);
  std::ofstream(path, std::ios::trunc) << other_key << cert;
  absl::StatusOr<NodeCertificateInfo> mismatched = ReadNodeCredential(path);
  EXPECT_TRUE(absl::IsInvalidArgument(mismatched.status()));
  EXPECT_NE(mismatched.status().message().find("does not match"), std::string::npos);
  std::ofstream(path, std::ios::trunc) << cert;  // no key at all
  EXPECT_TRUE(absl::IsInvalidArgument(ReadNodeCredential(path).status()));
}

TEST(NodeIdentityTest, TheCredentialReplacesTheTokenInTheClientConfig) {
  api::ClientConfig bootstrap{"cp", 8443, "/ca.crt", "bootstrap-token"};
  api::ClientConfig c = WithNodeCredential(bootstrap, "/state/node.pem");
  EXPECT_EQ(c.host, "cp");
  EXPECT_EQ(c.ca_path, "/ca.crt");
  EXPECT_TRUE(c.token.empty());  // the agent never sends the bootstrap token again
  EXPECT_EQ(c.cert_path, "/state/node.pem");
  EXPECT_EQ(c.key_path, "/state/node.pem");
}

}  // namespace
}  // namespace gpucloud::agent
