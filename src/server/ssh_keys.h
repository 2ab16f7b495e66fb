// A job's own ssh keys (JobSpec::ssh: Volcano's ssh plugin, every Kubeflow MPIJob), so that its
// launcher can `ssh` into its workers as mpirun does (docs/manifests.md, "SSH keys"):
//   1. when the job is created (or applied with ssh for the first time) the server makes a
//      fresh RSA 2048 key pair (GenerateSshKeyPair, OpenSSL's randomness);
//   2. it stores it as the Secret SshKeysSecretName(job) ("<job>-ssh") of the job's namespace,
//      in the same store transaction as the job (WriteJobWithSshKeys): keys id_rsa, id_rsa.pub,
//      authorized_keys and config, labelled kSshKeysOwnerLabel=<job>. A Secret of that name that
//      is already there (a user's) refuses the job with AlreadyExists naming it: it is never
//      overwritten, nor used;
//   3. every task gets it as the secret volume kSshKeysVolume at the spec's mount path (the
//      controller's assignments; the agent writes the files 0400 in a 0500 directory);
//   4. deleting the job deletes it (SshSecretDeleteOp, in the job's delete transaction).
// Free functions; thread-safe.
#ifndef GPUCLOUD_SERVER_SSH_KEYS_H_
#define GPUCLOUD_SERVER_SSH_KEYS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "store/store.h"

namespace gpucloud::server {

class SecretStore;

inline constexpr char kSshKeysOwnerLabel[] = "gpucloud.io/ssh-keys-of";
// The `config` key: what Volcano's plugin writes before its per-pod Host entries (gpucloud's
// hosts are node addresses, known only when the job is placed: VC_<TASK>_HOSTS).
inline constexpr char kSshClientConfig[] =
    "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n";

struct SshKeyPair {
  // RSA 2048, unencrypted PKCS#1 PEM ("-----BEGIN RSA PRIVATE KEY-----"), as ssh reads id_rsa.
  std::string private_key_pem;
  // OpenSSH's one-line form, "ssh-rsa BASE64 COMMENT\n" (RFC 4253's string "ssh-rsa", mpint e,
  // mpint n), for id_rsa.pub and authorized_keys.
  std::string public_key;
};

// A fresh key pair; `comment` ends the public key's line (no newline in it). Internal when
// OpenSSL fails.
absl::StatusOr<SshKeyPair> GenerateSshKeyPair(std::string_view comment);

// The OpenSSH public key line of an RSA private key in PEM (PKCS#1 or PKCS#8), as
// `ssh-keygen -y` derives it. InvalidArgument when it is no unencrypted RSA private key.
absl::StatusOr<std::string> OpenSshPublicKey(std::string_view private_key_pem,
                                             std::string_view comment);

// The Secret's values: id_rsa, id_rsa.pub, authorized_keys (the public key) and config.
std::map<std::string, std::string> SshSecretValues(const SshKeyPair& keys);

// Writes `job_op` (the Put of `job`'s document: a create, or an update of a job that had ssh
// keys when `had_ssh`) and, in the same transaction, what the job's ssh Secret needs: created
// when the job now asks for keys and had none, deleted when it had them and no longer asks.
// A Secret it creates gets `secret_uid` and `created` (RFC 3339) as metadata.uid and
// creationTimestamp. Returns the transaction's revision. AlreadyExists naming the Secret when a
// Secret of that name is there and the job did not have it; InvalidArgument when the job asks
// for keys and `secrets` is null (a server without a secret store); the store's errors
// (AlreadyExists or Aborted for the job's own precondition).
absl::StatusOr<int64_t> WriteJobWithSshKeys(store::Store& store, SecretStore* secrets,
                                            const Job& job, bool had_ssh, store::Op job_op,
                                            const std::string& secret_uid,
                                            const std::string& created);

// OK when `job` may have its ssh Secret made (it asks for none, or no Secret holds the name):
// WriteJobWithSshKeys' AlreadyExists otherwise. For dry runs.
absl::Status CheckSshSecretFree(store::Store& store, const Job& job);

// The op that deletes job NS/JOB's ssh Secret along with the job (`has_ssh`: its stored spec
// asks for keys), with the Secret's revision as precondition; nullopt when there is nothing to
// delete. The store's errors other than NotFound.
absl::StatusOr<std::optional<store::Op>> SshSecretDeleteOp(store::Store& store,
                                                           const std::string& ns,
                                                           const std::string& job, bool has_ssh);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SSH_KEYS_H_
