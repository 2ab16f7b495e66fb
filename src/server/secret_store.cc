#include "server/secret_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "absl/strings/escaping.h"
#include "core/log.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

absl::Time Now(const Clock& clock) { return absl::FromUnixMillis(clock.NowMillis()); }

// The associated data of value `data_key` of the secret at `store_key`.
std::string AadOf(const std::string& store_key, const std::string& data_key) {
  return Cat(store_key, "#", data_key);
}

// A stored Secret's document, or DataLoss naming the key.
absl::StatusOr<Json> ParseStored(const store::KeyValue& kv) {
  Json doc = Json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || (doc.contains("data") && !doc["data"].is_object())) {
    return absl::DataLossError(Cat(kv.key, ": not a stored Secret"));
  }
  if (!doc.contains("data")) doc["data"] = Json::object();
  for (const auto& [k, v] : doc["data"].items()) {
    if (!v.is_string()) return absl::DataLossError(Cat(kv.key, ": data.", k, " is not sealed"));
  }
  return doc;
}

// The plaintext size of a sealed blob (GCM's ciphertext is as long as the plaintext); -1 when
// it is not a blob.
int64_t SealedSize(const std::string& blob) {
  Json b = Json::parse(blob, nullptr, false);
  std::string ct;
  if (!b.is_object() || !b.contains("ct") || !b["ct"].is_string() ||
      !absl::Base64Unescape(b["ct"].get<std::string>(), &ct)) {
    return -1;
  }
  return static_cast<int64_t>(ct.size());
}

// One Secret's sealed values: {store key, {aad, key id}...}.
absl::StatusOr<std::vector<SealedRef>> RefsOf(const store::KeyValue& kv) {
  absl::StatusOr<Json> doc = ParseStored(kv);
  if (!doc.ok()) return doc.status();
  std::vector<SealedRef> refs;
  for (const auto& [k, v] : (*doc)["data"].items()) {
    absl::StatusOr<std::string> id = SecretBox::KeyIdOf(v.get<std::string>());
    if (!id.ok())
      return absl::DataLossError(Cat(kv.key, ": data.", k, ": ", id.status().message()));
    refs.push_back({AadOf(kv.key, k), *id});
  }
  return refs;
}

// Every sealed value under /secrets/.
absl::StatusOr<std::vector<SealedRef>> AllRefs(store::Store& store) {
  absl::StatusOr<store::ListResult> list = store.List("/secrets/");
  if (!list.ok()) return list.status();
  std::vector<SealedRef> all;
  for (const store::KeyValue& kv : list->items) {
    absl::StatusOr<std::vector<SealedRef>> refs = RefsOf(kv);
    if (!refs.ok()) return refs.status();
    all.insert(all.end(), refs->begin(), refs->end());
  }
  return all;
}

// The ring for a store: never a new one once the store holds a secret.
absl::StatusOr<std::unique_ptr<KeyRing>> LoadRing(store::Store& store, const std::string& dir,
                                                  absl::Time now) {
  absl::StatusOr<int64_t> secrets = store.Count("/secrets/");
  if (!secrets.ok()) return secrets.status();
  if (*secrets == 0) return KeyRing::LoadOrCreate(dir, now);
  absl::StatusOr<std::unique_ptr<KeyRing>> ring = KeyRing::Load(dir);
  if (absl::IsNotFound(ring.status())) {
    return absl::FailedPreconditionError(
        Cat("the store holds ", *secrets, *secrets == 1 ? " secret" : " secrets",
            " but their key ring ", dir,
            "/kek.json is missing: restore it (or pass --key-dir); without it they cannot be "
            "decrypted, and a new ring is not made in its place"));
  }
  return ring;
}

