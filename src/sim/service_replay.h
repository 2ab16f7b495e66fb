// Inference services in the simulator (`gpucloud sim --service SVC.yaml --service-load CURVE`):
// a service's load curve replayed next to a training trace, so that an operator sees how many
// GPUs serving takes from training over a day and what each got. The replay scales a service
// as production does: every tick it feeds the curve's load to the service autoscaler
// (autoscale::DecideReplicas) and follows the replica plan (autoscale::PlanReplicas); each
// replica is a job (autoscale::ReplicaJobSpec, sched::PendingOf) that the production scheduler
// places next to training, preempting lower-priority jobs where the service's priority allows.
//
// The model of load: the curve gives requests per second (linear between its points); a
// request spends `latency_s` at a replica, so the requests in flight are rps x latency_s
// (Little's law); a replica is ready `startup_s` after it is bound (image pulled, model
// loaded). A tick stands for the server's autoscaler rounds since the last (it decides every
// 200 ms; the curve changes over minutes); a replica to be scaled down is taken as idle at
// some moment of the tick (the server waits for such a moment). Requests queued because too
// few replicas are ready are not modelled beyond asking for a first replica.
//
// Owned by one Simulation; not thread-safe. No I/O, no clock.
#ifndef GPUCLOUD_SIM_SERVICE_REPLAY_H_
#define GPUCLOUD_SIM_SERVICE_REPLAY_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "autoscale/replica_plan.h"
#include "autoscale/service_scaler.h"
#include "core/inference_service.h"

namespace gpucloud::sim {

// The load at `t_s` seconds from the trace's start.
struct LoadPoint {
  int64_t t_s = 0;
  double rps = 0;
  bool operator==(const LoadPoint&) const = default;
};

// Reads a load curve: CSV with the header `time,rps`, a row per point; time in seconds or as a
// duration (90m, 1h30m, 2d); times strictly increasing, rps >= 0. InvalidArgument naming the
// line and column otherwise, or when there are fewer than two points.
absl::StatusOr<std::vector<LoadPoint>> ParseLoadCurve(std::string_view csv);

// Requests per second at `t_s`: linear between points; 0 before the first and after the last.
double RpsAt(std::span<const LoadPoint> load, int64_t t_s);

struct SimService {
  InferenceService service;
  std::vector<LoadPoint> load;  // the service exists from the first point to the last
  double latency_s = 0.1;       // a request's time at a replica
  int64_t startup_s = 30;       // bound to ready
};

// One moment of a service's replay, kept when what it shows changed.
struct ServicePoint {
  int64_t t_s = 0;
  double rps = 0;
  int32_t desired = 0;
  int32_t ready = 0;
};

// What a service got in a run.
struct ServiceOutcome {
  std::string name;      // namespace/name
  double gpu_hours = 0;  // GPU time its replicas held (GPU equivalents, starting ones included)
  double ready_replica_hours = 0;
  // Replicas desired but not ready (pending for room, or starting), over time: capacity the
  // autoscaler asked for and did not have.
  double shortfall_replica_hours = 0;
  double requests = 0;  // integral of the curve
  int32_t peak_ready = 0;
  int64_t replicas_started = 0;  // replica jobs made
  int64_t preempted = 0;         // times one of its replicas was preempted
  std::string rejected;          // a replica could never be placed: why (the service stopped)
  std::vector<ServicePoint> timeline;
};

class ServiceReplay {
 public:
  using State = autoscale::ReplicaView::State;
  struct Replica {
    int32_t job = -1;  // the simulation's job index
    State state = State::kPending;
  };
  struct Plan {
    int32_t create = 0;
    std::vector<int32_t> stop;  // job indexes
  };

  // Borrows `services`, which must outlive it. `tick_s` > 0.
  ServiceReplay(std::span<const SimService> services, int64_t tick_s);

  size_t size() const { return services_.size(); }
  const SimService& service(int32_t s) const { return services_[s]; }
  // When service s's first tick is.
  int64_t FirstTick(int32_t s) const { return services_[s].load.front().t_s; }
  // The tick after `now`; -1 when the tick at `now` was its last (the curve ended).
  int64_t NextTick(int32_t s, int64_t now) const;

  // A round of service s's autoscaler at `now` (a tick), its replicas as they are now. At the
  // curve's end, or once a replica was rejected, every replica is stopped.
  Plan Tick(int32_t s, int64_t now, const std::vector<Replica>& replicas);

  // Accounting, from the simulation.
  void AddGpuSeconds(int32_t s, double gpu_seconds) {
    runs_[s].out.gpu_hours += gpu_seconds / 3600;
  }
  void Started(int32_t s) { ++runs_[s].out.replicas_started; }
  void Preempted(int32_t s) { ++runs_[s].out.preempted; }
  void Rejected(int32_t s, const std::string& why);

  // The outcomes, the replay stopped at `now`.
  std::vector<ServiceOutcome> Finish(int64_t now);

 private:
  struct Run {
    std::vector<autoscale::LoadSample> samples;  // the last stable window's seconds
    int64_t next_second = 0;                     // the first second not sampled yet
    int64_t last_request_ms = 0;
    double carry = 0;  // requests of fractional rates not counted yet
    autoscale::ScalerMemory memory;
    int64_t last_tick = -1;
    int32_t desired = 0, ready = 0;  // as of the last tick
    ServiceOutcome out;
  };
  void Sample(int32_t s, int64_t until_s);
  void Account(int32_t s, int64_t now);

  std::span<const SimService> services_;
  int64_t tick_s_;
  std::vector<Run> runs_;
};

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_SERVICE_REPLAY_H_
