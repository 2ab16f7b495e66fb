#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <future>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "core/text.h"
#include "server/audit_chain.h"
#include "server/audit_log.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using store::Op;

constexpr int64_t kStart = 1'764'600'000'000;  // 2025-12-01T14:40:00Z

AuditRecord Req(const std::string& user, const std::string& action, const std::string& ns,
                int code = 200) {
  AuditRecord r;
  r.audit_id = "req-" + user + "-" + action;
  r.request_uri = "/apis/gpucloud/v1/namespaces/" + ns + "/jobs";
  r.verb = "create";
  r.username = user;
  r.groups = {"ml-team"};
  r.source_ips = {"10.0.0.7"};
  r.user_agent = "gpuctl/1.0";
  r.object_resource = "jobs";
  r.object_namespace = ns;
  r.object_name = "train";
  r.response_code = code;
  r.request_received_ms = kStart;
  r.action = action;
  r.resource = "gpucloud:job/" + ns + "/train";
  r.decision = code == 403 ? "deny" : "allow";
  r.reason = "policy builtin-tenant, Sid AllowOwnNamespace";
  r.token_name = "alice-laptop";
  return r;
}

Op Create(const std::string& key, const std::string& value = "{}") {
  return Op{Op::Kind::kPut, key, value, 0};
}

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenAll(); }
  void OpenAll(AuditLogOptions options = {}) {
    log_.reset();
    store_.reset();
    absl::StatusOr<std::unique_ptr<store::Store>> s = store::OpenSqliteStore(tmp_ / "store.db");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    log_ = std::make_unique<AuditLog>(*store_, clock_, key_, options);
    ASSERT_TRUE(log_->Open().ok());
  }
  // Records 1..n: every third a mutation, the rest buffered reads.
  void Fill(int n, const std::string& tag = "") {
    for (int i = 0; i < n; ++i) {
      clock_.Advance(1000);
      if (i % 3 == 0) {
        ASSERT_TRUE(log_->CommitWith(Req("alice", "jobs:Create", "team-a"),
                                     {Create("/jobs/team-a/j" + tag + std::to_string(i))})
                        .ok());
      } else {
        ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-b")).ok());
      }
    }
    ASSERT_TRUE(log_->Flush().ok());
  }
  std::vector<std::string> Records() {
    absl::StatusOr<store::ListResult> l = store_->List("/audit/records/");
    EXPECT_TRUE(l.ok());
    std::vector<std::string> out;
    for (const auto& kv : l->items) out.push_back(kv.value);
    return out;
  }
  std::vector<std::string> Digests() { return *log_->DigestTexts(); }
  std::string RecordKey(int64_t seq) { return fmt::format("/audit/records/{:020d}", seq); }
  void Put(const std::string& key, const std::string& value) {
    ASSERT_TRUE(store_->Txn({Op{Op::Kind::kPut, key, value}}).ok());
  }
  void Delete(const std::string& key) {
    ASSERT_TRUE(store_->Txn({Op{Op::Kind::kDelete, key}}).ok());
  }
  VerifyReport VerifyStore() {
    absl::StatusOr<VerifyReport> r = log_->Verify();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : VerifyReport{false, -1, r.status().ToString()};
  }

  testing_util::TempDir tmp_{"gpucloud-audit"};
  FakeClock clock_{kStart};
  AuditKey key_ = AuditKey::Generate();
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<AuditLog> log_;
};

// ---- records and keys ----

