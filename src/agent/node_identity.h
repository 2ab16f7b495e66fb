// The agent's own credentials, after Kubernetes' TLS bootstrapping: the bootstrap token is
// used once, to ask the server (POST nodes/NAME/certificate) to sign a certificate for
// "node:NAME"; from then on the agent authenticates with that certificate (mutual TLS), and
// renews it with itself when two thirds of its life are gone. The private key never leaves
// the node: it is made here (EC P-256) and kept with the certificate in one file,
// STATE_DIR/node.pem (mode 0600, replaced whole, so a crash never leaves a key without its
// certificate). Tasks cannot read it (the state directory is the agent's; tasks run as other
// users).
//
// Functions are thread-compatible: the agent calls them from its main loop.
#ifndef GPUCLOUD_AGENT_NODE_IDENTITY_H_
#define GPUCLOUD_AGENT_NODE_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/client.h"

namespace gpucloud::agent {

struct NodeCertificateInfo {
  std::string common_name;  // "node:NAME"
  absl::Time not_before;
  absl::Time not_after;
};

// STATE_DIR/node.pem.
std::string NodeCredentialPath(const std::string& state_dir);

// The certificate in a PEM file (the first certificate in it). NotFound when the file is
// absent; InvalidArgument when it holds no certificate or no private key that matches it.
absl::StatusOr<NodeCertificateInfo> ReadNodeCredential(const std::string& path);

// Whether a certificate valid from `not_before` to `not_after` is due for renewal at `now`:
// two thirds of its life are gone (Kubernetes' kubelet renews between 70% and 90%).
bool RenewalDue(absl::Time not_before, absl::Time not_after, absl::Time now);

// Makes a new key, asks `client` (the bootstrap token's, or the current certificate's) to
// sign a certificate for node `name`, and replaces `path` with the key and the certificate.
// The server's answer on failure: PermissionDenied for 401/403 (the message says why: a
// bootstrap token cannot join a live node), Unavailable when it cannot be reached, Internal
// for anything else; `path` is then untouched.
absl::StatusOr<NodeCertificateInfo> RequestNodeCertificate(const api::Client& client,
                                                           const std::string& name,
                                                           const std::string& path);

// The config that authenticates as node `name` with the credential at `path`: `server`'s
// address and CA, the certificate instead of the token.
api::ClientConfig WithNodeCredential(const api::ClientConfig& server, const std::string& path);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_NODE_IDENTITY_H_
