#include "server/secret_box.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/escaping.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

const absl::Time kT0 = absl::FromUnixSeconds(1'790'000'000);
constexpr char kAad[] = "/secrets/team-a/hf-token";

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), 0600);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

std::unique_ptr<KeyRing> MakeRing(const std::string& dir, absl::Time now = kT0) {
  absl::StatusOr<std::unique_ptr<KeyRing>> ring = KeyRing::LoadOrCreate(dir, now);
  EXPECT_TRUE(ring.ok()) << ring.status();
  return ring.ok() ? std::move(*ring) : nullptr;
}

// `blob` with field `name` (base64) changed by `change` on its bytes.
std::string WithField(const std::string& blob, const std::string& name,
                      void (*change)(std::string*)) {
  Json j = Json::parse(blob);
  std::string bytes;
  EXPECT_TRUE(absl::Base64Unescape(j[name].get<std::string>(), &bytes));
  change(&bytes);
  j[name] = absl::Base64Escape(bytes);
  return j.dump();
}

TEST(SecretBox, RoundTripsValuesOfEverySize) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  for (std::string value : {std::string(), std::string("hf_abc"), std::string(1000, '\0'),
                            std::string(kMaxSecretBytes, 'x')}) {
    absl::StatusOr<std::string> blob = box.Seal(value, kAad);
    ASSERT_TRUE(blob.ok()) << blob.status();
    EXPECT_EQ(blob->find("hf_abc"), std::string::npos);
    absl::StatusOr<std::string> back = box.Open(*blob, kAad);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, value);
  }
  EXPECT_TRUE(
      absl::IsInvalidArgument(box.Seal(std::string(kMaxSecretBytes + 1, 'x'), kAad).status()));
}

TEST(SecretBox, BlobIsVersionedAndSelfDescribingWithFreshKeysAndNonces) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  absl::StatusOr<std::string> a = box.Seal("same", kAad);
  absl::StatusOr<std::string> b = box.Seal("same", kAad);
  ASSERT_TRUE(a.ok() && b.ok());
  Json ja = Json::parse(*a);
  Json jb = Json::parse(*b);
  EXPECT_EQ(ja["v"], 1);
  EXPECT_EQ(ja["alg"], "AES-256-GCM");
  EXPECT_EQ(ja["kek"], ring->Current().id);
  for (const char* field : {"dek_iv", "dek", "iv", "ct"}) EXPECT_NE(ja[field], jb[field]) << field;
  EXPECT_EQ(SecretBox::KeyIdOf(*a).value(), ring->Current().id);
}

TEST(SecretBox, AChangeToAnyByteOfTheBlobFailsToOpen) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  const std::string blob = box.Seal("registry password", kAad).value();
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string changed = blob;
    changed[i] ^= 0x01;
    absl::StatusOr<std::string> opened = box.Open(changed, kAad);
    EXPECT_FALSE(opened.ok()) << "byte " << i << " of " << blob;
    EXPECT_TRUE(absl::IsDataLoss(opened.status()) ||
                absl::IsFailedPrecondition(opened.status()))  // the kek id changed
        << opened.status();
  }
  EXPECT_TRUE(absl::IsDataLoss(box.Open(blob.substr(0, blob.size() - 1), kAad).status()));
  EXPECT_TRUE(absl::IsDataLoss(box.Open("", kAad).status()));
}

TEST(SecretBox, AChangeToAnyBitOfEachRegionDoesNotAuthenticate) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  const std::string blob = box.Seal("dataset credential", kAad).value();
  for (const char* field : {"dek_iv", "dek", "dek_tag", "iv", "ct", "tag"}) {
    for (auto change :
         {+[](std::string* s) { (*s)[0] ^= 0x80; }, +[](std::string* s) { s->back() ^= 0x01; }}) {
      absl::Status s = box.Open(WithField(blob, field, change), kAad).status();
      EXPECT_TRUE(absl::IsDataLoss(s)) << field << ": " << s;
      EXPECT_NE(std::string(s.message()).find("does not authenticate"), std::string::npos) << s;
    }
  }
  absl::Status shorter = box.Open(WithField(
                                      blob, "tag", +[](std::string* s) { s->pop_back(); }),
                                  kAad)
                             .status();
  EXPECT_TRUE(absl::IsDataLoss(shorter)) << shorter;
  EXPECT_NE(std::string(shorter.message()).find("tag has 15 bytes"), std::string::npos);
}

