// SecretStore: the API's Secrets (issue 14) in the store, their values sealed (secret_box.h):
//   /secrets/NS/NAME   {"apiVersion": "gpucloud/v1", "kind": "Secret", "metadata": {...},
//                       "type": "Opaque", "data": {"KEY": "<SecretBox blob>"}}
// Metadata and type are stored in the clear; each value is a SecretBox::Seal blob whose
// associated data is "/secrets/NS/NAME#KEY" (the store key and the value's key), so a blob
// moved to another secret or another key of the same secret does not open.
//
// It owns the key ring (KEY_DIR/kek.json, default DATA_DIR/keys) and holds an exclusive lock
// on KEY_DIR/lock while it lives, so that `gpucloud server rotate-keys` (RotateKeysOffline)
// refuses to run beside a live server. Open uses KeyRing::Load once the store holds a secret
// (a lost ring is an error, never a new, empty one) and refuses a ring that lacks a key a
// stored value is sealed with.
//
// Maintenance (MaintainOnce; Start runs it in a thread, every check_every, and every
// rewrap_pause while values remain to rewrap):
//   1. rotate when RotationDue (the current key is older than rotation_period);
//   2. rewrap one batch of values under an old key (PlanRewrap), each secret written back with
//      a compare-and-swap on its revision (a conflict is retried on the next pass);
//   3. once none is pending, retire the old keys that seal nothing (read while writers are
//      held off, so no Seal under an old key is still in flight).
//
// Thread-safe: Put, Delete, Reveal and MaintainOnce may run concurrently.
#ifndef GPUCLOUD_SERVER_SECRET_STORE_H_
#define GPUCLOUD_SERVER_SECRET_STORE_H_

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "nlohmann/json.hpp"
#include "server/secret_box.h"
#include "store/store.h"

namespace gpucloud::server {

struct SecretStoreOptions {
  std::string key_dir;  // the key ring's directory (DATA_DIR/keys)
  absl::Duration rotation_period = kDefaultKeyRotationPeriod;  // <= 0: no automatic rotation
  size_t rewrap_batch = 16;                                    // values rewrapped per step
  absl::Duration check_every = absl::Hours(1);     // rotation check when nothing is pending
  absl::Duration rewrap_pause = absl::Seconds(1);  // between batches while values are pending
};

// What one maintenance step did.
struct SecretMaintenance {
  bool rotated = false;
  size_t rewrapped = 0;              // values now under the current key
  size_t pending = 0;                // values still under an old key after this step
  std::vector<std::string> retired;  // key ids dropped from the ring
};

// An exclusive flock(2) on DIR/lock (made 0600, DIR made 0700 if missing), released when freed.
class KeyDirLock {
 public:
  // FailedPrecondition when another holder has it (a running server, or rotate-keys); Internal
  // on I/O errors.
  static absl::StatusOr<std::unique_ptr<KeyDirLock>> Acquire(const std::string& dir);
  ~KeyDirLock();
  KeyDirLock(const KeyDirLock&) = delete;
  KeyDirLock& operator=(const KeyDirLock&) = delete;

 private:
  explicit KeyDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// `gpucloud server rotate-keys`: with the server stopped (its lock is taken, else
// FailedPrecondition), loads the ring in `key_dir` (NotFound when there is none) and makes a new
// current key. The server rewraps the old values in the background when it next starts.
absl::StatusOr<KeyInfo> RotateKeysOffline(const std::string& key_dir, absl::Time now);

class SecretStore {
 public:
  // Borrows `store` (the API's) and `clock`. Takes the key directory's lock, then loads the
  // ring: Load when the store holds a secret (NotFound becomes FailedPrecondition saying that
  // the ring is missing), LoadOrCreate otherwise; FailedPrecondition when a stored value is
  // sealed by a key the ring lacks. Then rotates when due. The ring's and store's errors.
  static absl::StatusOr<std::unique_ptr<SecretStore>> Open(store::Store& store, const Clock& clock,
                                                           SecretStoreOptions options);
  ~SecretStore();  // Stop()

  static std::string Key(const std::string& ns, const std::string& name) {
    return "/secrets/" + ns + "/" + name;
  }

  // Writes the Secret `doc` (validated; its "data" and "stringData" are ignored) with `values`
  // (key -> plaintext) sealed, with the precondition `expect` (store::Op's), and the ops `also`
  // in the same transaction (a job and its ssh keys: all or nothing). Returns what was stored
  // (values sealed) once durable. InvalidArgument over kMaxSecretBytes in all; the store's
  // errors (of `also`'s preconditions too).
  absl::StatusOr<store::KeyValue> Put(const std::string& ns, const std::string& name,
                                      nlohmann::ordered_json doc,
                                      const std::map<std::string, std::string>& values,
                                      std::optional<int64_t> expect,
                                      std::vector<store::Op> also = {});
  // Removes it. The store's errors (NotFound when absent).
  absl::StatusOr<int64_t> Delete(const std::string& ns, const std::string& name);
  // Server-internal, never served over HTTP: the plaintext values of NS/NAME, for the
  // controller and agents to hand to tasks. NotFound when absent; DataLoss for a value that
  // does not open (changed or moved); FailedPrecondition when its key is not in the ring.
  // With `type`, also its type ("Opaque", "kubernetes.io/dockerconfigjson"), from the same read.
  absl::StatusOr<std::map<std::string, std::string>> Reveal(const std::string& ns,
                                                            const std::string& name,
                                                            std::string* type = nullptr) const;
  // A stored Secret as the API shows it: never a value. "data" is left out; status.data gives
  // each key's size in bytes and the id of the KEK that wraps it; metadata.resourceVersion.
  static nlohmann::ordered_json Describe(const store::KeyValue& kv);

  // One maintenance step (the header's 1 to 3), at the clock's time.
  absl::StatusOr<SecretMaintenance> MaintainOnce();
  // Runs MaintainOnce in a thread until Stop (errors are logged and retried).
  void Start();
  void Stop();

  const KeyRing& ring() const { return *ring_; }

 private:
  SecretStore(store::Store& store, const Clock& clock, SecretStoreOptions options,
              std::unique_ptr<KeyDirLock> lock, std::unique_ptr<KeyRing> ring);
  absl::StatusOr<bool> RotateIfDue();
  // Rewraps the stale values of the secret at `key` (`aads` of its values) with a CAS write.
  absl::StatusOr<size_t> RewrapSecret(const std::string& key, const std::vector<std::string>& aads);
  absl::StatusOr<std::vector<std::string>> RetireUnused();

  // Constant after construction.
  store::Store& store_;
  const Clock& clock_;
  const SecretStoreOptions options_;
  std::unique_ptr<KeyDirLock> lock_;
  std::unique_ptr<KeyRing> ring_;
  std::unique_ptr<SecretBox> box_;
  // Put holds it shared from Seal to its write; retiring holds it exclusively.
  mutable absl::Mutex seal_mu_;
  absl::Mutex maintain_mu_;  // one MaintainOnce at a time
  std::string cursor_ ABSL_GUARDED_BY(maintain_mu_);
  std::jthread loop_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SECRET_STORE_H_
