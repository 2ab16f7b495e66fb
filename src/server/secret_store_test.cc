// SecretStore (issue 14): values sealed in the store, the ring loaded strictly, rotation, the
// background rewrap and retirement, and the key directory's lock that keeps rotate-keys away
// from a live server.
#include "server/secret_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/control_plane.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

Json SecretDoc(const std::string& ns, const std::string& name) {
  return Json{{"apiVersion", "gpucloud/v1"},
              {"kind", "Secret"},
              {"metadata", {{"name", name}, {"namespace", ns}}},
              {"type", "Opaque"}};
}

std::string FileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class SecretStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore(tmp_ / "store.db"));
    clock_.Set(
        absl::ToUnixMillis(absl::FromCivil(absl::CivilDay(2026, 1, 1), absl::UTCTimeZone())));
  }
  SecretStoreOptions Options() {
    SecretStoreOptions o;
    o.key_dir = tmp_ / "keys";
    o.rewrap_batch = 2;
    return o;
  }
  std::unique_ptr<SecretStore> OpenOk() {
    absl::StatusOr<std::unique_ptr<SecretStore>> s = SecretStore::Open(*store_, clock_, Options());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  void PutOk(SecretStore& s, const std::string& ns, const std::string& name,
             const std::map<std::string, std::string>& values) {
    absl::StatusOr<store::KeyValue> kv = s.Put(ns, name, SecretDoc(ns, name), values, 0);
    ASSERT_TRUE(kv.ok()) << kv.status();
  }
  // KEK ids of every stored value.
  std::map<std::string, size_t> ValuesByKey() {
    std::map<std::string, size_t> out;
    absl::StatusOr<store::ListResult> list = store_->List("/secrets/");
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return out;
    for (const store::KeyValue& kv : list->items) {
      const Json doc = Json::parse(kv.value);
      for (const auto& [k, v] : doc["data"].items()) {
        ++out[*SecretBox::KeyIdOf(v.get<std::string>())];
      }
    }
    return out;
  }

  testing_util::TempDir tmp_{"secret-store"};
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(SecretStoreTest, SealsValuesAndRevealsThem) {
  std::unique_ptr<SecretStore> s = OpenOk();
  PutOk(*s, "team-a", "hf", {{"token", "hf_PLAINTEXT_7731"}, {"user", "alice-visible-no"}});
  absl::StatusOr<std::map<std::string, std::string>> got = s->Reveal("team-a", "hf");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["token"], "hf_PLAINTEXT_7731");
  EXPECT_EQ((*got)["user"], "alice-visible-no");
  const std::string stored = store_->Get("/secrets/team-a/hf")->value;
  EXPECT_EQ(stored.find("hf_PLAINTEXT_7731"), std::string::npos) << stored;
  EXPECT_EQ(stored.find("alice-visible-no"), std::string::npos);
  EXPECT_NE(stored.find("\"kind\":\"Secret\""), std::string::npos);  // metadata in the clear
  // Nothing on disk holds it either (the database and its write-ahead log).
  for (const char* file : {"store.db", "store.db-wal"}) {
    EXPECT_EQ(FileBytes(tmp_ / file).find("hf_PLAINTEXT_7731"), std::string::npos) << file;
  }
  EXPECT_TRUE(absl::IsNotFound(s->Reveal("team-a", "nope").status()));
}

TEST_F(SecretStoreTest, AValueMovedToAnotherKeyDoesNotOpen) {
  std::unique_ptr<SecretStore> s = OpenOk();
  PutOk(*s, "team-a", "db", {{"a", "first"}, {"b", "second"}});
  Json doc = Json::parse(store_->Get("/secrets/team-a/db")->value);
  std::swap(doc["data"]["a"], doc["data"]["b"]);
  ASSERT_TRUE(store_->Txn({{store::Op::Kind::kPut, "/secrets/team-a/db", doc.dump()}}).ok());
  EXPECT_TRUE(absl::IsDataLoss(s->Reveal("team-a", "db").status()));
}

