// The server's credentials: on first start a private CA, a server certificate it signs (for
// localhost, 127.0.0.1 and the host name) and an admin token. Keys are ECDSA P-256 (OpenSSL).
// Tokens are kept only as SHA-256 hashes (DIR/tokens, mode 0600); the admin token itself is
// returned once, for the operator (and written to DIR/admin.config for gpuctl, mode 0600, like
// a kubeconfig). A bootstrap token for agents (role node) is kept in DIR/bootstrap.token.
// Every file is written whole (temporary file, fsync, rename) and created 0600
// (WritePrivateFile); making DIR itself private is the control plane's (PrepareDataDir).
// Functions are thread-safe as long as one process writes DIR; TokenBook is immutable once the
// server using it started (Add is for before that).
#ifndef GPUCLOUD_SERVER_CREDENTIALS_H_
#define GPUCLOUD_SERVER_CREDENTIALS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/rest.h"

typedef struct x509_st X509;  // OpenSSL's

namespace gpucloud::server {

struct Credentials {
  std::string ca_cert_path;
  std::string cert_path;
  std::string key_path;
  std::string admin_token;           // only on the first start; empty afterwards
  std::string bootstrap_token_path;  // DIR/bootstrap.token: the agents' join token (mode 0600)
  // DIR/audit.key: the key that signs the audit log's digests (EC P-256, 0600). Its own, made
  // once: the server certificate's key is made again when the server's names change, and the
  // digests it signed must stay verifiable.
  std::string audit_key_path;
};

// Creates what is missing under `dir`; keeps what exists. The paths returned are absolute (a
// relative `dir` is taken from the working directory). The server certificate names
// localhost, the host name, every IPv4 address of this host and `extra_names` (host names or
// addresses); it is made again, by the same CA, when those names change. When DIR/tokens holds
// no admin, `admin_token` is a new one that is NOT yet valid or stored: the caller commits it
// (CommitAdminToken) once it has handed it over (admin.config written), so that a start that
// fails before that (its port is busy) loses nothing. Internal on OpenSSL or file errors.
absl::StatusOr<Credentials> EnsureCredentials(const std::string& dir,
                                              const std::vector<std::string>& extra_names = {});

// Adds the admin `token`'s hash to DIR/tokens (atomically). Internal on file errors.
absl::Status CommitAdminToken(const std::string& dir, const std::string& token);
// gpuctl's config file for an admin (the server's URL, its CA and the token). The CA's path is
// written absolute (a relative one is taken from the working directory), so that the config
// works from any directory and when copied elsewhere.
std::string AdminConfigText(const std::string& url, const std::string& ca_path,
                            const std::string& token);
// A new random bearer token (256 bits, hex).
std::string NewToken();

std::string Sha256Hex(const std::string& text);

// A client certificate the CA signed.
struct SignedCertificate {
  std::string pem;
  std::string serial;  // lower-case hex, as CertificateSerial gives it
  absl::Time not_after;
};

// Signs `csr_pem` (a PEM certificate signing request) with the CA under `dir`: a certificate
// for client authentication only (extended key usage clientAuth, not a CA) for subject
// O=`org`, CN=`cn`, valid from five minutes before `now` until `now` + `ttl`. The request must ask
// for exactly that CN, be signed by its own key, and that key must be EC P-256. InvalidArgument
// (saying which) when not; Internal on OpenSSL or file errors.
absl::StatusOr<SignedCertificate> SignClientCsr(const std::string& dir, const std::string& csr_pem,
                                                const std::string& org, const std::string& cn,
                                                absl::Time now, absl::Duration ttl);

// The serial (lower-case hex) and the subject's common name ("" when it has none or several)
// of a certificate (an OpenSSL X509*).
std::string CertificateSerial(X509* cert);
std::string CertificateCommonName(X509* cert);

// Bearer tokens by hash.
class TokenBook {
 public:
  // DataLoss for a malformed line or a token given twice (an appended line must not silently
  // change who a token is); FailedPrecondition when the file holds no token at all.
  static absl::StatusOr<TokenBook> Load(const std::string& dir);
  // Whether some token is an admin's.
  bool HasAdmin() const;
  // Makes `token` valid as `who` (before the server starts serving).
  void Add(const std::string& token, Identity who);
  // The identity of `token`, or nullopt when it is not valid: the file's tokens first, then
  // the fallback's (the API's tokens: IdentityBook::Authenticate).
  std::optional<Identity> Find(const std::string& token) const;
  // Set before the server starts; must be thread-safe.
  void SetFallback(std::function<std::optional<Identity>(const std::string&)> fallback) {
    fallback_ = std::move(fallback);
  }

 private:
  std::map<std::string, Identity> by_hash_;
  std::function<std::optional<Identity>(const std::string&)> fallback_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_CREDENTIALS_H_