TEST(AuditChainTest, RecordEncodingIsCanonicalAndStrict) {
  AuditRecord r = Req("alice", "jobs:Create", "team-a");
  r.seq = 1;
  r.prev_hash = kGenesisHash;
  r.stage_ms = kStart + 5;
  r.annotations = {{"b", "2"}, {"a", "1"}};
  r.hash = RecordHash(r);
  std::string text = EncodeRecord(r);
  EXPECT_NE(text.find("\"apiVersion\":\"audit.k8s.io/v1\""), std::string::npos);
  EXPECT_NE(text.find("\"stageTimestamp\":\"2025-12-01T14:40:00.005000Z\""), std::string::npos);
  absl::StatusOr<AuditRecord> back = DecodeRecord(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(RecordHash(*back), r.hash);
  // One record, one encoding: an extra field, a missing one or another time form is refused.
  std::string extra = text;
  extra.insert(1, "\"zzz\":1,");
  EXPECT_EQ(DecodeRecord(extra).status().message(), "audit record: unknown field zzz");
  std::string missing = text;
  missing.replace(missing.find(",\"verb\":\"create\""), 16, "");
  EXPECT_EQ(DecodeRecord(missing).status().message(),
            "audit record: [json.exception.out_of_range.403] key 'verb' not found");
  std::string micro = text;
  micro.replace(micro.find("00.005000Z"), 10, "00.005001Z");
  EXPECT_EQ(DecodeRecord(micro).status().message(),
            "audit record: field stageTimestamp is not in canonical form");
  // Any text round-trips to the same bytes: quotes, control characters, non-ASCII, and invalid
  // UTF-8 (made U+FFFD once, so that the stored text is what the hash is over).
  AuditRecord odd = r;
  odd.username = "al\"ice\\ \x01\t\n\x7f é 日本 \xff\xc3";
  odd.annotations = {{"k\x02", "v\"/"}};
  odd.groups = {};
  odd.hash = RecordHash(odd);
  absl::StatusOr<AuditRecord> odd_back = DecodeRecord(EncodeRecord(odd));
  ASSERT_TRUE(odd_back.ok()) << odd_back.status() << "\n" << EncodeRecord(odd);
  EXPECT_EQ(odd_back->username, "al\"ice\\ \x01\t\n\x7f é 日本 \uFFFD\uFFFD");
  EXPECT_EQ(RecordHash(*odd_back), odd.hash);
  EXPECT_EQ(EncodeRecord(*odd_back), EncodeRecord(odd));
  // Every field is in the hash; the hash is not.
  AuditRecord other = r;
  other.response_code = 201;
  EXPECT_NE(RecordHash(other), r.hash);
  other = r;
  other.hash = "x";
  EXPECT_EQ(RecordHash(other), r.hash);
  // HashAndEncodeRecord is RecordHash then EncodeRecord, in one encoding.
  for (AuditRecord one : {r, odd, other}) {
    AuditRecord two = one;
    two.hash = RecordHash(two);
    EXPECT_EQ(HashAndEncodeRecord(one), EncodeRecord(two));
    EXPECT_EQ(one.hash, two.hash);
  }
  // A prepared record chained later is the same text and hash as one encoded then.
  for (AuditRecord one : {r, odd, other}) {
    PreparedRecord prepared = PrepareRecord(one);
    for (int64_t seq : {int64_t{1}, int64_t{1234567890123}}) {
      AuditRecord two = one;
      two.seq = seq;
      two.prev_hash = RecordHash(r);
      two.hash = RecordHash(two);
      EXPECT_EQ(ChainRecord(prepared, seq, two.prev_hash, one), EncodeRecord(two));
      EXPECT_EQ(one, two);
      EXPECT_TRUE(DecodeRecord(EncodeRecord(two)).ok());
    }
  }
}

TEST(AuditChainTest, KeysSignAndVerifyFromPem) {
  AuditKey signer = AuditKey::Generate();
  absl::StatusOr<AuditKey> pub = AuditKey::FromPem(signer.PublicPem());
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_FALSE(pub->has_private_key());
  EXPECT_EQ(pub->key_id(), signer.key_id());
  absl::StatusOr<AuditDigest> d = SignDigest(7, std::string(64, 'a'), kStart, signer);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(DigestSignatureValid(*d, *pub));
  absl::StatusOr<AuditDigest> back = DecodeDigest(EncodeDigest(*d));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *d);
  AuditDigest moved = *d;
  moved.seq = 8;
  EXPECT_FALSE(DigestSignatureValid(moved, *pub));
  EXPECT_FALSE(DigestSignatureValid(*d, AuditKey::Generate()));
  EXPECT_TRUE(absl::IsFailedPrecondition(SignDigest(1, "h", 0, *pub).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(AuditKey::FromPem("not a key").status()));
  EXPECT_TRUE(absl::IsNotFound(AuditKey::FromPemFile("/nonexistent/key.pem").status()));
}

// ---- the chain in the store ----

TEST_F(AuditTest, ChainOfMutationsAndReadsVerifies) {
  Fill(12);
  EXPECT_EQ(log_->head_seq(), 12);
  VerifyReport unsigned_log = VerifyStore();
  EXPECT_TRUE(unsigned_log.ok) << unsigned_log.what;
  EXPECT_EQ(unsigned_log.unsigned_records, 12);
  absl::StatusOr<std::optional<AuditDigest>> d = log_->SignDigest();
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->seq, 12);
  // Nothing new: nothing to sign.
  d = log_->SignDigest();
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->has_value());
  Fill(2, "b");
  VerifyReport r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.records, 14);
  EXPECT_EQ(r.signed_through, 12);
  EXPECT_EQ(r.unsigned_records, 2);
  // The mutations are there, with their records.
  EXPECT_TRUE(store_->Get("/jobs/team-a/j0").ok());
  EXPECT_TRUE(store_->Get("/jobs/team-a/j9").ok());
}

class TamperTest : public AuditTest {
 protected:
  void SetUp() override {
    AuditTest::SetUp();
    Fill(10);
    ASSERT_TRUE(log_->SignDigest().ok());
    Fill(2, "b");  // 11 and 12: not yet signed
    ASSERT_TRUE(VerifyStore().ok);
  }
  void ExpectBad(const VerifyReport& r, int64_t seq, const std::string& what) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.first_bad_seq, seq) << r.what;
    EXPECT_NE(r.what.find(what), std::string::npos) << r.what;
  }
};

TEST_F(TamperTest, OneChangedByteIsFound) {
  std::string text = Records()[4];
  size_t at = text.find("\"username\":\"bob\"");
  ASSERT_NE(at, std::string::npos);
  text[at + 12] = 'c';  // bob -> cob
  Put(RecordKey(5), text);
  ExpectBad(VerifyStore(), 5, "record 5 was modified");
}

TEST_F(TamperTest, ARecordChangedAndRehashedIsFoundByTheNextLink) {
  std::string original = Records()[4];
  absl::StatusOr<AuditRecord> r = DecodeRecord(original);
  ASSERT_TRUE(r.ok());
  r->response_code = 500;
  r->hash = RecordHash(*r);
  Put(RecordKey(5), EncodeRecord(*r));
  ExpectBad(VerifyStore(), 6, "record 6 does not follow record 5");
  // The same done to a signed record: its digest names it.
  absl::StatusOr<AuditRecord> ten = DecodeRecord(Records()[9]);
  ASSERT_TRUE(ten.ok());
  ten->verb = "get";
  ten->hash = RecordHash(*ten);
  Put(RecordKey(10), EncodeRecord(*ten));
  ExpectBad(VerifyChain(Records(), Digests(), key_), 6, "record 6 does not follow record 5");
  Put(RecordKey(5), original);
  ExpectBad(VerifyStore(), 10, "the signed digest for seq 10");
}

