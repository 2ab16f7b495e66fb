#include "agent/node_identity.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>

#include "api/paths.h"
#include "api/wire.h"
#include "core/private_file.h"
#include "core/text.h"
#include "nlohmann/json.hpp"

namespace gpucloud::agent {
namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Req = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

std::string BioText(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, n);
}

absl::Time AsnTime(const ASN1_TIME* t) {
  tm parts{};
  ASN1_TIME_to_tm(t, &parts);
  return absl::FromTM(parts, absl::UTCTimeZone());
}

absl::StatusOr<NodeCertificateInfo> Describe(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return absl::InvalidArgumentError("the certificate names no common name");
  ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  return NodeCertificateInfo{
      std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)), ASN1_STRING_length(cn)),
      AsnTime(X509_get0_notBefore(cert)), AsnTime(X509_get0_notAfter(cert))};
}

// A PEM certificate signing request for CN=`cn`, signed by `key`.
absl::StatusOr<std::string> MakeCsr(EVP_PKEY* key, const std::string& cn) {
  Req req(X509_REQ_new());
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gpucloud:nodes"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  if (X509_REQ_set_pubkey(req.get(), key) != 1 ||
      X509_REQ_sign(req.get(), key, EVP_sha256()) == 0) {
    return absl::InternalError("OpenSSL: cannot sign the certificate request");
  }
  Bio out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509_REQ(out.get(), req.get());
  return BioText(out.get());
}

}  // namespace

std::string NodeCredentialPath(const std::string& state_dir) { return state_dir + "/node.pem"; }

absl::StatusOr<NodeCertificateInfo> ReadNodeCredential(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(Cat(path, ": no node credential"));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Bio in(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  Cert cert(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr));
  Bio in2(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  Key key(PEM_read_bio_PrivateKey(in2.get(), nullptr, nullptr, nullptr));
  if (!cert || !key) {
    return absl::InvalidArgumentError(Cat(path, ": holds no certificate and key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(Cat(path, ": the key does not match the certificate"));
  }
  return Describe(cert.get());
}

bool RenewalDue(absl::Time not_before, absl::Time not_after, absl::Time now) {
  return now >= not_before + (not_after - not_before) * 2 / 3;
}

absl::StatusOr<NodeCertificateInfo> RequestNodeCertificate(const api::Client& client,
                                                           const std::string& name,
                                                           const std::string& path) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return absl::InternalError("OpenSSL: cannot make a key");
  absl::StatusOr<std::string> csr = MakeCsr(key.get(), Cat("node:", name));
  if (!csr.ok()) return csr.status();
  absl::StatusOr<api::HttpResponse> r =
      client.Call("POST", api::NodeVerbPath(name, "certificate"), *csr);
  if (!r.ok()) return r.status();
  nlohmann::json doc = nlohmann::json::parse(r->body, nullptr, false);
  std::string message = doc.is_object() ? doc.value("message", r->body) : r->body;
  if (r->status == 401 || r->status == 403) {
    return absl::PermissionDeniedError(Cat("HTTP ", r->status, ": ", message));
  }
  if (r->status != 201 || !doc.is_object() || !doc["status"].is_object() ||
      !doc["status"]["certificate"].is_string()) {
    return absl::InternalError(Cat("HTTP ", r->status, ": ", message));
  }
  std::string pem = doc["status"]["certificate"].get<std::string>();
  Bio in(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr));
  if (!cert || X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InternalError("the server answered with a certificate not for our key");
  }
  Bio out(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  if (absl::Status s = WritePrivateFile(path, BioText(out.get()) + pem, FileSync::kDurable);
      !s.ok()) {
    return s;
  }
  return Describe(cert.get());
}

api::ClientConfig WithNodeCredential(const api::ClientConfig& server, const std::string& path) {
  api::ClientConfig c = server;
  c.token.clear();
  c.cert_path = path;
  c.key_path = path;
  return c;
}

}  // namespace gpucloud::agent