TEST(SecretBox, WrongAssociatedDataFailsToOpen) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  const std::string blob = box.Seal("hf_abc", kAad).value();
  for (const char* other : {"/secrets/team-b/hf-token", "/secrets/team-a/hf-token ", ""}) {
    absl::Status s = box.Open(blob, other).status();
    EXPECT_TRUE(absl::IsDataLoss(s)) << other << ": " << s;
  }
  EXPECT_TRUE(absl::IsDataLoss(box.Rewrap(blob, "/secrets/team-b/hf-token").status()));
}

TEST(SecretBox, MalformedBlobsAreDataLossNamingTheFault) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  Json good = Json::parse(box.Seal("x", kAad).value());
  auto fault = [&](Json j) {
    absl::Status s = box.Open(j.dump(), kAad).status();
    EXPECT_TRUE(absl::IsDataLoss(s)) << j.dump() << ": " << s;
    return std::string(s.message());
  };
  Json v2 = good;
  v2["v"] = 2;
  EXPECT_NE(fault(v2).find("format version 2"), std::string::npos);
  Json alg = good;
  alg["alg"] = "AES-128-GCM";
  EXPECT_NE(fault(alg).find("algorithm"), std::string::npos);
  Json extra = good;
  extra["note"] = "x";
  EXPECT_NE(fault(extra).find("unknown field note"), std::string::npos);
  Json missing = good;
  missing.erase("tag");
  EXPECT_NE(fault(missing).find("missing"), std::string::npos);
  Json unpadded = good;
  std::string iv = unpadded["iv"].get<std::string>();  // 12 bytes: 16 characters, no padding
  unpadded["iv"] = iv.substr(0, 15) + "=";
  EXPECT_NE(fault(unpadded).find("iv"), std::string::npos);
  // Base64 that decodes to the same bytes but is not canonical: changed text, so refused.
  const std::string dek = good["dek"].get<std::string>();  // 32 bytes: 43 characters and "="
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string stray_bits = dek;
  stray_bits[42] = alphabet[alphabet.find(dek[42]) ^ 1];  // one of the 2 bits past byte 32
  for (const std::string& odd : {stray_bits, dek.substr(0, 43)}) {
    Json j = good;
    j["dek"] = odd;
    EXPECT_NE(fault(j).find("dek is not canonical base64"), std::string::npos) << odd;
  }
  EXPECT_TRUE(absl::IsDataLoss(SecretBox::KeyIdOf("[1]").status()));
  EXPECT_TRUE(absl::IsDataLoss(box.NeedsRewrap("{}").status()));
}

TEST(SecretBox, UnknownKeyIdAndAnotherRingsKeyAreClearErrors) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> mine = MakeRing(dir / "mine");
  std::unique_ptr<KeyRing> theirs = MakeRing(dir / "theirs");
  const std::string blob = SecretBox(theirs.get()).Seal("x", kAad).value();
  absl::Status unknown = SecretBox(mine.get()).Open(blob, kAad).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(unknown)) << unknown;
  EXPECT_NE(std::string(unknown.message()).find(theirs->Current().id), std::string::npos);

  // The same id with other material (a ring restored from the wrong backup): not authentic.
  Json ring_file = Json::parse(Slurp(dir / "mine/kek.json"));
  ring_file["keys"][0]["id"] = theirs->Current().id;
  ring_file["current"] = theirs->Current().id;
  Spit(dir / "mine/kek.json", ring_file.dump());
  std::unique_ptr<KeyRing> impostor = KeyRing::Load(dir / "mine").value();
  EXPECT_TRUE(absl::IsDataLoss(SecretBox(impostor.get()).Open(blob, kAad).status()));
}

