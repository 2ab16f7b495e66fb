// Envelope encryption for Secrets (issue 14): a value is sealed under a fresh random data key
// (DEK, AES-256-GCM, 96-bit random nonce), and the DEK is wrapped by the current key-encryption
// key (KEK, AES-256-GCM too) of a KeyRing kept outside the store. docs/secrets.md has the format.
//
//   1. KeyRing: the KEKs, one file DIR/kek.json (mode 0600, DIR 0700, written whole: temporary
//      file, fsync, rename). One key is current; Rotate adds a new current one and keeps the old
//      ones for opening; Retire drops an old one once no sealed value uses it.
//   2. SecretBox: Seal / Open / Rewrap values with a ring. A sealed blob is a JSON text naming its
//      format version, its KEK's id, the wrapped DEK and the ciphertext; it authenticates the
//      caller's associated data (the secret's store key), so a blob moved to another key, a byte
//      changed anywhere, or a different ring's key fails to open.
//   3. PlanRewrap and RotationDue: pure decisions for the server's background loop (which blobs
//      to rewrap next after a rotation; whether the 90-day period has passed).
//
// Thread safety: KeyRing and SecretBox are thread-safe. Seal, Open, NeedsRewrap and Rewrap may
// run concurrently with each other and with Rotate / Retire (which are serialised, write the
// file first and change the ring only once it is durable). One process owns DIR: a second
// writer's changes are not seen and may be overwritten.
#ifndef GPUCLOUD_SERVER_SECRET_BOX_H_
#define GPUCLOUD_SERVER_SECRET_BOX_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpucloud::server {

// The key ring's file in its directory (KeyRing).
inline constexpr char kKeyRingFile[] = "kek.json";
// Makes DIR ready for a key ring as KeyRing::LoadOrCreate does: created 0700 when missing (its
// parent must exist), a laxer mode made 0700. FailedPrecondition when it is not a directory;
// Internal on I/O errors. For writers of a ring file other than KeyRing (join_bundle.h).
absl::Status PrepareKeyRingDirectory(const std::string& dir);

// Seed 003's rotation period.
inline constexpr absl::Duration kDefaultKeyRotationPeriod = absl::Hours(24 * 90);
// The largest value Seal takes (a Kubernetes Secret's limit).
inline constexpr size_t kMaxSecretBytes = size_t{1} << 20;

// What may be said about a KEK (never its material).
struct KeyInfo {
  std::string id;  // "kek-" and 16 random hex digits
  absl::Time created;
  bool current = false;
};

class Kek;  // a KEK's id, time and material (secret_box.cc); material wiped when freed

class KeyRing {
 public:
  // Loads DIR/kek.json; when DIR or the file does not exist, makes DIR (0700, its parent must
  // exist) and a ring of one new current key created at `now`, durable before it returns.
  // A DIR with a laxer mode is made 0700. Errors: DataLoss naming the file and the fault when it
  // exists but is not a valid ring (empty, truncated, bad JSON, a key not 256 bits, the current
  // id missing...): a corrupt ring never silently becomes a new one; FailedPrecondition when the
  // file is readable or writable by group or others, is not a regular file or DIR is not a
  // directory; Internal on I/O errors.
  static absl::StatusOr<std::unique_ptr<KeyRing>> LoadOrCreate(const std::string& dir,
                                                               absl::Time now);
  // As LoadOrCreate but never creates: NotFound when DIR/kek.json does not exist (for a server
  // whose store already holds sealed values, so that a lost ring is an error, not a new ring).
  static absl::StatusOr<std::unique_ptr<KeyRing>> Load(const std::string& dir);

  // Adds a new key created at `now` and makes it current; the old ones stay for opening. The
  // file is durable before the ring changes. Internal on I/O errors (nothing changed).
  absl::StatusOr<KeyInfo> Rotate(absl::Time now);
  // Drops the key `id`. `sealed_by_key` counts the sealed values per KEK id (PlanRewrap's
  // `by_key`, from a store read made after every Seal that began before the last Rotate
  // returned). NotFound for an unknown id; FailedPrecondition for the current key or one that
  // still seals a value; Internal on I/O errors (nothing changed).
  absl::Status Retire(const std::string& id, const std::map<std::string, size_t>& sealed_by_key);

  KeyInfo Current() const;
  // Every key, oldest first.
  std::vector<KeyInfo> Keys() const;
  const std::string& dir() const { return dir_; }

  KeyRing(const KeyRing&) = delete;
  KeyRing& operator=(const KeyRing&) = delete;