TEST_F(TamperTest, ADeletedRecordIsFound) {
  std::string five = Records()[4];
  Delete(RecordKey(5));
  ExpectBad(VerifyStore(), 5, "records 5 to 5 are missing");
  // Also the first one.
  Put(RecordKey(5), five);
  ASSERT_TRUE(VerifyStore().ok);
  Delete(RecordKey(1));
  ExpectBad(VerifyStore(), 1, "no signed digest anchors seq 1: records from seq 1 were removed");
}

TEST_F(TamperTest, AnInsertedRecordIsFound) {
  std::vector<std::string> lines = Records();
  absl::StatusOr<AuditRecord> five = DecodeRecord(lines[4]);
  ASSERT_TRUE(five.ok());
  AuditRecord forged = Req("mallory", "jobs:Delete", "team-a");
  forged.seq = 6;
  forged.prev_hash = five->hash;
  forged.stage_ms = kStart;
  forged.hash = RecordHash(forged);
  lines.insert(lines.begin() + 5, EncodeRecord(forged));
  ExpectBad(VerifyChain(lines, Digests(), key_), 6, "record 6 comes after record 6");
  // Inserted with the next seq after a signed record: the digest tells the real one.
  lines = Records();
  absl::StatusOr<AuditRecord> nine = DecodeRecord(lines[8]);
  forged.seq = 10;
  forged.prev_hash = nine->hash;
  forged.hash = RecordHash(forged);
  lines.insert(lines.begin() + 9, EncodeRecord(forged));
  ExpectBad(VerifyChain(lines, Digests(), key_), 10, "the signed digest for seq 10");
}

TEST_F(TamperTest, ATruncatedLogIsFound) {
  // An export cut short of the digest.
  std::vector<std::string> lines = Records();
  lines.resize(9);
  ExpectBad(VerifyChain(lines, Digests(), key_), 10, "the log is truncated");
  // The store's tail deleted.
  for (int seq = 8; seq <= 12; ++seq) Delete(RecordKey(seq));
  ExpectBad(VerifyStore(), 8, "the log is truncated: a signed digest covers seq 10");
  // A file cut in the middle of a line.
  lines = Records();
  lines.back().resize(lines.back().size() / 2);
  ExpectBad(VerifyChain(lines, Digests(), key_), 7, "does not decode");
}

TEST_F(TamperTest, RecordsAfterTheLastDigestCanGoUnnoticed) {
  // The documented limit: 11 and 12 are not signed yet, so cutting them is not detectable.
  std::vector<std::string> lines = Records();
  lines.resize(10);
  VerifyReport r = VerifyChain(lines, Digests(), key_);
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.unsigned_records, 0);
}

TEST_F(TamperTest, AForgedDigestIsFound) {
  absl::StatusOr<AuditDigest> d = DecodeDigest(Digests()[0]);
  ASSERT_TRUE(d.ok());
  // A digest moved to cover less (to hide a truncation) no longer verifies.
  AuditDigest moved = *d;
  moved.seq = 8;
  std::vector<std::string> digests = {EncodeDigest(moved)};
  ExpectBad(VerifyChain(Records(), digests, key_), 8, "not signed by this server's key");
  // One signed by another key.
  absl::StatusOr<AuditDigest> other =
      SignDigest(d->seq, d->head_hash, kStart, AuditKey::Generate());
  digests = {EncodeDigest(*other)};
  ExpectBad(VerifyChain(Records(), digests, key_), 10, "not signed by this server's key");
  // And one whose signature is garbage, stored in place of the real one.
  AuditDigest garbage = *d;
  garbage.signature = "AAAA";
  Put(fmt::format("/audit/digests/{:020d}", d->seq), EncodeDigest(garbage));
  ExpectBad(VerifyStore(), 10, "not signed by this server's key");
}

TEST_F(TamperTest, OpenRefusesALogWithAHoleOrCutShortOfItsDigest) {
  std::string five = Records()[4];
  Delete(RecordKey(5));
  log_ = std::make_unique<AuditLog>(*store_, clock_, key_);
  absl::Status s = log_->Open();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  Put(RecordKey(5), five);
  ASSERT_TRUE(log_->Open().ok());
  for (int seq = 10; seq <= 12; ++seq) Delete(RecordKey(seq));
  s = log_->Open();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_EQ(s.message(), "audit log: truncated: a digest covers seq 10, the last record is 9");
}

// ---- writes ----

TEST_F(AuditTest, AFailedMutationWritesNeitherItNorItsRecord) {
  ASSERT_TRUE(
      log_->CommitWith(Req("alice", "jobs:Create", "team-a"), {Create("/jobs/team-a/x", "first")})
          .ok());
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-a")).ok());
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:List", "team-a")).ok());
  int64_t rev = store_->Revision();
  absl::StatusOr<int64_t> again =
      log_->CommitWith(Req("alice", "jobs:Create", "team-a"),
                       {Create("/jobs/team-a/y", "new"), Create("/jobs/team-a/x", "second")});
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  // Not the mutation: x kept, y not made. Not its record: the store's revision did not move
  // (SQLite makes records transaction tails: the two buffered reads wait for the next commit).
  EXPECT_EQ(store_->Get("/jobs/team-a/x")->value, "first");
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/jobs/team-a/y").status()));
  EXPECT_EQ(log_->head_seq(), 1);
  EXPECT_EQ(store_->Revision(), rev);
  absl::StatusOr<std::vector<AuditRecord>> all = log_->Query({});  // flushes the two
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].action, "jobs:List");
  // The chain goes on from there.
  ASSERT_TRUE(
      log_->CommitWith(Req("alice", "jobs:Create", "team-a"), {Create("/jobs/team-a/y")}).ok());
  EXPECT_EQ(log_->head_seq(), 4);
  EXPECT_TRUE(VerifyStore().ok);
  // The log's own keys are not the caller's to write.
  EXPECT_TRUE(absl::IsInvalidArgument(
      log_->CommitWith(Req("a", "b", "c"), {Create("/audit/head")}).status()));
}

