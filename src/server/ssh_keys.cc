#include "server/ssh_keys.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/encoder.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/escaping.h"
#include "core/text.h"
#include "server/secret_store.h"

namespace gpucloud::server {
namespace {

constexpr int kRsaBits = 2048;

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Bn = std::unique_ptr<BIGNUM, BnFree>;

// RFC 4251's string: a 4-byte big-endian length, then the bytes.
void AppendSshString(std::string_view bytes, std::string* out) {
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    out->push_back(static_cast<char>((n >> shift) & 0xff));
  out->append(bytes);
}

// RFC 4251's mpint of a non-negative number: big-endian, with a 0 byte before a high bit set
// (it would read as negative), none at all for zero.
void AppendSshMpint(const BIGNUM* bn, std::string* out) {
  std::string bytes(static_cast<size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(bytes.data()));
  if (!bytes.empty() && (static_cast<unsigned char>(bytes[0]) & 0x80) != 0)
    bytes.insert(0, 1, '\0');
  AppendSshString(bytes, out);
}

absl::StatusOr<std::string> PublicKeyLine(const EVP_PKEY* key, std::string_view comment) {
  BIGNUM* n = nullptr;
  BIGNUM* e = nullptr;
  if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n) != 1 ||
      EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e) != 1) {
    BN_free(n);
    return absl::InvalidArgumentError("the key has no RSA modulus and exponent");
  }
  Bn hold_n(n), hold_e(e);
  std::string blob;
  AppendSshString("ssh-rsa", &blob);
  AppendSshMpint(e, &blob);
  AppendSshMpint(n, &blob);
  std::string line = Cat("ssh-rsa ", absl::Base64Escape(blob));
  if (!comment.empty()) line += Cat(" ", comment);
  return line + "\n";
}

// The private key as PKCS#1 PEM ("type-specific" structure), unencrypted.
absl::StatusOr<std::string> PrivateKeyPem(EVP_PKEY* key) {
  OSSL_ENCODER_CTX* ctx =
      OSSL_ENCODER_CTX_new_for_pkey(key, EVP_PKEY_KEYPAIR, "PEM", "type-specific", nullptr);
  if (ctx == nullptr) return absl::InternalError("OpenSSL has no PEM encoder for RSA keys");
  unsigned char* data = nullptr;
  size_t len = 0;
  const bool ok = OSSL_ENCODER_to_data(ctx, &data, &len) == 1;
  OSSL_ENCODER_CTX_free(ctx);
  if (!ok) return absl::InternalError("OpenSSL could not encode the private key");
  std::string pem(reinterpret_cast<char*>(data), len);
  OPENSSL_free(data);
  return pem;
}

absl::Status SecretTaken(const std::string& ns, const std::string& secret, const Job& job) {
  return absl::AlreadyExistsError(
      Cat("secret ", ns, "/", secret, " already exists: job ", job.metadata.name,
          " makes its own ssh keys (spec.ssh: Volcano's ssh plugin, or an MPIJob) in a Secret of "
          "that name; delete or rename that secret, or rename the job"));
}

// Whether NS/NAME holds a Secret: its revision, or nullopt.
absl::StatusOr<std::optional<int64_t>> SecretRevision(store::Store& store, const std::string& ns,
                                                      const std::string& name) {
  absl::StatusOr<store::KeyValue> kv = store.Get(SecretStore::Key(ns, name));
  if (absl::IsNotFound(kv.status())) return std::optional<int64_t>();
  if (!kv.ok()) return kv.status();
  return std::optional<int64_t>(kv->mod_revision);
}

}  // namespace

absl::StatusOr<std::string> OpenSshPublicKey(std::string_view private_key_pem,
                                             std::string_view comment) {
  BIO* bio = BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size()));
  if (bio == nullptr) return absl::InternalError("OpenSSL could not allocate");
  // No passphrase callback: an encrypted key fails to read rather than prompting.
  Pkey key(PEM_read_bio_PrivateKey(
      bio, nullptr, [](char*, int, int, void*) { return -1; }, nullptr));
  BIO_free(bio);
  if (!key || !EVP_PKEY_is_a(key.get(), "RSA")) {
    return absl::InvalidArgumentError("not an unencrypted RSA private key in PEM");
  }
  return PublicKeyLine(key.get(), comment);
}

