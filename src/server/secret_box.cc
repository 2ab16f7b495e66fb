#include "server/secret_box.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "core/private_file.h"
#include "core/text.h"

namespace gpucloud::server {

using Json = nlohmann::json;

constexpr size_t kKeyBytes = 32;  // AES-256
constexpr size_t kIvBytes = 12;   // GCM's 96-bit nonce
constexpr size_t kTagBytes = 16;  // GCM's full tag
constexpr int kBlobVersion = 1;
constexpr char kAlgorithm[] = "AES-256-GCM";
constexpr char kRingFormat[] = "gpucloud-kek-ring/v1";
constexpr const char* kRingFile = kKeyRingFile;
constexpr size_t kMaxRingFileBytes = size_t{1} << 20;

// 256 bits of key material, wiped when it goes away (copies included).
struct KeyBytes {
  std::array<unsigned char, kKeyBytes> b{};
  KeyBytes() = default;
  KeyBytes(const KeyBytes&) = default;
  KeyBytes& operator=(const KeyBytes&) = default;
  ~KeyBytes() { OPENSSL_cleanse(b.data(), b.size()); }
};

class Kek {
 public:
  Kek(std::string id, absl::Time created, const KeyBytes& material)
      : id_(std::move(id)), created_(created), material_(material) {}
  const std::string& id() const { return id_; }
  absl::Time created() const { return created_; }
  const unsigned char* material() const { return material_.b.data(); }

 private:
  std::string id_;
  absl::Time created_;
  KeyBytes material_;
};

namespace {

// A string whose bytes are wiped when it goes away (plaintext data keys in transit).
struct WipedString {
  std::string s;
  ~WipedString() { OPENSSL_cleanse(s.data(), s.size()); }
};

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* Bytes(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

absl::StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(Bytes(out), static_cast<int>(n)) != 1) {
    return absl::InternalError("OpenSSL: RAND_bytes failed");
  }
  return out;
}

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

// AES-256-GCM of `plaintext` under `key` and the 96-bit `iv`, authenticating `aad` too.
absl::Status GcmEncrypt(const unsigned char* key, std::string_view iv, std::string_view aad,
                        std::string_view plaintext, std::string* ciphertext, std::string* tag) {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  ciphertext->assign(plaintext.size(), '\0');
  tag->assign(kTagBytes, '\0');
  int n = 0;
  int tail = 0;
  bool ok =
      ctx != nullptr &&
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, Bytes(iv)) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, Bytes(aad), static_cast<int>(aad.size())) == 1 &&
      EVP_EncryptUpdate(ctx.get(), Bytes(*ciphertext), &n, Bytes(plaintext),
                        static_cast<int>(plaintext.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), Bytes(*ciphertext) + n, &tail) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag->data()) == 1;
  return ok ? absl::OkStatus() : absl::InternalError("OpenSSL: AES-256-GCM encryption failed");
}

// The plaintext, or false when the ciphertext, tag, iv or aad does not authenticate under key.
bool GcmDecrypt(const unsigned char* key, std::string_view iv, std::string_view aad,
                std::string_view ciphertext, std::string_view tag, std::string* plaintext) {
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  plaintext->assign(ciphertext.size(), '\0');
  std::string tag_copy(tag);  // EVP_CTRL_GCM_SET_TAG takes a non-const pointer
  int n = 0;
  int tail = 0;
  bool ok =
      ctx != nullptr &&
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, Bytes(iv)) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, Bytes(aad), static_cast<int>(aad.size())) == 1 &&
      EVP_DecryptUpdate(ctx.get(), Bytes(*plaintext), &n, Bytes(ciphertext),
                        static_cast<int>(ciphertext.size())) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag_copy.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), Bytes(*plaintext) + n, &tail) == 1;
  if (!ok) OPENSSL_cleanse(plaintext->data(), plaintext->size());
  return ok;
}

// Standard base64 that must be canonical (padded, no stray bits), so that every change to the
// text changes the bytes.
bool DecodeBase64(const std::string& text, std::string* out) {
  return absl::Base64Unescape(text, out) && absl::Base64Escape(*out) == text;
}