 private:
  friend class SecretBox;
  // The current key, and the key `id` (nullptr when the ring lacks it).
  std::shared_ptr<const Kek> CurrentKek() const;
  std::shared_ptr<const Kek> FindKek(const std::string& id) const;
  using KekMap = std::map<std::string, std::shared_ptr<const Kek>>;
  KeyRing(std::string dir, KekMap keys, std::string current);
  // Writes `keys` with `current` to the file, then makes them the ring's. The caller holds
  // write_mu_.
  absl::Status Commit(KekMap keys, std::string current) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const std::string dir_;  // constant after construction
  absl::Mutex write_mu_;   // serialises Rotate and Retire (file, then ring)
  mutable absl::Mutex mu_;
  KekMap keys_ ABSL_GUARDED_BY(mu_);
  std::string current_ ABSL_GUARDED_BY(mu_);
};

// Seals and opens values with a ring, which must outlive it. Thread-safe.
// Errors common to Open, KeyIdOf, NeedsRewrap and Rewrap: DataLoss for a blob that is not one
// (bad JSON, an unknown format version or field, bad base64, wrong lengths) or that does not
// authenticate (a byte changed, other associated data, a different key of the same id);
// FailedPrecondition when the ring lacks the blob's KEK (retired, or another ring's).
class SecretBox {
 public:
  explicit SecretBox(const KeyRing* ring) : ring_(ring) {}

  // A blob of `plaintext` bound to `aad` (the secret's store key, e.g. "/secrets/team-a/hf").
  // InvalidArgument over kMaxSecretBytes; Internal on OpenSSL errors.
  absl::StatusOr<std::string> Seal(std::string_view plaintext, std::string_view aad) const;
  // The plaintext of `blob` sealed with the same `aad`.
  absl::StatusOr<std::string> Open(std::string_view blob, std::string_view aad) const;
  // The id of the KEK that wraps `blob`'s data key (checks the format only, not the keys).
  static absl::StatusOr<std::string> KeyIdOf(std::string_view blob);
  // Whether `blob` is wrapped by a key other than the current one.
  absl::StatusOr<bool> NeedsRewrap(std::string_view blob) const;
  // `blob` with its data key wrapped by the current KEK (fresh nonce); its nonce, ciphertext
  // and tag are kept byte for byte. The blob is checked to open first, so a damaged one is an
  // error, never rewrapped. A blob already under the current key is returned as it is.
  absl::StatusOr<std::string> Rewrap(std::string_view blob, std::string_view aad) const;

 private:
  const KeyRing* ring_;
};

// Sealing under one raw 256-bit key instead of a ring's: for what is opened with a key a person
// carries, not one kept on the machine (the join bundle, join_bundle.h). The blob is JSON
// {"v":1,"alg":"AES-256-GCM","iv","ct","tag"} (base64), bound to `aad`; the key is never in it.
// InvalidArgument when `key` is not 32 bytes; Internal on OpenSSL errors.
absl::StatusOr<std::string> SealWithRawKey(std::string_view key, std::string_view plaintext,
                                           std::string_view aad);
// The plaintext of a SealWithRawKey blob. InvalidArgument for a key that is not 32 bytes;
// DataLoss for a blob that is not one (bad JSON, an unknown version, bad base64 or lengths);
// PermissionDenied when it does not authenticate under `key` and `aad` (another key, a byte
// changed).
absl::StatusOr<std::string> OpenWithRawKey(std::string_view key, std::string_view blob,
                                           std::string_view aad);

// A sealed value as the rewrap planner sees it.
struct SealedRef {
  std::string store_key;  // also the blob's associated data
  std::string key_id;     // SecretBox::KeyIdOf of its blob
};

struct RewrapPlan {
  std::vector<std::string> batch;        // store keys to rewrap now, in key order
  std::string next_after;                // the cursor for the next call
  size_t pending = 0;                    // values not under the current key, batch included
  std::map<std::string, size_t> by_key;  // values per KEK id (for KeyRing::Retire)
};

// Background re-encryption after a rotation, one bounded step: up to `batch_size` (at least 1)
// of the store keys after `after` (in byte order) whose blob is not under `current_id`. When
// none is after the cursor the scan starts again from the beginning, so that a value that fails
// to rewrap is retried in the next pass and never blocks the others. The server loops: read the
// refs, plan, Rewrap and write each one (compare-and-swap), pass `next_after` back, until
// `pending` is 0; then the old keys with no value in `by_key` may be retired.
RewrapPlan PlanRewrap(const std::vector<SealedRef>& sealed, std::string_view current_id,
                      size_t batch_size, std::string_view after);

// Whether the current key, created at `current_created`, is due for rotation at `now`: when at
// least `period` has passed. A period of zero or less turns automatic rotation off.
bool RotationDue(absl::Time now, absl::Time current_created,
                 absl::Duration period = kDefaultKeyRotationPeriod);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SECRET_BOX_H_
