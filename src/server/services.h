// ServiceController: keeps each InferenceService at the replica count its autoscaler asks for.
// Runs on the leader beside the job controller, on a thread of its own, every `tick_ms` and
// at once on Kick (the gateway kicks when a request waits for a service with no replica):
//
//   1. catches up with the store (watch-fed caches of services, jobs and nodes);
//   2. per service: its replicas are the jobs labelled with it (service_replicas.h); the
//      gateway's measurements (gateway/load_meter.h) and replica health
//      (gateway/replica_health.h) go through the pure scaler (autoscale/service_scaler.h) and
//      the pure replica plan (scaling and rolling updates);
//   3. writes the plan in one transaction per service, compare-and-swap on the service: new
//      replicas' jobs (each with a port no other live replica holds), stopped ones' jobs
//      cancelled and deleted (the job controller stops their tasks first), and the service's
//      status — desired, live and ready counts, why, its endpoints (the running replicas'
//      node addresses and ports, which every server's gateway routes by), its last scaling
//      events. A status that did not change is not written.
// A service's deletion stops its replicas. The scheduler places replicas like any job: a
// service's priority against training decides who waits and who is preempted.
// Thread-safe: Start/Stop/Kick/Metrics from any thread; RunOnce from one at a time (tests call
// it directly with a FakeClock instead of Start).
#ifndef GPUCLOUD_SERVER_SERVICES_H_
#define GPUCLOUD_SERVER_SERVICES_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "api/job_status.h"
#include "autoscale/replica_plan.h"
#include "autoscale/service_scaler.h"
#include "core/clock.h"
#include "core/inference_service.h"
#include "gateway/load_meter.h"
#include "gateway/remote_loads.h"
#include "gateway/replica_health.h"
#include "server/object_cache.h"
#include "store/store.h"

namespace gpucloud::server {

struct ServiceControllerOptions {
  int64_t tick_ms = 200;
  // Several servers on one store (etcd): the other servers' gateways' load reports
  // (/serviceload/, gateway/remote_loads.h) are added to the local gateway's measurements;
  // `local_gateway` is this server's gateway's id (its own reports are not read back).
  bool merge_remote = false;
  std::string local_gateway;
  // The namespace's job quota (the API's --max-jobs-per-namespace; 0: none): replicas that
  // would pass it are not started, and the status says so (quotaExceeded).
  int64_t max_jobs_per_namespace = 0;
  // Where it says what went wrong (a failed write); stderr if unset.
  std::function<void(const std::string&)> log;
};

// What /metrics shows per service ("ns/name"), as of the last round.
struct ServiceMetrics {
  struct One {
    int32_t desired = 0, live = 0, ready = 0;
    double stable_load = 0, panic_load = 0;
    int64_t scale_ups = 0, scale_downs = 0;  // over the server's life
  };
  std::map<std::string, One> services;
};
std::string RenderServiceMetrics(const ServiceMetrics& m);

// The status key of a service's last scaling events: at most this many are kept.
inline constexpr size_t kMaxServiceHistory = 10;

class ServiceController {
 public:
  // Borrows everything; all must outlive the controller.
  ServiceController(store::Store& store, const Clock& clock, gateway::LoadMeter& load,
                    gateway::ReplicaHealth& health, ServiceControllerOptions options);
  ~ServiceController();  // Stop
  ServiceController(const ServiceController&) = delete;
  ServiceController& operator=(const ServiceController&) = delete;

  void Start();
  void Stop();
  void Kick();
  absl::Status RunOnce();
  ServiceMetrics Metrics() const;

 private:
  // One replica job as a round reads it.
  struct Replica {
    std::string ns, job, tmpl, node;
    int port = 0;
    api::JobPhase phase = api::JobPhase::kPending;
    bool stopping = false;
    const CachedObject* obj = nullptr;
  };
  struct Round {
    int64_t now = 0;
    std::map<std::string, std::vector<Replica>> by_service;  // "ns/service"
    std::set<int> ports;                                     // held by live replicas
    ServiceMetrics metrics;
  };
  // What a round needs of a service document, derived once per change of it (not every round).
  struct ParsedService {
    InferenceService svc;
    std::string tmpl;  // TemplateHash
  };
  // The cached parse of a service document (nullptr for one that does not parse).
  static const ParsedService* ParsedOf(CachedObject& obj, const std::string& key);
  // A service's replicas as the plan and the status see them.
  struct Views {
    std::vector<autoscale::ReplicaView> replicas;
    nlohmann::ordered_json endpoints = nlohmann::ordered_json::array();
    int32_t ready = 0, live = 0;
    std::set<std::string> existing;  // job names
  };
  void Loop();
  // Every replica job in the cache, by service ("ns/name"); the ports they hold.
  void CollectReplicas(Round& round);
  // One service's round; `obj.derived` caches its parsed document and template hash.
  absl::Status Reconcile(Round& round, const std::string& key, CachedObject& obj);
  // Its parts: the replicas' views; the jobs in a namespace (for its quota); `count` new
  // replicas' jobs into `ops`; the status; the one transaction that writes it all.
  Views ViewsOf(const Round& round, const std::string& ns, const std::string& svc_key,
                const std::string& tmpl) const;
  int64_t JobsIn(const std::string& ns) const;
  absl::Status CreateReplicas(Round& round, const ParsedService& parsed, int32_t count,
                              Views& views, int64_t* next, std::vector<store::Op>* ops);
  nlohmann::ordered_json StatusOf(Round& round, const std::string& svc_key,
                                  const nlohmann::ordered_json& old_status,
                                  const autoscale::ScaleDecision& d, int32_t before, int32_t after,
                                  Views& views, const gateway::LoadMeter::Reading& load,
                                  const InferenceServiceSpec& spec);
  absl::Status WriteStatus(int64_t now, const std::string& key, const CachedObject& obj,
                           const std::string& svc_key, const nlohmann::ordered_json& old_status,
                           nlohmann::ordered_json status, std::vector<store::Op> ops);
  std::string NewUid();
  void Log(const std::string& what) const;

  store::Store& store_;
  const Clock& clock_;
  gateway::LoadMeter& load_;
  gateway::ReplicaHealth& health_;
  ServiceControllerOptions options_;
  const int64_t started_ms_;
  ObjectCache services_{"/inferenceservices/"};
  ObjectCache jobs_{"/jobs/"};
  ObjectCache nodes_{"/nodes/"};
  std::map<std::string, autoscale::ScalerMemory> memory_;  // by service, on the loop's thread
  gateway::RemoteLoads remote_;                            // on the loop's thread
  int64_t remote_read_ms_ = 0;
  // With options_.merge_remote, at most once a second: the other gateways' reports into
  // remote_, and those of gateways gone for a minute deleted.
  absl::Status ReadRemoteLoads(int64_t now_ms);
  uint64_t uid_state_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool kicked_ = false;
  bool stopping_ = false;
  ServiceMetrics metrics_;
  std::thread thread_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_SERVICES_H_
