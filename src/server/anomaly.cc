#include "server/anomaly.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <list>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "core/log.h"
#include "core/prom_text.h"
#include "core/text.h"
#include "manifest/json_yaml.h"

namespace gpucloud::server {
namespace {

constexpr int64_t kHourMs = 3600 * 1000;

// A map of at most `cap` entries that forgets the least recently touched one.
template <typename V>
class LruMap {
 public:
  explicit LruMap(size_t cap) : cap_(std::max<size_t>(1, cap)) {}
  // The entry of `key`, made if new (forgetting the oldest beyond cap); now the most recent.
  V& Touch(const std::string& key) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, V{});
    index_[key] = order_.begin();
    if (order_.size() > cap_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

 private:
  size_t cap_;
  std::list<std::pair<std::string, V>> order_;  // most recent first
  std::unordered_map<std::string, typename std::list<std::pair<std::string, V>>::iterator> index_;
};

struct DenyState {
  std::deque<int64_t> times;
};
struct UseState {
  std::vector<std::pair<std::string, int64_t>> entries;  // "gpu:TYPE" or "ns:NAME", last use
};
struct CostState {
  std::deque<std::pair<int64_t, double>> creates;  // time, estimated hourly cost
  std::optional<int64_t> last_hit_ms;
};

// "UTC+08:00", "UTC-05:30" or an IANA name.
std::optional<absl::TimeZone> ParseTimeZone(const std::string& name) {
  if (name == "UTC") return absl::UTCTimeZone();
  int h = 0, m = 0;
  char sign = 0;
  char rest = 0;
  if (std::sscanf(name.c_str(), "UTC%c%2d:%2d%c", &sign, &h, &m, &rest) == 3 &&
      (sign == '+' || sign == '-') && h <= 14 && m < 60) {
    return absl::FixedTimeZone((sign == '-' ? -1 : 1) * (h * 3600 + m * 60));
  }
  absl::TimeZone tz;
  if (!absl::LoadTimeZone(name, &tz)) return std::nullopt;
  return tz;
}

// A job's create that was allowed and done: its record committed with the job (stage Committed,
// the request's first transaction: audited_store.h), or one answered 2xx.
bool IsAllowedCreate(const AuditRecord& r) {
  if (r.action != "jobs:Create" || r.decision != "allow") return false;
  if (r.stage == "Committed") return !r.annotations.contains("gpucloud.io/txn");
  return r.response_code >= 200 && r.response_code < 300;
}

double CostOf(const AuditRecord& r) {
  auto it = r.annotations.find(kCostAnnotation);
  double cost = 0;
  if (it == r.annotations.end() || !absl::SimpleAtod(it->second, &cost)) return 0;
  return std::isfinite(cost) && cost > 0 ? cost : 0;
}

}  // namespace

struct AnomalyDetector::State {
  explicit State(AnomalyRules r)
      : rules(std::move(r)),
        denies(rules.deny_burst_max_identities),
        unauthenticated(rules.unauthenticated_burst_max_sources),
        uses(rules.first_use_max_identities),
        costs(rules.cost_jump_max_identities) {}
  void OffHours(const AuditRecord& r, const std::string& who, int64_t t,
                std::vector<AnomalyHit>& hits);
  void DenyBurst(const AuditRecord& r, const std::string& who, int64_t t,
                 std::vector<AnomalyHit>& hits);
  // Returns the source's identity ("ip:ADDRESS") when it hit.
  std::optional<std::string> UnauthenticatedBurst(const AuditRecord& r, int64_t t,
                                                  std::vector<AnomalyHit>& hits);
  void FirstUse(const AuditRecord& r, const std::string& who, int64_t t,
                std::vector<AnomalyHit>& hits);
  void CostJump(const AuditRecord& r, const std::string& who, int64_t t,
                std::vector<AnomalyHit>& hits);