TEST_F(AuditTest, RecordsGroupCommitByCountAndDelay) {
  OpenAll(AuditLogOptions{.max_batch = 3, .flush_delay_ms = 100});
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-a")).ok());
  ASSERT_TRUE(log_->Tick(kStart + 99).ok());
  EXPECT_EQ(log_->head_seq(), 0);
  ASSERT_TRUE(log_->Tick(kStart + 100).ok());
  EXPECT_EQ(log_->head_seq(), 1);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-a")).ok());
  EXPECT_EQ(log_->head_seq(), 1);
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-a")).ok());  // the third: a batch
  EXPECT_EQ(log_->head_seq(), 4);
  // Ten minutes after Open a digest is signed.
  ASSERT_TRUE(log_->Tick(kStart + 10 * 60 * 1000 - 1).ok());
  EXPECT_TRUE(Digests().empty());
  ASSERT_TRUE(log_->Tick(kStart + 10 * 60 * 1000).ok());
  ASSERT_EQ(Digests().size(), 1u);
  EXPECT_EQ(DecodeDigest(Digests()[0])->seq, 4);
}

TEST_F(AuditTest, ConcurrentWritersKeepOneChain) {
  constexpr int kThreads = 4, kEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string key = fmt::format("/jobs/team-a/t{}-{}", t, i);
        if (i % 2 == 0) {
          if (!log_->CommitWith(Req("alice", "jobs:Create", "team-a"), {Create(key)}).ok()) {
            ++failures;
          }
        } else if (!log_->Record(Req("bob", "jobs:Get", "team-a")).ok()) {
          ++failures;
        }
        if (i % 10 == 5 && !log_->SignDigest().ok()) ++failures;
      }
    });
  }
  // Meanwhile verification and retention run too: every verification passes.
  std::atomic<bool> writing{true};
  int64_t retained = 0;
  std::thread verifier([&] {
    for (bool last = false; !last;) {
      last = !writing;  // one round after the writers are done
      absl::StatusOr<VerifyReport> v = log_->Verify();
      if (!v.ok() || !v->ok) ++failures;
      if (!v.ok() || !v->ok) ADD_FAILURE() << (v.ok() ? v->what : v.status().ToString());
      absl::StatusOr<int64_t> n = log_->Retain({.max_records = 60});
      if (!n.ok()) ++failures;
      retained += n.value_or(0);
    }
  });
  for (std::thread& th : threads) th.join();
  writing = false;
  verifier.join();
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(log_->Close().ok());
  VerifyReport r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.records + retained, kThreads * kEach);
  EXPECT_EQ(r.unsigned_records, 0);
  EXPECT_LE(r.records, 60);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(store_->Get(fmt::format("/jobs/team-a/t{}-{}", t, kEach - 2)).ok());
  }
}

// On SQLite a record is its transaction's tail: concurrent mutations (some refused), buffered
// reads and unaudited writers (the controller) commit in the store's own group commit, each
// mutation in a revision of its own that its record shares; the chain has no gap or fork and
// the observer sees every record once, in seq order.
TEST_F(AuditTest, OnSqliteRecordsAreTailsOfTheStoresOwnGroupCommit) {
  std::mutex seen_mu;
  std::vector<int64_t> seen;
  log_->SetObserver([&](const AuditRecord& r) {
    std::lock_guard<std::mutex> lock(seen_mu);
    seen.push_back(r.seq);
  });
  ASSERT_TRUE(store_->Txn({Create("/jobs/team-a/taken")}).ok());
  constexpr int kThreads = 8, kEach = 40;
  std::atomic<int> committed{0}, recorded{0}, failures{0};
  std::mutex revs_mu;
  std::set<int64_t> revs;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string key = fmt::format("/jobs/team-a/t{}-{}", t, i);
        if (i % 4 == 0) {
          absl::StatusOr<int64_t> r =
              log_->CommitWith(Req("alice", "jobs:Create", "team-a"), {Create(key)});
          if (!r.ok()) ++failures;
          std::lock_guard<std::mutex> lock(revs_mu);
          if (r.ok() && !revs.insert(*r).second) ++failures;  // a revision of its own
          ++committed;
        } else if (i % 4 == 1) {
          absl::StatusOr<int64_t> r =
              log_->CommitWith(Req("eve", "jobs:Create", "team-a"), {Create("/jobs/team-a/taken")});
          if (!absl::IsAlreadyExists(r.status())) ++failures;
        } else if (i % 4 == 2) {
          if (!log_->Record(Req("bob", "jobs:Get", "team-a")).ok()) ++failures;
          ++recorded;
        } else if (!store_->Txn({Create(key)}).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(log_->Close().ok());
  VerifyReport r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.records, committed + recorded);
  EXPECT_EQ(log_->head_seq(), committed + recorded);
  std::vector<int64_t> want(committed + recorded);
  std::iota(want.begin(), want.end(), 1);
  EXPECT_EQ(seen, want);
  // A mutation's record is written at the mutation's revision; the refused ones have none.
  int alices = 0;
  absl::StatusOr<store::ListResult> records = store_->List("/audit/records/");
  ASSERT_TRUE(records.ok()) << records.status();
  for (const store::KeyValue& kv : records->items) {
    absl::StatusOr<AuditRecord> a = DecodeRecord(kv.value);
    ASSERT_TRUE(a.ok());
    EXPECT_NE(a->username, "eve");
    if (a->username == "alice") {
      ++alices;
      EXPECT_EQ(revs.count(kv.mod_revision), 1u) << kv.key;
    }
  }
  EXPECT_EQ(alices, committed);
}

