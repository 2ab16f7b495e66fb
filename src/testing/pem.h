// Test helpers for keys and certificates (OpenSSL): PEM text of what a writer puts into a BIO, a
// new key with a certificate signing request for it (as an agent makes them, for the server's
// tests, which may not use the agent), and a self-signed certificate. Test-only.
#ifndef GPUCLOUD_TESTING_PEM_H_
#define GPUCLOUD_TESTING_PEM_H_

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <string>
#include <utility>

namespace gpucloud::testing_util {

// The text `write(BIO*)` puts into a memory BIO (PEM_write_bio_...).
template <typename Write>
std::string PemText(Write write) {
  BIO* b = BIO_new(BIO_s_mem());
  write(b);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

inline std::string KeyPem(EVP_PKEY* key) {
  return PemText(
      [&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
}

struct KeyAndCsr {
  std::string key_pem;
  std::string csr_pem;
};

// A PEM key (EC P-256, or RSA 2048) and a CSR for subject CN=`cn` signed by it.
inline KeyAndCsr MakeKeyAndCsr(const std::string& cn, bool rsa = false) {
  EVP_PKEY* key = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
  X509_REQ* req = X509_REQ_new();
  X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_REQ_set_pubkey(req, key);
  X509_REQ_sign(req, key, EVP_sha256());
  auto text = [](auto write) {
    BIO* b = BIO_new(BIO_s_mem());
    write(b);
    char* data = nullptr;
    long n = BIO_get_mem_data(b, &data);
    std::string out(data, n);
    BIO_free(b);
    return out;
  };
  KeyAndCsr out{text([&](BIO* b) {
                  PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
                }),
                text([&](BIO* b) { PEM_write_bio_X509_REQ(b, req); })};
  X509_REQ_free(req);
  EVP_PKEY_free(key);
  return out;
}

// A PEM key and a self-signed certificate for CN=`cn`, valid for `days` from now.
inline std::pair<std::string, std::string> MakeKeyAndSelfSignedCert(const std::string& cn,
                                                                    long days) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400);
  X509_set_pubkey(cert, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, X509_get_subject_name(cert));
  X509_sign(cert, key, EVP_sha256());
  std::pair<std::string, std::string> out{KeyPem(key),
                                          PemText([&](BIO* b) { PEM_write_bio_X509(b, cert); })};
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace gpucloud::testing_util

#endif  // GPUCLOUD_TESTING_PEM_H_
