#include "gateway/load_meter.h"

#include <algorithm>

namespace gpucloud::gateway {

void LoadMeter::Advance(Series& s, int64_t now) {
  if (now >= s.second_start + 1000) {
    const int64_t end = s.second_start + 1000;
    s.area += static_cast<double>(s.in_flight) * static_cast<double>(end - s.last_change);
    s.closed.push_back({s.second_start, s.area / 1000.0, s.arrivals, std::move(s.latency)});
    s.latency.clear();
    const int64_t next = now - now % 1000;
    const int64_t horizon = next - static_cast<int64_t>(kMaxSeconds) * 1000;
    // The whole seconds in between held the same requests in flight (none is no sample).
    if (s.in_flight > 0) {
      for (int64_t t = std::max(end, horizon); t < next; t += 1000) {
        s.closed.push_back({t, static_cast<double>(s.in_flight), 0, {}});
      }
    }
    while (!s.closed.empty() &&
           (s.closed.size() > kMaxSeconds || s.closed.front().start_ms < horizon)) {
      s.closed.pop_front();
    }
    s.second_start = next;
    s.last_change = next;
    s.area = 0;
    s.arrivals = 0;
  }
  s.area += static_cast<double>(s.in_flight) * static_cast<double>(now - s.last_change);
  s.last_change = now;
}

LoadMeter::Series& LoadMeter::SeriesOf(const std::string& service, int64_t now) {
  auto [it, fresh] = series_.try_emplace(service);
  if (fresh) {
    it->second.second_start = now - now % 1000;
    it->second.last_change = now;
  }
  Advance(it->second, now);
  return it->second;
}

void LoadMeter::Arrived(const std::string& service) {
  const int64_t now = clock_.NowMillis();
  std::lock_guard lock(mu_);
  Series& s = SeriesOf(service, now);
  ++s.in_flight;
  ++s.arrivals;
  ++s.requests_total;
  s.last_request_ms = now;
}

void LoadMeter::Finished(const std::string& service, double latency_ms) {
  const int64_t now = clock_.NowMillis();
  std::lock_guard lock(mu_);
  Series& s = SeriesOf(service, now);
  s.in_flight = std::max<int64_t>(0, s.in_flight - 1);
  if (latency_ms >= 0) autoscale::AddLatency(s.latency, autoscale::LatencyBucket(latency_ms));
}

void LoadMeter::Queued(const std::string& service, int delta) {
  const int64_t now = clock_.NowMillis();
  std::lock_guard lock(mu_);
  Series& s = SeriesOf(service, now);
  s.queued = std::max<int64_t>(0, s.queued + delta);
}

LoadMeter::Reading LoadMeter::Read(const std::string& service, int64_t seconds) {
  const int64_t now = clock_.NowMillis();
  std::lock_guard lock(mu_);
  Reading r;
  auto it = series_.find(service);
  if (it == series_.end()) return r;
  Series& s = it->second;
  Advance(s, now);
  const int64_t from = s.second_start - seconds * 1000;
  for (const autoscale::LoadSample& sample : s.closed) {
    if (sample.start_ms >= from) r.samples.push_back(sample);
  }
  r.in_flight = s.in_flight;
  r.queued = s.queued;
  r.last_request_ms = s.last_request_ms;
  r.requests_total = s.requests_total;
  return r;
}

void LoadMeter::Forget(const std::string& service) {
  std::lock_guard lock(mu_);
  series_.erase(service);
}

}  // namespace gpucloud::gateway
