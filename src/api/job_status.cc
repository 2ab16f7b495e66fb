#include "api/job_status.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gpucloud::api {
namespace {

constexpr std::array<std::string_view, kAllJobPhases.size()> kPhaseNames = {
    "Pending",   "Scheduled",  "Running",    "Succeeded",  "Failed",
    "Cancelled", "Preempting", "Restarting", "Cancelling", "Stopping"};

std::string PhaseList() {
  std::vector<std::string> names(kPhaseNames.begin(), kPhaseNames.end());
  return Join(names, ", ");
}

// Reads the typed fields of one JSON object at `path` ("status", "status.placement[0]"); the
// first bad one is kept, named by its path, and later reads do nothing. A field absent or null
// leaves its default.
template <typename Json>
class Reader {
 public:
  Reader(const Json& obj, std::string path, std::optional<std::string>* error)
      : obj_(obj), path_(std::move(path)), error_(error) {
    if (!obj_.is_null() && !obj_.is_object()) Fail(path_, "must be an object");
  }

  // The field's value, or null when it is absent or null (or an error was found).
  const Json* Find(const char* key) const {
    if (*error_ || !obj_.is_object()) return nullptr;
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string Path(const char* key) const { return Cat(path_, ".", key); }

  void Str(const char* key, std::string* out) {
    if (const Json* v = Find(key)) {
      if (!v->is_string()) return Fail(Path(key), "must be a string");
      *out = v->template get<std::string>();
    }
  }
  template <typename T>
  void Int(const char* key, T* out) {
    if (const Json* v = Find(key)) {
      if (!v->is_number_integer()) return Fail(Path(key), "must be an integer");
      *out = static_cast<T>(v->template get<int64_t>());
    }
  }
  template <typename T>
  void OptInt(const char* key, std::optional<T>* out) {
    if (Find(key) == nullptr) return;
    T v{};
    Int(key, &v);
    *out = v;
  }
  void Num(const char* key, double* out) {
    if (const Json* v = Find(key)) {
      if (!v->is_number()) return Fail(Path(key), "must be a number");
      *out = v->template get<double>();
    }
  }
  void Bool(const char* key, bool* out) {
    if (const Json* v = Find(key)) {
      if (!v->is_boolean()) return Fail(Path(key), "must be true or false");
      *out = v->template get<bool>();
    }
  }
  void Phase(const char* key, JobPhase* out) {
    if (const Json* v = Find(key)) {
      absl::StatusOr<JobPhase> p = PhaseFromJson(*v, Path(key));
      if (!p.ok()) return Fail(std::string(p.status().message()));
      *out = *p;
    }
  }
  void StrMap(const char* key, std::map<std::string, std::string>* out) {
    if (const Json* v = Find(key)) {
      if (!v->is_object()) return Fail(Path(key), "must be a map of strings");
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (!it.value().is_string()) return Fail(Cat(Path(key), ".", it.key()), "must be a string");
        (*out)[it.key()] = it.value().template get<std::string>();
      }
    }
  }
  void NumMap(const char* key, std::map<std::string, double>* out) {
    if (const Json* v = Find(key)) {
      if (!v->is_object()) return Fail(Path(key), "must be a map of numbers");
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (!it.value().is_number()) return Fail(Cat(Path(key), ".", it.key()), "must be a number");
        (*out)[it.key()] = it.value().template get<double>();
      }
    }
  }
  // The elements of the array `key` (none when absent), each read by `read(element, path)`.
  template <typename F>
  void Each(const char* key, F read) {
    const Json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(Path(key), "must be a list");
    for (size_t i = 0; i < v->size() && !*error_; ++i) read((*v)[i], Cat(Path(key), "[", i, "]"));
  }

  void Fail(const std::string& field, std::string_view what) {
    if (!*error_) *error_ = Cat(field, ": ", what);
  }
  void Fail(std::string message) {
    if (!*error_) *error_ = std::move(message);
  }

 private:
  const Json& obj_;
  std::string path_;
  std::optional<std::string>* error_;
};

