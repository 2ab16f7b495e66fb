// RemoteLoads: what the other servers' gateways measured, for the leader's service autoscaler.
// With several servers (on etcd) every server runs a gateway, and clients may reach any of them;
// each gateway publishes a LoadReport per service every second (its last few seconds of
// samples), and the leader adds them to its own gateway's measurements: a second's concurrency
// and arrivals are summed over the gateways. A report overwrites the seconds its gateway
// reported before (reports overlap), so nothing is counted twice; a gateway not heard from for
// kStaleMs counts for nothing new (its earlier seconds stay, as its traffic happened).
// Owned by the service controller's thread: not thread-safe.
#ifndef GPUCLOUD_GATEWAY_REMOTE_LOADS_H_
#define GPUCLOUD_GATEWAY_REMOTE_LOADS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "autoscale/service_scaler.h"
#include "gateway/load_meter.h"

namespace gpucloud::gateway {

// One gateway's measurement of one service, as it publishes it.
struct LoadReport {
  int64_t updated_ms = 0;
  std::vector<autoscale::LoadSample> samples;  // its last closed seconds
  int64_t in_flight = 0;
  int64_t queued = 0;
  int64_t last_request_ms = 0;
};
std::string LoadReportToJson(const LoadReport& r);
// InvalidArgument for a document that is not one.
absl::StatusOr<LoadReport> LoadReportFromJson(std::string_view json);

class RemoteLoads {
 public:
  static constexpr int64_t kStaleMs = 5000;
  // Seconds of history kept per gateway and service (the longest stable window).
  static constexpr int64_t kKeepMs = 3600 * 1000;

  void Add(const std::string& gateway, const std::string& service, const LoadReport& r);
  // Adds the other gateways' measurements of `service` into `reading` (its samples summed per
  // second; queued and in flight from fresh reports; the latest request).
  void MergeInto(const std::string& service, int64_t now_ms, LoadMeter::Reading* reading) const;
  // Forgets seconds older than kKeepMs, and gateways with nothing left.
  void Prune(int64_t now_ms);

 private:
  struct Series {
    std::map<int64_t, autoscale::LoadSample> seconds;  // by start_ms
    LoadReport last;
  };
  std::map<std::string, std::map<std::string, Series>> by_service_;  // service -> gateway
};

}  // namespace gpucloud::gateway

#endif  // GPUCLOUD_GATEWAY_REMOTE_LOADS_H_