// A store whose next Txn waits until released, to hold a commit in flight.
class HeldStore : public store::Store {
 public:
  explicit HeldStore(store::Store& s) : s_(s) {}
  absl::StatusOr<store::KeyValue> Get(const std::string& k) override { return s_.Get(k); }
  absl::StatusOr<store::ListResult> List(const std::string& p) override { return s_.List(p); }
  absl::StatusOr<int64_t> Count(const std::string& p) override { return s_.Count(p); }
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override {
    if (hold_.exchange(false)) {
      entered_.set_value();
      released_.wait();
    }
    return s_.Txn(ops);
  }
  absl::StatusOr<std::vector<store::Event>> Changes(const std::string& p, int64_t after,
                                                    int limit) override {
    return s_.Changes(p, after, limit);
  }
  absl::Status Compact(int64_t r) override { return s_.Compact(r); }
  int64_t CompactedRevision() override { return s_.CompactedRevision(); }
  int64_t Revision() override { return s_.Revision(); }
  bool WaitForChange(int64_t after, absl::Duration t) override {
    return s_.WaitForChange(after, t);
  }
  // With `tails` (over a store that has them): the next tail held in Make, after the tail
  // took its records (its batch in flight), and `on_later` told of each transaction after it.
  bool HasTxnTails() const override { return tails; }
  absl::StatusOr<int64_t> TxnWithTail(const std::vector<Op>& ops, store::TxnTail& tail) override {
    if (!hold_.exchange(false)) {
      if (on_later) on_later();
      return s_.TxnWithTail(ops, tail);
    }
    struct Holding final : store::TxnTail {
      Holding(store::TxnTail& t, HeldStore& h) : inner(t), held(h) {}
      absl::StatusOr<std::vector<Op>> Make(int64_t rev) override {
        absl::StatusOr<std::vector<Op>> ops = inner.Make(rev);
        held.entered_.set_value();
        held.released_.wait();
        return ops;
      }
      void Settled(const absl::Status& s) override { inner.Settled(s); }
      store::TxnTail& inner;
      HeldStore& held;
    } holding(tail, *this);
    return s_.TxnWithTail(ops, holding);
  }

  store::Store& s_;
  bool tails = false;
  std::function<void()> on_later;
  std::atomic<bool> hold_{false};
  std::promise<void> entered_;
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

// A flush must not answer before the records a tail in flight took are durable: it waits for
// that batch (it reaches the store) rather than finding the buffer empty and returning.
TEST_F(AuditTest, AFlushWaitsForTheRecordsATailInFlightTook) {
  HeldStore held(*store_);
  held.tails = true;
  std::mutex mu;
  std::condition_variable cv;
  bool reached_store = false, flushed = false;
  held.on_later = [&] {
    std::lock_guard<std::mutex> lock(mu);
    reached_store = true;
    cv.notify_all();
  };
  AuditLog log(held, clock_, key_);
  ASSERT_TRUE(log.Open().ok());
  ASSERT_TRUE(log.Record(Req("bob", "jobs:Get", "a")).ok());
  held.hold_ = true;
  absl::StatusOr<int64_t> commit;
  std::thread a(
      [&] { commit = log.CommitWith(Req("alice", "jobs:Create", "a"), {Create("/j/1")}); });
  held.entered_.get_future().wait();  // a's tail took bob's record; its batch is in flight
  absl::Status flush;
  bool durable_at_flush = false;
  std::thread b([&] {
    flush = log.Flush();
    durable_at_flush = store_->Get(RecordKey(1)).ok();
    std::lock_guard<std::mutex> lock(mu);
    flushed = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return reached_store || flushed; });
    EXPECT_TRUE(reached_store && !flushed) << "the flush answered while bob's record was in flight";
  }
  held.release_.set_value();
  a.join();
  b.join();
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_TRUE(flush.ok()) << flush;
  EXPECT_TRUE(durable_at_flush);
  EXPECT_EQ(log.head_seq(), 2);
  EXPECT_TRUE(log.Verify()->ok);
}

