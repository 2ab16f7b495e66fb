#include "server/anomaly.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "core/clock.h"
#include "server/audit_log.h"
#include "server/audited_store.h"
#include "server/rest.h"
#include "store/sqlite_store.h"

namespace gpucloud::server {
namespace {

int64_t Ms(const std::string& rfc3339) {
  absl::Time t;
  std::string err;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) << err;
  return absl::ToUnixMillis(t);
}

int64_t next_seq = 0;

AuditRecord Create(const std::string& user, const std::string& ns, int64_t t, double cost,
                   const std::string& gpu = "") {
  AuditRecord r;
  r.seq = ++next_seq;
  r.username = user;
  r.action = "jobs:Create";
  r.resource = "gpucloud:job/" + ns + "/train";
  r.object_namespace = ns;
  r.decision = "allow";
  r.stage = "Committed";  // as the record committed with the job is (audited_store.h)
  r.response_code = 0;
  r.stage_ms = t;
  if (cost > 0) r.annotations[kCostAnnotation] = std::to_string(cost);
  if (!gpu.empty()) r.annotations[kGpuTypeAnnotation] = gpu;
  return r;
}

AuditRecord Denied(const std::string& user, int64_t t) {
  AuditRecord r;
  r.seq = ++next_seq;
  r.username = user;
  r.action = "jobs:Get";
  r.resource = "gpucloud:job/team-b/x";
  r.decision = "deny";
  r.response_code = 403;
  r.stage_ms = t;
  return r;
}

// Only `rule` on, at thresholds the tests name.
AnomalyRules Only(const std::string& rule) {
  AnomalyRules r;
  if (rule != kRuleOffHoursLaunch) r.off_hours_min_cost = 0;
  if (rule != kRuleDenyBurst) r.deny_burst_count = 0;
  if (rule != kRuleFirstUseGpuType) r.first_use = false;
  if (rule != kRuleCostJump) r.cost_jump_factor = 0;
  if (rule != kRuleUnauthenticatedBurst) r.unauthenticated_burst_count = 0;
  r.first_use_warmup_ms = 0;
  return r;
}

std::vector<std::string> RulesHit(AnomalyDetector& d, const std::vector<AuditRecord>& stream) {
  std::vector<std::string> out;
  for (const AuditRecord& r : stream) {
    for (const AnomalyHit& h : d.Observe(r)) out.push_back(h.rule);
  }
  return out;
}

std::unique_ptr<AnomalyDetector> Make(const AnomalyRules& rules) {
  absl::StatusOr<std::unique_ptr<AnomalyDetector>> d = AnomalyDetector::Create(rules);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(*d);
}

struct OffHoursCase {
  const char* name;
  std::string time;
  double cost;
  std::string zone;  // team-a's, "" for the default (UTC)
  bool hit;
};

TEST(AnomalyTest, OffHoursLaunchTable) {
  const std::vector<OffHoursCase> cases = {
      {"19:59 is working hours", "2026-12-01T19:59:59Z", 80, "", false},
      {"20:00 is off hours", "2026-12-01T20:00:00Z", 80, "", true},
      {"midnight", "2026-12-02T00:30:00Z", 80, "", true},
      {"06:59 still off", "2026-12-02T06:59:59Z", 80, "", true},
      {"07:00 working again", "2026-12-02T07:00:00Z", 80, "", false},
      {"cost at the threshold is not over it", "2026-12-01T22:00:00Z", 50, "", false},
      {"no cost annotation", "2026-12-01T22:00:00Z", 0, "", false},
      // 11:00 UTC is 20:00 in Tokyo (UTC+9): off hours there, working hours in UTC.
      {"time zone shift: 20:00 in UTC+09:00", "2026-12-01T11:00:00Z", 80, "UTC+09:00", true},
      {"time zone shift: 19:59 in UTC+09:00", "2026-12-01T10:59:00Z", 80, "UTC+09:00", false},
      {"time zone shift: 22:00 UTC is 07:00 there", "2026-12-01T22:00:00Z", 80, "UTC+09:00", false},
      {"IANA name", "2026-12-01T11:00:00Z", 80, "Asia/Tokyo", true},
      {"negative offset: 01:00 UTC is 20:00 in UTC-05:00", "2026-12-02T01:00:00Z", 80, "UTC-05:00",
       true},
  };
  for (const OffHoursCase& c : cases) {
    SCOPED_TRACE(c.name);
    AnomalyRules rules = Only(kRuleOffHoursLaunch);
    if (!c.zone.empty()) rules.namespace_time_zones["team-a"] = c.zone;
    auto d = Make(rules);
    std::vector<AnomalyHit> hits = d->Observe(Create("alice", "team-a", Ms(c.time), c.cost));
    ASSERT_EQ(hits.size(), c.hit ? 1u : 0u);
    if (c.hit) {
      EXPECT_EQ(hits[0].rule, kRuleOffHoursLaunch);
      EXPECT_EQ(hits[0].identity, "alice");
      EXPECT_EQ(hits[0].namespace_, "team-a");
      EXPECT_EQ(hits[0].time_ms, Ms(c.time));
      EXPECT_NE(hits[0].message.find("$80.00/h"), std::string::npos) << hits[0].message;
    }
  }
}

TEST(AnomalyTest, OffHoursCountsOnlyDoneCreatesOnce) {
  auto d = Make(Only(kRuleOffHoursLaunch));
  AuditRecord denied = Create("alice", "team-a", Ms("2026-12-01T21:00:00Z"), 80);
  denied.decision = "deny";
  denied.response_code = 403;
  AuditRecord failed = Create("alice", "team-a", Ms("2026-12-01T21:00:00Z"), 80);
  failed.stage = "ResponseComplete";
  failed.response_code = 422;
  AuditRecord second_txn = Create("alice", "team-a", Ms("2026-12-01T21:00:00Z"), 80);
  second_txn.annotations["gpucloud.io/txn"] = "2";
  EXPECT_TRUE(d->Observe(denied).empty());
  EXPECT_TRUE(d->Observe(failed).empty());
  EXPECT_TRUE(d->Observe(second_txn).empty());
  AuditRecord answered = failed;
  answered.response_code = 201;
  EXPECT_EQ(d->Observe(answered).size(), 1u);
}

TEST(AnomalyTest, BadRulesAreRefused) {
  AnomalyRules r;
  r.namespace_time_zones["team-a"] = "Mars/Olympus";
  EXPECT_EQ(AnomalyDetector::Create(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = AnomalyRules{};
  r.off_hours_start_hour = 24;
  EXPECT_EQ(AnomalyDetector::Create(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = AnomalyRules{};
  r.default_time_zone = "UTC+25:00";
  EXPECT_EQ(AnomalyDetector::Create(r).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AnomalyTest, RulesFromYaml) {
  absl::StatusOr<AnomalyRules> r = ParseAnomalyRules(R"(
offHours:
  minHourlyCost: 30.5
  startHour: 19
  namespaceTimeZones: {team-a: Asia/Tokyo, team-b: "UTC-05:00"}
denyBurst: {count: 5, windowSeconds: 30}
firstUse: {enabled: false}
costJump: {factor: 2, minHourlyCost: 10}
unauthenticatedBurst: {count: 50, windowSeconds: 10}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->off_hours_min_cost, 30.5);
  EXPECT_EQ(r->off_hours_start_hour, 19);
  EXPECT_EQ(r->off_hours_end_hour, 7);  // the default stays
  EXPECT_EQ(r->namespace_time_zones.at("team-b"), "UTC-05:00");
  EXPECT_EQ(r->deny_burst_count, 5);
  EXPECT_EQ(r->deny_burst_window_ms, 30'000);
  EXPECT_FALSE(r->first_use);
  EXPECT_EQ(r->cost_jump_factor, 2);
  EXPECT_EQ(r->cost_jump_min_cost, 10);
  EXPECT_EQ(r->unauthenticated_burst_count, 50);
  EXPECT_EQ(r->unauthenticated_burst_window_ms, 10'000);
  EXPECT_TRUE(ParseAnomalyRules("").ok());
  struct Bad {
    std::string yaml, field;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"offHours: {startHour: 25}", "offHours.startHour"},
           {"offHours: {startHour: 7.5}", "offHours.startHour: must be an integer"},
           {"offHours: {namespaceTimeZones: {team-a: Mars/Base}}", "team-a"},
           {"denyBurst: {cuont: 3}", "denyBurst.cuont: unknown field"},
           {"denyBurst: {count: three}", "denyBurst.count: must be a number"},
           {"firstUse: {enabled: 1}", "firstUse.enabled: must be true or false"},
           {"burst: {}", "burst: unknown field"},
           {"costJump: 3", "costJump: must be a mapping"},
           {"unauthenticatedBurst: {count: -1}", "unauthenticatedBurst"},
       }) {
    absl::StatusOr<AnomalyRules> parsed = ParseAnomalyRules(bad.yaml);
    ASSERT_FALSE(parsed.ok()) << bad.yaml;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(bad.field), std::string::npos) << parsed.status();
  }
  EXPECT_EQ(LoadAnomalyRulesFile("/nonexistent/rules.yaml").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(AnomalyTest, DenyBurstThresholdEdges) {
  AnomalyRules rules = Only(kRuleDenyBurst);
  rules.deny_burst_count = 3;           // more than 3 ...
  rules.deny_burst_window_ms = 10'000;  // ... within 10 s
  const int64_t t0 = Ms("2026-12-01T12:00:00Z");
  struct Case {
    const char* name;
    std::vector<int64_t> offsets_ms;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"3 denials: not more than 3", {0, 1000, 2000}, {}},
      {"4 within 10 s", {0, 1000, 2000, 9999}, {kRuleDenyBurst}},
      {"the 4th exactly 10 s after the 1st: out of the window", {0, 1000, 2000, 10'000}, {}},
      {"one burst, one hit; a second burst another",
       {0, 1, 2, 3, 4, 5, 6, 7},
       {kRuleDenyBurst, kRuleDenyBurst}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto d = Make(rules);
    std::vector<AuditRecord> stream;
    for (int64_t off : c.offsets_ms) stream.push_back(Denied("mallory", t0 + off));
    EXPECT_EQ(RulesHit(*d, stream), c.expect);
  }
}

TEST(AnomalyTest, DenyBurstIsPerIdentity) {
  AnomalyRules rules = Only(kRuleDenyBurst);
  rules.deny_burst_count = 3;
  auto d = Make(rules);
  const int64_t t0 = Ms("2026-12-01T12:00:00Z");
  std::vector<AuditRecord> stream;
  for (int i = 0; i < 3; ++i) {
    stream.push_back(Denied("alice", t0 + i));
    stream.push_back(Denied("bob", t0 + i));
  }
  EXPECT_TRUE(RulesHit(*d, stream).empty());
  std::vector<AnomalyHit> hits = d->Observe(Denied("bob", t0 + 10));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].identity, "bob");
  EXPECT_EQ(hits[0].audit_seq, next_seq);
  // Allowed requests never count.
  AuditRecord ok = Denied("alice", t0 + 11);
  ok.decision = "allow";
  EXPECT_TRUE(d->Observe(ok).empty());
}

AuditRecord Unauthenticated(const std::string& ip, int64_t t) {
  AuditRecord r;
  r.seq = ++next_seq;
  r.source_ips = {ip};
  r.verb = "list";
  r.request_uri = "/apis/gpucloud/v1/jobs";
  r.response_code = 401;  // no identity, no authorization decision
  r.stage_ms = t;
  return r;
}

// Token guessing: 401s counted per source IP, not per (absent) identity.
TEST(AnomalyTest, UnauthenticatedBurstIsPerSourceIp) {
  AnomalyRules rules = Only(kRuleUnauthenticatedBurst);
  rules.unauthenticated_burst_count = 3;
  rules.unauthenticated_burst_window_ms = 10'000;
  auto d = Make(rules);
  const int64_t t0 = Ms("2026-12-01T12:00:00Z");
  std::vector<AuditRecord> stream;
  for (int i = 0; i < 3; ++i) {
    stream.push_back(Unauthenticated("10.0.0.7", t0 + i));
    stream.push_back(Unauthenticated("10.0.0.8", t0 + i));
  }
  stream.push_back(Unauthenticated("10.0.0.7", t0 + 10'000));  // the 1st left the window
  EXPECT_TRUE(RulesHit(*d, stream).empty());
  std::vector<AnomalyHit> hits = d->Observe(Unauthenticated("10.0.0.8", t0 + 9'999));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].rule, kRuleUnauthenticatedBurst);
  EXPECT_EQ(hits[0].identity, "ip:10.0.0.8");
  EXPECT_NE(hits[0].message.find("10.0.0.8 was refused 4 requests"), std::string::npos)
      << hits[0].message;
  // One burst, one hit; 403s (an identity was known) are deny-burst's, not this rule's.
  EXPECT_TRUE(d->Observe(Unauthenticated("10.0.0.8", t0 + 10'001)).empty());
  AuditRecord denied = Denied("mallory", t0 + 10'002);
  denied.source_ips = {"10.0.0.9"};
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(d->Observe(denied).empty());
  EXPECT_EQ(d->Counts().at(kRuleUnauthenticatedBurst), 1);
}

TEST(AnomalyTest, FirstUseOfGpuTypeAndNamespace) {
  auto d = Make(Only(kRuleFirstUseGpuType));
  const int64_t t = Ms("2026-12-01T12:00:00Z");
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-a", t, 10, "A100-80GB")}),
            (std::vector<std::string>{kRuleFirstUseGpuType, kRuleFirstUseNamespace}));
  EXPECT_TRUE(RulesHit(*d, {Create("alice", "team-a", t + 1, 10, "A100-80GB")}).empty());
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-a", t + 2, 10, "H100-80GB")}),
            (std::vector<std::string>{kRuleFirstUseGpuType}));
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-b", t + 3, 10, "H100-80GB")}),
            (std::vector<std::string>{kRuleFirstUseNamespace}));
  // Another identity has its own memory; a create naming no GPU type uses only a namespace.
  EXPECT_EQ(RulesHit(*d, {Create("bob", "team-a", t + 4, 10)}),
            (std::vector<std::string>{kRuleFirstUseNamespace}));
}

TEST(AnomalyTest, FirstUseMemoryIsBounded) {
  AnomalyRules rules = Only(kRuleFirstUseGpuType);
  rules.first_use_max_entries = 2;
  rules.first_use_max_identities = 2;
  auto d = Make(rules);
  const int64_t t = Ms("2026-12-01T12:00:00Z");
  // alice: ns:team-a and gpu:A100 fill her 2 entries; H100 forgets the least recently used
  // (A100, used at t; team-a is used again at t+1).
  RulesHit(*d, {Create("alice", "team-a", t, 0, "A100")});
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-a", t + 1, 0, "H100")}),
            (std::vector<std::string>{kRuleFirstUseGpuType}));
  EXPECT_TRUE(RulesHit(*d, {Create("alice", "team-a", t + 2, 0, "H100")}).empty());
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-a", t + 3, 0, "A100")}),
            (std::vector<std::string>{kRuleFirstUseGpuType}));
  // Identities: bob, then carol, forgets alice (the least recently active): her next use of
  // team-a is a first use again; carol's is not.
  RulesHit(*d, {Create("bob", "team-a", t + 4, 0)});
  RulesHit(*d, {Create("carol", "team-a", t + 5, 0)});
  EXPECT_TRUE(RulesHit(*d, {Create("carol", "team-a", t + 6, 0)}).empty());
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-a", t + 7, 0)}),
            (std::vector<std::string>{kRuleFirstUseNamespace}));
}

TEST(AnomalyTest, FirstUseWarmupOnlyLearns) {
  AnomalyRules rules = Only(kRuleFirstUseGpuType);
  rules.first_use_warmup_ms = 60'000;
  auto d = Make(rules);
  const int64_t t = Ms("2026-12-01T12:00:00Z");
  EXPECT_TRUE(RulesHit(*d, {Create("alice", "team-a", t, 0, "A100")}).empty());
  EXPECT_TRUE(RulesHit(*d, {Create("bob", "team-b", t + 59'999, 0, "A100")}).empty());
  EXPECT_TRUE(RulesHit(*d, {Create("bob", "team-b", t + 60'000, 0, "A100")}).empty());
  EXPECT_EQ(RulesHit(*d, {Create("alice", "team-b", t + 60'000, 0, "A100")}),
            (std::vector<std::string>{kRuleFirstUseNamespace}));
}

TEST(AnomalyTest, CostJumpTable) {
  AnomalyRules rules = Only(kRuleCostJump);
  rules.cost_jump_factor = 3;
  rules.cost_jump_min_cost = 100;
  const int64_t h = 3600 * 1000;
  const int64_t t0 = Ms("2026-12-01T08:00:00Z");
  struct Create_ {
    int64_t at;
    double cost;
  };
  struct Case {
    const char* name;
    std::vector<Create_> creates;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"under the floor: no hit however steep", {{0, 1}, {h, 90}}, {}},
      {"at the floor: not over it", {{0, 10}, {h + 1, 100}}, {}},
      {"over the floor from nothing", {{0, 150}}, {kRuleCostJump}},
      {"3x exactly is no jump", {{0, 50}, {h, 150}}, {}},
      {"over 3x and the floor", {{0, 50}, {h, 151}}, {kRuleCostJump}},
      {"summed over the hour", {{0, 40}, {h, 60}, {h + 10, 70}}, {kRuleCostJump}},
      {"one hit an hour",
       {{0, 150}, {10, 500}, {h, 1}, {h + 10, 5000}},
       {kRuleCostJump, kRuleCostJump}},
      {"steady spending: no jump", {{0, 200}, {h + 1, 200}, {2 * h + 2, 200}}, {kRuleCostJump}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto d = Make(rules);
    std::vector<AuditRecord> stream;
    for (const Create_& cr : c.creates)
      stream.push_back(Create("alice", "team-a", t0 + cr.at, cr.cost));
    EXPECT_EQ(RulesHit(*d, stream), c.expect);
  }
}

TEST(AnomalyTest, CountsAndMetrics) {
  AnomalyRules rules = Only(kRuleOffHoursLaunch);
  auto d = Make(rules);
  d->Observe(Create("alice", "team-a", Ms("2026-12-01T21:00:00Z"), 80));
  d->Observe(Create("alice", "team-a", Ms("2026-12-01T22:00:00Z"), 80));
  EXPECT_EQ(d->Counts().at(kRuleOffHoursLaunch), 2);
  EXPECT_EQ(d->Counts().at(kRuleDenyBurst), 0);
  const std::string text = d->RenderMetrics();
  EXPECT_EQ(text,
            "# HELP gpucloud_audit_anomalies_total Hits of the audit log's anomaly rules, by "
            "rule.\n"
            "# TYPE gpucloud_audit_anomalies_total counter\n"
            "gpucloud_audit_anomalies_total{rule=\"cost-jump\"} 0\n"
            "gpucloud_audit_anomalies_total{rule=\"deny-burst\"} 0\n"
            "gpucloud_audit_anomalies_total{rule=\"first-use-gpu-type\"} 0\n"
            "gpucloud_audit_anomalies_total{rule=\"first-use-namespace\"} 0\n"
            "gpucloud_audit_anomalies_total{rule=\"off-hours-launch\"} 2\n"
            "gpucloud_audit_anomalies_total{rule=\"unauthenticated-burst\"} 0\n");
}

TEST(AnomalyTest, RecorderWritesEventsAndKeepsABoundedNumber) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "anomaly_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore(dir / "store.db");
  ASSERT_TRUE(opened.ok()) << opened.status();
  store::Store& store = **opened;
  AnomalyRules rules = Only(kRuleOffHoursLaunch);
  AnomalyRecorder recorder(store, Make(rules), /*max_events=*/2);
  ASSERT_TRUE(recorder.Load().ok());
  const int64_t t = Ms("2026-12-01T21:00:00Z");
  recorder.Observe(Create("alice", "team-a", t - 12 * 3600 * 1000, 80));  // 09:00: no hit
  EXPECT_TRUE(store.List(kAnomalyPrefix)->items.empty());
  for (int i = 0; i < 3; ++i) recorder.Observe(Create("alice", "team-a", t + i, 80));
  absl::StatusOr<store::ListResult> list = store.List(kAnomalyPrefix);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 2u);  // the oldest of 3 went
  nlohmann::json e = nlohmann::json::parse(list->items[1].value);
  EXPECT_EQ(e["kind"], "Event");
  EXPECT_EQ(e["reason"], "Anomaly");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["rule"], kRuleOffHoursLaunch);
  EXPECT_EQ(e["identity"], "alice");
  EXPECT_EQ(e["involvedObject"]["name"], "alice");
  EXPECT_EQ(e["auditSeq"], next_seq);
  EXPECT_EQ(e["timestampMs"], t + 2);
  EXPECT_EQ(e["timestamp"], "2026-12-01T21:00:00.002Z");
  EXPECT_EQ(recorder.detector().Counts().at(kRuleOffHoursLaunch), 3);
  // A new recorder over the same store learns what is there, and keeps the bound.
  AnomalyRecorder again(store, Make(rules), 2);
  ASSERT_TRUE(again.Load().ok());
  again.Observe(Create("bob", "team-a", t + 10, 80));
  list = store.List(kAnomalyPrefix);
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(list->items[1].value)["identity"], "bob");
}

std::unique_ptr<store::Store> TempStore(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore(dir / "store.db");
  EXPECT_TRUE(opened.ok()) << opened.status();
  return opened.ok() ? std::move(*opened) : nullptr;
}

// The audit log's observer: each committed record once, in seq order, with its seq and hash;
// buffered records only once flushed; a mutation that fails shows nothing.
TEST(AuditObserverTest, SeesCommittedRecordsInOrder) {
  std::unique_ptr<store::Store> store = TempStore("anomaly_observer");
  ASSERT_NE(store, nullptr);
  FakeClock clock(Ms("2026-12-01T12:00:00Z"));
  AuditLog log(*store, clock, AuditKey::Generate());
  ASSERT_TRUE(log.Open().ok());
  std::vector<AuditRecord> seen;
  log.SetObserver([&seen](const AuditRecord& r) { seen.push_back(r); });
  ASSERT_TRUE(log.Record(Denied("mallory", 0)).ok());
  EXPECT_TRUE(seen.empty());  // buffered, not committed
  ASSERT_TRUE(log.CommitWith(Create("alice", "team-a", 0, 80),
                             {{store::Op::Kind::kPut, "/jobs/team-a/train", "{}", 0}})
                  .ok());
  ASSERT_EQ(seen.size(), 2u);  // the buffered record went first, in the same transaction
  EXPECT_EQ(seen[0].seq, 1);
  EXPECT_EQ(seen[0].username, "mallory");
  EXPECT_EQ(seen[0].stage_ms, clock.NowMillis());  // a zero stage time became now
  EXPECT_EQ(seen[1].seq, 2);
  EXPECT_EQ(seen[1].prev_hash, seen[0].hash);
  EXPECT_EQ(seen[1].hash, RecordHash(seen[1]));
  // The same key again: AlreadyExists, nothing committed, nothing seen.
  EXPECT_FALSE(log.CommitWith(Create("alice", "team-a", 0, 80),
                              {{store::Op::Kind::kPut, "/jobs/team-a/train", "{}", 0}})
                   .ok());
  EXPECT_EQ(seen.size(), 2u);
  ASSERT_TRUE(log.Record(Denied("mallory", 0)).ok());
  ASSERT_TRUE(log.Flush().ok());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].seq, 3);
}

TEST(AuditObserverTest, ConcurrentCommitsAreSeenOnceInSeqOrder) {
  std::unique_ptr<store::Store> store = TempStore("anomaly_observer_concurrent");
  ASSERT_NE(store, nullptr);
  SystemClock clock;
  AuditLog log(*store, clock, AuditKey::Generate());
  ASSERT_TRUE(log.Open().ok());
  std::vector<int64_t> seqs;  // the observer is called one at a time: no lock needed
  log.SetObserver([&seqs](const AuditRecord& r) { seqs.push_back(r.seq); });
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string key = "/jobs/team-a/j" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(
            log.CommitWith(Create("alice", "team-a", 0, 1), {{store::Op::Kind::kPut, key, "{}", 0}})
                .ok());
        EXPECT_TRUE(log.Record(Denied("bob", 0)).ok());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_TRUE(log.Flush().ok());
  ASSERT_EQ(seqs.size(), static_cast<size_t>(2 * kThreads * kEach));
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], static_cast<int64_t>(i + 1));
}

// The detector over the log's observer, as the server wires it: a burst of denials is a hit.
TEST(AuditObserverTest, DetectorOverTheLog) {
  std::unique_ptr<store::Store> store = TempStore("anomaly_observer_detector");
  ASSERT_NE(store, nullptr);
  FakeClock clock(Ms("2026-12-01T12:00:00Z"));
  AuditLog log(*store, clock, AuditKey::Generate());
  ASSERT_TRUE(log.Open().ok());
  AnomalyRules rules = Only(kRuleDenyBurst);
  rules.deny_burst_count = 2;
  AnomalyRecorder recorder(*store, Make(rules));
  ASSERT_TRUE(recorder.Load().ok());
  log.SetObserver([&recorder](const AuditRecord& r) { recorder.Observe(r); });
  for (int i = 0; i < 3; ++i) {
    clock.Advance(1000);
    ASSERT_TRUE(log.Record(Denied("mallory", 0)).ok());
  }
  ASSERT_TRUE(log.Flush().ok());
  absl::StatusOr<store::ListResult> events = store->List(kAnomalyPrefix);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->items.size(), 1u);
  nlohmann::json e = nlohmann::json::parse(events->items[0].value);
  EXPECT_EQ(e["rule"], kRuleDenyBurst);
  EXPECT_EQ(e["auditSeq"], 3);
  EXPECT_EQ(recorder.detector().Counts().at(kRuleDenyBurst), 1);
}

// Through the API as the server serves it: the create's record (committed with the job) is a
// first use of its namespace, three denials a burst; GET audit/anomalies lists them for admins.
TEST(AuditObserverTest, HitsThroughTheApiAndTheAnomaliesEndpoint) {
  std::unique_ptr<store::Store> base = TempStore("anomaly_api");
  ASSERT_NE(base, nullptr);
  FakeClock clock(Ms("2026-12-01T12:00:00Z"));
  AuditLog log(*base, clock, AuditKey::Generate());
  ASSERT_TRUE(log.Open().ok());
  AnomalyRules rules = Only(kRuleDenyBurst);
  rules.deny_burst_count = 2;
  rules.first_use = true;
  AnomalyRecorder recorder(*base, Make(rules));
  ASSERT_TRUE(recorder.Load().ok());
  log.SetObserver([&recorder](const AuditRecord& r) { recorder.Observe(r); });
  AuditedStore audited(*base, log);
  RestApi api(audited, clock, 7);
  api.AttachAudit(&log);
  auto serve = [&](Request r) {
    AuditRequest audit;
    audit.record = AuditRecordFor(r, "10.0.0.7", "gpuctl/test", NewAuditId(), clock.NowMillis());
    Response resp;
    {
      AuditScope scope(&audit);
      resp = api.Handle(r);
    }
    EXPECT_TRUE(FinishAuditRequest(log, audit, resp).ok());
    return resp;
  };
  Identity alice{.user = "alice", .namespace_ = "team-a"};
  Identity admin{.user = "admin", .admin = true};
  const std::string job = R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train}
spec:
  tasks:
  - name: worker
    replicas: 1
    resources: {gpu: {count: 1}}
)";
  ASSERT_EQ(serve({"POST", "/apis/gpucloud/v1/namespaces/team-a/jobs", {}, job, alice}).status,
            201);
  for (int i = 0; i < 3; ++i) {
    clock.Advance(1000);
    EXPECT_EQ(serve({"GET", "/apis/gpucloud/v1/namespaces/team-b/jobs", {}, "", alice}).status,
              403);
  }
  ASSERT_TRUE(log.Flush().ok());
  Response all = serve({"GET", "/apis/gpucloud/v1/audit/anomalies", {}, "", admin});
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(all.content_type, "application/jsonl");
  std::vector<nlohmann::json> lines;
  std::istringstream in(all.body);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << all.body;
  EXPECT_EQ(lines[0]["rule"], kRuleFirstUseNamespace);
  EXPECT_EQ(lines[0]["identity"], "alice");
  EXPECT_EQ(lines[0]["namespace"], "team-a");
  EXPECT_EQ(lines[1]["rule"], kRuleDenyBurst);
  // The hit names its record: the audit log has it, a denial of alice's.
  absl::StatusOr<std::vector<AuditRecord>> rec =
      log.Query({.after_seq = lines[1]["auditSeq"].get<int64_t>() - 1, .limit = 1});
  ASSERT_TRUE(rec.ok());
  ASSERT_EQ(rec->size(), 1u);
  EXPECT_EQ((*rec)[0].decision, "deny");
  EXPECT_EQ((*rec)[0].username, "alice");
  Response burst =
      serve({"GET", "/apis/gpucloud/v1/audit/anomalies", {{"rule", "deny-burst"}}, "", admin});
  EXPECT_EQ(std::count(burst.body.begin(), burst.body.end(), '\n'), 1) << burst.body;
  EXPECT_EQ(serve({"GET", "/apis/gpucloud/v1/audit/anomalies", {{"bogus", "1"}}, "", admin}).status,
            400);
  EXPECT_EQ(serve({"GET", "/apis/gpucloud/v1/audit/anomalies", {}, "", alice}).status, 403);
  EXPECT_EQ(serve({"DELETE", "/apis/gpucloud/v1/audit/anomalies", {}, "", admin}).status, 405);
}

}  // namespace
}  // namespace gpucloud::server
