// LoadMeter: what the gateway measures of each inference service's traffic, second by second,
// for the service autoscaler (autoscale/service_scaler.h): requests in flight (those waiting
// for a replica included) integrated over time, arrivals, and the latencies of the requests
// that finished. A second's sample is closed when
// the clock passes it; seconds with nothing in flight and no arrival are not kept (the scaler
// counts a missing second as idle); at most the last kMaxSeconds are kept per service.
// Thread-safe (one mutex; every call is a few arithmetic operations).
#ifndef GPUCLOUD_GATEWAY_LOAD_METER_H_
#define GPUCLOUD_GATEWAY_LOAD_METER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "autoscale/service_scaler.h"
#include "core/clock.h"

namespace gpucloud::gateway {

class LoadMeter {
 public:
  static constexpr size_t kMaxSeconds = 3600;

  // Borrows `clock`, which must outlive the meter.
  explicit LoadMeter(const Clock& clock) : clock_(clock) {}

  // A request arrived for `service` ("ns/name"): in flight until Finished.
  void Arrived(const std::string& service);
  // It took `latency_ms` from arrival to answer (counted in the second it finished in; < 0:
  // not measured).
  void Finished(const std::string& service, double latency_ms = -1);
  // A request started or stopped waiting for a replica (it stays in flight either way).
  void Queued(const std::string& service, int delta);

  struct Reading {
    std::vector<autoscale::LoadSample> samples;  // closed seconds, oldest first
    int64_t in_flight = 0;
    int64_t queued = 0;
    int64_t last_request_ms = 0;  // 0: none since the gateway started
    int64_t requests_total = 0;
  };
  // What was measured of `service`: the samples of the last `seconds` closed seconds.
  Reading Read(const std::string& service, int64_t seconds);
  // Drops a service that no longer exists.
  void Forget(const std::string& service);

 private:
  struct Series {
    int64_t second_start = 0;  // of the open second
    int64_t last_change = 0;   // when in_flight last changed (inside the open second)
    double area = 0;           // in-flight x ms in the open second so far
    int64_t arrivals = 0;      // in the open second
    std::vector<autoscale::LatencyCount> latency;  // of requests finished in the open second
    int64_t in_flight = 0;
    int64_t queued = 0;
    int64_t last_request_ms = 0;
    int64_t requests_total = 0;
    std::deque<autoscale::LoadSample> closed;
  };
  // Closes the seconds before `now`.
  static void Advance(Series& s, int64_t now);
  Series& SeriesOf(const std::string& service, int64_t now);

  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Series> series_;
};

}  // namespace gpucloud::gateway

#endif  // GPUCLOUD_GATEWAY_LOAD_METER_H_