TEST(SecretBox, OldBlobsOpenAfterRotationAndRewrapMovesThemToTheCurrentKey) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  const std::string old_id = ring->Current().id;
  const std::string blob = box.Seal("hf_abc", kAad).value();
  EXPECT_FALSE(box.NeedsRewrap(blob).value());
  EXPECT_EQ(box.Rewrap(blob, kAad).value(), blob);  // already current: unchanged

  absl::StatusOr<KeyInfo> fresh = ring->Rotate(kT0 + absl::Hours(24 * 90));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(fresh->id, old_id);
  EXPECT_EQ(ring->Current().id, fresh->id);
  EXPECT_EQ(box.Open(blob, kAad).value(), "hf_abc");
  EXPECT_TRUE(box.NeedsRewrap(blob).value());
  EXPECT_EQ(SecretBox::KeyIdOf(box.Seal("new", kAad).value()).value(), fresh->id);

  absl::StatusOr<std::string> rewrapped = box.Rewrap(blob, kAad);
  ASSERT_TRUE(rewrapped.ok()) << rewrapped.status();
  EXPECT_FALSE(box.NeedsRewrap(*rewrapped).value());
  EXPECT_EQ(SecretBox::KeyIdOf(*rewrapped).value(), fresh->id);
  EXPECT_EQ(box.Open(*rewrapped, kAad).value(), "hf_abc");
  Json before = Json::parse(blob);
  Json after = Json::parse(*rewrapped);
  for (const char* kept : {"iv", "ct", "tag"}) EXPECT_EQ(before[kept], after[kept]) << kept;
  for (const char* changed : {"kek", "dek_iv", "dek"}) EXPECT_NE(before[changed], after[changed]);

  // Once nothing uses it, the old key may go; the rewrapped blob still opens, the old one not.
  EXPECT_TRUE(absl::IsFailedPrecondition(ring->Retire(old_id, {{old_id, 1}})));
  ASSERT_TRUE(ring->Retire(old_id, {{fresh->id, 1}}).ok());
  EXPECT_EQ(box.Open(*rewrapped, kAad).value(), "hf_abc");
  EXPECT_TRUE(absl::IsFailedPrecondition(box.Open(blob, kAad).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(box.Rewrap(blob, kAad).status()));
}

TEST(SecretBox, RewrapRefusesADamagedBlob) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  const std::string blob = box.Seal("hf_abc", kAad).value();
  ASSERT_TRUE(ring->Rotate(kT0 + absl::Hours(1)).ok());
  std::string damaged = WithField(
      blob, "ct", +[](std::string* s) { (*s)[2] ^= 0x04; });
  EXPECT_TRUE(absl::IsDataLoss(box.Rewrap(damaged, kAad).status()));
}

TEST(KeyRing, PersistsAcrossLoadsWithPrivateModes) {
  testing_util::TempDir dir("secret-box");
  const std::string keys = dir / "keys";
  mode_t old_umask = umask(0);
  std::unique_ptr<KeyRing> first = MakeRing(keys);
  umask(old_umask);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(ModeOf(keys), 0700u);
  EXPECT_EQ(ModeOf(keys + "/kek.json"), 0600u);
  EXPECT_FALSE(std::filesystem::exists(keys + "/kek.json.tmp"));
  EXPECT_EQ(first->Current().created, kT0);
  const std::string blob = SecretBox(first.get()).Seal("hf_abc", kAad).value();
  KeyInfo rotated = first->Rotate(kT0 + absl::Seconds(1.5)).value();
  EXPECT_EQ(ModeOf(keys + "/kek.json"), 0600u);

  std::unique_ptr<KeyRing> again = MakeRing(keys, kT0 + absl::Hours(5));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->Current().id, rotated.id);
  EXPECT_EQ(again->Current().created, kT0 + absl::Seconds(1.5));
  ASSERT_EQ(again->Keys().size(), 2u);
  EXPECT_EQ(again->Keys()[0].created, kT0);
  EXPECT_FALSE(again->Keys()[0].current);
  EXPECT_EQ(SecretBox(again.get()).Open(blob, kAad).value(), "hf_abc");
  EXPECT_EQ(Slurp(keys + "/kek.json").find("hf_abc"), std::string::npos);
}

