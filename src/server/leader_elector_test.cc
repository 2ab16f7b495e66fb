// Leader election: ElectionMachine's decisions as tables over an injected clock; FencedStore's
// stale token refused; and LeaderElector on a real etcd (skipped without /usr/bin/etcd): two
// servers campaigning, exactly one leads, and the other takes over when it stops; a paused
// leader's fenced writes refused once another is elected; a leader cut off steps down.
#include "server/leader_elector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "server/fenced_store.h"
#include "store/etcd_store.h"
#include "store/etcd_test_server.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Action = ElectionMachine::Action;
using Renewal = ElectionMachine::Renewal;

constexpr ElectionTiming kTiming{.ttl_ms = 3000, .renew_ms = 1000};

TEST(ElectionMachine, AFollowerCampaignsAtOnceThenEveryRenewInterval) {
  ElectionMachine m(kTiming);
  EXPECT_EQ(m.Decide(0), Action::kCampaign);
  m.CampaignLost(0);
  EXPECT_FALSE(m.leader());
  EXPECT_EQ(m.WakeAtMs(), 1000);
  EXPECT_EQ(m.Decide(999), Action::kWait);
  EXPECT_EQ(m.Decide(1000), Action::kCampaign);
  m.CampaignFailed(1000);  // etcd did not answer: sooner than a renew interval
  EXPECT_EQ(m.Decide(1332), Action::kWait);
  EXPECT_EQ(m.Decide(1333), Action::kCampaign);
}

// A leader renews every interval from the last good keep-alive's send time, and steps down a
// TTL after it when none succeeded since, even though etcd has not said so.
TEST(ElectionMachine, ALeaderRenewsAndStepsDownATtlAfterTheLastGoodKeepAlive) {
  struct Row {
    int64_t now;
    Action want;
  };
  ElectionMachine m(kTiming);
  m.CampaignWon(100, 42);
  EXPECT_TRUE(m.leader());
  EXPECT_EQ(m.token(), 42);
  for (Row r : {Row{100, Action::kWait}, Row{1099, Action::kWait}, Row{1100, Action::kRenew}}) {
    EXPECT_EQ(m.Decide(r.now), r.want) << r.now;
  }
  m.Renewed(1100, Renewal::kRenewed);
  EXPECT_EQ(m.Decide(2099), Action::kWait);
  EXPECT_EQ(m.Decide(2100), Action::kRenew);
  m.Renewed(2100, Renewal::kFailed);  // no answer: retry in a third of the interval
  EXPECT_EQ(m.WakeAtMs(), 2433);
  m.Renewed(2433, Renewal::kFailed);
  m.Renewed(2766, Renewal::kFailed);
  m.Renewed(3099, Renewal::kFailed);
  m.Renewed(3432, Renewal::kFailed);
  m.Renewed(3765, Renewal::kFailed);
  EXPECT_EQ(m.WakeAtMs(), 4098);
  for (Row r : {Row{4098, Action::kRenew}, Row{4099, Action::kRenew}, Row{4100, Action::kStepDown},
                Row{9000, Action::kStepDown}}) {
    EXPECT_EQ(m.Decide(r.now), r.want) << r.now;
  }
  // Failed renewals do not move the deadline; a late good one does.
  ElectionMachine late(kTiming);
  late.CampaignWon(0, 7);
  late.Renewed(1000, Renewal::kFailed);
  late.Renewed(2900, Renewal::kRenewed);
  EXPECT_EQ(late.Decide(3000), Action::kWait);
  EXPECT_EQ(late.Decide(3900), Action::kRenew);
  EXPECT_EQ(late.Decide(5900), Action::kStepDown);
}

