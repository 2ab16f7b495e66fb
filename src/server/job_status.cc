#include "server/job_status.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
T Get(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const Json::exception&) {
    return fallback;
  }
}

}  // namespace

sched::JobView ViewOf(const JobStatus& s, int64_t creation_ms) {
  using P = sched::JobViewPhase;
  sched::JobView v;
  if (s.Active()) {
    v.phase = P::kHolding;
  } else if (s.Stopping()) {
    v.phase = P::kStopping;
  } else if (s.phase == api::JobPhase::kPending && !s.cancel_requested && !s.delete_requested) {
    v.phase = P::kWaiting;
  }
  v.submit_ms = s.submitted_ms ? s.submitted_ms : creation_ms;
  v.not_before_ms = s.not_before_ms;
  // GPU time of the attempts that ended (ordering las), in GPU x ms like the simulator's.
  v.attained_gpu_ms = std::llround(s.gpu_seconds.allocated * 1000);
  // The dlas starvation guard's wait starts when its last attempt was interrupted (preempted,
  // drained, its node lost); otherwise at its submission.
  v.waiting_since_ms = s.interrupted_ms;
  if (v.phase == P::kHolding || v.phase == P::kStopping) {
    for (const PlacedReplica& r : s.placement) v.placement.push_back({r.node, r.placement});
    v.bound_ms = s.scheduled_ms;
    v.started_ms = s.started_ms;
    v.last_checkpoint_ms = s.last_checkpoint_ms;
    v.las_service_gpu_ms = s.las_service_gpu_ms;
  }
  v.usage = s.usage;
  return v;
}

double GpuEquivalents(const std::vector<PlacedReplica>& placement) {
  double n = 0;
  for (const PlacedReplica& r : placement) {
    for (const sched::GpuAssignment& g : r.placement.gpus) {
      n += sched::GpuShareOf(g, nullptr).raw() / 1000.0;  // the MIG profile's slices by name
    }
  }
  return n;
}

namespace {

// The current attempt's GPU time if it ended at `now_ms` (SettleAttempt's arithmetic).
GpuSeconds AttemptGpuSeconds(const JobStatus& s, int64_t now_ms, bool completed,
                             int64_t checkpoint_ms) {
  GpuSeconds add;
  if (s.scheduled_ms > 0 && now_ms > s.scheduled_ms)
    add.allocated = s.gpus * (now_ms - s.scheduled_ms) / 1000.0;
  if (s.attempt_started_ms > 0) {
    int64_t end = s.run_ended_ms > 0 ? s.run_ended_ms : now_ms;
    double ran = std::max<int64_t>(0, end - s.attempt_started_ms);
    double kept = completed ? ran
                  : checkpoint_ms > s.attempt_started_ms
                      ? static_cast<double>(std::min(checkpoint_ms, end) - s.attempt_started_ms)
                      : 0.0;
    add.productive = s.gpus * kept / 1000.0;
    add.lost = s.gpus * (ran - kept) / 1000.0;
  }
  return add;
}

}  // namespace

GpuSeconds SettleAttempt(JobStatus& s, int64_t now_ms, bool completed, int64_t checkpoint_ms) {
  GpuSeconds add = AttemptGpuSeconds(s, now_ms, completed, checkpoint_ms);
  s.gpu_seconds += add;
  double held = 0;
  for (const auto& [type, gpus] : s.gpus_by_type) held += gpus;
  for (const auto& [type, gpus] : s.gpus_by_type) {
    if (add.allocated > 0 && gpus > 0) {
      s.usage.push_back({now_ms, type, add.allocated * gpus / held});
    }
  }
  if (s.usage.size() > kMaxUsageRecords) {
    s.usage.erase(s.usage.begin(), s.usage.end() - kMaxUsageRecords);
  }
  s.gpus_by_type.clear();
  if (s.scheduled_ms > 0 && now_ms > s.BilledFrom()) {
    for (const auto& [billing, rate] : s.usd_per_hour) {
      s.cost_usd[billing] += rate * static_cast<double>(now_ms - s.BilledFrom()) / 3.6e6;
    }
  }
  s.usd_per_hour.clear();
  s.usd_per_hour_by_pool.clear();
  s.billed_from_ms = 0;
  s.energy_j += s.attempt_energy_j;
  s.co2e_g += s.attempt_energy_j / 3.6e6 * s.co2e_g_per_kwh;
  s.attempt_energy_j = 0;
  s.co2e_g_per_kwh = 0;
  s.attempt_started_ms = 0;
  s.run_ended_ms = 0;
  s.gpus = 0;
  return add;
}

