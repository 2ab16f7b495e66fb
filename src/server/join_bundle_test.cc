// The join bundle (join_bundle.h) and the raw-key seal under it (secret_box.h), on real files.
#include "server/join_bundle.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "server/secret_box.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

const char* const kShared[] = {"ca.crt", "ca.key", "tokens", "bootstrap.token", "audit.key"};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The ciphertext of a sealed blob, decoded (what a reader of the store has).
std::string CiphertextOf(const std::string& blob) {
  std::string ct;
  EXPECT_TRUE(absl::Base64Unescape(nlohmann::json::parse(blob)["ct"].get<std::string>(), &ct));
  return ct;
}

int ModeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

// A first server's data directory: each shared file, a key ring, and what is its own.
void MakeServerDir(const testing_util::TempDir& t) {
  std::filesystem::create_directories(t / "a/keys");
  for (const char* name : kShared) std::ofstream(t / ("a/" + std::string(name))) << "of " << name;
  std::ofstream(t / "a/keys/kek.json") << R"({"ring":"of a"})";
  std::ofstream(t / "a/server.key") << "a's own";
}

// A first server's directory (MakeServerDir) and its bundle, sealed under a new key.
struct Sealed {
  std::string key;
  absl::StatusOr<std::string> blob;
};
Sealed SealFirstServer(const testing_util::TempDir& t) {
  MakeServerDir(t);
  std::string key = *ParseJoinKey(*NewJoinKey(), "k");
  absl::StatusOr<std::string> blob = SealJoinBundle(t / "a", t / "a/keys", key);
  return {std::move(key), std::move(blob)};
}

TEST(RawKeySeal, OpensOnlyWithItsKeyAndAssociatedData) {
  const std::string key(32, 'k'), other(32, 'o');
  absl::StatusOr<std::string> blob = SealWithRawKey(key, "secret text", "aad");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(CiphertextOf(*blob).size(), std::string("secret text").size());
  EXPECT_EQ(CiphertextOf(*blob).find("secret"), std::string::npos);
  EXPECT_EQ(*OpenWithRawKey(key, *blob, "aad"), "secret text");
  EXPECT_EQ(OpenWithRawKey(other, *blob, "aad").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenWithRawKey(key, *blob, "other aad").status().code(),
            absl::StatusCode::kPermissionDenied);
  // A byte of the ciphertext changed: not authentic.
  nlohmann::json j = nlohmann::json::parse(*blob);
  std::string ct;
  ASSERT_TRUE(absl::Base64Unescape(j["ct"].get<std::string>(), &ct));
  ct[0] ^= 1;
  j["ct"] = absl::Base64Escape(ct);
  EXPECT_EQ(OpenWithRawKey(key, j.dump(), "aad").status().code(),
            absl::StatusCode::kPermissionDenied);
  for (const char* bad :
       {"", "{}", "[1]", R"({"v":2,"alg":"AES-256-GCM","iv":"","ct":"","tag":""})",
        R"({"v":1,"alg":7})"}) {
    EXPECT_EQ(OpenWithRawKey(key, bad, "aad").status().code(), absl::StatusCode::kDataLoss) << bad;
  }
  EXPECT_EQ(SealWithRawKey("short", "x", "aad").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenWithRawKey("short", *blob, "aad").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JoinKey, IsSixtyFourHexDigitsAndParsedBackToItsBytes) {
  absl::StatusOr<std::string> a = NewJoinKey(), b = NewJoinKey();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
  absl::StatusOr<std::string> bytes = ParseJoinKey("  " + *a + "\n", "--join-key-file k");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(absl::BytesToHexString(*bytes), *a);
  for (const std::string& bad : {std::string(""), a->substr(1), *a + "0", std::string(64, 'g')}) {
    absl::Status s = ParseJoinKey(bad, "--join-key-file k").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--join-key-file k: not a join key"), std::string::npos) << s;
  }
}

// What the first server seals, a new server's empty directory gets, file for file, private; not
// the first server's own files; and nothing with another key.
TEST(JoinBundle, CarriesTheSharedFilesIntoAnEmptyDataDirectory) {
  testing_util::TempDir t("join-bundle");
  const auto [key, blob] = SealFirstServer(t);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(CiphertextOf(*blob).find("of ca.key"), std::string::npos) << "sealed, not in clear";
  EXPECT_TRUE(CheckJoinBundle(*blob, key).ok());

  const std::string other = *ParseJoinKey(*NewJoinKey(), "k");
  absl::Status wrong = OpenJoinBundle(*blob, other, t / "b", t / "b/keys");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.message().find("the join key does not open the bundle"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(t / "b")) << "nothing written when it does not open";
  EXPECT_EQ(CheckJoinBundle(*blob, other).code(), absl::StatusCode::kPermissionDenied);

  std::filesystem::create_directories(t / "b");
  chmod((t / "b").c_str(), 0711);  // as the server makes it: tasks pass through to checkpoints
  ASSERT_TRUE(OpenJoinBundle(*blob, key, t / "b", t / "b/keys").ok());
  EXPECT_EQ(ModeOf(t / "b"), 0711) << "the data directory's mode is left as it was";
  for (const char* name : kShared) {
    const std::string path = t / ("b/" + std::string(name));
    EXPECT_EQ(Slurp(path), Slurp(t / ("a/" + std::string(name)))) << name;
    EXPECT_EQ(ModeOf(path), std::string(name) == "ca.crt" ? 0644 : 0600) << name;
  }
  // The key is kept beside the ring, for this server to seal the bundle again.
  EXPECT_EQ(absl::BytesToHexString(*ReadJoinKeyFile(t / "b/keys/join.key", "k")),
            absl::BytesToHexString(key));
  EXPECT_EQ(ModeOf(t / "b/keys/join.key"), 0600);
  EXPECT_EQ(Slurp(t / "b/keys/kek.json"), R"({"ring":"of a"})");
  EXPECT_EQ(ModeOf(t / "b/keys"), 0700);
  EXPECT_FALSE(std::filesystem::exists(t / "b/server.key")) << "each server makes its own";

  // A directory that has credentials is never overwritten.
  absl::Status again = OpenJoinBundle(*blob, key, t / "b", t / "b/keys");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("already holds a server's credentials"), std::string::npos);
}

// A key directory that holds another key ring is never overwritten (a --key-dir shared by
// mistake); a missing or bad key file is told apart.
TEST(JoinBundle, AnotherKeyRingIsNotReplacedAndKeyFilesAreRead) {
  testing_util::TempDir t("join-bundle-ring");
  const auto [key, blob] = SealFirstServer(t);
  ASSERT_TRUE(blob.ok()) << blob.status();
  std::filesystem::create_directories(t / "b/keys");
  std::ofstream(t / "b/keys/kek.json") << R"({"ring":"another"})";
  absl::Status s = OpenJoinBundle(*blob, key, t / "b", t / "b/keys");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("holds another key ring"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(t / "b/ca.crt"));
  EXPECT_EQ(ReadJoinKeyFile(t / "none.key", "k").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(t / "bad.key") << "not a key\n";
  EXPECT_EQ(ReadJoinKeyFile(t / "bad.key", "k").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JoinBundle, AMissingSharedFileIsNamed) {
  testing_util::TempDir t("join-bundle-missing");
  MakeServerDir(t);
  std::filesystem::remove(t / "a/audit.key");
  absl::Status s = SealJoinBundle(t / "a", t / "a/keys", std::string(32, 'k')).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("audit.key"), std::string::npos) << s;
}

}  // namespace
}  // namespace gpucloud::server