TEST(KeyRing, TightensALaxDirectoryAndRefusesALaxFile) {
  testing_util::TempDir dir("secret-box");
  const std::string keys = dir / "keys";
  std::filesystem::create_directory(keys);
  chmod(keys.c_str(), 0755);
  ASSERT_NE(MakeRing(keys), nullptr);
  EXPECT_EQ(ModeOf(keys), 0700u);
  const std::string before = Slurp(keys + "/kek.json");
  chmod((keys + "/kek.json").c_str(), 0644);
  absl::Status lax = KeyRing::LoadOrCreate(keys, kT0).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(lax)) << lax;
  EXPECT_NE(std::string(lax.message()).find("mode 644"), std::string::npos) << lax;
  EXPECT_EQ(Slurp(keys + "/kek.json"), before);
  Spit(dir / "file", "x");
  EXPECT_TRUE(absl::IsFailedPrecondition(KeyRing::LoadOrCreate(dir / "file", kT0).status()));
}

TEST(KeyRing, ACorruptFileIsAClearErrorNeverANewKey) {
  testing_util::TempDir dir("secret-box");
  const std::string keys = dir / "keys";
  ASSERT_NE(MakeRing(keys), nullptr);
  const std::string path = keys + "/kek.json";
  const std::string good = Slurp(path);
  Json j = Json::parse(good);
  auto with = [&](auto change) {
    Json c = j;
    change(c);
    return c.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON"},
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"[]", "exactly {format, current, keys}"},
      {with([](Json& c) { c["format"] = "gpucloud-kek-ring/v9"; }), "format"},
      {with([](Json& c) { c["current"] = "kek-nope"; }), "kek-nope is not among the keys"},
      {with([](Json& c) { c["keys"] = Json::array(); }), "non-empty list"},
      {with([](Json& c) { c["keys"][0]["material"] = absl::Base64Escape("short"); }), "256 bits"},
      {with([](Json& c) { c["keys"][0]["created"] = "yesterday"; }), "creation time"},
      {with([](Json& c) { c["keys"].push_back(c["keys"][0]); }), "appears twice"},
      {with([](Json& c) { c["keys"][0].erase("id"); }), "{id, created, material}"},
  };
  for (const auto& [text, fault] : cases) {
    Spit(path, text);
    for (auto load : {+[](const std::string& d) { return KeyRing::LoadOrCreate(d, kT0).status(); },
                      +[](const std::string& d) { return KeyRing::Load(d).status(); }}) {
      absl::Status s = load(keys);
      EXPECT_TRUE(absl::IsDataLoss(s)) << text << ": " << s;
      EXPECT_NE(std::string(s.message()).find(fault), std::string::npos) << s;
      EXPECT_NE(std::string(s.message()).find(path), std::string::npos) << s;
    }
    EXPECT_EQ(Slurp(path), text);  // left as it was for the operator
  }
  Spit(path, good);
  EXPECT_TRUE(KeyRing::Load(keys).ok());
}