// A renewal blocks the elector's thread for up to io_ms: a leader steps down that long before
// its lease could run out, so that no renewal still waiting on etcd outlives its term (found by
// tests/e2e/ha_chaos.py: a leader cut off from etcd stepped down after another was elected).
TEST(ElectionMachine, ALeaderStepsDownTheLongestRenewalBeforeItsLeaseCouldRunOut) {
  ElectionTiming timing = kTiming;
  timing.io_ms = 500;
  ElectionMachine m(timing);
  m.CampaignWon(100, 42);
  m.Renewed(1100, Renewal::kFailed);
  m.Renewed(1433, Renewal::kFailed);
  EXPECT_EQ(m.Decide(2599), Action::kRenew);
  EXPECT_EQ(m.Decide(2600), Action::kStepDown);  // 100 + 3000 - 500
  m.Renewed(2000, Renewal::kFailed);
  EXPECT_LE(m.WakeAtMs(), 2600);
}

TEST(ElectionMachine, ALostLeaseOrKeyStepsDownAtOnceAndCampaignsAgain) {
  ElectionMachine m(kTiming);
  m.CampaignWon(0, 42);
  m.Renewed(1000, Renewal::kLost);
  EXPECT_EQ(m.Decide(1001), Action::kStepDown);
  m.SteppedDown(1001);
  EXPECT_FALSE(m.leader());
  EXPECT_EQ(m.token(), 0);
  EXPECT_EQ(m.Decide(1001), Action::kCampaign);
  m.CampaignWon(1001, 50);
  EXPECT_EQ(m.token(), 50);
  EXPECT_EQ(m.Decide(1002), Action::kWait);
}