TEST_F(SecretStoreTest, DescribeShowsSizesNeverValues) {
  std::unique_ptr<SecretStore> s = OpenOk();
  PutOk(*s, "team-a", "hf", {{"token", "0123456789"}});
  Json shown = SecretStore::Describe(*store_->Get("/secrets/team-a/hf"));
  EXPECT_FALSE(shown.contains("data")) << shown.dump();
  EXPECT_EQ(shown["status"]["data"]["token"]["bytes"], 10);
  EXPECT_EQ(shown["status"]["data"]["token"]["keyId"], s->ring().Current().id);
  EXPECT_EQ(shown.dump().find("ct"), std::string::npos) << shown.dump();
}

TEST_F(SecretStoreTest, OverTheSizeLimitIsRefusedAndNothingWritten) {
  std::unique_ptr<SecretStore> s = OpenOk();
  std::map<std::string, std::string> big{{"a", std::string(kMaxSecretBytes / 2 + 1, 'x')},
                                         {"b", std::string(kMaxSecretBytes / 2, 'y')}};
  EXPECT_TRUE(
      absl::IsInvalidArgument(s->Put("ns", "big", SecretDoc("ns", "big"), big, 0).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/secrets/ns/big").status()));
}

TEST_F(SecretStoreTest, AMissingRingWithStoredSecretsRefusesToOpen) {
  {
    std::unique_ptr<SecretStore> s = OpenOk();
    PutOk(*s, "team-a", "hf", {{"token", "x"}});
  }
  std::filesystem::remove_all(tmp_ / "keys");
  absl::StatusOr<std::unique_ptr<SecretStore>> again =
      SecretStore::Open(*store_, clock_, Options());
  ASSERT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("kek.json is missing"), std::string::npos);
  EXPECT_NE(again.status().message().find("holds 1 secret but"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "keys/kek.json"));  // no new ring in its place
}

TEST_F(SecretStoreTest, AnotherServersRingRefusesToOpen) {
  {
    std::unique_ptr<SecretStore> s = OpenOk();
    PutOk(*s, "team-a", "hf", {{"token", "x"}});
  }
  std::filesystem::remove_all(tmp_ / "keys");
  ASSERT_TRUE(KeyRing::LoadOrCreate(tmp_ / "keys", absl::Now()).ok());  // a stranger's ring
  absl::StatusOr<std::unique_ptr<SecretStore>> again =
      SecretStore::Open(*store_, clock_, Options());
  ASSERT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("does not hold"), std::string::npos);
}

TEST_F(SecretStoreTest, RotateKeysOfflineRefusesBesideALiveStore) {
  std::unique_ptr<SecretStore> s = OpenOk();
  absl::StatusOr<KeyInfo> refused = RotateKeysOffline(tmp_ / "keys", absl::Now());
  ASSERT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("stop it first"), std::string::npos);
  s.reset();
  absl::StatusOr<KeyInfo> done = RotateKeysOffline(tmp_ / "keys", absl::Now());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->current);
  EXPECT_TRUE(absl::IsNotFound(RotateKeysOffline(tmp_ / "nokeys", absl::Now()).status()));
}

TEST_F(SecretStoreTest, RotationAndRewrapLeaveEverySecretReadableOnTheCurrentKey) {
  std::string first_key;
  {
    std::unique_ptr<SecretStore> s = OpenOk();
    first_key = s->ring().Current().id;
    for (int i = 0; i < 3; ++i) {
      PutOk(*s, "team-a", "s" + std::to_string(i),
            {{"a", "va" + std::to_string(i)}, {"b", "vb" + std::to_string(i)}});
    }
  }
  ASSERT_TRUE(RotateKeysOffline(tmp_ / "keys", absl::Now()).ok());
  std::unique_ptr<SecretStore> s = OpenOk();
  const std::string current = s->ring().Current().id;
  ASSERT_NE(current, first_key);
  EXPECT_EQ(ValuesByKey(), (std::map<std::string, size_t>{{first_key, 6}}));
  // Batches of 2 values; a write between batches lands on the current key.
  absl::StatusOr<SecretMaintenance> step = s->MaintainOnce();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->rewrapped, 2u);
  EXPECT_EQ(step->pending, 4u);
  EXPECT_TRUE(step->retired.empty());
  PutOk(*s, "team-b", "fresh", {{"k", "new"}});
  for (int i = 0; i < 10 && step->pending > 0; ++i) {
    step = s->MaintainOnce();
    ASSERT_TRUE(step.ok()) << step.status();
  }
  EXPECT_EQ(step->pending, 0u);
  EXPECT_EQ(step->retired, std::vector<std::string>{first_key});
  EXPECT_EQ(ValuesByKey(), (std::map<std::string, size_t>{{current, 7}}));
  ASSERT_EQ(s->ring().Keys().size(), 1u);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::map<std::string, std::string>> got =
        s->Reveal("team-a", "s" + std::to_string(i));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)["a"], "va" + std::to_string(i));
    EXPECT_EQ((*got)["b"], "vb" + std::to_string(i));
  }
  EXPECT_EQ((*s->Reveal("team-b", "fresh"))["k"], "new");
  // The ring on disk agrees after a restart.
  s.reset();
  s = OpenOk();
  EXPECT_EQ(s->ring().Keys().size(), 1u);
  EXPECT_EQ((*s->Reveal("team-a", "s0"))["a"], "va0");
}