// ---- the key ring's file ----------------------------------------------------------------------

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone());
}

std::string RingText(const std::map<std::string, std::shared_ptr<const Kek>>& keys,
                     const std::string& current) {
  std::vector<const Kek*> order;
  order.reserve(keys.size());
  for (const auto& [id, k] : keys) order.push_back(k.get());
  std::stable_sort(order.begin(), order.end(),
                   [](const Kek* a, const Kek* b) { return a->created() < b->created(); });
  Json list = Json::array();
  for (const Kek* k : order) {
    absl::string_view material(reinterpret_cast<const char*>(k->material()), kKeyBytes);
    list.push_back(Json{{"id", k->id()},
                        {"created", Rfc3339(k->created())},
                        {"material", absl::Base64Escape(material)}});
  }
  return Json{{"format", kRingFormat}, {"current", current}, {"keys", list}}.dump(2) + "\n";
}

absl::Status RingFault(const std::string& path, const std::string& what) {
  return absl::DataLossError(Cat("key ring ", path, " is corrupt: ", what,
                                 " (restore it from a backup; a new ring cannot open what the "
                                 "old one sealed)"));
}

bool HasOnlyFields(const Json& j, const std::set<std::string>& fields) {
  if (!j.is_object() || j.size() != fields.size()) return false;
  return std::all_of(fields.begin(), fields.end(),
                     [&](const std::string& f) { return j.contains(f) && j[f].is_string(); });
}

// One key of the ring file, or why it is not one.
absl::StatusOr<std::shared_ptr<const Kek>> ParseKek(const Json& j) {
  if (!HasOnlyFields(j, {"id", "created", "material"})) {
    return absl::DataLossError("a key is not {id, created, material}, all strings");
  }
  std::string id = j["id"].get<std::string>();
  if (id.empty()) return absl::DataLossError("a key has an empty id");
  absl::Time created;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, j["created"].get<std::string>(), &created, &err)) {
    return absl::DataLossError(Cat("key ", id, " has a bad creation time: ", err));
  }
  WipedString material;
  if (!DecodeBase64(j["material"].get<std::string>(), &material.s) ||
      material.s.size() != kKeyBytes) {
    return absl::DataLossError(Cat("key ", id, "'s material is not 256 bits in base64"));
  }
  KeyBytes bytes;
  std::memcpy(bytes.b.data(), material.s.data(), kKeyBytes);
  return std::make_shared<const Kek>(id, created, bytes);
}

struct ParsedRing {
  std::map<std::string, std::shared_ptr<const Kek>> keys;
  std::string current;
};

absl::StatusOr<ParsedRing> ParseRing(const std::string& path, const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return RingFault(path, "not valid JSON (empty or truncated?)");
  if (!j.is_object() || j.size() != 3 || !j.contains("format") || !j.contains("current") ||
      !j.contains("keys")) {
    return RingFault(path, "not an object of exactly {format, current, keys}");
  }
  if (j["format"] != kRingFormat) return RingFault(path, Cat("format is not ", kRingFormat));
  if (!j["current"].is_string() || !j["keys"].is_array() || j["keys"].empty()) {
    return RingFault(path, "current is not a string or keys is not a non-empty list");
  }
  ParsedRing ring;
  ring.current = j["current"].get<std::string>();
  for (const Json& k : j["keys"]) {
    absl::StatusOr<std::shared_ptr<const Kek>> kek = ParseKek(k);
    if (!kek.ok()) return RingFault(path, std::string(kek.status().message()));
    if (!ring.keys.emplace((*kek)->id(), *kek).second) {
      return RingFault(path, Cat("key ", (*kek)->id(), " appears twice"));
    }
  }
  if (!ring.keys.contains(ring.current)) {
    return RingFault(path, Cat("the current key ", ring.current, " is not among the keys"));
  }
  return ring;
}

