#include "server/join_bundle.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/escaping.h"
#include "core/private_file.h"
#include "core/text.h"
#include "server/secret_box.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

constexpr char kAad[] = "gpucloud join bundle v1";
constexpr size_t kKeyBytes = 32;
// The shared files of DATA_DIR (the key ring, kKeyRingFile, is in KEY_DIR).
constexpr std::array<const char*, 5> kDataFiles = {"ca.crt", "ca.key", "tokens", "bootstrap.token",
                                                   "audit.key"};

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(Cat(path, ": cannot read (", std::strerror(errno), ")"));
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::string> NewJoinKey() {
  std::array<unsigned char, kKeyBytes> b{};
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) {
    return absl::InternalError("OpenSSL: RAND_bytes failed");
  }
  std::string hex =
      absl::BytesToHexString(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
  OPENSSL_cleanse(b.data(), b.size());
  return hex;
}

absl::StatusOr<std::string> ParseJoinKey(std::string_view text, std::string_view source) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  const bool hex = text.size() == 2 * kKeyBytes &&
                   std::all_of(text.begin(), text.end(),
                               [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  if (!hex) {
    return absl::InvalidArgumentError(Cat(source, ": not a join key (", 2 * kKeyBytes,
                                          " hex digits, as the first server wrote to DATA_DIR/",
                                          kJoinKeyFile, ")"));
  }
  return absl::HexStringToBytes(std::string(text));
}

absl::StatusOr<std::string> SealJoinBundle(const std::string& data_dir, const std::string& key_dir,
                                           std::string_view key) {
  Json files = Json::object();
  for (const char* name : kDataFiles) {
    absl::StatusOr<std::string> text = ReadWhole(Cat(data_dir, "/", name));
    if (!text.ok()) return text.status();
    files[name] = *text;
  }
  absl::StatusOr<std::string> ring = ReadWhole(Cat(key_dir, "/", kKeyRingFile));
  if (!ring.ok()) return ring.status();
  return SealWithRawKey(key, Json{{"files", files}, {"keyRing", *ring}}.dump(), kAad);
}

absl::StatusOr<std::string> ReadJoinKeyFile(const std::string& path, std::string_view source) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(Cat(source, ": ", path, " does not exist"));
  }
  absl::StatusOr<std::string> text = ReadWhole(path);
  if (!text.ok()) return absl::InvalidArgumentError(Cat(source, ": ", text.status().message()));
  return ParseJoinKey(*text, source);
}

absl::Status CheckJoinBundle(std::string_view blob, std::string_view key) {
  return OpenWithRawKey(key, blob, kAad).status();
}

absl::Status OpenJoinBundle(std::string_view blob, std::string_view key,
                            const std::string& data_dir, const std::string& key_dir) {
  std::error_code ec;
  if (std::filesystem::exists(Cat(data_dir, "/ca.crt"), ec)) {
    return absl::FailedPreconditionError(Cat(
        data_dir, " already holds a server's credentials (ca.crt): a join never replaces them"));
  }
  absl::StatusOr<std::string> opened = OpenWithRawKey(key, blob, kAad);
  if (absl::IsPermissionDenied(opened.status())) {
    return absl::PermissionDeniedError(
        "the join key does not open the bundle in the store (another control plane's key, or a "
        "bundle sealed again under a new key since: take KEY_DIR/join.key of a server of this "
        "one)");
  }
  if (!opened.ok()) return absl::DataLossError(Cat("the join bundle: ", opened.status().message()));
  const Json j = Json::parse(*opened, nullptr, false);
  const bool shaped = j.is_object() && j.contains("files") && j["files"].is_object() &&
                      j.contains("keyRing") && j["keyRing"].is_string();
  if (!shaped) return absl::DataLossError("the join bundle opens but is not one (no files)");
  for (const char* name : kDataFiles) {
    if (!j["files"].contains(name) || !j["files"][name].is_string()) {
      return absl::DataLossError(Cat("the join bundle has no ", name));
    }
  }
  const std::string ring_path = Cat(key_dir, "/", kKeyRingFile);
  const std::string ring = j["keyRing"].get<std::string>();
  if (std::filesystem::exists(ring_path, ec)) {
    absl::StatusOr<std::string> there = ReadWhole(ring_path);
    if (!there.ok() || *there != ring) {
      return absl::FailedPreconditionError(
          Cat(key_dir, " holds another key ring (", kKeyRingFile, "): a join never replaces it"));
    }
  }
  // DATA_DIR keeps the mode the server gave it (0711: tasks pass through to its checkpoints);
  // the key ring's directory is the owner's alone.
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return absl::InternalError(Cat("cannot create ", data_dir, ": ", ec.message()));
  if (absl::Status s = PrepareKeyRingDirectory(key_dir); !s.ok()) return s;
  for (const char* name : kDataFiles) {
    if (std::string_view(name) == "ca.crt") continue;
    const std::string text = j["files"][name].get<std::string>();
    if (absl::Status s = WritePrivateFile(Cat(data_dir, "/", name), text, FileSync::kDurable);
        !s.ok()) {
      return s;
    }
  }
  for (const auto& [path, text] :
       {std::pair{ring_path, ring},
        std::pair{Cat(key_dir, "/", kJoinKeyFile),
                  Cat(absl::BytesToHexString(std::string(key)), "\n")}}) {
    if (absl::Status s = WritePrivateFile(path, text, FileSync::kDurable); !s.ok()) return s;
  }
  // The CA last (a join cut short leaves none, so it is tried again), readable by all as the
  // first server's is: it is public.
  const std::string ca = Cat(data_dir, "/ca.crt");
  if (absl::Status s =
          WritePrivateFile(ca, j["files"]["ca.crt"].get<std::string>(), FileSync::kDurable);
      !s.ok()) {
    return s;
  }
  if (chmod(ca.c_str(), 0644) != 0) {
    return absl::InternalError(Cat("cannot make ", ca, " readable: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gpucloud::server