TEST_F(AuditTest, MutationsWaitingTogetherShareATransactionButNotAFailure) {
  ASSERT_TRUE(store_->Txn({Create("/jobs/a/taken")}).ok());
  HeldStore held(*store_);
  AuditLog log(held, clock_, key_);
  ASSERT_TRUE(log.Open().ok());
  held.hold_ = true;
  absl::StatusOr<int64_t> first, b, c, d;
  std::thread leader(
      [&] { first = log.CommitWith(Req("a", "jobs:Create", "a"), {Create("/jobs/a/1")}); });
  held.entered_.get_future().wait();  // the first commit is in flight
  std::thread tb([&] { b = log.CommitWith(Req("b", "jobs:Create", "a"), {Create("/jobs/a/b")}); });
  std::thread tc(
      [&] { c = log.CommitWith(Req("c", "jobs:Create", "a"), {Create("/jobs/a/taken")}); });
  std::thread td([&] { d = log.CommitWith(Req("d", "jobs:Create", "a"), {Create("/jobs/a/d")}); });
  while (log.QueuedForTest() < 3) std::this_thread::yield();
  ASSERT_TRUE(log.Record(Req("r", "jobs:Get", "a")).ok());
  held.release_.set_value();
  for (std::thread* t : {&leader, &tb, &tc, &td}) t->join();
  ASSERT_TRUE(first.ok() && b.ok() && d.ok()) << b.status() << d.status();
  EXPECT_TRUE(absl::IsAlreadyExists(c.status())) << c.status();
  // b and d were redone alone after the batch with c failed; c's record is nowhere.
  EXPECT_NE(*b, *d);
  EXPECT_TRUE(store_->Get("/jobs/a/b").ok());
  EXPECT_TRUE(store_->Get("/jobs/a/d").ok());
  absl::StatusOr<std::vector<AuditRecord>> all = log.Query({});
  ASSERT_TRUE(all.ok());
  std::vector<std::string> users;
  for (const AuditRecord& r : *all) users.push_back(r.username);
  EXPECT_EQ(users.size(), 4u);
  EXPECT_EQ(users[0], "a");
  EXPECT_EQ(std::count(users.begin(), users.end(), "c"), 0);
  EXPECT_EQ(std::count(users.begin(), users.end(), "r"), 1);
  EXPECT_TRUE(log.Verify()->ok);
  // Without a failure, those waiting together are one transaction: one revision.
  held.hold_ = true;
  held.entered_ = std::promise<void>();
  held.release_ = std::promise<void>();
  held.released_ = held.release_.get_future().share();
  std::thread l2(
      [&] { first = log.CommitWith(Req("a", "jobs:Create", "a"), {Create("/jobs/a/2")}); });
  held.entered_.get_future().wait();
  std::thread t2([&] { b = log.CommitWith(Req("b", "jobs:Create", "a"), {Create("/jobs/a/b2")}); });
  std::thread t3([&] { d = log.CommitWith(Req("d", "jobs:Create", "a"), {Create("/jobs/a/d2")}); });
  while (log.QueuedForTest() < 2) std::this_thread::yield();
  held.release_.set_value();
  for (std::thread* t : {&l2, &t2, &t3}) t->join();
  ASSERT_TRUE(first.ok() && b.ok() && d.ok());
  EXPECT_EQ(*b, *d);
  EXPECT_EQ(store_->Get("/jobs/a/b2")->mod_revision, *b);
  EXPECT_TRUE(log.Verify()->ok);
}

TEST_F(AuditTest, AReopenedLogContinuesTheChain) {
  Fill(5);
  ASSERT_TRUE(log_->Close().ok());
  OpenAll();
  EXPECT_EQ(log_->head_seq(), 5);
  Fill(4, "b");
  EXPECT_EQ(log_->head_seq(), 9);
  VerifyReport r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.records, 9);
  EXPECT_EQ(r.signed_through, 5);
}