std::string ResumeFrom(JobStatus& s, const CheckpointSpec& spec,
                       const std::vector<PlacedReplica>& placement) {
  if (!spec.node_local || s.checkpoint_nodes.empty()) return "";
  bool same = placement.size() == s.checkpoint_nodes.size();
  for (size_t i = 0; same && i < placement.size(); ++i)
    same = placement[i].node == s.checkpoint_nodes[i];
  std::string from;
  int64_t kept = s.last_checkpoint_ms;
  if (same) {
    from = "from the checkpoints on the nodes' local disks";
  } else if (spec.replicate && s.last_replicated_ms > 0) {
    from = Cat("from the replica in ", s.checkpoint_dir, " (the node-local copies are elsewhere)");
    kept = std::min(s.last_checkpoint_ms, s.last_replicated_ms);
  } else {
    from = Cat("from scratch: the checkpoints were on the local disk of ", s.checkpoint_nodes[0],
               spec.replicate ? " and none had been replicated yet" : " and are not replicated");
    kept = 0;
  }
  // The work between the surviving checkpoint and the one the accounting assumed is lost too.
  if (kept < s.last_checkpoint_ms) {
    double moved = kept == 0 ? s.gpu_seconds.productive
                             : std::min(s.gpu_seconds.productive,
                                        s.checkpoint_gpus * (s.last_checkpoint_ms - kept) / 1000.0);
    s.gpu_seconds.productive -= moved;
    s.gpu_seconds.lost += moved;
    s.last_checkpoint_ms = kept;
    if (kept == 0) s.last_replicated_ms = 0;
  }
  s.checkpoint_nodes.clear();
  s.checkpoint_gpus = 0;
  return from;
}

GpuSeconds LiveGpuSeconds(const JobStatus& s, int64_t now_ms) {
  GpuSeconds total = s.gpu_seconds;
  if (s.Active() || s.Stopping()) {
    // A stopping attempt's fate is not known yet: count it as the checkpoint would leave it.
    total += AttemptGpuSeconds(s, now_ms, s.Active(), s.last_checkpoint_ms);
  }
  return total;
}

namespace {

// The phase at status[key] (`field` names it in errors); `absent` when missing or null.
absl::StatusOr<std::optional<api::JobPhase>> PhaseAt(const Json& status, const char* key,
                                                     const char* field) {
  auto it = status.find(key);
  if (it == status.end() || it->is_null()) return std::optional<api::JobPhase>();
  absl::StatusOr<api::JobPhase> p = api::PhaseFromJson(*it, field);
  if (!p.ok()) return p.status();
  return std::optional<api::JobPhase>(*p);
}

}  // namespace

absl::StatusOr<api::JobPhase> JobPhaseOf(const Json& doc) {
  auto it = doc.find("status");
  if (it == doc.end() || !it->is_object()) return api::JobPhase::kPending;
  absl::StatusOr<std::optional<api::JobPhase>> phase = PhaseAt(*it, "phase", "status.phase");
  if (!phase.ok()) return phase.status();
  return phase->value_or(api::JobPhase::kPending);
}