// FailedPrecondition when a stored value is sealed by a key `ring` lacks (another ring).
absl::Status CheckRingCovers(store::Store& store, const KeyRing& ring) {
  absl::StatusOr<std::vector<SealedRef>> refs = AllRefs(store);
  if (!refs.ok()) return refs.status();
  std::map<std::string, bool> known;
  for (const KeyInfo& k : ring.Keys()) known[k.id] = true;
  for (const SealedRef& r : *refs) {
    if (!known.contains(r.key_id)) {
      return absl::FailedPreconditionError(Cat(
          "the secret value ", r.store_key, " is sealed by key ", r.key_id, ", which the key ring ",
          ring.dir(), "/kek.json does not hold: is it another server's ring?"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KeyDirLock>> KeyDirLock::Acquire(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(Cat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  const std::string path = dir + "/lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::InternalError(Cat("cannot open ", path, ": ", std::strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          Cat(path,
              " is held by another process (a running gpucloud server, or rotate-keys): "
              "stop it first"));
    }
    return absl::InternalError(Cat("cannot lock ", path, ": ", std::strerror(e)));
  }
  return std::unique_ptr<KeyDirLock>(new KeyDirLock(fd));
}

KeyDirLock::~KeyDirLock() { close(fd_); }

absl::StatusOr<KeyInfo> RotateKeysOffline(const std::string& key_dir, absl::Time now) {
  absl::StatusOr<std::unique_ptr<KeyDirLock>> lock = KeyDirLock::Acquire(key_dir);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<std::unique_ptr<KeyRing>> ring = KeyRing::Load(key_dir);
  if (!ring.ok()) return ring.status();
  return (*ring)->Rotate(now);
}

SecretStore::SecretStore(store::Store& store, const Clock& clock, SecretStoreOptions options,
                         std::unique_ptr<KeyDirLock> lock, std::unique_ptr<KeyRing> ring)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      lock_(std::move(lock)),
      ring_(std::move(ring)),
      box_(std::make_unique<SecretBox>(ring_.get())) {}

SecretStore::~SecretStore() { Stop(); }

absl::StatusOr<std::unique_ptr<SecretStore>> SecretStore::Open(store::Store& store,
                                                               const Clock& clock,
                                                               SecretStoreOptions options) {
  absl::StatusOr<std::unique_ptr<KeyDirLock>> lock = KeyDirLock::Acquire(options.key_dir);
  if (!lock.ok()) return lock.status();
  absl::StatusOr<std::unique_ptr<KeyRing>> ring = LoadRing(store, options.key_dir, Now(clock));
  if (!ring.ok()) return ring.status();
  if (absl::Status s = CheckRingCovers(store, **ring); !s.ok()) return s;
  std::unique_ptr<SecretStore> out(
      new SecretStore(store, clock, std::move(options), *std::move(lock), *std::move(ring)));
  if (absl::StatusOr<bool> rotated = out->RotateIfDue(); !rotated.ok()) return rotated.status();
  return out;
}

absl::StatusOr<store::KeyValue> SecretStore::Put(const std::string& ns, const std::string& name,
                                                 nlohmann::ordered_json doc,
                                                 const std::map<std::string, std::string>& values,
                                                 std::optional<int64_t> expect,
                                                 std::vector<store::Op> also) {
  size_t total = 0;
  for (const auto& [k, v] : values) total += v.size();
  if (total > kMaxSecretBytes) {
    return absl::InvalidArgumentError(
        Cat("data: ", total, " bytes in all; the limit is ", kMaxSecretBytes));
  }
  const std::string key = Key(ns, name);
  doc.erase("stringData");
  doc["data"] = Json::object();
  absl::ReaderMutexLock hold(&seal_mu_);  // until written: retiring waits for it
  for (const auto& [k, v] : values) {
    absl::StatusOr<std::string> blob = box_->Seal(v, AadOf(key, k));
    if (!blob.ok()) return blob.status();
    doc["data"][k] = *blob;
  }
  store::KeyValue kv{.key = key, .value = doc.dump()};
  also.insert(also.begin(), store::Op{store::Op::Kind::kPut, key, kv.value, expect});
  absl::StatusOr<int64_t> rev = store_.Txn(also);
  if (!rev.ok()) return rev.status();
  kv.mod_revision = *rev;
  return kv;
}

absl::StatusOr<int64_t> SecretStore::Delete(const std::string& ns, const std::string& name) {
  return store_.Txn({store::Op{store::Op::Kind::kDelete, Key(ns, name), "", std::nullopt}});
}

absl::StatusOr<std::map<std::string, std::string>> SecretStore::Reveal(const std::string& ns,
                                                                       const std::string& name,
                                                                       std::string* type) const {
  absl::StatusOr<store::KeyValue> kv = store_.Get(Key(ns, name));
  if (!kv.ok()) return kv.status();
  absl::StatusOr<Json> doc = ParseStored(*kv);
  if (!doc.ok()) return doc.status();
  if (type != nullptr) {
    const Json& t = (*doc)["type"];
    *type = t.is_string() ? t.get<std::string>() : "Opaque";
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : (*doc)["data"].items()) {
    absl::StatusOr<std::string> plain = box_->Open(v.get<std::string>(), AadOf(kv->key, k));
    if (!plain.ok()) {
      return absl::Status(plain.status().code(),
                          Cat(kv->key, ": data.", k, ": ", plain.status().message()));
    }
    out[k] = *std::move(plain);
  }
  return out;
}

nlohmann::ordered_json SecretStore::Describe(const store::KeyValue& kv) {
  Json doc = Json::parse(kv.value, nullptr, false);
  if (!doc.is_object()) doc = Json::object();
  Json sizes = Json::object();
  if (doc.contains("data") && doc["data"].is_object()) {
    for (const auto& [k, v] : doc["data"].items()) {
      const std::string blob = v.is_string() ? v.get<std::string>() : "";
      absl::StatusOr<std::string> id = SecretBox::KeyIdOf(blob);
      sizes[k] = {{"bytes", SealedSize(blob)}, {"keyId", id.ok() ? *id : ""}};
    }
  }
  doc.erase("data");
  doc["status"] = {{"data", sizes}};
  if (doc.contains("metadata") && doc["metadata"].is_object()) {
    doc["metadata"]["resourceVersion"] = std::to_string(kv.mod_revision);
  }
  return doc;
}

absl::StatusOr<bool> SecretStore::RotateIfDue() {
  const absl::Time now = Now(clock_);
  if (!RotationDue(now, ring_->Current().created, options_.rotation_period)) return false;
  absl::StatusOr<KeyInfo> added = ring_->Rotate(now);
  if (!added.ok()) return added.status();
  log::Info("server", "secrets: rotated the key-encryption key",
            {{"key_encryption_key", added->id}});
  return true;
}

absl::StatusOr<SecretMaintenance> SecretStore::MaintainOnce() {
  absl::MutexLock lock(&maintain_mu_);
  SecretMaintenance out;
  absl::StatusOr<bool> rotated = RotateIfDue();
  if (!rotated.ok()) return rotated.status();
  out.rotated = *rotated;
  absl::StatusOr<std::vector<SealedRef>> refs = AllRefs(store_);
  if (!refs.ok()) return refs.status();
  RewrapPlan plan = PlanRewrap(*refs, ring_->Current().id, options_.rewrap_batch, cursor_);
  cursor_ = plan.next_after;
  // The batch by secret, so that each secret is written once.
  std::map<std::string, std::vector<std::string>> by_secret;
  for (const std::string& aad : plan.batch) {
    by_secret[aad.substr(0, aad.rfind('#'))].push_back(aad);
  }
  absl::Status first_error;
  for (const auto& [key, aads] : by_secret) {
    absl::StatusOr<size_t> n = RewrapSecret(key, aads);
    if (n.ok()) {
      out.rewrapped += *n;
    } else if (first_error.ok() && !absl::IsAborted(n.status()) && !absl::IsNotFound(n.status())) {
      first_error = n.status();  // a conflict or a delete is redone or moot next pass
    }
  }
  out.pending = plan.pending - out.rewrapped;
  if (!first_error.ok()) return first_error;
  if (out.pending == 0) {
    absl::StatusOr<std::vector<std::string>> retired = RetireUnused();
    if (!retired.ok()) return retired.status();
    out.retired = *std::move(retired);
  }
  return out;
}

absl::StatusOr<size_t> SecretStore::RewrapSecret(const std::string& key,
                                                 const std::vector<std::string>& aads) {
  absl::StatusOr<store::KeyValue> kv = store_.Get(key);
  if (!kv.ok()) return kv.status();
  absl::StatusOr<Json> doc = ParseStored(*kv);
  if (!doc.ok()) return doc.status();
  size_t n = 0;
  for (const std::string& aad : aads) {
    const std::string data_key = aad.substr(key.size() + 1);
    Json& data = (*doc)["data"];
    if (!data.contains(data_key)) continue;  // rewritten since it was listed
    const std::string blob = data[data_key].get<std::string>();
    absl::StatusOr<bool> stale = box_->NeedsRewrap(blob);
    if (!stale.ok())
      return absl::Status(stale.status().code(), Cat(aad, ": ", stale.status().message()));
    if (!*stale) continue;
    absl::StatusOr<std::string> fresh = box_->Rewrap(blob, aad);
    if (!fresh.ok())
      return absl::Status(fresh.status().code(), Cat(aad, ": ", fresh.status().message()));
    data[data_key] = *fresh;
    ++n;
  }
  if (n == 0) return 0;
  absl::StatusOr<int64_t> rev =
      store_.Txn({store::Op{store::Op::Kind::kPut, key, doc->dump(), kv->mod_revision}});
  if (!rev.ok()) return rev.status();
  return n;
}

absl::StatusOr<std::vector<std::string>> SecretStore::RetireUnused() {
  // No Put is between its Seal and its write while the counts are read and keys retired.
  absl::WriterMutexLock hold(&seal_mu_);
  absl::StatusOr<std::vector<SealedRef>> refs = AllRefs(store_);
  if (!refs.ok()) return refs.status();
  RewrapPlan plan = PlanRewrap(*refs, ring_->Current().id, 1, "");
  std::vector<std::string> retired;
  for (const KeyInfo& k : ring_->Keys()) {
    if (k.current || plan.by_key.contains(k.id)) continue;
    if (absl::Status s = ring_->Retire(k.id, plan.by_key); !s.ok()) return s;
    retired.push_back(k.id);
  }
  return retired;
}

void SecretStore::Start() {
  loop_ = std::jthread([this](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    while (!stop.stop_requested()) {
      absl::Duration pause = options_.check_every;
      absl::StatusOr<SecretMaintenance> step = MaintainOnce();
      if (!step.ok()) {
        log::Error("server", "secrets: maintenance failed", {{"error", step.status().ToString()}});
      } else if (step->pending > 0) {
        pause = options_.rewrap_pause;
      }
      cv.wait_for(lock, stop, absl::ToChronoMilliseconds(pause), [] { return false; });
    }
  });
}

void SecretStore::Stop() {
  if (loop_.joinable()) {
    loop_.request_stop();
    loop_.join();
  }
}

}  // namespace gpucloud::server
