// A job's ssh key pair (ssh_keys.h): the private key is PKCS#1 PEM, the public key is OpenSSH's
// "ssh-rsa" line of that same key (re-derived from the private key, decoded field by field, and,
// where ssh-keygen is installed, as ssh-keygen derives it), and every job gets a fresh pair.
#include "server/ssh_keys.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "core/text.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

// Reads RFC 4251's string at *at.
std::string TakeSshString(const std::string& blob, size_t* at) {
  EXPECT_LE(*at + 4, blob.size());
  if (*at + 4 > blob.size()) return "";
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(blob[*at + i]);
  *at += 4;
  EXPECT_LE(*at + n, blob.size());
  std::string out = blob.substr(*at, n);
  *at += n;
  return out;
}

// The private key's modulus and exponent, big-endian, as OpenSSL reads the PEM.
std::pair<std::string, std::string> ModulusAndExponent(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(key, nullptr);
  if (key == nullptr) return {};
  BIGNUM* n = nullptr;
  BIGNUM* e = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n), 1);
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e), 1);
  EXPECT_EQ(EVP_PKEY_get_bits(key), 2048);
  auto bytes = [](const BIGNUM* b) {
    std::string out(static_cast<size_t>(BN_num_bytes(b)), '\0');
    BN_bn2bin(b, reinterpret_cast<unsigned char*>(out.data()));
    return out;
  };
  std::pair<std::string, std::string> out{bytes(n), bytes(e)};
  BN_free(n);
  BN_free(e);
  EVP_PKEY_free(key);
  return out;
}

TEST(SshKeys, ThePublicKeyIsThePrivateKeysInOpenSshForm) {
  absl::StatusOr<SshKeyPair> keys = GenerateSshKeyPair("team-a/mpi");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(keys->private_key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"))
      << keys->private_key_pem.substr(0, 40);
  EXPECT_TRUE(keys->private_key_pem.ends_with("-----END RSA PRIVATE KEY-----\n"));

  // Re-derived from the private key: the same line.
  absl::StatusOr<std::string> derived = OpenSshPublicKey(keys->private_key_pem, "team-a/mpi");
  ASSERT_TRUE(derived.ok()) << derived.status();
  EXPECT_EQ(*derived, keys->public_key);

  // Field by field: "ssh-rsa BASE64 COMMENT\n", the blob string "ssh-rsa", mpint e, mpint n.
  std::vector<std::string> parts = SplitAny(keys->public_key, " ");
  ASSERT_EQ(parts.size(), 3u) << keys->public_key;
  EXPECT_EQ(parts[0], "ssh-rsa");
  EXPECT_EQ(parts[2], "team-a/mpi\n");
  std::string blob;
  ASSERT_TRUE(absl::Base64Unescape(parts[1], &blob));
  size_t at = 0;
  EXPECT_EQ(TakeSshString(blob, &at), "ssh-rsa");
  std::string e = TakeSshString(blob, &at);
  std::string n = TakeSshString(blob, &at);
  EXPECT_EQ(at, blob.size());
  auto [want_n, want_e] = ModulusAndExponent(keys->private_key_pem);
  EXPECT_EQ(e, want_e);       // 65537: 01 00 01, its high bit clear
  ASSERT_EQ(n.size(), 257u);  // 2048 bits with the top bit set: a 0 byte first (mpint)
  EXPECT_EQ(n[0], '\0');
  EXPECT_EQ(n.substr(1), want_n);
}

TEST(SshKeys, EveryPairIsFreshAndTheSecretHoldsWhatVolcanoWrites) {
  absl::StatusOr<SshKeyPair> a = GenerateSshKeyPair("a");
  absl::StatusOr<SshKeyPair> b = GenerateSshKeyPair("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->private_key_pem, b->private_key_pem);
  std::map<std::string, std::string> values = SshSecretValues(*a);
  EXPECT_EQ(values.size(), 4u);
  EXPECT_EQ(values["id_rsa"], a->private_key_pem);
  EXPECT_EQ(values["id_rsa.pub"], a->public_key);
  EXPECT_EQ(values["authorized_keys"], a->public_key);
  EXPECT_EQ(values["config"], "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n");
}

TEST(SshKeys, OnlyAnRsaPrivateKeyHasAnOpenSshRsaLine) {
  EXPECT_TRUE(absl::IsInvalidArgument(OpenSshPublicKey("not a key", "").status()));
  EVP_PKEY* ec = EVP_EC_gen("P-256");
  ASSERT_NE(ec, nullptr);
  BIO* bio = BIO_new(BIO_s_mem());
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio, ec, nullptr, nullptr, 0, nullptr, nullptr), 1);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(len));
  BIO_free(bio);
  EVP_PKEY_free(ec);
  EXPECT_TRUE(absl::IsInvalidArgument(OpenSshPublicKey(pem, "").status()));
}

// OpenSSH itself reads the private key and derives the same public key.
TEST(SshKeys, SshKeygenDerivesTheSamePublicKey) {
  if (std::system("command -v ssh-keygen >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "ssh-keygen is not installed";
  }
  absl::StatusOr<SshKeyPair> keys = GenerateSshKeyPair("c");
  ASSERT_TRUE(keys.ok());
  testing_util::TempDir dir("gpucloud-ssh-keys");
  const std::string key = (dir.path() / "id_rsa").string();
  const std::string out = (dir.path() / "derived.pub").string();
  {
    std::ofstream f(key);
    f << keys->private_key_pem;
  }
  ASSERT_EQ(std::system(Cat("chmod 600 ", key).c_str()), 0);
  ASSERT_EQ(std::system(Cat("ssh-keygen -y -f ", key, " > ", out).c_str()), 0);
  std::ifstream f(out);
  std::stringstream derived;
  derived << f.rdbuf();
  // ssh-keygen prints the key without our comment.
  std::string ours = keys->public_key.substr(0, keys->public_key.rfind(' '));
  std::string theirs = derived.str();
  theirs = theirs.substr(0, theirs.find_first_of(" \n", 8));
  EXPECT_EQ(theirs, ours);
}

}  // namespace
}  // namespace gpucloud::server
