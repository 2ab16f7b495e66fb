// Test helper: a certificate authority made on the spot (EC P-256, OpenSSL's C API) and the
// certificates it signs, written as PEM files (0600) for an etcd that serves TLS
// (EtcdTestServer::ServeTls) and for its clients. Time comes in from the caller, so a test can
// make an expired certificate. Test-only; a TestCa is immutable once made (thread-safe to share).
#ifndef GPUCLOUD_STORE_ETCD_TEST_CERTS_H_
#define GPUCLOUD_STORE_ETCD_TEST_CERTS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

typedef struct evp_pkey_st EVP_PKEY;  // OpenSSL's
typedef struct x509_st X509;

namespace gpucloud::store {

// A certificate and its private key, as PEM files.
struct TestCertificate {
  std::string cert_file;
  std::string key_file;
};

// What a certificate is for: its subject alternative names (OpenSSL's syntax,
// "IP:127.0.0.1,DNS:localhost"; "" for none), extended key usages ("serverAuth,clientAuth")
// and validity.
struct TestCertificateSpec {
  std::string common_name;
  std::string alt_names;
  std::string key_usages;
  absl::Time not_before;
  absl::Time not_after;
};

class TestCa {
 public:
  // A new CA named `name` (its subject is CN=NAME test CA), valid from an hour before `now` for a
  // day, its certificate in DIR/NAME-ca.crt. Internal on OpenSSL or file errors.
  static absl::StatusOr<TestCa> Create(const std::string& dir, const std::string& name,
                                       absl::Time now);

  const std::string& cert_file() const { return cert_file_; }

  // DIR/FILE.crt and DIR/FILE.key: a certificate for a new key, signed by this CA.
  absl::StatusOr<TestCertificate> Issue(const std::string& file,
                                        const TestCertificateSpec& spec) const;
  // What an etcd member on loopback serves: for 127.0.0.1 and localhost, server and client
  // authentication (etcd 3.4's gateway dials its own gRPC server with it), valid for an hour
  // around `now`.
  absl::StatusOr<TestCertificate> IssueMember(const std::string& file, absl::Time now) const;
  // A client's: client authentication only, valid for an hour around `now`.
  absl::StatusOr<TestCertificate> IssueClient(const std::string& file, absl::Time now) const;

 private:
  TestCa() = default;

  std::string dir_;
  std::string cert_file_;
  std::shared_ptr<EVP_PKEY> key_;
  std::shared_ptr<X509> cert_;
};

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_ETCD_TEST_CERTS_H_