TEST_F(AuditTest, ASecondWriterCannotForkTheChain) {
  AuditLog other(*store_, clock_, key_);
  ASSERT_TRUE(other.Open().ok());
  ASSERT_TRUE(log_->CommitWith(Req("alice", "jobs:Create", "a"), {Create("/jobs/a/1")}).ok());
  absl::Status s = other.CommitWith(Req("eve", "jobs:Create", "a"), {Create("/jobs/a/2")}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/jobs/a/2").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(other.SignDigest().status()));
  EXPECT_TRUE(VerifyStore().ok);
}

// Several servers on one etcd share one chain (AuditLogOptions::shared_chain), on stores
// without tails (HeldStore with tails off stands for etcd here): each writer that finds its next
// seq taken chains after the new head, so every acknowledged mutation has its record in one
// verified chain, and a refused one has none.
TEST_F(AuditTest, SharedChainWritersInterleaveIntoOneChain) {
  HeldStore on_a(*store_), on_b(*store_);
  AuditLog a(on_a, clock_, key_, {.shared_chain = true});
  AuditLog b(on_b, clock_, key_, {.shared_chain = true});
  ASSERT_TRUE(a.Open().ok());
  ASSERT_TRUE(b.Open().ok());
  ASSERT_TRUE(store_->Txn({Create("/jobs/x/taken")}).ok());
  std::atomic<int> committed{0}, refused{0};
  auto write = [&](AuditLog& log, const std::string& who) {
    for (int i = 0; i < 40; ++i) {
      if (i % 10 == 9) {
        absl::Status s =
            log.CommitWith(Req(who, "jobs:Create", "x"), {Create("/jobs/x/taken")}).status();
        EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
        ++refused;
      } else if (i % 2 == 0) {
        absl::StatusOr<int64_t> rev =
            log.CommitWith(Req(who, "jobs:Create", "x"), {Create(Cat("/jobs/x/", who, i))});
        EXPECT_TRUE(rev.ok()) << rev.status();
        if (rev.ok()) ++committed;
      } else {
        EXPECT_TRUE(log.Record(Req(who, "jobs:Get", "x")).ok());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back(write, std::ref(a), Cat("a", t));
    threads.emplace_back(write, std::ref(b), Cat("b", t));
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(a.Flush().ok());
  ASSERT_TRUE(b.Flush().ok());
  // 6 writers x (20 creates + 16 reads), none of the 4 refusals each.
  EXPECT_EQ(committed.load(), 6 * 20);
  EXPECT_EQ(refused.load(), 6 * 4);
  absl::StatusOr<VerifyReport> r = a.Verify();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok) << r->what;
  EXPECT_EQ(r->records, 6 * (20 + 16));
  absl::StatusOr<std::vector<AuditRecord>> all = b.Query({.action = "jobs:Create"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 6u * 20);
  // Both sign (the same seq or not): each digest verifies.
  ASSERT_TRUE(a.SignDigest().ok());
  ASSERT_TRUE(b.SignDigest().ok());
  EXPECT_TRUE(a.Verify()->ok);
}

// A server opening the shared chain while another appends to it follows the records appended
// between its count and its reads instead of taking them for a gap (found by
// tests/e2e/ha_chaos.py: a server restarted beside two busy ones refused to start, "not a
// contiguous chain"). A record missing in the middle is still refused.
TEST_F(AuditTest, OpeningASharedChainWhileAnotherAppendsFollowsTheAppendedRecords) {
  AuditLog a(*store_, clock_, key_, {.shared_chain = true});
  ASSERT_TRUE(a.Open().ok());
  auto create = [&](const std::string& name) {
    ASSERT_TRUE(a.CommitWith(Req("alice", "jobs:Create", "x"), {Create("/jobs/x/" + name)}).ok());
  };
  for (const char* name : {"a0", "a1", "a2"}) create(name);
  struct AppendAfterCount : HeldStore {
    using HeldStore::HeldStore;
    absl::StatusOr<int64_t> Count(const std::string& p) override {
      absl::StatusOr<int64_t> n = HeldStore::Count(p);
      if (append) std::exchange(append, nullptr)();
      return n;
    }
    std::function<void()> append;
  } racing(*store_);
  racing.append = [&] {
    create("a3");
    create("a4");
  };
  AuditLog b(racing, clock_, key_, {.shared_chain = true});
  absl::Status opened = b.Open();
  ASSERT_TRUE(opened.ok()) << opened;
  ASSERT_TRUE(b.CommitWith(Req("bob", "jobs:Create", "x"), {Create("/jobs/x/b")}).ok());
  EXPECT_EQ(b.head_seq(), 6);
  EXPECT_TRUE(a.Verify()->ok);
  ASSERT_TRUE(store_->Txn({Op{Op::Kind::kDelete, RecordKey(3)}}).ok());
  AuditLog c(*store_, clock_, key_, {.shared_chain = true});
  EXPECT_TRUE(absl::IsDataLoss(c.Open())) << c.Open();
}

// A writer whose head retention removed meanwhile does not start a second chain: its
// transaction checks that head, fails, and it chains after the head the store has now. Without
// the shared chain, the second writer refuses instead (ASecondWriterCannotForkTheChain).
TEST_F(AuditTest, ASharedChainWriterWhoseHeadRetentionRemovedChainsAfterTheNewHead) {
  HeldStore on_a(*store_), on_b(*store_);
  AuditLog a(on_a, clock_, key_, {.shared_chain = true});
  AuditLog b(on_b, clock_, key_, {.shared_chain = true});
  AuditLog late(on_b, clock_, key_, {.shared_chain = true});
  ASSERT_TRUE(a.Open().ok());
  ASSERT_TRUE(b.Open().ok());
  ASSERT_TRUE(late.Open().ok());
  ASSERT_TRUE(b.CommitWith(Req("bob", "jobs:Create", "x"), {Create("/jobs/x/b1")}).ok());
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(a.CommitWith(Req("alice", "jobs:Create", "x"), {Create(Cat("/jobs/x/a", i))}).ok());
  }
  absl::StatusOr<int64_t> gone = a.Retain({.max_records = 3});
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_EQ(*gone, 10);  // records 1..10 (b's head, 1, among them)
  absl::StatusOr<int64_t> rev =
      b.CommitWith(Req("bob", "jobs:Create", "x"), {Create("/jobs/x/b2")});
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_EQ(b.head_seq(), 14);
  EXPECT_TRUE(absl::IsNotFound(store_->Get(RecordKey(1)).status()));
  absl::StatusOr<VerifyReport> r = a.Verify();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok) << r->what;
  EXPECT_EQ(r->first_seq, 11);
  EXPECT_EQ(r->records, 4);
  // A writer that opened the empty log and never wrote starts from the store's head too.
  ASSERT_TRUE(late.CommitWith(Req("carol", "jobs:Create", "x"), {Create("/jobs/x/c")}).ok());
  EXPECT_EQ(late.head_seq(), 15);
  EXPECT_TRUE(a.Verify()->ok);
}

TEST_F(AuditTest, ACrashLosesBufferedRecordsButNeverBreaksTheChain) {
  Fill(6);
  ASSERT_TRUE(log_->SignDigest().ok());
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-a")).ok());
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:Get", "team-a")).ok());
  ASSERT_TRUE(log_->CommitWith(Req("alice", "jobs:Delete", "team-a"),
                               {Op{Op::Kind::kDelete, "/jobs/team-a/j0"}})
                  .ok());
  ASSERT_TRUE(log_->Record(Req("carol", "jobs:Get", "team-a")).ok());  // buffered: lost
  OpenAll();  // no Flush, no Close: as after kill -9
  EXPECT_EQ(log_->head_seq(), 9);
  VerifyReport r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_TRUE(log_->Query({.user = "carol"})->empty());
  Fill(3, "b");
  EXPECT_TRUE(VerifyStore().ok);
}

TEST_F(AuditTest, KillNineAtAnyPointLeavesAVerifiableChain) {
  std::string path = tmp_ / "store.db";
  log_.reset();
  store_.reset();
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      absl::StatusOr<std::unique_ptr<store::Store>> s = store::OpenSqliteStore(path);
      if (!s.ok()) _exit(2);
      AuditLog log(**s, clock_, key_, AuditLogOptions{.max_batch = 4});
      if (!log.Open().ok()) _exit(3);
      for (int i = 0;; ++i) {
        std::string key = fmt::format("/jobs/a/r{}-{}", round, i);
        if (!log.CommitWith(Req("alice", "jobs:Create", "a"), {Create(key)}).ok()) _exit(4);
        if (write(fds[1], &i, sizeof i) != sizeof i) _exit(5);  // acknowledged
        for (int k = 0; k < 3; ++k) {
          if (!log.Record(Req("bob", "jobs:Get", "a")).ok()) _exit(6);
        }
        if (i % 7 == 3 && !log.SignDigest().ok()) _exit(7);
      }
    }
    close(fds[1]);
    int acked = -1, i = 0;
    while (acked < 20 + 13 * round && read(fds[0], &i, sizeof i) == sizeof i) acked = i;
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    while (read(fds[0], &i, sizeof i) == sizeof i) acked = i;
    close(fds[0]);
    ASSERT_GE(acked, 20);
    OpenAll();
    VerifyReport r = VerifyStore();
    EXPECT_TRUE(r.ok) << "round " << round << ": " << r.what;
    for (int k = 0; k <= acked; ++k) {
      ASSERT_TRUE(store_->Get(fmt::format("/jobs/a/r{}-{}", round, k)).ok()) << k;
    }
    log_.reset();
    store_.reset();
  }
}