absl::StatusOr<SshKeyPair> GenerateSshKeyPair(std::string_view comment) {
  Pkey key(EVP_RSA_gen(kRsaBits));
  if (!key) return absl::InternalError("OpenSSL could not generate an RSA key");
  SshKeyPair out;
  absl::StatusOr<std::string> pem = PrivateKeyPem(key.get());
  if (!pem.ok()) return pem.status();
  absl::StatusOr<std::string> pub = PublicKeyLine(key.get(), comment);
  if (!pub.ok()) return absl::InternalError(pub.status().message());
  out.private_key_pem = *std::move(pem);
  out.public_key = *std::move(pub);
  return out;
}

std::map<std::string, std::string> SshSecretValues(const SshKeyPair& keys) {
  return {{"id_rsa", keys.private_key_pem},
          {"id_rsa.pub", keys.public_key},
          {"authorized_keys", keys.public_key},
          {"config", kSshClientConfig}};
}

absl::Status CheckSshSecretFree(store::Store& store, const Job& job) {
  if (!job.spec.ssh) return absl::OkStatus();
  const std::string& ns = job.metadata.namespace_;
  const std::string name = SshKeysSecretName(job.metadata.name);
  absl::StatusOr<std::optional<int64_t>> rev = SecretRevision(store, ns, name);
  if (!rev.ok()) return rev.status();
  return *rev ? SecretTaken(ns, name, job) : absl::OkStatus();
}

absl::StatusOr<int64_t> WriteJobWithSshKeys(store::Store& store, SecretStore* secrets,
                                            const Job& job, bool had_ssh, store::Op job_op,
                                            const std::string& secret_uid,
                                            const std::string& created) {
  const std::string& ns = job.metadata.namespace_;
  const std::string name = SshKeysSecretName(job.metadata.name);
  if (job.spec.ssh.has_value() == had_ssh) return store.Txn({std::move(job_op)});
  if (!job.spec.ssh) {  // it had keys and asks for none now
    absl::StatusOr<std::optional<store::Op>> del =
        SshSecretDeleteOp(store, ns, job.metadata.name, true);
    if (!del.ok()) return del.status();
    std::vector<store::Op> ops{std::move(job_op)};
    if (*del) ops.push_back(**del);
    return store.Txn(ops);
  }
  if (secrets == nullptr) {
    return absl::InvalidArgumentError(
        "spec.ssh: this server keeps no Secrets, so it cannot make the job's ssh keys");
  }
  if (absl::Status free = CheckSshSecretFree(store, job); !free.ok()) return free;
  absl::StatusOr<SshKeyPair> keys = GenerateSshKeyPair(Cat(ns, "/", job.metadata.name));
  if (!keys.ok()) return keys.status();
  nlohmann::ordered_json doc = {{"apiVersion", "gpucloud/v1"},
                                {"kind", "Secret"},
                                {"metadata",
                                 {{"name", name},
                                  {"namespace", ns},
                                  {"labels", {{kSshKeysOwnerLabel, job.metadata.name}}},
                                  {"uid", secret_uid},
                                  {"creationTimestamp", created}}},
                                {"type", "Opaque"}};
  absl::StatusOr<store::KeyValue> kv =
      secrets->Put(ns, name, std::move(doc), SshSecretValues(*keys), 0, {std::move(job_op)});
  if (absl::IsAlreadyExists(kv.status()) &&
      kv.status().message().find(SecretStore::Key(ns, name)) != std::string_view::npos) {
    return SecretTaken(ns, name, job);  // made between the check and the write
  }
  if (!kv.ok()) return kv.status();
  return kv->mod_revision;
}

absl::StatusOr<std::optional<store::Op>> SshSecretDeleteOp(store::Store& store,
                                                           const std::string& ns,
                                                           const std::string& job, bool has_ssh) {
  if (!has_ssh) return std::optional<store::Op>();
  const std::string name = SshKeysSecretName(job);
  absl::StatusOr<std::optional<int64_t>> rev = SecretRevision(store, ns, name);
  if (!rev.ok()) return rev.status();
  if (!*rev) return std::optional<store::Op>();
  return std::optional<store::Op>(
      store::Op{store::Op::Kind::kDelete, SecretStore::Key(ns, name), "", **rev});
}

}  // namespace gpucloud::server