// A deposed leader's controllers write through a FencedStore with its old token: once another
// term's key is there, every write fails with FailedPrecondition naming the key, and nothing
// changes; the new term's token writes.
TEST(FencedStore, AStaleTokenWritesNothing) {
  testing_util::TempDir tmp("gpucloud-fenced");
  absl::StatusOr<std::unique_ptr<store::Store>> opened =
      store::OpenSqliteStore((tmp.path() / "store.db").string());
  ASSERT_TRUE(opened.ok()) << opened.status();
  store::Store& s = **opened;
  const std::string key = "/meta/leader";
  absl::StatusOr<int64_t> first = s.Txn({{store::Op::Kind::kPut, key, "a", 0}});
  ASSERT_TRUE(first.ok());
  FencedStore a(s, key, *first);
  ASSERT_TRUE(a.Txn({{store::Op::Kind::kPut, "/jobs/ns/j", "bound by a", 0}}).ok());
  // a's term ends (its lease expired: the key is deleted) and b's begins.
  ASSERT_TRUE(s.Txn({{store::Op::Kind::kDelete, key}}).ok());
  absl::StatusOr<int64_t> second = s.Txn({{store::Op::Kind::kPut, key, "b", 0}});
  ASSERT_TRUE(second.ok());
  const int64_t before = s.Revision();
  absl::StatusOr<store::KeyValue> job = s.Get("/jobs/ns/j");
  ASSERT_TRUE(job.ok());
  absl::Status st =
      a.Txn({{store::Op::Kind::kPut, "/jobs/ns/j", "rebound by a", job->mod_revision}}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_EQ(st.message(), "check on /meta/leader: it is at revision " + std::to_string(*second) +
                              ", not " + std::to_string(*first));
  EXPECT_EQ(s.Revision(), before);
  EXPECT_EQ(s.Get("/jobs/ns/j")->value, "bound by a");
  FencedStore b(s, key, *second);
  EXPECT_TRUE(b.Txn({{store::Op::Kind::kPut, "/jobs/ns/j", "bound by b", job->mod_revision}}).ok());
  EXPECT_EQ(s.Get("/jobs/ns/j")->value, "bound by b");
}

// One server's elector with its lease client and what its callbacks saw.
struct Candidate {
  Candidate(const std::string& endpoint, const std::string& name, ElectionTiming timing,
            const std::string& key = "/test/meta/leader") {
    absl::StatusOr<std::unique_ptr<store::LeaseClient>> l =
        store::OpenEtcdLeases(endpoint, absl::Milliseconds(timing.RenewMs()));
    EXPECT_TRUE(l.ok()) << l.status();
    leases = std::move(*l);
    elector = std::make_unique<LeaderElector>(
        *leases, clock, LeaderElectorOptions{key, name, timing},
        [this](int64_t token) {
          elected_token = token;
          ++elections;
        },
        [this] { ++depositions; });
  }
  SystemClock clock;
  std::unique_ptr<store::LeaseClient> leases;
  std::unique_ptr<LeaderElector> elector;
  std::atomic<int64_t> elected_token{0};
  std::atomic<int> elections{0};
  std::atomic<int> depositions{0};
};

#define SKIP_WITHOUT_ETCD()                                          \
  if (!store::EtcdTestServer::Available()) {                         \
    GTEST_SKIP() << store::EtcdTestServer::kBinary                   \
                 << " is absent (scripts/install-deps installs it)"; \
  }

// Polls `done` every 10 ms until it holds or `limit` passes (the electors run on their own
// threads with the real clock; there is no event to wait on from outside).
template <class F>
bool Within(absl::Duration limit, F done) {
  const absl::Time end = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST(LeaderElector, OneOfTwoLeadsAndTheOtherTakesOverWhenItStops) {
  SKIP_WITHOUT_ETCD();
  testing_util::TempDir tmp("gpucloud-elector");
  store::EtcdTestServer etcd((tmp.path() / "etcd").string());
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  const ElectionTiming timing{.ttl_ms = 2000};
  Candidate a(etcd.endpoint(), "a", timing), b(etcd.endpoint(), "b", timing);
  a.elector->Start();
  ASSERT_TRUE(Within(absl::Seconds(5), [&] { return a.elector->leader(); }));
  b.elector->Start();
  // b campaigns (at once, then every renew interval) and loses while a renews.
  absl::SleepFor(absl::Milliseconds(3 * timing.RenewMs()));
  EXPECT_TRUE(a.elector->leader());
  EXPECT_FALSE(b.elector->leader());
  EXPECT_EQ(b.elections.load(), 0);
  EXPECT_EQ(a.elections.load(), 1);
  EXPECT_EQ(a.elector->token(), a.elected_token.load());
  // A clean stop revokes the lease: b takes over within a campaign interval, not a TTL.
  const absl::Time stopped = absl::Now();
  a.elector->Stop();
  EXPECT_EQ(a.depositions.load(), 1);
  // Until its callback has run (leader() turns true just before it does).
  ASSERT_TRUE(Within(absl::Seconds(5), [&] { return b.elections.load() == 1; }));
  EXPECT_TRUE(b.elector->leader());
  EXPECT_LT(absl::Now() - stopped, absl::Milliseconds(timing.RenewMs() + 500));
  EXPECT_GT(b.elected_token.load(), a.elected_token.load());
  b.elector->Stop();
}

// The seam the server relies on, on a real etcd: the elector's key is the store's /meta/leader
// under its namespace, and the token it is elected with fences the store's writes. A leader that
// is paused (its elector not stepped) while its key goes and another server is elected: its
// fenced writes fail and change nothing, the new leader's land; when it runs again it sees the
// key is not its own and steps down.
TEST(LeaderElector, APausedLeadersWritesAreFencedOutOnceAnotherIsElected) {
  SKIP_WITHOUT_ETCD();
  testing_util::TempDir tmp("gpucloud-elector-fence");
  store::EtcdTestServer etcd((tmp.path() / "etcd").string());
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  absl::StatusOr<std::unique_ptr<store::Store>> opened =
      store::OpenEtcdStore({.endpoint = etcd.endpoint(),
                            .namespace_prefix = "/test/data",
                            .compaction_key = "/test/meta/compacted-revision"});
  ASSERT_TRUE(opened.ok()) << opened.status();
  store::Store& s = **opened;
  const ElectionTiming timing{.ttl_ms = 5000};
  Candidate a(etcd.endpoint(), "a", timing, "/test/data/meta/leader");
  Candidate b(etcd.endpoint(), "b", timing, "/test/data/meta/leader");
  a.elector->StepOnce();  // campaigns: wins
  ASSERT_TRUE(a.elector->leader());
  FencedStore fenced_a(s, "/meta/leader", a.elector->token());
  ASSERT_TRUE(fenced_a.Txn({{store::Op::Kind::kPut, "/jobs/ns/j", "bound by a", 0}}).ok());
  b.elector->StepOnce();  // loses
  EXPECT_FALSE(b.elector->leader());
  // a pauses (no more steps); its key goes (as when its lease expires); b is elected.
  ASSERT_TRUE(s.Txn({{store::Op::Kind::kDelete, "/meta/leader"}}).ok());
  ASSERT_TRUE(Within(absl::Seconds(5), [&] {  // at its next campaign, a renew interval on
    b.elector->StepOnce();
    return b.elector->leader();
  }));
  EXPECT_GT(b.elector->token(), a.elector->token());
  absl::StatusOr<store::KeyValue> job = s.Get("/jobs/ns/j");
  ASSERT_TRUE(job.ok()) << job.status();
  const int64_t before = s.Revision();
  absl::Status st =
      fenced_a.Txn({{store::Op::Kind::kPut, "/jobs/ns/j", "rebound by a", job->mod_revision}})
          .status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_EQ(s.Revision(), before);
  EXPECT_EQ(s.Get("/jobs/ns/j")->value, "bound by a");
  FencedStore fenced_b(s, "/meta/leader", b.elector->token());
  EXPECT_TRUE(
      fenced_b.Txn({{store::Op::Kind::kPut, "/jobs/ns/j", "bound by b", job->mod_revision}}).ok());
  // a runs again: it still believes it leads until its next renewal, which finds b's key.
  EXPECT_TRUE(a.elector->leader());
  EXPECT_TRUE(Within(absl::Seconds(5), [&] {
    a.elector->StepOnce();
    return !a.elector->leader();
  }));
  EXPECT_EQ(a.depositions.load(), 1);
  EXPECT_TRUE(b.elector->leader());
  a.elector->Stop();
  b.elector->Stop();
}

// A leader cut off from etcd (SIGSTOP: connections accepted, nothing answered) steps down within
// a TTL of its last keep-alive; the key expires, and once etcd answers again one leader is
// elected with a new token.
TEST(LeaderElector, ALeaderThatCannotRenewStepsDownWithinItsTtl) {
  SKIP_WITHOUT_ETCD();
  testing_util::TempDir tmp("gpucloud-elector-cut");
  store::EtcdTestServer etcd((tmp.path() / "etcd").string());
  ASSERT_TRUE(etcd.Start().ok()) << etcd.log();
  const ElectionTiming timing{.ttl_ms = 2000};
  Candidate a(etcd.endpoint(), "a", timing);
  a.elector->Start();
  ASSERT_TRUE(Within(absl::Seconds(5), [&] { return a.elector->leader(); }));
  const int64_t first = a.elector->token();
  etcd.Pause();
  const absl::Time paused = absl::Now();
  // Until its callback has run (leader() turns false just before it does).
  ASSERT_TRUE(Within(absl::Seconds(5), [&] { return a.depositions.load() == 1; }));
  EXPECT_FALSE(a.elector->leader());
  EXPECT_LE(absl::Now() - paused, absl::Milliseconds(timing.ttl_ms + 1200));
  etcd.Resume();
  ASSERT_TRUE(Within(absl::Seconds(10), [&] { return a.elector->leader(); }));
  EXPECT_GT(a.elector->token(), first);
  a.elector->Stop();
}

}  // namespace
}  // namespace gpucloud::server