template <typename Json>
PlacedGpu ReadGpu(const Json& j, const std::string& path, std::optional<std::string>* error) {
  Reader<Json> r(j, path, error);
  PlacedGpu g;
  r.Int("index", &g.index);
  r.Str("mode", &g.mode);
  r.Str("migProfile", &g.mig_profile);
  r.Int("migStart", &g.mig_start);
  r.Int("fractionMilli", &g.fraction_milli);
  r.Int("memoryMiB", &g.memory_mib);
  r.Bool("mps", &g.mps);
  return g;
}

template <typename Json>
PlacedReplica ReadReplica(const Json& j, const std::string& path,
                          std::optional<std::string>* error) {
  Reader<Json> r(j, path, error);
  PlacedReplica p;
  r.Str("name", &p.name);
  r.Str("node", &p.node);
  r.Int("rank", &p.rank);
  r.Str("task", &p.task);
  r.Int("replica", &p.replica);
  r.Int("cpuMilli", &p.cpu_milli);
  r.Int("memoryMiB", &p.memory_mib);
  r.Each("gpus",
         [&](const Json& g, const std::string& at) { p.gpus.push_back(ReadGpu(g, at, error)); });
  return p;
}

template <typename Json>
void ReadTimes(Reader<Json>& r, JobStatus& s) {
  r.Int("submittedMs", &s.submitted_ms);
  r.Int("notBeforeMs", &s.not_before_ms);
  r.Int("scheduledMs", &s.scheduled_ms);
  r.Int("startedMs", &s.started_ms);
  r.Int("finishedMs", &s.finished_ms);
  r.Int("stopDeadlineMs", &s.stop_deadline_ms);
  r.Int("interruptedMs", &s.interrupted_ms);
  r.Int("recoveries", &s.recoveries);
  r.Int("lastRecoveryMs", &s.last_recovery_ms);
  r.Int("attemptStartedMs", &s.attempt_started_ms);
  r.Int("lastCheckpointMs", &s.last_checkpoint_ms);
  r.Int("lastReplicatedMs", &s.last_replicated_ms);
}

template <typename Json>
void ReadGpuFields(Reader<Json>& r, JobStatus& s, std::optional<std::string>* error) {
  r.Num("gpus", &s.gpus);
  if (const Json* g = r.Find("gpuSeconds")) {
    Reader<Json> gs(*g, r.Path("gpuSeconds"), error);
    gs.Num("allocated", &s.gpu_seconds.allocated);
    gs.Num("productive", &s.gpu_seconds.productive);
    gs.Num("lost", &s.gpu_seconds.lost);
  }
  r.NumMap("usdPerHour", &s.usd_per_hour);
  r.NumMap("costUsd", &s.cost_usd);
  r.NumMap("usdPerHourByPool", &s.usd_per_hour_by_pool);
  r.NumMap("gpusByType", &s.gpus_by_type);
  r.Int("billedFromMs", &s.billed_from_ms);
  r.Num("energyJ", &s.energy_j);
  r.Num("attemptEnergyJ", &s.attempt_energy_j);
  r.Num("co2eGPerKwh", &s.co2e_g_per_kwh);
  r.Num("co2eG", &s.co2e_g);
  if (const Json* u = r.Find("gpuUsage")) {
    Reader<Json> gu(*u, r.Path("gpuUsage"), error);
    GpuUsage usage;
    gu.Int("gpus", &usage.gpus);
    gu.Int("measuredGpus", &usage.measured_gpus);
    gu.OptInt("utilization", &usage.utilization_percent);
    gu.OptInt("memoryUsedMiB", &usage.memory_used_mib);
    gu.OptInt("memoryTotalMiB", &usage.memory_total_mib);
    gu.Int("sampledAtMs", &usage.sampled_at_ms);
    s.gpu_usage = usage;
  }
}

template <typename Json>
absl::StatusOr<JobStatus> Decode(const Json& status) {
  std::optional<std::string> error;
  Reader<Json> r(status, "status", &error);
  JobStatus s;
  r.Phase("phase", &s.phase);
  if (r.Find("next") != nullptr) {
    JobPhase next{};
    r.Phase("next", &next);
    s.next = next;
  }
  r.Int("attempt", &s.attempt);
  r.Int("restarts", &s.restarts);
  r.Int("interruptions", &s.interruptions);
  r.Str("reason", &s.reason);
  r.Str("message", &s.message);
  ReadTimes(r, s);
  r.Bool("cancelRequested", &s.cancel_requested);
  r.Bool("deleteRequested", &s.delete_requested);
  r.Str("checkpointDir", &s.checkpoint_dir);
  ReadGpuFields(r, s, &error);
  r.Int("masterPort", &s.master_port);
  r.Each("placement", [&](const Json& p, const std::string& at) {
    s.placement.push_back(ReadReplica(p, at, &error));
  });
  r.StrMap("tasks", &s.tasks);
  if (error) return absl::InvalidArgumentError(*error);
  return s;
}

