// Anomaly rules on the audit stream (docs/audit.md, "Anomaly rules"): AnomalyDetector reads
// committed audit records, in seq order, and reports hits. It is pure: time comes from each
// record (stageTimestamp, else requestReceivedTimestamp), never from a clock, so a stream of
// records always gives the same hits. The rules, each switched off by a zero threshold:
// A create below is an allowed jobs:Create that was done: the record committed with the job
// (stage "Committed", the request's first transaction) or one answered 2xx.
// 1. off-hours-launch: a create whose estimated hourly cost (the
//    annotation gpucloud.io/estimated-hourly-cost, dollars) is over off_hours_min_cost, at a
//    local time in [off_hours_start_hour:00, off_hours_end_hour:00) (wrapping midnight) in the
//    namespace's time zone (namespace_time_zones, else default_time_zone).
// 2. deny-burst: more than deny_burst_count records with decision "deny" from one identity
//    within deny_burst_window_ms (the window (t - W, t]); after a hit that identity's count
//    starts again, so one burst is one hit.
// 3. first-use-gpu-type / first-use-namespace: a create by an identity
//    of a GPU type (annotation gpucloud.io/gpu-type) or a namespace it was not seen to use.
//    Memory is bounded: at most first_use_max_identities identities (the least recently active
//    is forgotten) of at most first_use_max_entries entries each (the least recently used is
//    forgotten); a forgotten one's next use is a first use again. Records in the first
//    first_use_warmup_ms after the first record seen only teach (a server start knows nobody).
// 4. cost-jump: the summed estimated hourly cost of an identity's creates in the last hour
//    (t - 1h, t] over cost_jump_min_cost and more than cost_jump_factor times that of the hour
//    before, (t - 2h, t - 1h]; at most one hit per identity per hour.
// 5. unauthenticated-burst: more than unauthenticated_burst_count records answered 401 (no
//    valid token or certificate: token guessing) from one source IP within
//    unauthenticated_burst_window_ms; one burst is one hit, as for deny-burst. The hit's
//    identity is "ip:ADDRESS".
// An identity is the record's user.username ("anonymous" when empty).
// AnomalyDetector is thread-safe (one mutex); AnomalyRecorder too.
#ifndef GPUCLOUD_SERVER_ANOMALY_H_
#define GPUCLOUD_SERVER_ANOMALY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/audit_chain.h"
#include "store/store.h"

