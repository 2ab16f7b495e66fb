#include "sim/service_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/parse.h"
#include "core/text.h"
#include "sim/csv.h"

namespace gpucloud::sim {
namespace {

std::string Trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t\r");
  const size_t b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

}  // namespace

absl::StatusOr<std::vector<LoadPoint>> ParseLoadCurve(std::string_view csv) {
  absl::StatusOr<std::vector<CsvRow>> rows = ParseCsv(csv);
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().fields.size() != 2 ||
      Trim(rows->front().fields[0]) != "time" || Trim(rows->front().fields[1]) != "rps") {
    return absl::InvalidArgumentError("a load curve starts with the header \"time,rps\"");
  }
  std::vector<LoadPoint> out;
  for (size_t i = 1; i < rows->size(); ++i) {
    const CsvRow& row = (*rows)[i];
    if (row.fields.size() != 2) {
      return absl::InvalidArgumentError(Cat("line ", row.line, ": expected 2 fields (time,rps)"));
    }
    absl::StatusOr<int64_t> t = ParseDurationSeconds(Trim(row.fields[0]));
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          Cat("line ", row.line, ": time \"", row.fields[0], "\": ", t.status().message()));
    }
    const std::string rps_text = Trim(row.fields[1]);
    char* end = nullptr;
    const double rps = std::strtod(rps_text.c_str(), &end);
    if (rps_text.empty() || end != rps_text.c_str() + rps_text.size() || !(rps >= 0) ||
        !std::isfinite(rps) || rps > 1e9) {
      return absl::InvalidArgumentError(
          Cat("line ", row.line, ": rps \"", row.fields[1], "\" is not a number >= 0"));
    }
    if (!out.empty() && *t <= out.back().t_s) {
      return absl::InvalidArgumentError(
          Cat("line ", row.line, ": time ", *t, "s is not after the previous point's"));
    }
    out.push_back({*t, rps});
  }
  if (out.size() < 2) return absl::InvalidArgumentError("a load curve needs at least two points");
  return out;
}

double RpsAt(std::span<const LoadPoint> load, int64_t t_s) {
  if (load.empty() || t_s < load.front().t_s || t_s > load.back().t_s) return 0;
  auto it = std::upper_bound(load.begin(), load.end(), t_s,
                             [](int64_t t, const LoadPoint& p) { return t < p.t_s; });
  if (it == load.end()) return load.back().rps;
  const LoadPoint& b = *it;
  const LoadPoint& a = *(it - 1);
  const double f = static_cast<double>(t_s - a.t_s) / static_cast<double>(b.t_s - a.t_s);
  return a.rps + (b.rps - a.rps) * f;
}

ServiceReplay::ServiceReplay(std::span<const SimService> services, int64_t tick_s)
    : services_(services), tick_s_(std::max<int64_t>(1, tick_s)), runs_(services.size()) {
  for (size_t s = 0; s < services.size(); ++s) {
    const InferenceService& svc = services[s].service;
    runs_[s].out.name = Cat(svc.metadata.namespace_, "/", svc.metadata.name);
    runs_[s].next_second = services[s].load.front().t_s;
  }
}

int64_t ServiceReplay::NextTick(int32_t s, int64_t now) const {
  const int64_t end = services_[s].load.back().t_s;
  if (now >= end || !runs_[s].out.rejected.empty()) return -1;
  return std::min(end, now + tick_s_);
}

void ServiceReplay::Rejected(int32_t s, const std::string& why) {
  if (runs_[s].out.rejected.empty()) runs_[s].out.rejected = why;
}