  const AnomalyRules rules;
  absl::TimeZone default_tz;
  std::map<std::string, absl::TimeZone> namespace_tz;
  LruMap<DenyState> denies;
  LruMap<DenyState> unauthenticated;  // by source IP
  LruMap<UseState> uses;
  LruMap<CostState> costs;
  std::optional<int64_t> first_ms;  // the first record's time (the first-use warm-up)
  std::map<std::string, int64_t> counts;
};

absl::Status ValidateAnomalyRules(const AnomalyRules& r) {
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(Cat("anomaly rules: ", field, ": ", why));
  };
  if (r.off_hours_start_hour < 0 || r.off_hours_start_hour > 23) {
    return bad("offHours.startHour", "must be 0..23");
  }
  if (r.off_hours_end_hour < 0 || r.off_hours_end_hour > 23) {
    return bad("offHours.endHour", "must be 0..23");
  }
  if (r.off_hours_min_cost < 0) return bad("offHours.minHourlyCost", "must not be negative");
  if (r.deny_burst_count < 0 || r.deny_burst_window_ms < 0) {
    return bad("denyBurst", "count and windowSeconds must not be negative");
  }
  if (r.unauthenticated_burst_count < 0 || r.unauthenticated_burst_window_ms < 0) {
    return bad("unauthenticatedBurst", "count and windowSeconds must not be negative");
  }
  if (r.cost_jump_factor < 0 || r.cost_jump_min_cost < 0) {
    return bad("costJump", "factor and minHourlyCost must not be negative");
  }
  if (r.first_use_max_identities < 1 || r.first_use_max_entries < 1 ||
      r.deny_burst_max_identities < 1 || r.cost_jump_max_identities < 1 ||
      r.unauthenticated_burst_max_sources < 1 || r.cost_jump_max_creates < 1) {
    return bad("maxIdentities, maxEntries, maxCreates", "must be at least 1");
  }
  if (!ParseTimeZone(r.default_time_zone)) {
    return bad("offHours.defaultTimeZone", Cat("unknown time zone \"", r.default_time_zone, "\""));
  }
  for (const auto& [ns, zone] : r.namespace_time_zones) {
    if (!ParseTimeZone(zone)) {
      return bad("offHours.namespaceTimeZones", Cat(ns, ": unknown time zone \"", zone, "\""));
    }
  }
  return absl::OkStatus();
}