template <typename Json>
absl::StatusOr<JobStatus> DecodeOf(const Json& job) {
  if (!job.is_object()) return absl::InvalidArgumentError("the job is not a JSON object");
  auto it = job.find("status");
  return it == job.end() ? JobStatus{} : Decode(*it);
}

template <typename Json>
absl::StatusOr<JobPhase> Phase(const Json& value, std::string_view field) {
  if (!value.is_string()) return absl::InvalidArgumentError(Cat(field, ": must be a string"));
  const std::string name = value.template get<std::string>();
  if (std::optional<JobPhase> p = ParsePhase(name)) return *p;
  return absl::InvalidArgumentError(
      Cat(field, ": unknown phase \"", name, "\" (one of ", PhaseList(), ")"));
}

nlohmann::ordered_json PlacementJson(const std::vector<PlacedReplica>& placement) {
  using Json = nlohmann::ordered_json;
  Json p = Json::array();
  for (const PlacedReplica& r : placement) {
    Json gpus = Json::array();
    for (const PlacedGpu& a : r.gpus) {
      Json g{{"index", a.index}, {"mode", a.mode}};
      if (a.mode == "mig") {
        g["migProfile"] = a.mig_profile;
        g["migStart"] = a.mig_start;
      }
      if (a.mode == "shared") {
        g["fractionMilli"] = a.fraction_milli;
        g["memoryMiB"] = a.memory_mib;
        g["mps"] = a.mps;
      }
      gpus.push_back(std::move(g));
    }
    p.push_back(Json{{"name", r.name},
                     {"node", r.node},
                     {"rank", r.rank},
                     {"task", r.task},
                     {"replica", r.replica},
                     {"cpuMilli", r.cpu_milli},
                     {"memoryMiB", r.memory_mib},
                     {"gpus", std::move(gpus)}});
  }
  return p;
}

void PutTimes(const JobStatus& s, nlohmann::ordered_json& j) {
  if (s.submitted_ms) j["submittedMs"] = s.submitted_ms;
  if (s.not_before_ms) j["notBeforeMs"] = s.not_before_ms;
  if (s.scheduled_ms) j["scheduledMs"] = s.scheduled_ms;
  if (s.started_ms) j["startedMs"] = s.started_ms;
  if (s.finished_ms) j["finishedMs"] = s.finished_ms;
  if (s.stop_deadline_ms) j["stopDeadlineMs"] = s.stop_deadline_ms;
  if (s.interrupted_ms) j["interruptedMs"] = s.interrupted_ms;
  if (s.recoveries) {
    j["recoveries"] = s.recoveries;
    j["lastRecoveryMs"] = s.last_recovery_ms;
  }
}

nlohmann::ordered_json UsageJson(const GpuUsage& u) {
  nlohmann::ordered_json j{{"gpus", u.gpus}, {"measuredGpus", u.measured_gpus}};
  if (u.utilization_percent) j["utilization"] = *u.utilization_percent;
  if (u.memory_used_mib) j["memoryUsedMiB"] = *u.memory_used_mib;
  if (u.memory_total_mib) j["memoryTotalMiB"] = *u.memory_total_mib;
  if (u.sampled_at_ms) j["sampledAtMs"] = u.sampled_at_ms;
  return j;
}

}  // namespace

std::string_view PhaseName(JobPhase p) {
  const auto i = static_cast<size_t>(p);
  return i < kPhaseNames.size() ? kPhaseNames[i] : "Unknown";
}

std::optional<JobPhase> ParsePhase(std::string_view name) {
  for (JobPhase p : kAllJobPhases) {
    if (PhaseName(p) == name) return p;
  }
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, JobPhase p) { return os << PhaseName(p); }

bool IsTerminal(JobPhase p) {
  return p == JobPhase::kSucceeded || p == JobPhase::kFailed || p == JobPhase::kCancelled;
}