TEST(KeyRing, LoadNeverCreates) {
  testing_util::TempDir dir("secret-box");
  EXPECT_TRUE(absl::IsNotFound(KeyRing::Load(dir / "keys").status()));
  EXPECT_FALSE(std::filesystem::exists(dir / "keys"));
  std::filesystem::create_directory(dir / "keys");
  EXPECT_TRUE(absl::IsNotFound(KeyRing::Load(dir / "keys").status()));
  EXPECT_FALSE(std::filesystem::exists(dir / "keys/kek.json"));
  EXPECT_TRUE(absl::IsInternal(KeyRing::LoadOrCreate(dir / "no/such/keys", kT0).status()));
}

TEST(KeyRing, RetireRefusesTheCurrentKeyAnUnknownOneAndOneInUse) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  const std::string first = ring->Current().id;
  EXPECT_TRUE(absl::IsFailedPrecondition(ring->Retire(first, {})));
  EXPECT_TRUE(absl::IsNotFound(ring->Retire("kek-0000000000000000", {})));
  const std::string second = ring->Rotate(kT0 + absl::Hours(1)).value().id;
  absl::Status in_use = ring->Retire(first, {{first, 3}});
  EXPECT_TRUE(absl::IsFailedPrecondition(in_use));
  EXPECT_NE(std::string(in_use.message()).find("3 value(s)"), std::string::npos) << in_use;
  EXPECT_EQ(ring->Keys().size(), 2u);
  ASSERT_TRUE(ring->Retire(first, {{first, 0}, {second, 7}}).ok());
  ASSERT_EQ(ring->Keys().size(), 1u);
  std::unique_ptr<KeyRing> reloaded = KeyRing::Load(dir / "keys").value();
  ASSERT_EQ(reloaded->Keys().size(), 1u);
  EXPECT_EQ(reloaded->Keys()[0].id, second);
}

TEST(KeyRing, SealAndOpenRunConcurrentlyWithRotation) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  std::vector<std::thread> workers;
  std::atomic<int> failures = 0;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string value = std::to_string(t * 1000 + i);
        absl::StatusOr<std::string> blob = box.Seal(value, kAad);
        absl::StatusOr<std::string> back =
            blob.ok() ? box.Open(*blob, kAad) : absl::StatusOr<std::string>(blob.status());
        if (!back.ok() || *back != value) ++failures;
      }
    });
  }
  for (int r = 1; r <= 10; ++r) ASSERT_TRUE(ring->Rotate(kT0 + absl::Minutes(r)).ok());
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(ring->Keys().size(), 11u);
}

std::vector<SealedRef> Refs(const std::vector<std::pair<std::string, std::string>>& list) {
  std::vector<SealedRef> out;
  for (const auto& [key, id] : list) out.push_back({key, id});
  return out;
}

TEST(PlanRewrap, TakesBoundedBatchesOfStaleValuesInKeyOrder) {
  const std::vector<SealedRef> sealed = Refs({{"/secrets/b/2", "old"},
                                              {"/secrets/a/1", "old"},
                                              {"/secrets/a/2", "new"},
                                              {"/secrets/c/1", "older"},
                                              {"/secrets/b/1", "old"}});
  RewrapPlan first = PlanRewrap(sealed, "new", 2, "");
  EXPECT_EQ(first.batch, (std::vector<std::string>{"/secrets/a/1", "/secrets/b/1"}));
  EXPECT_EQ(first.next_after, "/secrets/b/1");
  EXPECT_EQ(first.pending, 4u);
  EXPECT_EQ(first.by_key, (std::map<std::string, size_t>{{"new", 1}, {"old", 3}, {"older", 1}}));
  RewrapPlan second = PlanRewrap(sealed, "new", 2, first.next_after);
  EXPECT_EQ(second.batch, (std::vector<std::string>{"/secrets/b/2", "/secrets/c/1"}));
  // Past the end, a new pass: what failed to rewrap is retried after the others.
  RewrapPlan third = PlanRewrap(sealed, "new", 2, second.next_after);
  EXPECT_EQ(third.batch, (std::vector<std::string>{"/secrets/a/1", "/secrets/b/1"}));
  EXPECT_EQ(PlanRewrap(sealed, "new", 0, "").batch.size(), 1u);  // at least one
  EXPECT_EQ(PlanRewrap(sealed, "new", 100, "").batch.size(), 4u);
}

