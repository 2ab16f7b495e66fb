// Test helper: a new key and a certificate signing request for it, as an agent makes them
// (agent/node_identity.cc; the server's tests may not use the agent). Test-only.
#ifndef GPUCLOUD_SERVER_TEST_CSR_H_
#define GPUCLOUD_SERVER_TEST_CSR_H_

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <string>

namespace gpucloud::testing_util {

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

}  // namespace gpucloud::testing_util

#endif  // GPUCLOUD_SERVER_TEST_CSR_H_
