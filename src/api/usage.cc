#include "api/usage.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gpucloud::api {
namespace {

using Json = nlohmann::json;

// Reads `key` of `j` into `out` when present; an error message naming usage.KEY otherwise "".
std::string ReadStr(const Json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) return Cat("usage.", key, ": must be a string");
  *out = it->get<std::string>();
  return "";
}

template <typename T>
std::string ReadInt(const Json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_number_integer()) return Cat("usage.", key, ": must be an integer");
  *out = static_cast<T>(it->get<int64_t>());
  return "";
}

std::string ReadNum(const Json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_number()) return Cat("usage.", key, ": must be a number");
  *out = it->get<double>();
  return "";
}

std::string ReadNumMap(const Json& j, const char* key, std::map<std::string, double>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_object()) return Cat("usage.", key, ": must be a map of numbers");
  for (const auto& [k, v] : it->items()) {
    if (!v.is_number()) return Cat("usage.", key, ".", k, ": must be a number");
    (*out)[k] = v.get<double>();
  }
  return "";
}

std::string StrAt(const Json& j, const char* object, const char* key) {
  auto o = j.find(object);
  if (o == j.end() || !o->is_object()) return "";
  auto v = o->find(key);
  return v != o->end() && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

double AttemptUsage::HoursIn(int64_t since_ms, int64_t until_ms) const {
  const int64_t from = std::max(start_ms, since_ms), to = std::min(end_ms, until_ms);
  return to > from ? (to - from) / 3.6e6 : 0.0;
}

std::string UsageKey(const AttemptUsage& u) {
  return Cat("/usage/", u.ns, "/", u.uid, ".", u.attempt, ".", u.start_ms);
}

Json UsageToJson(const AttemptUsage& u) {
  Json j = {{"namespace", u.ns},
            {"job", u.job},
            {"uid", u.uid},
            {"queue", u.queue},
            {"attempt", u.attempt},
            {"startMs", u.start_ms},
            {"endMs", u.end_ms},
            {"gpus", u.gpus},
            {"gpusByType", u.gpus_by_type},
            {"usdPerHour", u.usd_per_hour},
            {"usdPerHourByPool", u.usd_per_hour_by_pool}};
  if (u.spot_tolerant) j["spotTolerant"] = true;
  if (u.energy_j > 0) j["energyJ"] = u.energy_j;
  if (u.co2e_g_per_kwh > 0) j["co2eGPerKwh"] = u.co2e_g_per_kwh;
  return j;
}

absl::StatusOr<AttemptUsage> UsageFromJson(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("usage: must be an object");
  AttemptUsage u;
  for (const std::string& e :
       {ReadStr(j, "namespace", &u.ns), ReadStr(j, "job", &u.job), ReadStr(j, "uid", &u.uid),
        ReadStr(j, "queue", &u.queue), ReadInt(j, "attempt", &u.attempt),
        ReadInt(j, "startMs", &u.start_ms), ReadInt(j, "endMs", &u.end_ms),
        ReadNum(j, "gpus", &u.gpus), ReadNumMap(j, "gpusByType", &u.gpus_by_type),
        ReadNumMap(j, "usdPerHour", &u.usd_per_hour),
        ReadNumMap(j, "usdPerHourByPool", &u.usd_per_hour_by_pool),
        ReadNum(j, "energyJ", &u.energy_j), ReadNum(j, "co2eGPerKwh", &u.co2e_g_per_kwh)}) {
    if (!e.empty()) return absl::InvalidArgumentError(e);
  }
  if (auto it = j.find("spotTolerant"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean())
      return absl::InvalidArgumentError("usage.spotTolerant: must be a boolean");
    u.spot_tolerant = it->get<bool>();
  }
  if (u.end_ms < u.start_ms) {
    return absl::InvalidArgumentError("usage.endMs: is before usage.startMs");
  }
  return u;
}

bool SpotTolerant(const Json& job) { return StrAt(job, "spec", "billing") == "spot"; }

std::optional<AttemptUsage> AttemptUsageOf(const Json& job, int64_t now_ms) {
  absl::StatusOr<JobStatus> s = JobStatusOf(job);
  if (!s.ok() || !(IsActive(s->phase) || IsStopping(s->phase)) || s->scheduled_ms <= 0 ||
      s->usd_per_hour.empty()) {
    return std::nullopt;
  }
  AttemptUsage u;
  u.ns = StrAt(job, "metadata", "namespace");
  u.job = StrAt(job, "metadata", "name");
  u.uid = StrAt(job, "metadata", "uid");
  u.queue = StrAt(job, "spec", "queue");
  if (u.queue.empty()) u.queue = "default";
  u.attempt = s->attempt;
  u.start_ms = s->BilledFrom();
  u.end_ms = std::max(now_ms, u.start_ms);
  u.spot_tolerant = SpotTolerant(job);
  u.gpus = s->gpus;
  u.usd_per_hour = s->usd_per_hour;
  u.usd_per_hour_by_pool = s->usd_per_hour_by_pool;
  u.gpus_by_type = s->gpus_by_type;
  u.energy_j = s->attempt_energy_j;
  u.co2e_g_per_kwh = s->co2e_g_per_kwh;
  return u;
}

}  // namespace gpucloud::api
