#include "server/credentials.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/escaping.h"
#include "core/private_file.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

absl::Status WriteDurable(const std::string& path, const std::string& text) {
  return WritePrivateFile(path, text, FileSync::kDurable);
}

// Adds a line "HASH USER - ROLE" to DIR/tokens (the file rewritten whole).
absl::Status AppendToken(const std::string& dir, const std::string& hash, const std::string& user,
                         const std::string& role) {
  std::string tokens = dir + "/tokens";
  std::ifstream in(tokens);
  std::string book((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!book.empty() && !book.ends_with("\n")) book += "\n";
  book += Cat(hash, " ", user, " - ", role, "\n");
  return WriteDurable(tokens, book);
}

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;

absl::Status OpenSslError(const std::string& what) {
  return absl::InternalError(Cat("OpenSSL: ", what));
}

}  // namespace

namespace {

// PEM text of what `write` puts into a memory BIO.
template <typename Write>
std::string ToPem(Write write) {
  BIO* b = BIO_new(BIO_s_mem());
  write(b);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

std::string Pem(EVP_PKEY* key) {
  return ToPem(
      [&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
}
std::string Pem(X509* cert) {
  return ToPem([&](BIO* b) { PEM_write_bio_X509(b, cert); });
}

// A key or certificate read from a PEM file.
template <typename Ptr, typename Read>
absl::StatusOr<Ptr> FromPem(const std::string& path, Read read, const char* what) {
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return absl::InternalError(Cat("cannot read ", path));
  Ptr p(read(f, nullptr, nullptr, nullptr));
  fclose(f);
  if (!p) return OpenSslError(Cat("bad ", what, " in ", path));
  return p;
}
absl::StatusOr<Key> ReadKey(const std::string& path) {
  return FromPem<Key>(path, PEM_read_PrivateKey, "key");
}
absl::StatusOr<Cert> ReadCert(const std::string& path) {
  return FromPem<Cert>(path, PEM_read_X509, "certificate");
}

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A version 3 certificate for `key` with a random serial, subject O=`org`, CN=`cn`, valid
// from `not_before` to `not_after` (seconds from `now`), not yet signed.
Cert NewCert(EVP_PKEY* key, const std::string& org, const std::string& cn, time_t now,
             long not_before, long not_after) {
  Cert c(X509_new());
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get()));
  BN_free(bn);
  X509_set_version(c.get(), 2);
  X509_time_adj_ex(X509_getm_notBefore(c.get()), 0, not_before, &now);
  X509_time_adj_ex(X509_getm_notAfter(c.get()), 0, not_after, &now);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(org.c_str()), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return c;
}

// A certificate for `key` named `cn`, signed by `issuer_key` (self-signed when issuer is null).
absl::StatusOr<Cert> MakeCert(EVP_PKEY* key, const std::string& cn, X509* issuer,
                              EVP_PKEY* issuer_key, bool ca, const std::string& san) {
  Cert c =
      NewCert(key, "gpucloud", cn, time(nullptr), -3600, ca ? 10L * 365 * 86400 : 2L * 365 * 86400);
  X509* iss = issuer ? issuer : c.get();
  X509_set_issuer_name(c.get(), X509_get_subject_name(iss));
  bool ok = AddExt(c.get(), iss, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE") &&
            AddExt(c.get(), iss, NID_key_usage,
                   ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature") &&
            AddExt(c.get(), iss, NID_subject_key_identifier, "hash");
  if (!ca) {
    ok = ok && AddExt(c.get(), iss, NID_ext_key_usage, "serverAuth") &&
         AddExt(c.get(), iss, NID_subject_alt_name, san.c_str());
  }
  if (!ok || X509_sign(c.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0) {
    return OpenSslError(Cat("cannot make the certificate for ", cn));
  }
  return c;
}

std::string RandomHex(int bytes) {
  std::string raw(bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes);
  return absl::BytesToHexString(raw);
}

}  // namespace

std::string Sha256Hex(const std::string& text) {
  // Every request's token is hashed: the digest is fetched from the provider once (OpenSSL 3
  // looks it up on every EVP_sha256() use), and the hex written without a format per byte.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, sha256, nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), n));
}

namespace {

using Csr = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;

// The subject's common name of `req`, or "" when it has none (or several).
std::string CommonName(X509_NAME* name) {
  if (X509_NAME_entry_count(name) < 1) return "";
  int at = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (at < 0 || X509_NAME_get_index_by_NID(name, NID_commonName, at) >= 0) return "";
  ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                     ASN1_STRING_length(value));
}

// Whether `key` is an EC key on P-256 (the only kind of key a node may ask to have signed).
bool IsP256(EVP_PKEY* key) {
  char group[64] = {};
  size_t n = 0;
  return EVP_PKEY_is_a(key, "EC") &&
         EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof group, &n) == 1 &&
         std::string(group) == "prime256v1";
}

}  // namespace

std::string CertificateSerial(X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr);
  char* hex = BN_bn2hex(bn);
  std::string out = ToLower(hex);
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

std::string CertificateCommonName(X509* cert) { return CommonName(X509_get_subject_name(cert)); }

absl::StatusOr<SignedCertificate> SignClientCsr(const std::string& dir, const std::string& csr_pem,
                                                const std::string& org, const std::string& cn,
                                                absl::Time now, absl::Duration ttl) {
  BIO* bio = BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size()));
  Csr req(PEM_read_bio_X509_REQ(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  if (!req) return absl::InvalidArgumentError("the body is not a PEM certificate signing request");
  Key key(X509_REQ_get_pubkey(req.get()));
  if (!key || X509_REQ_verify(req.get(), key.get()) != 1) {
    return absl::InvalidArgumentError("the request's signature does not verify with its key");
  }
  if (!IsP256(key.get())) {
    return absl::InvalidArgumentError("the request's key must be an EC key on P-256");
  }
  if (std::string asked = CommonName(X509_REQ_get_subject_name(req.get())); asked != cn) {
    return absl::InvalidArgumentError(
        Cat("the request asks for CN \"", asked, "\"; this path signs only \"", cn, "\""));
  }
  absl::StatusOr<Key> ca_key = ReadKey(dir + "/ca.key");
  if (!ca_key.ok()) return ca_key.status();
  absl::StatusOr<Cert> ca = ReadCert(dir + "/ca.crt");
  if (!ca.ok()) return ca.status();
  // Valid five minutes before now, for clocks a little behind the server's.
  Cert c = NewCert(key.get(), org, cn, absl::ToTimeT(now), -300, absl::ToInt64Seconds(ttl));
  X509_set_issuer_name(c.get(), X509_get_subject_name(ca->get()));
  bool ok = AddExt(c.get(), ca->get(), NID_basic_constraints, "critical,CA:FALSE") &&
            AddExt(c.get(), ca->get(), NID_key_usage, "critical,digitalSignature") &&
            AddExt(c.get(), ca->get(), NID_ext_key_usage, "clientAuth") &&
            AddExt(c.get(), ca->get(), NID_subject_key_identifier, "hash") &&
            AddExt(c.get(), ca->get(), NID_authority_key_identifier, "keyid");
  if (!ok || X509_sign(c.get(), ca_key->get(), EVP_sha256()) == 0) {
    return OpenSslError(Cat("cannot sign the certificate for ", cn));
  }
  const ASN1_TIME* end = X509_get0_notAfter(c.get());
  tm t{};
  ASN1_TIME_to_tm(end, &t);
  return SignedCertificate{Pem(c.get()), CertificateSerial(c.get()),
                           absl::FromTM(t, absl::UTCTimeZone())};
}

absl::StatusOr<Credentials> EnsureCredentials(const std::string& dir,
                                              const std::vector<std::string>& extra_names) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(Cat("cannot create ", dir, ": ", ec.message()));
  // Absolute paths: admin.config records the CA's, and must work from any working directory.
  const std::string abs = std::filesystem::absolute(dir).lexically_normal().string();
  const std::string base = abs.ends_with('/') ? abs.substr(0, abs.size() - 1) : abs;
  Credentials out{base + "/ca.crt", base + "/server.crt", base + "/server.key", ""};
  if (!std::filesystem::exists(out.ca_cert_path)) {
    Key ca_key(EVP_EC_gen("P-256"));
    if (!ca_key) return OpenSslError("cannot make a key");
    absl::StatusOr<Cert> ca = MakeCert(ca_key.get(), "gpucloud CA", nullptr, nullptr, true, "");
    if (!ca.ok()) return ca.status();
    if (absl::Status s = WriteDurable(dir + "/ca.key", Pem(ca_key.get())); !s.ok()) return s;
    if (absl::Status s = WriteDurable(out.ca_cert_path, Pem(ca->get())); !s.ok()) return s;
    chmod(out.ca_cert_path.c_str(), 0644);
    std::filesystem::remove(out.cert_path, ec);  // a new CA needs a new server certificate
  }
  // The names the certificate is for: localhost, the host name, every address of this host's
  // interfaces (so agents may dial any of them) and the names the caller adds (--listen).
  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  std::set<std::string> names = {"DNS:localhost", "IP:127.0.0.1", "IP:::1", Cat("DNS:", hostname)};
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      names.insert(Cat("IP:", text));
    }
    freeifaddrs(ifs);
  }
  for (const std::string& n : extra_names) {
    if (n.empty() || n == "0.0.0.0" || n == "::") continue;
    in6_addr a6;
    in_addr a4;
    bool ip = inet_pton(AF_INET, n.c_str(), &a4) == 1 || inet_pton(AF_INET6, n.c_str(), &a6) == 1;
    names.insert(Cat(ip ? "IP:" : "DNS:", n));
  }
  std::string san;
  for (const std::string& n : names) san += (san.empty() ? "" : ",") + n;
  std::string san_path = dir + "/server.san";
  std::string old_san;
  {
    std::ifstream f(san_path);
    std::getline(f, old_san);
  }
  // A certificate made for other names is made again (the CA stays, so agents keep trusting it).
  bool names_moved = old_san != san && !old_san.empty();
  if (names_moved || !std::filesystem::exists(out.cert_path) ||
      !std::filesystem::exists(out.key_path)) {
    absl::StatusOr<Key> ca_key = ReadKey(dir + "/ca.key");
    if (!ca_key.ok()) return ca_key.status();
    absl::StatusOr<Cert> ca = ReadCert(out.ca_cert_path);
    if (!ca.ok()) return ca.status();
    Key key(EVP_EC_gen("P-256"));
    if (!key) return OpenSslError("cannot make a key");
    absl::StatusOr<Cert> cert = MakeCert(key.get(), hostname, ca->get(), ca_key->get(), false, san);
    if (!cert.ok()) return cert.status();
    if (absl::Status s = WriteDurable(out.key_path, Pem(key.get())); !s.ok()) return s;
    if (absl::Status s = WriteDurable(out.cert_path, Pem(cert->get())); !s.ok()) return s;
    std::ofstream(san_path, std::ios::trunc) << san << "\n";
  } else if (old_san.empty()) {
    std::ofstream(san_path, std::ios::trunc) << san << "\n";
  }
  std::string tokens = dir + "/tokens";
  // The agents' bootstrap token: kept in the clear for the operator to hand to agents (like
  // kubeadm's join token), and as a hash in the token book.
  out.bootstrap_token_path = dir + "/bootstrap.token";
  if (!std::filesystem::exists(out.bootstrap_token_path)) {
    std::string token = RandomHex(32);
    if (absl::Status s = AppendToken(dir, Sha256Hex(token), "system:node", "node"); !s.ok()) {
      return s;
    }
    if (absl::Status s = WriteDurable(out.bootstrap_token_path, token + "\n"); !s.ok()) return s;
  }
  out.audit_key_path = base + "/audit.key";
  if (!std::filesystem::exists(out.audit_key_path)) {
    Key key(EVP_EC_gen("P-256"));
    if (!key) return OpenSslError("cannot make a key");
    if (absl::Status s = WriteDurable(out.audit_key_path, Pem(key.get())); !s.ok()) return s;
  }
  // No admin yet (a first start, or one that failed before its admin config was written): one is
  // made here and kept only once the caller commits it (CommitAdminToken).
  absl::StatusOr<TokenBook> book = TokenBook::Load(dir);
  if (!book.ok()) return book.status();
  if (!book->HasAdmin()) out.admin_token = RandomHex(32);
  return out;
}