bool IsStopping(JobPhase p) {
  return p == JobPhase::kPreempting || p == JobPhase::kRestarting || p == JobPhase::kCancelling ||
         p == JobPhase::kStopping;
}

absl::StatusOr<JobStatus> JobStatusFromJson(const nlohmann::json& status) { return Decode(status); }
absl::StatusOr<JobStatus> JobStatusFromJson(const nlohmann::ordered_json& status) {
  return Decode(status);
}
absl::StatusOr<JobStatus> JobStatusOf(const nlohmann::json& job) { return DecodeOf(job); }
absl::StatusOr<JobStatus> JobStatusOf(const nlohmann::ordered_json& job) { return DecodeOf(job); }

absl::StatusOr<JobPhase> PhaseFromJson(const nlohmann::ordered_json& value,
                                       std::string_view field) {
  return Phase(value, field);
}
absl::StatusOr<JobPhase> PhaseFromJson(const nlohmann::json& value, std::string_view field) {
  return Phase(value, field);
}

std::string JobStatusToJson(const JobStatus& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["phase"] = PhaseName(s.phase);
  if (s.next) j["next"] = PhaseName(*s.next);
  j["attempt"] = s.attempt;
  j["restarts"] = s.restarts;
  j["interruptions"] = s.interruptions;
  if (!s.reason.empty()) j["reason"] = s.reason;
  if (!s.message.empty()) j["message"] = s.message;
  PutTimes(s, j);
  if (s.cancel_requested) j["cancelRequested"] = true;
  if (s.delete_requested) j["deleteRequested"] = true;
  if (!s.checkpoint_dir.empty()) j["checkpointDir"] = s.checkpoint_dir;
  if (s.gpus > 0) j["gpus"] = s.gpus;
  if (s.attempt_started_ms) j["attemptStartedMs"] = s.attempt_started_ms;
  if (s.last_checkpoint_ms) j["lastCheckpointMs"] = s.last_checkpoint_ms;
  if (s.last_replicated_ms) j["lastReplicatedMs"] = s.last_replicated_ms;
  if (s.gpu_seconds.allocated > 0) {
    j["gpuSeconds"] = nlohmann::ordered_json{{"allocated", s.gpu_seconds.allocated},
                                             {"productive", s.gpu_seconds.productive},
                                             {"lost", s.gpu_seconds.lost},
                                             {"goodput", s.gpu_seconds.goodput()}};
  }
  if (!s.usd_per_hour.empty()) j["usdPerHour"] = s.usd_per_hour;
  if (!s.cost_usd.empty()) j["costUsd"] = s.cost_usd;
  if (!s.usd_per_hour_by_pool.empty()) j["usdPerHourByPool"] = s.usd_per_hour_by_pool;
  if (!s.gpus_by_type.empty()) j["gpusByType"] = s.gpus_by_type;
  if (s.billed_from_ms > 0) j["billedFromMs"] = s.billed_from_ms;
  if (s.energy_j > 0) j["energyJ"] = s.energy_j;
  if (s.attempt_energy_j > 0) j["attemptEnergyJ"] = s.attempt_energy_j;
  if (s.co2e_g_per_kwh > 0) j["co2eGPerKwh"] = s.co2e_g_per_kwh;
  if (s.co2e_g > 0) j["co2eG"] = s.co2e_g;
  if (s.master_port != 0) j["masterPort"] = s.master_port;
  if (!s.placement.empty()) j["placement"] = PlacementJson(s.placement);
  if (!s.tasks.empty()) j["tasks"] = s.tasks;
  if (s.gpu_usage) j["gpuUsage"] = UsageJson(*s.gpu_usage);
  return j.dump();
}

std::map<std::string, double> CostSoFar(const JobStatus& s, int64_t now_ms) {
  std::map<std::string, double> cost = s.cost_usd;
  if ((IsActive(s.phase) || IsStopping(s.phase)) && s.scheduled_ms > 0) {
    for (const auto& [billing, rate] : s.usd_per_hour) {
      cost[billing] +=
          rate * static_cast<double>(std::max<int64_t>(0, now_ms - s.BilledFrom())) / 3.6e6;
    }
  }
  return cost;
}

}  // namespace gpucloud::api