TEST_F(SecretStoreTest, RotatesWhenTheKeyIsNinetyDaysOld) {
  std::unique_ptr<SecretStore> s = OpenOk();
  PutOk(*s, "team-a", "hf", {{"token", "t"}});
  const std::string first = s->ring().Current().id;
  clock_.Advance(absl::ToInt64Milliseconds(absl::Hours(24 * 89)));
  EXPECT_FALSE(s->MaintainOnce()->rotated);
  clock_.Advance(absl::ToInt64Milliseconds(absl::Hours(24)));
  absl::StatusOr<SecretMaintenance> step = s->MaintainOnce();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->rotated);
  EXPECT_NE(s->ring().Current().id, first);
  EXPECT_EQ(step->rewrapped, 1u);
  EXPECT_EQ(step->retired, std::vector<std::string>{first});
  EXPECT_EQ((*s->Reveal("team-a", "hf"))["token"], "t");
}

TEST_F(SecretStoreTest, TheBackgroundLoopRewrapsAfterARotation) {
  {
    std::unique_ptr<SecretStore> s = OpenOk();
    PutOk(*s, "team-a", "hf", {{"token", "t"}});
  }
  ASSERT_TRUE(RotateKeysOffline(tmp_ / "keys", absl::Now()).ok());
  std::unique_ptr<SecretStore> s = OpenOk();
  const std::string current = s->ring().Current().id;
  s->Start();
  // Wait on the store's own change notification, not a sleep.
  int64_t seen = store_->Revision();
  while (ValuesByKey() != std::map<std::string, size_t>{{current, 1}}) {
    ASSERT_TRUE(store_->WaitForChange(seen, absl::Seconds(30)));
    seen = store_->Revision();
  }
  s->Stop();
  EXPECT_EQ((*s->Reveal("team-a", "hf"))["token"], "t");
}

// The server itself: it holds the ring's lock while it runs (rotate-keys refuses), and a store
// with secrets but no ring does not start.
TEST(SecretStoreServerTest, TheServerHoldsTheRingAndRefusesToStartWithoutIt) {
  testing_util::TempDir tmp("secret-server");
  ControlPlaneOptions o;
  o.data_dir = tmp / "data";
  o.port = 0;
  {
    ControlPlane cp(o);
    ASSERT_TRUE(cp.Start().ok());
    absl::StatusOr<KeyInfo> refused = RotateKeysOffline(tmp / "data/keys", absl::Now());
    EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
    cp.Stop();
  }
  {  // a secret in the store, as the API writes it
    std::unique_ptr<store::Store> st = std::move(*store::OpenSqliteStore(tmp / "data/store.db"));
    FakeClock clock;
    absl::StatusOr<std::unique_ptr<SecretStore>> s =
        SecretStore::Open(*st, clock, SecretStoreOptions{.key_dir = tmp / "data/keys"});
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Put("team-a", "hf", SecretDoc("team-a", "hf"), {{"t", "v"}}, 0).ok());
  }
  std::filesystem::rename(tmp / "data/keys", tmp / "keys-elsewhere");
  {
    ControlPlane cp(o);
    absl::Status s = cp.Start();
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_NE(s.message().find("keys/kek.json is missing"), std::string::npos) << s;
  }
  o.key_dir = tmp / "keys-elsewhere";  // --key-dir
  ControlPlane cp(o);
  EXPECT_TRUE(cp.Start().ok());
}

}  // namespace
}  // namespace gpucloud::server