TEST(PlanRewrap, NothingToDoWhenAllAreCurrent) {
  RewrapPlan plan = PlanRewrap(Refs({{"/secrets/a/1", "new"}, {"/secrets/a/2", "new"}}), "new", 5,
                               "/secrets/a/1");
  EXPECT_TRUE(plan.batch.empty());
  EXPECT_EQ(plan.pending, 0u);
  EXPECT_EQ(plan.next_after, "");
  EXPECT_EQ(plan.by_key, (std::map<std::string, size_t>{{"new", 2}}));
  EXPECT_TRUE(PlanRewrap({}, "new", 5, "").batch.empty());
}

TEST(PlanRewrap, DrivesARealRingToOneKey) {
  testing_util::TempDir dir("secret-box");
  std::unique_ptr<KeyRing> ring = MakeRing(dir / "keys");
  SecretBox box(ring.get());
  std::map<std::string, std::string> store;
  for (int i = 0; i < 7; ++i) {
    std::string key = "/secrets/team-a/s" + std::to_string(i);
    store[key] = box.Seal("value " + std::to_string(i), key).value();
    if (i == 3) {
      ASSERT_TRUE(ring->Rotate(kT0 + absl::Hours(1)).ok());
    }
  }
  const std::string first = ring->Keys()[0].id;
  const std::string second = ring->Keys()[1].id;
  ASSERT_TRUE(ring->Rotate(kT0 + absl::Hours(2)).ok());
  std::string cursor;
  for (int step = 0;; ++step) {
    ASSERT_LT(step, 10);
    std::vector<SealedRef> refs;
    for (const auto& [key, blob] : store) refs.push_back({key, SecretBox::KeyIdOf(blob).value()});
    RewrapPlan plan = PlanRewrap(refs, ring->Current().id, 3, cursor);
    if (plan.pending == 0) {
      EXPECT_EQ(plan.by_key, (std::map<std::string, size_t>{{ring->Current().id, 7}}));
      EXPECT_TRUE(ring->Retire(first, plan.by_key).ok());
      EXPECT_TRUE(ring->Retire(second, plan.by_key).ok());
      break;
    }
    EXPECT_LE(plan.batch.size(), 3u);
    EXPECT_TRUE(absl::IsFailedPrecondition(ring->Retire(second, plan.by_key)));  // s4..s6
    for (const std::string& key : plan.batch) store[key] = box.Rewrap(store[key], key).value();
    cursor = plan.next_after;
  }
  EXPECT_EQ(ring->Keys().size(), 1u);
  for (const auto& [key, blob] : store) {
    EXPECT_EQ(box.Open(blob, key).value(), "value " + key.substr(key.size() - 1));
  }
}

TEST(RotationDue, AfterThePeriodAndNeverWhenOff) {
  EXPECT_FALSE(RotationDue(kT0, kT0));
  EXPECT_FALSE(RotationDue(kT0 + absl::Hours(24 * 90) - absl::Seconds(1), kT0));
  EXPECT_TRUE(RotationDue(kT0 + absl::Hours(24 * 90), kT0));
  EXPECT_TRUE(RotationDue(kT0 + absl::Hours(24 * 400), kT0));
  EXPECT_FALSE(RotationDue(kT0 - absl::Hours(1), kT0));  // a clock stepped back
  EXPECT_TRUE(RotationDue(kT0 + absl::Hours(2), kT0, absl::Hours(1)));
  EXPECT_FALSE(RotationDue(kT0 + absl::Hours(24 * 400), kT0, absl::ZeroDuration()));
  EXPECT_FALSE(RotationDue(kT0 + absl::Hours(24 * 400), kT0, -absl::Hours(1)));
}

}  // namespace
}  // namespace gpucloud::server
