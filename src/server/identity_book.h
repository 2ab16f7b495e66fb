// IdentityBook: the API's users, groups, service accounts, policies and tokens (issue 14), kept
// in the store under /iam/ and mirrored in memory for authentication, which needs no store read:
//   /iam/users/NAME                 User: spec.groups, spec.policies, spec.namespace (its home)
//   /iam/groups/NAME                Group: spec.policies
//   /iam/serviceaccounts/NS/NAME    ServiceAccount: spec.policies (its namespace is NS)
//   /iam/policies/NAME              Policy: the gpucloud/v1 Policy manifest (docs/policies.md)
//   /iam/tokens/NAME                Token: spec.user or spec.serviceAccount, spec.expiresAt, and
//                                   the SHA-256 of the secret (the secret itself is shown once)
// A token authenticates its user (or service account) until it expires or is revoked (deleted:
// at once, on open connections too); its identity's policies are the user's and its groups'
// (names of stored policies or the built-in gpucloud:admin, gpucloud:tenant, gpucloud:node),
// resolved on every request, so attaching or detaching takes effect on the next one.
//
// Objects are written by the API (rest_iam.cc) through Put/Delete, which commit to the store
// first and then update the mirror and the Authorizer's policies. Thread-safe. The mirror
// follows this process's writes; several servers on one store also Follow the store's changes
// under /iam/ (each key's newest revision wins, so an older event never undoes a newer write).
#ifndef GPUCLOUD_SERVER_IDENTITY_BOOK_H_
#define GPUCLOUD_SERVER_IDENTITY_BOOK_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "core/policy.h"
#include "nlohmann/json.hpp"
#include "server/authorizer.h"
#include "server/rest.h"
#include "store/store.h"

namespace gpucloud::server {

class IdentityBook {
 public:
  // Borrows all three; `authorizer` gets the stored policies.
  IdentityBook(store::Store& store, const Clock& clock, Authorizer& authorizer);

  // Reads /iam/ into the mirror. DataLoss for an object that does not parse.
  absl::Status Load();
  // Applies changes under /iam/ another server made (Store::Changes' events; ours come back too
  // and change nothing). Objects that do not parse are skipped (the writer validated them).
  void Follow(const std::vector<store::Event>& events);
  // The store's revision the last Load read at (Follow from there).
  int64_t loaded_revision() const {
    absl::MutexLock lock(&mu_);
    return loaded_rev_;
  }

  // Who `token` is: its user or service account with their policies, or nullopt (unknown,
  // expired or revoked).
  std::optional<Identity> Authenticate(const std::string& token) const;

  // The policies, groups and home namespace of user `name` as an Identity (for whoami and for
  // deciding on its behalf: POST authorize with "user"); nullopt when there is no such user.
  std::optional<Identity> IdentityOfUser(const std::string& name) const;

  // Writes `doc` (a validated object) at `key` (a /iam/ key) with the precondition `expect`
  // (store::Op's), then mirrors it. The store's errors.
  absl::StatusOr<int64_t> Put(const std::string& key, const nlohmann::ordered_json& doc,
                              std::optional<int64_t> expect);
  absl::StatusOr<int64_t> Delete(const std::string& key, std::optional<int64_t> expect);

  // Moves the hand-written tenant tokens of DIR/tokens (lines "SHA256 USER NAMESPACE tenant",
  // how tenants were added before the API) into the API, so that they can be listed and
  // revoked: a User (its namespace, policy gpucloud:tenant) unless one exists, and a Token
  // "USER-tokens-file" with the same hash and no expiry; then rewrites the file without those
  // lines (admin and bootstrap tokens stay). Tokens keep working throughout; a start that stops
  // between the two steps moves nothing twice. Returns how many moved; the store's and the
  // file's errors (DataLoss for a line that does not parse).
  absl::StatusOr<int> MigrateTokenFile(const std::string& dir);

  // The user a stored token belongs to ("" when no such token, or a service account's).
  std::string TokenOwner(const std::string& token_name) const;

  static std::string TokenKey(const std::string& name) { return "/iam/tokens/" + name; }

 private:
  struct Token {
    std::string name, user, service_account;  // service_account: "NS/NAME"
    int64_t expires_ms = 0;
  };
  void MirrorLocked(const std::string& key, const nlohmann::ordered_json* doc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishPoliciesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // MirrorLocked unless the key was mirrored at `revision` or later; true when it was applied.
  bool MirrorAtLocked(const std::string& key, const nlohmann::ordered_json* doc, int64_t revision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Identity UserIdentityLocked(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  store::Store& store_;
  const Clock& clock_;
  Authorizer& authorizer_;
  mutable absl::Mutex mu_;
  std::map<std::string, nlohmann::ordered_json> users_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::ordered_json> groups_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::ordered_json> service_accounts_
      ABSL_GUARDED_BY(mu_);  // "NS/NAME"
  std::map<std::string, PolicyDocument> policies_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> mirrored_rev_ ABSL_GUARDED_BY(mu_);  // key -> newest applied
  int64_t loaded_rev_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Token> tokens_by_hash_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> token_hash_by_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_IDENTITY_BOOK_H_
