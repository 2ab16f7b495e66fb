// NodeCertificates: the agents' own credentials, after Kubernetes' TLS bootstrapping. An agent
// presents the bootstrap token once, with a certificate signing request for "node:NAME"; the
// server signs a short-lived client certificate for it (the CA of the server's credentials
// directory), and from then on the agent authenticates with mutual TLS as that node alone
// (NodeRestriction: the API lets a node write only its own node object, heartbeats, task
// status and logs, and read only its own assignments). The agent renews its certificate with
// the certificate itself before it expires.
//
// Which certificates are valid is recorded in the store, under /nodecerts/NAME (the serials of
// the newest kKeptSerials certificates signed for NAME, with their expiry), and mirrored here
// for the handshake's lookup: deleting a node (Forget, in the same transaction as the node's
// delete: ForgetOp) revokes its certificates at once, even on connections already open.
//
// Who may ask (Issue): the node itself (renewal), an admin, or a bootstrap token for a name no
// unexpired certificate holds — so a bootstrap token cannot take over a live node; it can join
// a new one, or one whose agent stayed away longer than its certificate's life.
//
// Thread-safe. Load once before serving. With one server the mirror follows this process's
// writes only. Several servers on one store (SetShared) sign and revoke each other's: then a
// certificate the mirror does not know is looked up in the store (at most once a second per
// node), and the server feeds the store's changes under /nodecerts/ to Follow (every second), so
// a revocation through another server holds here within about a second. Each node's newest
// revision wins: an older event never undoes a newer write.
#ifndef GPUCLOUD_SERVER_NODE_CERTS_H_
#define GPUCLOUD_SERVER_NODE_CERTS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "store/store.h"

namespace gpucloud::server {

// The subject a node's certificate carries: O=kNodeOrganization, CN="node:" + name.
inline constexpr char kNodeOrganization[] = "gpucloud:nodes";
inline constexpr char kNodeNamePrefix[] = "node:";

class NodeCertificates {
 public:
  static constexpr int kKeptSerials = 2;  // the current certificate and the one it renewed
  static constexpr int64_t kMissRereadMs = 1'000;

  struct Issued {
    std::string certificate_pem;
    std::string serial;
    absl::Time not_after;
  };
  // Who asks for a certificate.
  enum class Asker { kBootstrap, kNode, kAdmin };

  // Borrows `store` and `clock`; signs with the CA in `credentials_dir`, certificates valid
  // for `ttl`.
  NodeCertificates(store::Store& store, const Clock& clock, std::string credentials_dir,
                   absl::Duration ttl);

  // Reads /nodecerts/ into the mirror. DataLoss for a record that does not parse.
  absl::Status Load();
  // Other servers write /nodecerts/ too (see above). Set before serving.
  void SetShared(bool shared) { shared_ = shared; }
  // Applies the store's changes under /nodecerts/ (Store::Changes' events).
  void Follow(const std::vector<store::Event>& events);
  // The store's revision the last Load read at (Follow from there).
  int64_t loaded_revision() const {
    absl::MutexLock lock(&mu_);
    return loaded_rev_;
  }

  // Signs `csr_pem` for node `name` (asked by `asker`; for kNode, `asker_node` is the node
  // that asks) and records it (durably) before returning it. PermissionDenied when the asker may
  // not have a certificate for `name` (another node's; a bootstrap token for a name an unexpired
  // certificate holds); InvalidArgument for a bad request (SignClientCsr's errors); Aborted
  // when another issue for `name` raced this one (retry); the store's errors.
  absl::StatusOr<Issued> Issue(const std::string& name, const std::string& csr_pem, Asker asker,
                               const std::string& asker_node = "");

  // The node a client certificate authenticates (its subject's CN, and serial as
  // CertificateSerial gives it), or nullopt when it is not a node's, was never recorded, was
  // revoked or has expired.
  std::optional<std::string> Authenticate(const std::string& common_name,
                                          const std::string& serial) const;

  // The store operation that revokes `name`'s certificates, for the transaction that deletes
  // the node; call Forget after that transaction committed.
  static store::Op ForgetOp(const std::string& name);
  // `revision`: that transaction's (0: unknown).
  void Forget(const std::string& name, int64_t revision = 0);

  absl::Duration ttl() const { return ttl_; }

 private:
  struct Serial {
    std::string serial;
    int64_t not_after_ms = 0;
  };
  static std::string Key(const std::string& name) { return "/nodecerts/" + name; }
  bool HoldsLiveCertificate(const std::vector<Serial>& serials) const;
  void ReadFromStore(const std::string& name) const;
  // The serials of `name` as of `revision`, unless the mirror has a newer one.
  void MirrorLocked(const std::string& name, std::optional<std::vector<Serial>> serials,
                    int64_t revision) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store& store_;
  const Clock& clock_;
  const std::string dir_;
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  bool shared_ = false;
  // Mutable: Authenticate refreshes the mirror from the store when shared.
  mutable std::map<std::string, std::vector<Serial>> by_node_ ABSL_GUARDED_BY(mu_);
  mutable std::map<std::string, int64_t> read_ms_ ABSL_GUARDED_BY(mu_);   // last store lookup
  mutable std::map<std::string, int64_t> revision_ ABSL_GUARDED_BY(mu_);  // newest mirrored
  int64_t loaded_rev_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_NODE_CERTS_H_