// Per-second samples of the curve for the seconds before `until_s`, the requests of fractional
// rates carried from second to second.
void ServiceReplay::Sample(int32_t s, int64_t until_s) {
  Run& r = runs_[s];
  const SimService& svc = services_[s];
  for (; r.next_second < until_s; ++r.next_second) {
    const double rps = RpsAt(svc.load, r.next_second);
    r.out.requests += rps;
    r.carry += rps;
    const auto requests = static_cast<int64_t>(std::floor(r.carry + 1e-9));
    r.carry -= static_cast<double>(requests);
    if (requests > 0) r.last_request_ms = r.next_second * 1000;
    r.samples.push_back({.start_ms = r.next_second * 1000,
                         .concurrency = rps * svc.latency_s,
                         .requests = requests});
  }
  const int64_t keep_s = std::max(svc.service.spec.autoscaling.stable_window_seconds,
                                  svc.service.spec.autoscaling.panic_window_seconds);
  const int64_t from_ms = (until_s - keep_s) * 1000;
  size_t drop = 0;
  while (drop < r.samples.size() && r.samples[drop].start_ms < from_ms) ++drop;
  r.samples.erase(r.samples.begin(), r.samples.begin() + static_cast<std::ptrdiff_t>(drop));
}

void ServiceReplay::Account(int32_t s, int64_t now) {
  Run& r = runs_[s];
  if (r.last_tick >= 0 && now > r.last_tick) {
    const double hours = static_cast<double>(now - r.last_tick) / 3600;
    r.out.ready_replica_hours += r.ready * hours;
    r.out.shortfall_replica_hours += std::max(0, r.desired - r.ready) * hours;
  }
  r.last_tick = std::max(r.last_tick, now);
}

ServiceReplay::Plan ServiceReplay::Tick(int32_t s, int64_t now,
                                        const std::vector<Replica>& replicas) {
  Run& r = runs_[s];
  const SimService& svc = services_[s];
  const InferenceServiceSpec& spec = svc.service.spec;
  Account(s, now);
  Sample(s, now);
  std::vector<autoscale::ReplicaView> views;
  int32_t ready = 0, live = 0;
  for (const Replica& x : replicas) {
    views.push_back({.job = std::to_string(x.job), .current = true, .state = x.state});
    if (x.state == State::kReady) ++ready;
    if (x.state != State::kStopping && x.state != State::kEnded) ++live;
  }
  Plan plan;
  if (now >= svc.load.back().t_s || !r.out.rejected.empty()) {  // the service goes
    for (const Replica& x : replicas) plan.stop.push_back(x.job);
    r.desired = r.ready = 0;
    r.out.timeline.push_back({now, 0, 0, 0});
    return plan;
  }
  const double rps = RpsAt(svc.load, now);
  const double in_flight = rps * svc.latency_s;
  autoscale::ScalerInput in{.ready = ready,
                            .live = live,
                            // With no replica ready, the gateway holds the requests that arrive.
                            .queued = ready == 0 && rps > 0
                                          ? std::max<int64_t>(1, std::llround(std::ceil(in_flight)))
                                          : 0,
                            .last_request_ms = r.last_request_ms,
                            .created_ms = FirstTick(s) * 1000};
  autoscale::ScaleDecision d = autoscale::DecideReplicas(spec, r.samples, in, r.memory, now * 1000);
  r.memory = d.memory;
  autoscale::ReplicaPlan p = autoscale::PlanReplicas(spec, d.desired, views);
  plan.create = p.create;
  for (const std::string& job : p.stop) plan.stop.push_back(std::stoi(job));
  if (d.desired != r.desired || ready != r.ready || r.out.timeline.empty()) {
    r.out.timeline.push_back({now, rps, d.desired, ready});
  }
  r.desired = d.desired;
  r.ready = ready;
  r.out.peak_ready = std::max(r.out.peak_ready, ready);
  return plan;
}

std::vector<ServiceOutcome> ServiceReplay::Finish(int64_t now) {
  std::vector<ServiceOutcome> out;
  for (size_t s = 0; s < runs_.size(); ++s) {
    Account(static_cast<int32_t>(s), now);
    out.push_back(std::move(runs_[s].out));
  }
  return out;
}

}  // namespace gpucloud::sim