// The ring file's text; NotFound when it does not exist. Refuses a file others may read.
absl::StatusOr<std::string> ReadRingFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return absl::NotFoundError(Cat("no key ring at ", path));
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(Cat("key ring ", path, " is a symbolic link"));
  }
  if (fd < 0) return absl::InternalError(Cat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  absl::Status s;
  if (fstat(fd, &st) != 0) {
    s = absl::InternalError(Cat("cannot stat ", path, ": ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError(Cat("key ring ", path, " is not a regular file"));
  } else if ((st.st_mode & 077) != 0) {
    s = absl::FailedPreconditionError(
        Cat("key ring ", path, " may be read or written by others (mode ",
            fmt::format("{:o}", st.st_mode & 0777), "): chmod 600 it, and rotate if it leaked"));
  } else if (static_cast<size_t>(st.st_size) > kMaxRingFileBytes) {
    s = RingFault(path, "larger than 1 MiB");
  }
  std::string text;
  for (char buf[4096]; s.ok();) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = absl::InternalError(Cat("cannot read ", path, ": ", std::strerror(errno)));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (!s.ok()) return s;
  return text;
}

void FsyncDir(const std::string& dir) {
  int fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

// Makes `dir` a directory of mode 0700 (created when `create` and missing).
absl::Status PrepareKeyDir(const std::string& dir, bool create) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::InternalError(Cat("cannot stat ", dir, ": ", std::strerror(errno)));
    }
    if (!create) return absl::NotFoundError(Cat("no key ring directory ", dir));
    if (mkdir(dir.c_str(), 0700) != 0) {
      return absl::InternalError(Cat("cannot create ", dir, ": ", std::strerror(errno)));
    }
    FsyncDir(std::filesystem::path(dir).parent_path().string());
  } else if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(Cat("key ring directory ", dir, " is not a directory"));
  }
  if (chmod(dir.c_str(), 0700) != 0) {  // whatever the umask, or a laxer older mode
    return absl::InternalError(Cat("cannot chmod 700 ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareKeyRingDirectory(const std::string& dir) {
  return PrepareKeyDir(dir, /*create=*/true);
}

namespace {

absl::StatusOr<std::shared_ptr<const Kek>> NewKek(
    absl::Time now, const std::map<std::string, std::shared_ptr<const Kek>>& taken) {
  while (true) {
    absl::StatusOr<std::string> id = RandomBytes(8);
    absl::StatusOr<std::string> material = RandomBytes(kKeyBytes);
    if (!id.ok()) return id.status();
    if (!material.ok()) return material.status();
    KeyBytes bytes;
    std::memcpy(bytes.b.data(), material->data(), kKeyBytes);
    OPENSSL_cleanse(material->data(), material->size());
    std::string name = Cat("kek-", absl::BytesToHexString(*id));
    if (!taken.contains(name)) return std::make_shared<const Kek>(name, now, bytes);
  }
}

KeyInfo InfoOf(const Kek& k, const std::string& current) {
  return KeyInfo{k.id(), k.created(), k.id() == current};
}

}  // namespace

// ---- KeyRing ----------------------------------------------------------------------------------

KeyRing::KeyRing(std::string dir, KekMap keys, std::string current)
    : dir_(std::move(dir)), keys_(std::move(keys)), current_(std::move(current)) {}

absl::StatusOr<std::unique_ptr<KeyRing>> KeyRing::LoadOrCreate(const std::string& dir,
                                                               absl::Time now) {
  if (absl::Status s = PrepareKeyDir(dir, /*create=*/true); !s.ok()) return s;
  const std::string path = dir + "/" + kRingFile;
  absl::StatusOr<std::string> text = ReadRingFile(path);
  if (text.ok()) {
    absl::StatusOr<ParsedRing> ring = ParseRing(path, *text);
    if (!ring.ok()) return ring.status();
    return std::unique_ptr<KeyRing>(new KeyRing(dir, std::move(ring->keys), ring->current));
  }
  if (!absl::IsNotFound(text.status())) return text.status();
  absl::StatusOr<std::shared_ptr<const Kek>> first = NewKek(now, {});
  if (!first.ok()) return first.status();
  std::unique_ptr<KeyRing> ring(new KeyRing(dir, {}, ""));
  {
    absl::MutexLock lock(&ring->write_mu_);
    absl::Status s = ring->Commit({{(*first)->id(), *first}}, (*first)->id());
    if (!s.ok()) return s;
  }
  return ring;
}

absl::StatusOr<std::unique_ptr<KeyRing>> KeyRing::Load(const std::string& dir) {
  if (absl::Status s = PrepareKeyDir(dir, /*create=*/false); !s.ok()) return s;
  const std::string path = dir + "/" + kRingFile;
  absl::StatusOr<std::string> text = ReadRingFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<ParsedRing> ring = ParseRing(path, *text);
  if (!ring.ok()) return ring.status();
  return std::unique_ptr<KeyRing>(new KeyRing(dir, std::move(ring->keys), ring->current));
}

absl::Status KeyRing::Commit(KekMap keys, std::string current) {
  WipedString text{RingText(keys, current)};
  absl::Status s = WritePrivateFile(dir_ + "/" + kRingFile, text.s, FileSync::kDurable);
  if (!s.ok()) return s;
  absl::MutexLock lock(&mu_);
  keys_ = std::move(keys);
  current_ = std::move(current);
  return absl::OkStatus();
}

absl::StatusOr<KeyInfo> KeyRing::Rotate(absl::Time now) {
  absl::MutexLock write(&write_mu_);
  KekMap keys;
  {
    absl::ReaderMutexLock lock(&mu_);
    keys = keys_;
  }
  absl::StatusOr<std::shared_ptr<const Kek>> fresh = NewKek(now, keys);
  if (!fresh.ok()) return fresh.status();
  const std::string id = (*fresh)->id();
  keys.emplace(id, *fresh);
  if (absl::Status s = Commit(std::move(keys), id); !s.ok()) return s;
  return KeyInfo{id, now, true};
}

absl::Status KeyRing::Retire(const std::string& id,
                             const std::map<std::string, size_t>& sealed_by_key) {
  absl::MutexLock write(&write_mu_);
  KekMap keys;
  std::string current;
  {
    absl::ReaderMutexLock lock(&mu_);
    keys = keys_;
    current = current_;
  }
  if (!keys.contains(id)) return absl::NotFoundError(Cat("no key ", id, " in the key ring"));
  if (id == current) {
    return absl::FailedPreconditionError(Cat("key ", id, " is current: rotate first"));
  }
  auto used = sealed_by_key.find(id);
  if (used != sealed_by_key.end() && used->second > 0) {
    return absl::FailedPreconditionError(
        Cat("key ", id, " still seals ", used->second, " value(s): rewrap them first"));
  }
  keys.erase(id);
  return Commit(std::move(keys), std::move(current));
}

KeyInfo KeyRing::Current() const {
  absl::ReaderMutexLock lock(&mu_);
  return InfoOf(*keys_.at(current_), current_);
}

std::vector<KeyInfo> KeyRing::Keys() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<KeyInfo> out;
  for (const auto& [id, k] : keys_) out.push_back(InfoOf(*k, current_));
  std::stable_sort(out.begin(), out.end(),
                   [](const KeyInfo& a, const KeyInfo& b) { return a.created < b.created; });
  return out;
}

std::shared_ptr<const Kek> KeyRing::CurrentKek() const {
  absl::ReaderMutexLock lock(&mu_);
  return keys_.at(current_);
}

std::shared_ptr<const Kek> KeyRing::FindKek(const std::string& id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = keys_.find(id);
  return it == keys_.end() ? nullptr : it->second;
}

// ---- sealed blobs -----------------------------------------------------------------------------

namespace {

// A sealed blob's fields, decoded. See docs/secrets.md.
struct Blob {
  std::string kek;      // the KEK's id
  std::string dek_iv;   // 12 bytes: the nonce that wrapped the DEK
  std::string dek;      // 32 bytes: the wrapped DEK
  std::string dek_tag;  // 16 bytes: the wrap's tag
  std::string iv;       // 12 bytes: the value's nonce
  std::string ct;       // the value's ciphertext (as long as the value)
  std::string tag;      // 16 bytes: the value's tag
};

std::string BlobText(const Blob& b) {
  return Json{{"v", kBlobVersion},
              {"alg", kAlgorithm},
              {"kek", b.kek},
              {"dek_iv", absl::Base64Escape(b.dek_iv)},
              {"dek", absl::Base64Escape(b.dek)},
              {"dek_tag", absl::Base64Escape(b.dek_tag)},
              {"iv", absl::Base64Escape(b.iv)},
              {"ct", absl::Base64Escape(b.ct)},
              {"tag", absl::Base64Escape(b.tag)}}
      .dump();
}

absl::Status BlobFault(const std::string& what) {
  return absl::DataLossError(Cat("sealed secret is malformed: ", what));
}

// One base64 field of exactly `size` bytes (any size up to `max` when size is 0).
absl::Status DecodeField(const Json& j, const char* name, size_t size, size_t max,
                         std::string* out) {
  if (!j[name].is_string() || !DecodeBase64(j[name].get<std::string>(), out)) {
    return BlobFault(Cat(name, " is not canonical base64"));
  }
  if ((size != 0 && out->size() != size) || out->size() > max) {
    return BlobFault(Cat(name, " has ", out->size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Blob> ParseBlob(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return BlobFault("not a JSON object");
  static const std::set<std::string> kFields = {"v",       "alg", "kek", "dek_iv", "dek",
                                                "dek_tag", "iv",  "ct",  "tag"};
  for (const auto& [name, value] : j.items()) {
    if (!kFields.contains(name)) return BlobFault(Cat("unknown field ", name));
  }
  if (j.size() != kFields.size()) return BlobFault("a field is missing");
  if (!j["v"].is_number_unsigned() || j["v"].get<uint64_t>() != kBlobVersion) {
    return BlobFault(Cat("format version ", j["v"].dump(), " is not ", kBlobVersion));
  }
  if (j["alg"] != kAlgorithm) return BlobFault(Cat("algorithm is not ", kAlgorithm));
  if (!j["kek"].is_string() || j["kek"].get<std::string>().empty()) {
    return BlobFault("kek is not a key id");
  }
  Blob b;
  b.kek = j["kek"].get<std::string>();
  absl::Status s = DecodeField(j, "dek_iv", kIvBytes, kIvBytes, &b.dek_iv);
  if (s.ok()) s = DecodeField(j, "dek", kKeyBytes, kKeyBytes, &b.dek);
  if (s.ok()) s = DecodeField(j, "dek_tag", kTagBytes, kTagBytes, &b.dek_tag);
  if (s.ok()) s = DecodeField(j, "iv", kIvBytes, kIvBytes, &b.iv);
  if (s.ok()) s = DecodeField(j, "ct", 0, kMaxSecretBytes, &b.ct);
  if (s.ok()) s = DecodeField(j, "tag", kTagBytes, kTagBytes, &b.tag);
  if (!s.ok()) return s;
  return b;
}

// What each cipher authenticates besides its input: a label per use, the key's id for the wrap
// (so that a blob naming another key fails), and the caller's associated data for both.
std::string WrapAad(std::string_view kek_id, std::string_view aad) {
  return Cat("gpucloud-secret-dek/v1", std::string_view("\0", 1), kek_id, std::string_view("\0", 1),
             aad);
}
std::string DataAad(std::string_view aad) {
  return Cat("gpucloud-secret/v1", std::string_view("\0", 1), aad);
}

absl::Status NotAuthentic(std::string_view aad) {
  return absl::DataLossError(
      Cat("sealed secret for ", aad,
          " does not authenticate: changed, moved from another key, or sealed by another key "
          "ring"));
}

// Wraps `dek` under `kek` into b's kek, dek_iv, dek and dek_tag.
absl::Status WrapDek(const Kek& kek, const KeyBytes& dek, std::string_view aad, Blob* b) {
  absl::StatusOr<std::string> iv = RandomBytes(kIvBytes);
  if (!iv.ok()) return iv.status();
  b->kek = kek.id();
  b->dek_iv = *iv;
  std::string_view plain(reinterpret_cast<const char*>(dek.b.data()), kKeyBytes);  // wiped by dek
  return GcmEncrypt(kek.material(), b->dek_iv, WrapAad(kek.id(), aad), plain, &b->dek, &b->dek_tag);
}

absl::StatusOr<KeyBytes> UnwrapDek(const KeyRing& ring, const std::shared_ptr<const Kek>& kek,
                                   const Blob& b, std::string_view aad) {
  if (kek == nullptr) {
    return absl::FailedPreconditionError(Cat("sealed secret for ", aad, " is wrapped by key ",
                                             b.kek, ", which the key ring in ", ring.dir(),
                                             " does not hold (retired, or another ring's)"));
  }
  WipedString plain;
  if (!GcmDecrypt(kek->material(), b.dek_iv, WrapAad(b.kek, aad), b.dek, b.dek_tag, &plain.s)) {
    return NotAuthentic(aad);
  }
  KeyBytes dek;
  std::memcpy(dek.b.data(), plain.s.data(), kKeyBytes);
  return dek;
}

}  // namespace

// ---- SecretBox --------------------------------------------------------------------------------

absl::StatusOr<std::string> SecretBox::Seal(std::string_view plaintext,
                                            std::string_view aad) const {
  if (plaintext.size() > kMaxSecretBytes) {
    return absl::InvalidArgumentError(
        Cat("a secret value has ", plaintext.size(), " bytes; at most ", kMaxSecretBytes));
  }
  absl::StatusOr<std::string> dek_text = RandomBytes(kKeyBytes);
  absl::StatusOr<std::string> iv = RandomBytes(kIvBytes);
  if (!dek_text.ok()) return dek_text.status();
  if (!iv.ok()) return iv.status();
  KeyBytes dek;
  std::memcpy(dek.b.data(), dek_text->data(), kKeyBytes);
  OPENSSL_cleanse(dek_text->data(), dek_text->size());
  Blob b;
  b.iv = *iv;
  absl::Status s = GcmEncrypt(dek.b.data(), b.iv, DataAad(aad), plaintext, &b.ct, &b.tag);
  if (s.ok()) s = WrapDek(*ring_->CurrentKek(), dek, aad, &b);
  if (!s.ok()) return s;
  return BlobText(b);
}

absl::StatusOr<std::string> SecretBox::Open(std::string_view blob, std::string_view aad) const {
  absl::StatusOr<Blob> b = ParseBlob(blob);
  if (!b.ok()) return b.status();
  absl::StatusOr<KeyBytes> dek = UnwrapDek(*ring_, ring_->FindKek(b->kek), *b, aad);
  if (!dek.ok()) return dek.status();
  std::string plaintext;
  if (!GcmDecrypt(dek->b.data(), b->iv, DataAad(aad), b->ct, b->tag, &plaintext)) {
    return NotAuthentic(aad);
  }
  return plaintext;
}

absl::StatusOr<std::string> SecretBox::KeyIdOf(std::string_view blob) {
  absl::StatusOr<Blob> b = ParseBlob(blob);
  if (!b.ok()) return b.status();
  return b->kek;
}

absl::StatusOr<bool> SecretBox::NeedsRewrap(std::string_view blob) const {
  absl::StatusOr<std::string> id = KeyIdOf(blob);
  if (!id.ok()) return id.status();
  return *id != ring_->Current().id;
}

absl::StatusOr<std::string> SecretBox::Rewrap(std::string_view blob, std::string_view aad) const {
  absl::StatusOr<Blob> b = ParseBlob(blob);
  if (!b.ok()) return b.status();
  absl::StatusOr<KeyBytes> dek = UnwrapDek(*ring_, ring_->FindKek(b->kek), *b, aad);
  if (!dek.ok()) return dek.status();
  WipedString plaintext;  // only to check that the value opens
  if (!GcmDecrypt(dek->b.data(), b->iv, DataAad(aad), b->ct, b->tag, &plaintext.s)) {
    return NotAuthentic(aad);
  }
  std::shared_ptr<const Kek> current = ring_->CurrentKek();
  if (b->kek == current->id()) return std::string(blob);
  if (absl::Status s = WrapDek(*current, *dek, aad, &*b); !s.ok()) return s;
  return BlobText(*b);
}

// ---- one raw key ------------------------------------------------------------------------------

absl::StatusOr<std::string> SealWithRawKey(std::string_view key, std::string_view plaintext,
                                           std::string_view aad) {
  if (key.size() != kKeyBytes) {
    return absl::InvalidArgumentError(Cat("a key of ", key.size(), " bytes; needs ", kKeyBytes));
  }
  absl::StatusOr<std::string> iv = RandomBytes(kIvBytes);
  if (!iv.ok()) return iv.status();
  std::string ct, tag;
  if (absl::Status s = GcmEncrypt(Bytes(key), *iv, aad, plaintext, &ct, &tag); !s.ok()) return s;
  return Json{{"v", kBlobVersion},
              {"alg", kAlgorithm},
              {"iv", absl::Base64Escape(*iv)},
              {"ct", absl::Base64Escape(ct)},
              {"tag", absl::Base64Escape(tag)}}
      .dump();
}

absl::StatusOr<std::string> OpenWithRawKey(std::string_view key, std::string_view blob,
                                           std::string_view aad) {
  if (key.size() != kKeyBytes) {
    return absl::InvalidArgumentError(Cat("a key of ", key.size(), " bytes; needs ", kKeyBytes));
  }
  const Json j = Json::parse(blob, nullptr, false);
  std::string iv, ct, tag;
  auto field = [&](const char* name, std::string* out) {
    return j.contains(name) && j[name].is_string() && DecodeBase64(j[name].get<std::string>(), out);
  };
  if (!j.is_object() || j.size() != 5 || !j.contains("v") || j["v"] != kBlobVersion ||
      !j.contains("alg") || j["alg"] != kAlgorithm || !field("iv", &iv) || !field("ct", &ct) ||
      !field("tag", &tag) || iv.size() != kIvBytes || tag.size() != kTagBytes) {
    return absl::DataLossError("not a sealed blob (version 1, AES-256-GCM)");
  }
  std::string plaintext;
  if (!GcmDecrypt(Bytes(key), iv, aad, ct, tag, &plaintext)) {
    return absl::PermissionDeniedError("the key does not open it (another key, or altered)");
  }
  return plaintext;
}

// ---- planning ---------------------------------------------------------------------------------

RewrapPlan PlanRewrap(const std::vector<SealedRef>& sealed, std::string_view current_id,
                      size_t batch_size, std::string_view after) {
  RewrapPlan plan;
  std::vector<const std::string*> stale;
  for (const SealedRef& ref : sealed) {
    ++plan.by_key[ref.key_id];
    if (ref.key_id != current_id) stale.push_back(&ref.store_key);
  }
  plan.pending = stale.size();
  std::sort(stale.begin(), stale.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  auto from = std::upper_bound(stale.begin(), stale.end(), after,
                               [](std::string_view a, const std::string* b) { return a < *b; });
  if (from == stale.end()) from = stale.begin();  // a new pass
  for (auto it = from; it != stale.end() && plan.batch.size() < std::max<size_t>(batch_size, 1);
       ++it) {
    plan.batch.push_back(**it);
  }
  plan.next_after = plan.batch.empty() ? "" : plan.batch.back();
  return plan;
}

bool RotationDue(absl::Time now, absl::Time current_created, absl::Duration period) {
  return period > absl::ZeroDuration() && now - current_created >= period;
}

}  // namespace gpucloud::server