absl::StatusOr<JobStatus> JobStatusFromJson(const Json& doc) {
  JobStatus s;
  auto it = doc.find("status");
  if (it == doc.end() || !it->is_object()) return s;
  const Json& j = *it;
  absl::StatusOr<std::optional<api::JobPhase>> phase = PhaseAt(j, "phase", "status.phase");
  if (!phase.ok()) return phase.status();
  s.phase = phase->value_or(api::JobPhase::kPending);
  absl::StatusOr<std::optional<api::JobPhase>> next = PhaseAt(j, "next", "status.next");
  if (!next.ok()) return next.status();
  s.next = *next;
  s.attempt = Get<int>(j, "attempt", 0);
  s.restarts = Get<int>(j, "restarts", 0);
  s.interruptions = Get<int>(j, "interruptions", 0);
  s.reason = Get<std::string>(j, "reason", "");
  s.message = Get<std::string>(j, "message", "");
  s.submitted_ms = Get<int64_t>(j, "submittedMs", 0);
  s.not_before_ms = Get<int64_t>(j, "notBeforeMs", 0);
  s.scheduled_ms = Get<int64_t>(j, "scheduledMs", 0);
  s.started_ms = Get<int64_t>(j, "startedMs", 0);
  s.finished_ms = Get<int64_t>(j, "finishedMs", 0);
  s.stop_deadline_ms = Get<int64_t>(j, "stopDeadlineMs", 0);
  s.interrupted_ms = Get<int64_t>(j, "interruptedMs", 0);
  s.last_recovery_ms = Get<int64_t>(j, "lastRecoveryMs", 0);
  s.recoveries = Get<int>(j, "recoveries", 0);
  s.cancel_requested = Get<bool>(j, "cancelRequested", false);
  s.idle_warned = Get<bool>(j, "idleWarned", false);
  s.delete_requested = Get<bool>(j, "deleteRequested", false);
  s.checkpoint_dir = Get<std::string>(j, "checkpointDir", "");
  s.gpus = Get<double>(j, "gpus", 0);
  s.attempt_started_ms = Get<int64_t>(j, "attemptStartedMs", 0);
  s.run_ended_ms = Get<int64_t>(j, "runEndedMs", 0);
  s.last_checkpoint_ms = Get<int64_t>(j, "lastCheckpointMs", 0);
  s.las_service_gpu_ms = Get<int64_t>(j, "lasServiceGpuMs", 0);
  s.last_replicated_ms = Get<int64_t>(j, "lastReplicatedMs", 0);
  s.checkpoint_nodes = Get<std::vector<std::string>>(j, "checkpointNodes", {});
  s.checkpoint_gpus = Get<double>(j, "checkpointGpus", 0);
  s.master_port = Get<int>(j, "masterPort", 0);
  if (auto g = j.find("gpusByType"); g != j.end() && g->is_object()) {
    for (const auto& [type, n] : g->items()) {
      if (n.is_number()) s.gpus_by_type[type] = n.get<double>();
    }
  }
  s.billed_from_ms = Get<int64_t>(j, "billedFromMs", 0);
  s.energy_j = Get<double>(j, "energyJ", 0);
  s.attempt_energy_j = Get<double>(j, "attemptEnergyJ", 0);
  s.co2e_g_per_kwh = Get<double>(j, "co2eGPerKwh", 0);
  s.co2e_g = Get<double>(j, "co2eG", 0);
  for (auto [key, into] : {std::pair{"usdPerHour", &s.usd_per_hour},
                           {"costUsd", &s.cost_usd},
                           {"usdPerHourByPool", &s.usd_per_hour_by_pool}}) {
    if (auto g = j.find(key); g != j.end() && g->is_object()) {
      for (const auto& [billing, v] : g->items()) {
        if (v.is_number()) (*into)[billing] = v.get<double>();
      }
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_array()) {
    for (const Json& r : *u) {
      if (!r.is_object()) continue;
      s.usage.push_back({Get<int64_t>(r, "endMs", 0), Get<std::string>(r, "gpuType", ""),
                         Get<double>(r, "gpuSeconds", 0)});
    }
  }
  if (auto g = j.find("gpuSeconds"); g != j.end() && g->is_object()) {
    s.gpu_seconds.allocated = Get<double>(*g, "allocated", 0);
    s.gpu_seconds.productive = Get<double>(*g, "productive", 0);
    s.gpu_seconds.lost = Get<double>(*g, "lost", 0);
  }
  if (auto p = j.find("placement"); p != j.end() && p->is_array()) {
    for (const Json& r : *p) {
      PlacedReplica pr;
      pr.name = Get<std::string>(r, "name", "");
      pr.node = Get<std::string>(r, "node", "");
      pr.rank = Get<int>(r, "rank", 0);
      pr.placement.task = Get<std::string>(r, "task", "");
      pr.placement.replica = Get<int>(r, "replica", 0);
      pr.placement.cpu = MilliCpu(Get<int64_t>(r, "cpuMilli", 0));
      pr.placement.memory = MiB(Get<int64_t>(r, "memoryMiB", 0));
      if (auto g = r.find("gpus"); g != r.end() && g->is_array()) {
        for (const Json& x : *g) {
          sched::GpuAssignment a;
          a.gpu = Get<int>(x, "index", 0);
          a.mode = ParseGpuMode(Get<std::string>(x, "mode", "whole")).value_or(GpuMode::kNone);
          a.mig.profile = Get<std::string>(x, "migProfile", "");
          a.mig.start = Get<int>(x, "migStart", 0);
          a.fraction = MilliGpu(Get<int64_t>(x, "fractionMilli", 0));
          a.memory = MiB(Get<int64_t>(x, "memoryMiB", 0));
          a.sharing = Get<bool>(x, "mps", false) ? GpuSharing::kMps : GpuSharing::kTimeSlicing;
          pr.placement.gpus.push_back(std::move(a));
        }
      }
      s.placement.push_back(std::move(pr));
    }
  }
  if (auto t = j.find("tasks"); t != j.end() && t->is_object()) {
    for (auto x = t->begin(); x != t->end(); ++x) {
      if (x.value().is_string()) s.tasks[x.key()] = x.value().get<std::string>();
    }
  }
  return s;
}

void JobStatusToJson(const JobStatus& s, Json& doc) {
  Json j = Json::object();
  j["phase"] = api::PhaseName(s.phase);
  if (s.next) j["next"] = api::PhaseName(*s.next);
  j["attempt"] = s.attempt;
  j["restarts"] = s.restarts;
  j["interruptions"] = s.interruptions;
  if (!s.reason.empty()) j["reason"] = s.reason;
  if (!s.message.empty()) j["message"] = s.message;
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
  if (s.cancel_requested) j["cancelRequested"] = true;
  if (s.idle_warned) j["idleWarned"] = true;
  if (s.delete_requested) j["deleteRequested"] = true;
  if (!s.checkpoint_dir.empty()) j["checkpointDir"] = s.checkpoint_dir;
  if (s.gpus > 0) j["gpus"] = s.gpus;
  if (s.attempt_started_ms) j["attemptStartedMs"] = s.attempt_started_ms;
  if (s.run_ended_ms) j["runEndedMs"] = s.run_ended_ms;
  if (s.last_checkpoint_ms) j["lastCheckpointMs"] = s.last_checkpoint_ms;
  if (s.las_service_gpu_ms) j["lasServiceGpuMs"] = s.las_service_gpu_ms;
  if (s.last_replicated_ms) j["lastReplicatedMs"] = s.last_replicated_ms;
  if (!s.checkpoint_nodes.empty()) {
    j["checkpointNodes"] = s.checkpoint_nodes;
    j["checkpointGpus"] = s.checkpoint_gpus;
  }
  if (s.gpu_seconds.allocated > 0) {
    j["gpuSeconds"] = Json{{"allocated", s.gpu_seconds.allocated},
                           {"productive", s.gpu_seconds.productive},
                           {"lost", s.gpu_seconds.lost},
                           {"goodput", s.gpu_seconds.goodput()}};
  }
  if (!s.gpus_by_type.empty()) j["gpusByType"] = s.gpus_by_type;
  if (!s.usd_per_hour.empty()) j["usdPerHour"] = s.usd_per_hour;
  if (!s.cost_usd.empty()) j["costUsd"] = s.cost_usd;
  if (!s.usd_per_hour_by_pool.empty()) j["usdPerHourByPool"] = s.usd_per_hour_by_pool;
  if (s.billed_from_ms > 0) j["billedFromMs"] = s.billed_from_ms;
  if (s.energy_j > 0) j["energyJ"] = s.energy_j;
  if (s.attempt_energy_j > 0) j["attemptEnergyJ"] = s.attempt_energy_j;
  if (s.co2e_g_per_kwh > 0) j["co2eGPerKwh"] = s.co2e_g_per_kwh;
  if (s.co2e_g > 0) j["co2eG"] = s.co2e_g;
  if (!s.usage.empty()) {
    Json u = Json::array();
    for (const UsageRecord& r : s.usage) {
      u.push_back(
          Json{{"endMs", r.end_ms}, {"gpuType", r.gpu_type}, {"gpuSeconds", r.gpu_seconds}});
    }
    j["usage"] = std::move(u);
  }
  if (s.master_port != 0) j["masterPort"] = s.master_port;
  if (!s.placement.empty()) {
    Json p = Json::array();
    for (const PlacedReplica& r : s.placement) {
      Json gpus = Json::array();
      for (const sched::GpuAssignment& a : r.placement.gpus) {
        Json g{{"index", a.gpu}, {"mode", GpuModeName(a.mode)}};
        if (a.mode == GpuMode::kMig) {
          g["migProfile"] = a.mig.profile;
          g["migStart"] = a.mig.start;
        }
        if (a.mode == GpuMode::kShared) {
          g["fractionMilli"] = a.fraction.raw();
          g["memoryMiB"] = a.memory.raw();
          g["mps"] = a.sharing == GpuSharing::kMps;
        }
        gpus.push_back(std::move(g));
      }
      p.push_back(Json{{"name", r.name},
                       {"node", r.node},
                       {"rank", r.rank},
                       {"task", r.placement.task},
                       {"replica", r.placement.replica},
                       {"cpuMilli", r.placement.cpu.raw()},
                       {"memoryMiB", r.placement.memory.raw()},
                       {"gpus", std::move(gpus)}});
    }
    j["placement"] = std::move(p);
  }
  if (!s.tasks.empty()) {
    Json t = Json::object();
    for (const auto& [k, v] : s.tasks) t[k] = v;
    j["tasks"] = std::move(t);
  }
  doc["status"] = std::move(j);
}

}  // namespace gpucloud::server