absl::Status CommitAdminToken(const std::string& dir, const std::string& token) {
  return AppendToken(dir, Sha256Hex(token), "admin", "admin");
}

std::string AdminConfigText(const std::string& url, const std::string& ca_path,
                            const std::string& token) {
  // Absolute: the config is copied elsewhere (~/.gpucloud/config) and read from anywhere.
  const std::string ca = std::filesystem::absolute(ca_path).lexically_normal().string();
  return Cat("server: ", url, "\ncertificate-authority: ", ca, "\ntoken: ", token, "\n");
}

std::string NewToken() { return RandomHex(32); }

absl::StatusOr<TokenBook> TokenBook::Load(const std::string& dir) {
  std::ifstream f(dir + "/tokens");
  if (!f) return absl::InternalError(Cat("cannot read ", dir, "/tokens"));
  TokenBook book;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string hash, user, ns, role;
    if (!(in >> hash >> user >> ns >> role) || hash.size() != 64) {
      return absl::DataLossError(
          Cat(dir, "/tokens:", n, ": expected \"SHA256 USER NAMESPACE admin|tenant|node\""));
    }
    if (role != "admin" && role != "tenant" && role != "node") {
      return absl::DataLossError(
          Cat(dir, "/tokens:", n, ": role \"", role, "\" is not admin, tenant or node"));
    }
    Identity who{user, ns == "-" ? "" : ns, role == "admin"};
    who.bootstrap = role == "node";  // an agent's join token: it asks for a node certificate
    if (auto [it, fresh] = book.by_hash_.try_emplace(hash, std::move(who)); !fresh) {
      return absl::DataLossError(Cat(dir, "/tokens:", n, ": the token of user ", user,
                                     " is already on an earlier line (for ", it->second.user,
                                     "); each token may appear once"));
    }
  }
  if (book.by_hash_.empty()) {
    return absl::FailedPreconditionError(
        Cat(dir,
            "/tokens holds no token: nobody could use this server (`gpucloud server "
            "admin-config --data-dir ",
            dir, "` issues an admin token)"));
  }
  return book;
}

bool TokenBook::HasAdmin() const {
  return std::any_of(by_hash_.begin(), by_hash_.end(),
                     [](const auto& e) { return e.second.admin; });
}

void TokenBook::Add(const std::string& token, Identity who) {
  by_hash_[Sha256Hex(token)] = std::move(who);
}

std::optional<Identity> TokenBook::Find(const std::string& token) const {
  if (token.empty()) return std::nullopt;
  auto it = by_hash_.find(Sha256Hex(token));
  if (it == by_hash_.end()) return fallback_ ? fallback_(token) : std::nullopt;
  return it->second;
}

}  // namespace gpucloud::server