namespace gpucloud::server {

// The annotations of a job's create that the rules read (set by the API, rest.cc).
inline constexpr char kCostAnnotation[] = "gpucloud.io/estimated-hourly-cost";
inline constexpr char kGpuTypeAnnotation[] = "gpucloud.io/gpu-type";

// The rules' names, as in hits and the metric's `rule` label.
inline constexpr char kRuleOffHoursLaunch[] = "off-hours-launch";
inline constexpr char kRuleDenyBurst[] = "deny-burst";
inline constexpr char kRuleFirstUseGpuType[] = "first-use-gpu-type";
inline constexpr char kRuleFirstUseNamespace[] = "first-use-namespace";
inline constexpr char kRuleCostJump[] = "cost-jump";
inline constexpr char kRuleUnauthenticatedBurst[] = "unauthenticated-burst";

struct AnomalyRules {
  // 1. Expensive launches outside working hours (0: off).
  double off_hours_min_cost = 50.0;  // dollars per hour, strictly over
  int off_hours_start_hour = 20;     // local hour the off hours begin (inclusive)
  int off_hours_end_hour = 7;        // local hour they end (exclusive)
  // An IANA name ("Asia/Shanghai") or a fixed offset ("UTC+08:00", "UTC-05:30").
  std::string default_time_zone = "UTC";
  std::map<std::string, std::string> namespace_time_zones;  // namespace -> zone
  // 2. Denied bursts (0: off).
  int deny_burst_count = 20;  // more than this many ...
  int64_t deny_burst_window_ms = 60'000;
  int deny_burst_max_identities = 10'000;
  // 3. First uses (false: off).
  bool first_use = true;
  int first_use_max_identities = 10'000;
  int first_use_max_entries = 64;  // GPU types and namespaces together, per identity
  int64_t first_use_warmup_ms = 24 * 3600 * 1000;
  // 4. Cost-rate jumps (0: off).
  double cost_jump_factor = 3.0;
  double cost_jump_min_cost = 100.0;  // dollars per hour summed over the last hour
  int cost_jump_max_identities = 10'000;
  int cost_jump_max_creates = 4096;  // remembered per identity (the oldest go)
  // 5. 401 bursts per source IP (0: off).
  int unauthenticated_burst_count = 20;  // more than this many ...
  int64_t unauthenticated_burst_window_ms = 60'000;
  int unauthenticated_burst_max_sources = 10'000;
};

// InvalidArgument naming the field for hours outside 0..23, negative bounds or an unknown
// time zone.
absl::Status ValidateAnomalyRules(const AnomalyRules& rules);
// The rules from a YAML (or JSON) document over the defaults, in sections whose fields say what
// they set (docs/audit.md, "Anomaly rules"):
//   offHours: {minHourlyCost, startHour, endHour, defaultTimeZone, namespaceTimeZones: {NS: TZ}}
//   denyBurst: {count, windowSeconds, maxIdentities}
//   firstUse: {enabled, maxIdentities, maxEntries, warmupSeconds}
//   costJump: {factor, minHourlyCost, maxIdentities, maxCreates}
// InvalidArgument naming the field ("denyBurst.count") for an unknown field, a wrong type or a
// value ValidateAnomalyRules refuses; NotFound for a file that cannot be read.
absl::StatusOr<AnomalyRules> ParseAnomalyRules(const std::string& yaml);
absl::StatusOr<AnomalyRules> LoadAnomalyRulesFile(const std::string& path);

struct AnomalyHit {
  std::string rule;  // kRule...
  std::string identity;
  int64_t time_ms = 0;    // the record's
  int64_t audit_seq = 0;  // the record that tripped it
  std::string namespace_;
  std::string message;  // what and why, for people
  bool operator==(const AnomalyHit&) const = default;
};

class AnomalyDetector {
 public:
  // InvalidArgument from ValidateAnomalyRules.
  static absl::StatusOr<std::unique_ptr<AnomalyDetector>> Create(AnomalyRules rules);
  ~AnomalyDetector();
  // Feeds one committed record (in seq order) and returns its hits (usually none).
  std::vector<AnomalyHit> Observe(const AuditRecord& record);
  // Hits so far per rule (every rule present, 0 when none).
  std::map<std::string, int64_t> Counts() const;
  // gpucloud_audit_anomalies_total{rule="..."} in the Prometheus text format (0.0.4).
  std::string RenderMetrics() const;

 private:
  struct State;
  explicit AnomalyDetector(std::unique_ptr<State> state);
  mutable std::mutex mu_;
  std::unique_ptr<State> state_;  // guarded by mu_
};

// The store write of a hit as an Event (kind Event, involvedObject the identity's User, reason
// "Anomaly", type Warning, plus rule, identity, auditSeq) at
// /anomalies/{13-digit time ms}-{20-digit audit seq}-{rule}: one per record and rule.
store::Op AnomalyEventOp(const AnomalyHit& hit);
inline constexpr char kAnomalyPrefix[] = "/anomalies/";

// Wires a detector to a store: each hit of Observe is written as an Event (AnomalyEventOp), and
// the oldest are deleted beyond max_events. `store` must outlive it. Thread-safe.
class AnomalyRecorder {
 public:
  AnomalyRecorder(store::Store& store, std::unique_ptr<AnomalyDetector> detector,
                  size_t max_events = 10'000);
  // Learns the events already stored (call once before Observe).
  absl::Status Load();
  // Observe and write the hits (a failed write is reported to stderr: the hit stays counted).
  void Observe(const AuditRecord& record);
  const AnomalyDetector& detector() const { return *detector_; }

 private:
  store::Store& store_;
  const std::unique_ptr<AnomalyDetector> detector_;
  const size_t max_events_;
  std::mutex mu_;
  std::deque<std::string> keys_;  // guarded by mu_: the stored events, oldest first
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_ANOMALY_H_
