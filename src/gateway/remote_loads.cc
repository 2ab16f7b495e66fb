#include "gateway/remote_loads.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gpucloud::gateway {

using Json = nlohmann::json;

std::string LoadReportToJson(const LoadReport& r) {
  Json samples = Json::array();
  for (const autoscale::LoadSample& s : r.samples) {
    Json sample = Json::array({s.start_ms, s.concurrency, s.requests});
    if (!s.latency.empty()) {  // [[bucket, count], ...]
      Json latency = Json::array();
      for (const autoscale::LatencyCount& c : s.latency) {
        latency.push_back(Json::array({c.bucket, c.count}));
      }
      sample.push_back(std::move(latency));
    }
    samples.push_back(std::move(sample));
  }
  return Json{{"updatedMs", r.updated_ms},
              {"samples", std::move(samples)},
              {"inFlight", r.in_flight},
              {"queued", r.queued},
              {"lastRequestMs", r.last_request_ms}}
      .dump();
}

absl::StatusOr<LoadReport> LoadReportFromJson(std::string_view json) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("samples") || !j["samples"].is_array()) {
    return absl::InvalidArgumentError("a load report is an object with a samples array");
  }
  LoadReport r;
  try {
    r.updated_ms = j.value("updatedMs", int64_t{0});
    r.in_flight = j.value("inFlight", int64_t{0});
    r.queued = j.value("queued", int64_t{0});
    r.last_request_ms = j.value("lastRequestMs", int64_t{0});
    for (const Json& s : j["samples"]) {
      if (!s.is_array() || (s.size() != 3 && s.size() != 4)) {
        return absl::InvalidArgumentError(
            "a load sample is [startMs, concurrency, requests] or [..., [[bucket, count]...]]");
      }
      autoscale::LoadSample sample{s[0].get<int64_t>(), s[1].get<double>(), s[2].get<int64_t>()};
      if (s.size() == 4) {
        for (const Json& c : s[3]) {
          const int32_t bucket = c.at(0).get<int32_t>();
          if (bucket < 0 || bucket >= autoscale::kLatencyBuckets) {
            return absl::InvalidArgumentError("a load sample's latency bucket is out of range");
          }
          autoscale::AddLatency(sample.latency, bucket, c.at(1).get<int64_t>());
        }
      }
      r.samples.push_back(std::move(sample));
    }
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(std::string("a load report's field: ") + e.what());
  }
  return r;
}

void RemoteLoads::Add(const std::string& gateway, const std::string& service, const LoadReport& r) {
  Series& s = by_service_[service][gateway];
  if (r.updated_ms < s.last.updated_ms) return;  // an older report, read late
  for (const autoscale::LoadSample& sample : r.samples) s.seconds[sample.start_ms] = sample;
  s.last = r;
  s.last.samples.clear();
}

void RemoteLoads::MergeInto(const std::string& service, int64_t now_ms,
                            LoadMeter::Reading* reading) const {
  auto it = by_service_.find(service);
  if (it == by_service_.end()) return;
  std::map<int64_t, autoscale::LoadSample> sum;
  for (const autoscale::LoadSample& s : reading->samples) sum[s.start_ms] = s;
  for (const auto& [gateway, series] : it->second) {
    for (const auto& [start, s] : series.seconds) {
      autoscale::LoadSample& into = sum[start];
      into.start_ms = start;
      into.concurrency += s.concurrency;
      into.requests += s.requests;
      for (const autoscale::LatencyCount& c : s.latency) {
        autoscale::AddLatency(into.latency, c.bucket, c.count);
      }
    }
    reading->last_request_ms = std::max(reading->last_request_ms, series.last.last_request_ms);
    if (now_ms - series.last.updated_ms <= kStaleMs) {
      reading->queued += series.last.queued;
      reading->in_flight += series.last.in_flight;
    }
  }
  reading->samples.clear();
  for (const auto& [start, s] : sum) reading->samples.push_back(s);
}

void RemoteLoads::Prune(int64_t now_ms) {
  for (auto svc = by_service_.begin(); svc != by_service_.end();) {
    for (auto gw = svc->second.begin(); gw != svc->second.end();) {
      auto& seconds = gw->second.seconds;
      seconds.erase(seconds.begin(), seconds.lower_bound(now_ms - kKeepMs));
      gw = seconds.empty() && now_ms - gw->second.last.updated_ms > kStaleMs ? svc->second.erase(gw)
                                                                             : std::next(gw);
    }
    svc = svc->second.empty() ? by_service_.erase(svc) : std::next(svc);
  }
}

}  // namespace gpucloud::gateway