// ---- reading, export, retention ----

TEST_F(AuditTest, QueryAndExportFilter) {
  ASSERT_TRUE(log_->CommitWith(Req("alice", "jobs:Create", "team-a"), {Create("/jobs/a/1")}).ok());
  clock_.Advance(60'000);
  ASSERT_TRUE(log_->Record(Req("alice", "jobs:Get", "team-a")).ok());
  clock_.Advance(60'000);
  ASSERT_TRUE(log_->Record(Req("bob", "jobs:Create", "team-b", 403)).ok());
  clock_.Advance(60'000);
  ASSERT_TRUE(log_->Record(Req("bob", "nodes:Drain", "")).ok());
  auto seqs = [&](const AuditFilter& f) {
    std::vector<int64_t> out;
    absl::StatusOr<std::vector<AuditRecord>> got = log_->Query(f);
    EXPECT_TRUE(got.ok()) << got.status();
    for (const AuditRecord& r : got.value_or(std::vector<AuditRecord>{})) out.push_back(r.seq);
    return out;
  };
  EXPECT_EQ(seqs({}), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(seqs({.user = "alice"}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(seqs({.action = "jobs:*"}), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(seqs({.action = "*:Create"}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(seqs({.namespace_ = "team-b"}), (std::vector<int64_t>{3}));
  EXPECT_EQ(seqs({.since_ms = kStart + 60'000, .until_ms = kStart + 180'000}),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(seqs({.after_seq = 1, .limit = 2}), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*log_->Query({.namespace_ = "team-b"}))[0].decision, "deny");
  // An unfiltered export verifies with the digests; lines are the stored records.
  ASSERT_TRUE(log_->SignDigest().ok());
  std::stringstream out;
  ASSERT_TRUE(log_->ExportJsonLines(out, {}).ok());
  std::vector<std::string> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  EXPECT_EQ(lines, Records());
  EXPECT_TRUE(VerifyChain(lines, Digests(), *AuditKey::FromPem(key_.PublicPem())).ok);
  std::stringstream bobs;
  ASSERT_TRUE(log_->ExportJsonLines(bobs, {.user = "bob"}).ok());
  std::string bob_lines = bobs.str();
  EXPECT_EQ(std::count(bob_lines.begin(), bob_lines.end(), '\n'), 2);
}

TEST_F(AuditTest, RetentionKeepsTheLogVerifiable) {
  OpenAll(AuditLogOptions{.retain_batch = 7});
  Fill(30);
  ASSERT_TRUE(log_->SignDigest().ok());
  Fill(20, "b");
  absl::StatusOr<int64_t> deleted = log_->Retain({.max_records = 10});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 40);
  VerifyReport r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.first_seq, 41);
  EXPECT_EQ(r.records, 10);
  // Old digests went with their records; the anchor (seq 40) and the head's (50) stay.
  EXPECT_EQ(Digests().size(), 2u);
  // By age: record k was made at kStart + k s and it is now kStart + 50 s: 41 to 44 are older
  // than 5.5 s.
  absl::StatusOr<int64_t> by_age = log_->Retain({.max_age_ms = 5500});
  ASSERT_TRUE(by_age.ok());
  EXPECT_EQ(*by_age, 4);
  // All of them old: all but the newest go.
  clock_.Advance(3'600'000);
  EXPECT_EQ(*log_->Retain({.max_age_ms = 1000}), 5);
  EXPECT_EQ(log_->head_seq(), 50);
  Fill(3, "c");
  r = VerifyStore();
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.first_seq, 50);
  // Retention is no cover for removing more from the start than a digest anchors: record 50 is
  // signed, so a log starting at 51 would be anchored, but one starting at 52 is not.
  Delete(RecordKey(50));
  Delete(RecordKey(51));
  VerifyReport cut = VerifyStore();
  EXPECT_FALSE(cut.ok);
  EXPECT_EQ(cut.first_bad_seq, 51) << cut.what;
  // And retention refuses to run over a log that does not verify.
  EXPECT_TRUE(absl::IsFailedPrecondition(log_->Retain({.max_records = 1}).status()));
}

TEST_F(AuditTest, RetentionByBytes) {
  Fill(10);
  std::vector<std::string> before = Records();
  int64_t last_three = before[7].size() + before[8].size() + before[9].size();
  absl::StatusOr<int64_t> deleted = log_->Retain({.max_bytes = last_three});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 7);
  EXPECT_TRUE(VerifyStore().ok);
}

}  // namespace
}  // namespace gpucloud::server
