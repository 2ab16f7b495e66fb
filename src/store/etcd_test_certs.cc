#include "store/etcd_test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "core/private_file.h"
#include "core/text.h"
#include "testing/pem.h"

namespace gpucloud::store {
namespace {

std::shared_ptr<EVP_PKEY> NewKey() {
  return std::shared_ptr<EVP_PKEY>(EVP_EC_gen("P-256"), EVP_PKEY_free);
}

bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A version 3 certificate for `key` with a random serial, subject CN=`cn`, not signed yet.
std::shared_ptr<X509> NewCert(EVP_PKEY* key, const std::string& cn, absl::Time not_before,
                              absl::Time not_after) {
  std::shared_ptr<X509> c(X509_new(), X509_free);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get()));
  BN_free(bn);
  X509_set_version(c.get(), 2);
  ASN1_TIME_set(X509_getm_notBefore(c.get()), absl::ToTimeT(not_before));
  ASN1_TIME_set(X509_getm_notAfter(c.get()), absl::ToTimeT(not_after));
  X509_set_pubkey(c.get(), key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(c.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return c;
}

absl::Status WritePem(const std::string& path, EVP_PKEY* key, X509* cert) {
  std::string pem = key ? testing_util::PemText([&](BIO* b) {
    PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  })
                        : testing_util::PemText([&](BIO* b) { PEM_write_bio_X509(b, cert); });
  return WritePrivateFile(path, pem);
}

}  // namespace

absl::StatusOr<TestCa> TestCa::Create(const std::string& dir, const std::string& name,
                                      absl::Time now) {
  TestCa ca;
  ca.dir_ = dir;
  ca.cert_file_ = Cat(dir, "/", name, "-ca.crt");
  ca.key_ = NewKey();
  if (!ca.key_) return absl::InternalError("OpenSSL: cannot make a key");
  ca.cert_ =
      NewCert(ca.key_.get(), Cat(name, " test CA"), now - absl::Hours(1), now + absl::Hours(24));
  X509* c = ca.cert_.get();
  X509_set_issuer_name(c, X509_get_subject_name(c));
  const bool ok = AddExt(c, c, NID_basic_constraints, "critical,CA:TRUE") &&
                  AddExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") &&
                  AddExt(c, c, NID_subject_key_identifier, "hash") &&
                  X509_sign(c, ca.key_.get(), EVP_sha256()) != 0;
  if (!ok) return absl::InternalError(Cat("OpenSSL: cannot make the CA ", name));
  if (absl::Status s = WritePem(ca.cert_file_, nullptr, c); !s.ok()) return s;
  return ca;
}

absl::StatusOr<TestCertificate> TestCa::Issue(const std::string& file,
                                              const TestCertificateSpec& spec) const {
  std::shared_ptr<EVP_PKEY> key = NewKey();
  if (!key) return absl::InternalError("OpenSSL: cannot make a key");
  std::shared_ptr<X509> cert =
      NewCert(key.get(), spec.common_name, spec.not_before, spec.not_after);
  X509* c = cert.get();
  X509_set_issuer_name(c, X509_get_subject_name(cert_.get()));
  bool ok = AddExt(c, cert_.get(), NID_basic_constraints, "CA:FALSE") &&
            AddExt(c, cert_.get(), NID_key_usage, "critical,digitalSignature") &&
            AddExt(c, cert_.get(), NID_ext_key_usage, spec.key_usages);
  if (!spec.alt_names.empty()) {
    ok = ok && AddExt(c, cert_.get(), NID_subject_alt_name, spec.alt_names);
  }
  if (!ok || X509_sign(c, key_.get(), EVP_sha256()) == 0) {
    return absl::InternalError(Cat("OpenSSL: cannot make the certificate ", file));
  }
  TestCertificate out{Cat(dir_, "/", file, ".crt"), Cat(dir_, "/", file, ".key")};
  if (absl::Status s = WritePem(out.cert_file, nullptr, c); !s.ok()) return s;
  if (absl::Status s = WritePem(out.key_file, key.get(), nullptr); !s.ok()) return s;
  return out;
}

absl::StatusOr<TestCertificate> TestCa::IssueMember(const std::string& file, absl::Time now) const {
  return Issue(file, {.common_name = "etcd",
                      .alt_names = "IP:127.0.0.1,DNS:localhost",
                      .key_usages = "serverAuth,clientAuth",
                      .not_before = now - absl::Hours(1),
                      .not_after = now + absl::Hours(1)});
}

absl::StatusOr<TestCertificate> TestCa::IssueClient(const std::string& file, absl::Time now) const {
  return Issue(file, {.common_name = "gpucloud",
                      .key_usages = "clientAuth",
                      .not_before = now - absl::Hours(1),
                      .not_after = now + absl::Hours(1)});
}

}  // namespace gpucloud::store