namespace {

using nlohmann::json;

// One section's fields: name -> how to read its value (an error names the field).
using FieldReaders = std::map<std::string, std::function<absl::Status(const json&)>>;

absl::Status ReadSection(const json& doc, const std::string& section, const FieldReaders& fields) {
  if (!doc.contains(section)) return absl::OkStatus();
  const json& j = doc[section];
  if (!j.is_object()) return absl::InvalidArgumentError(Cat(section, ": must be a mapping"));
  for (const auto& [key, value] : j.items()) {
    auto it = fields.find(key);
    if (it == fields.end()) {
      return absl::InvalidArgumentError(Cat(section, ".", key, ": unknown field"));
    }
    if (absl::Status s = it->second(value); !s.ok()) {
      return absl::InvalidArgumentError(Cat(section, ".", key, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

template <typename T>
std::function<absl::Status(const json&)> Number(T& out, double scale = 1) {
  return [&out, scale](const json& v) {
    if (!v.is_number()) return absl::InvalidArgumentError("must be a number");
    if (std::is_integral_v<T> && scale == 1 && !v.is_number_integer()) {
      return absl::InvalidArgumentError("must be an integer");
    }
    out = static_cast<T>(v.get<double>() * scale);
    return absl::OkStatus();
  };
}

std::function<absl::Status(const json&)> Text(std::string& out) {
  return [&out](const json& v) {
    if (!v.is_string()) return absl::InvalidArgumentError("must be a string");
    out = v.get<std::string>();
    return absl::OkStatus();
  };
}

}  // namespace

absl::StatusOr<AnomalyRules> ParseAnomalyRules(const std::string& yaml) {
  absl::StatusOr<std::string> text = manifest::YamlToJson(yaml);
  if (!text.ok())
    return absl::InvalidArgumentError(Cat("anomaly rules: ", text.status().message()));
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  AnomalyRules r;
  if (doc.is_discarded()) return absl::InvalidArgumentError("anomaly rules: not YAML");
  if (doc.is_null()) return r;  // an empty document: the defaults
  if (!doc.is_object()) return absl::InvalidArgumentError("anomaly rules: must be a mapping");
  for (const auto& [key, value] : doc.items()) {
    if (key != "offHours" && key != "denyBurst" && key != "firstUse" && key != "costJump" &&
        key != "unauthenticatedBurst") {
      return absl::InvalidArgumentError(Cat("anomaly rules: ", key, ": unknown field"));
    }
  }
  auto zones = [&r](const json& v) {
    if (!v.is_object()) return absl::InvalidArgumentError("must be a mapping of namespaces");
    for (const auto& [ns, zone] : v.items()) {
      if (!zone.is_string()) return absl::InvalidArgumentError(Cat(ns, ": must be a string"));
      r.namespace_time_zones[ns] = zone.get<std::string>();
    }
    return absl::OkStatus();
  };
  auto flag = [&r](const json& v) {
    if (!v.is_boolean()) return absl::InvalidArgumentError("must be true or false");
    r.first_use = v.get<bool>();
    return absl::OkStatus();
  };
  const std::vector<std::pair<std::string, FieldReaders>> sections = {
      {"offHours",
       {{"minHourlyCost", Number(r.off_hours_min_cost)},
        {"startHour", Number(r.off_hours_start_hour)},
        {"endHour", Number(r.off_hours_end_hour)},
        {"defaultTimeZone", Text(r.default_time_zone)},
        {"namespaceTimeZones", zones}}},
      {"denyBurst",
       {{"count", Number(r.deny_burst_count)},
        {"windowSeconds", Number(r.deny_burst_window_ms, 1000)},
        {"maxIdentities", Number(r.deny_burst_max_identities)}}},
      {"unauthenticatedBurst",
       {{"count", Number(r.unauthenticated_burst_count)},
        {"windowSeconds", Number(r.unauthenticated_burst_window_ms, 1000)},
        {"maxSources", Number(r.unauthenticated_burst_max_sources)}}},
      {"firstUse",
       {{"enabled", flag},
        {"maxIdentities", Number(r.first_use_max_identities)},
        {"maxEntries", Number(r.first_use_max_entries)},
        {"warmupSeconds", Number(r.first_use_warmup_ms, 1000)}}},
      {"costJump",
       {{"factor", Number(r.cost_jump_factor)},
        {"minHourlyCost", Number(r.cost_jump_min_cost)},
        {"maxIdentities", Number(r.cost_jump_max_identities)},
        {"maxCreates", Number(r.cost_jump_max_creates)}}},
  };
  for (const auto& [section, fields] : sections) {
    if (absl::Status s = ReadSection(doc, section, fields); !s.ok()) {
      return absl::InvalidArgumentError(Cat("anomaly rules: ", s.message()));
    }
  }
  if (absl::Status s = ValidateAnomalyRules(r); !s.ok()) return s;
  return r;
}

absl::StatusOr<AnomalyRules> LoadAnomalyRulesFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(Cat("cannot read ", path));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  absl::StatusOr<AnomalyRules> rules = ParseAnomalyRules(text);
  if (!rules.ok()) return absl::InvalidArgumentError(Cat(path, ": ", rules.status().message()));
  return rules;
}

absl::StatusOr<std::unique_ptr<AnomalyDetector>> AnomalyDetector::Create(AnomalyRules rules) {
  if (absl::Status s = ValidateAnomalyRules(rules); !s.ok()) return s;
  auto state = std::make_unique<State>(std::move(rules));
  state->default_tz = *ParseTimeZone(state->rules.default_time_zone);
  for (const auto& [ns, zone] : state->rules.namespace_time_zones) {
    state->namespace_tz[ns] = *ParseTimeZone(zone);
  }
  for (const char* rule : {kRuleOffHoursLaunch, kRuleDenyBurst, kRuleFirstUseGpuType,
                           kRuleFirstUseNamespace, kRuleCostJump, kRuleUnauthenticatedBurst}) {
    state->counts[rule] = 0;
  }
  return std::unique_ptr<AnomalyDetector>(new AnomalyDetector(std::move(state)));
}

AnomalyDetector::AnomalyDetector(std::unique_ptr<State> state) : state_(std::move(state)) {}
AnomalyDetector::~AnomalyDetector() = default;

std::vector<AnomalyHit> AnomalyDetector::Observe(const AuditRecord& r) {
  const int64_t t = r.stage_ms != 0 ? r.stage_ms : r.request_received_ms;
  const std::string who = r.username.empty() ? "anonymous" : r.username;
  std::vector<AnomalyHit> hits;
  std::lock_guard<std::mutex> lock(mu_);
  State& s = *state_;
  if (!s.first_ms) s.first_ms = t;
  if (IsAllowedCreate(r)) {
    s.OffHours(r, who, t, hits);
    s.FirstUse(r, who, t, hits);
    s.CostJump(r, who, t, hits);
  } else if (r.decision == "deny") {
    s.DenyBurst(r, who, t, hits);
  }
  std::optional<std::string> source;
  if (r.response_code == 401) source = s.UnauthenticatedBurst(r, t, hits);
  for (AnomalyHit& h : hits) {
    h.identity = h.rule == kRuleUnauthenticatedBurst && source ? *source : who;
    h.time_ms = t;
    h.audit_seq = r.seq;
    h.namespace_ = r.object_namespace;
    ++s.counts[h.rule];
  }
  return hits;
}

void AnomalyDetector::State::OffHours(const AuditRecord& r, const std::string& who, int64_t t,
                                      std::vector<AnomalyHit>& hits) {
  const double cost = CostOf(r);
  if (rules.off_hours_min_cost <= 0 || cost <= rules.off_hours_min_cost) return;
  auto zone = namespace_tz.find(r.object_namespace);
  const absl::TimeZone& tz = zone == namespace_tz.end() ? default_tz : zone->second;
  const int hour = absl::ToCivilHour(absl::FromUnixMillis(t), tz).hour();
  const int start = rules.off_hours_start_hour, end = rules.off_hours_end_hour;
  const bool off = start <= end ? (hour >= start && hour < end) : (hour >= start || hour < end);
  if (!off) return;
  hits.push_back({.rule = kRuleOffHoursLaunch,
                  .message = absl::StrFormat(
                      "%s created %s at %s (%s) costing an estimated $%.2f/h (over $%.2f/h "
                      "between %02d:00 and %02d:00)",
                      who, r.resource, absl::FormatTime("%H:%M", absl::FromUnixMillis(t), tz),
                      zone == namespace_tz.end() ? rules.default_time_zone
                                                 : rules.namespace_time_zones.at(zone->first),
                      cost, rules.off_hours_min_cost, start, end)});
}

void AnomalyDetector::State::DenyBurst(const AuditRecord& r, const std::string& who, int64_t t,
                                       std::vector<AnomalyHit>& hits) {
  if (rules.deny_burst_count <= 0) return;
  std::deque<int64_t>& times = denies.Touch(who).times;
  times.push_back(t);
  while (!times.empty() && times.front() <= t - rules.deny_burst_window_ms) times.pop_front();
  if (times.size() <= static_cast<size_t>(rules.deny_burst_count)) return;
  hits.push_back({.rule = kRuleDenyBurst,
                  .message = absl::StrFormat("%s was denied %d requests within %d s (the last: %s "
                                             "%s)",
                                             who, times.size(), rules.deny_burst_window_ms / 1000,
                                             r.action, r.resource)});
  times.clear();  // one burst, one hit
}

std::optional<std::string> AnomalyDetector::State::UnauthenticatedBurst(
    const AuditRecord& r, int64_t t, std::vector<AnomalyHit>& hits) {
  if (rules.unauthenticated_burst_count <= 0) return std::nullopt;
  const std::string source = Cat("ip:", r.source_ips.empty() ? "unknown" : r.source_ips[0]);
  std::deque<int64_t>& times = unauthenticated.Touch(source).times;
  times.push_back(t);
  const int64_t window = rules.unauthenticated_burst_window_ms;
  while (!times.empty() && times.front() <= t - window) times.pop_front();
  if (times.size() <= static_cast<size_t>(rules.unauthenticated_burst_count)) return std::nullopt;
  hits.push_back({.rule = kRuleUnauthenticatedBurst,
                  .message = absl::StrFormat(
                      "%s was refused %d requests without a valid token or "
                      "certificate within %d s (the last: %s %s): a guessed or "
                      "stolen token?",
                      source.substr(3), times.size(), window / 1000, r.verb, r.request_uri)});
  times.clear();  // one burst, one hit
  return source;
}

void AnomalyDetector::State::FirstUse(const AuditRecord& r, const std::string& who, int64_t t,
                                      std::vector<AnomalyHit>& hits) {
  if (!rules.first_use) return;
  const bool learning = t - *first_ms < rules.first_use_warmup_ms;
  auto it = r.annotations.find(kGpuTypeAnnotation);
  std::vector<std::pair<std::string, std::string>> used;  // entry, rule
  if (it != r.annotations.end() && !it->second.empty()) {
    used.emplace_back("gpu:" + it->second, kRuleFirstUseGpuType);
  }
  if (!r.object_namespace.empty()) {
    used.emplace_back("ns:" + r.object_namespace, kRuleFirstUseNamespace);
  }
  if (used.empty()) return;
  auto& entries = uses.Touch(who).entries;
  auto find = [&entries](const std::string& entry) {
    return std::find_if(entries.begin(), entries.end(),
                        [&](const auto& e) { return e.first == entry; });
  };
  // What is known is used again first, so that a new entry forgets another one.
  std::erase_if(used, [&](const auto& u) {
    auto known = find(u.first);
    if (known == entries.end()) return false;
    known->second = t;
    return true;
  });
  for (const auto& [entry, rule] : used) {
    if (entries.size() >= static_cast<size_t>(rules.first_use_max_entries)) {
      entries.erase(
          std::min_element(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; }));
    }
    entries.emplace_back(entry, t);
    if (learning) continue;
    const bool gpu = rule == kRuleFirstUseGpuType;
    hits.push_back(
        {.rule = rule,
         .message = Cat(who, " used ", gpu ? "GPU type " : "namespace ", entry.substr(gpu ? 4 : 3),
                        " for the first time (", r.resource, ")")});
  }
}

void AnomalyDetector::State::CostJump(const AuditRecord& r, const std::string& who, int64_t t,
                                      std::vector<AnomalyHit>& hits) {
  const double cost = CostOf(r);
  if (rules.cost_jump_factor <= 0 || cost <= 0) return;
  CostState& c = costs.Touch(who);
  c.creates.emplace_back(t, cost);
  while (!c.creates.empty() &&
         (c.creates.front().first <= t - 2 * kHourMs ||
          c.creates.size() > static_cast<size_t>(rules.cost_jump_max_creates))) {
    c.creates.pop_front();
  }
  double last_hour = 0, hour_before = 0;
  for (const auto& [when, dollars] : c.creates)
    (when > t - kHourMs ? last_hour : hour_before) += dollars;
  if (last_hour <= rules.cost_jump_min_cost || last_hour <= rules.cost_jump_factor * hour_before ||
      (c.last_hit_ms && t - *c.last_hit_ms < kHourMs)) {
    return;
  }
  c.last_hit_ms = t;
  hits.push_back({.rule = kRuleCostJump,
                  .message = absl::StrFormat(
                      "%s's creates in the last hour add up to $%.2f/h, over %.1f times the hour "
                      "before ($%.2f/h) and over $%.2f/h (the last: %s)",
                      who, last_hour, rules.cost_jump_factor, hour_before, rules.cost_jump_min_cost,
                      r.resource)});
}

std::map<std::string, int64_t> AnomalyDetector::Counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_->counts;
}

std::string AnomalyDetector::RenderMetrics() const {
  PromText p;
  p.Family("gpucloud_audit_anomalies_total", "counter",
           "Hits of the audit log's anomaly rules, by rule.");
  for (const auto& [rule, n] : Counts()) p.Sample({{"rule", rule}}, n);
  return p.Take();
}

store::Op AnomalyEventOp(const AnomalyHit& hit) {
  std::string name = fmt::format("{:013d}-{:020d}-{}", hit.time_ms, hit.audit_seq, hit.rule);
  nlohmann::ordered_json j{
      {"apiVersion", "gpucloud/v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}}},
      {"involvedObject", {{"kind", "User"}, {"name", hit.identity}}},
      {"type", "Warning"},
      {"reason", "Anomaly"},
      {"message", hit.message},
      {"rule", hit.rule},
      {"identity", hit.identity},
      {"namespace", hit.namespace_},
      {"auditSeq", hit.audit_seq},
      {"timestamp", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(hit.time_ms),
                                     absl::UTCTimeZone())},
      {"timestampMs", hit.time_ms}};
  return {store::Op::Kind::kPut, Cat(kAnomalyPrefix, name), j.dump(), std::nullopt};
}

AnomalyRecorder::AnomalyRecorder(store::Store& store, std::unique_ptr<AnomalyDetector> detector,
                                 size_t max_events)
    : store_(store), detector_(std::move(detector)), max_events_(std::max<size_t>(1, max_events)) {}

absl::Status AnomalyRecorder::Load() {
  absl::StatusOr<store::ListResult> list = store_.List(kAnomalyPrefix);
  if (!list.ok()) return list.status();
  std::lock_guard<std::mutex> lock(mu_);
  keys_.clear();
  for (const store::KeyValue& kv : list->items) keys_.push_back(kv.key);
  return absl::OkStatus();
}

void AnomalyRecorder::Observe(const AuditRecord& record) {
  std::vector<AnomalyHit> hits = detector_->Observe(record);
  if (hits.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<store::Op> ops;
  std::vector<std::string> added;
  for (const AnomalyHit& hit : hits) {
    ops.push_back(AnomalyEventOp(hit));
    added.push_back(ops.back().key);
  }
  size_t drop = 0;
  while (keys_.size() - drop + added.size() > max_events_ && drop < keys_.size()) {
    ops.push_back({store::Op::Kind::kDelete, keys_[drop++], "", std::nullopt});
  }
  if (absl::StatusOr<int64_t> rev = store_.Txn(ops); !rev.ok()) {
    log::Error("server", "anomaly events not written", {{"error", rev.status().ToString()}});
    return;
  }
  keys_.erase(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(drop));
  keys_.insert(keys_.end(), added.begin(), added.end());
}

}  // namespace gpucloud::server
