// The scheduler recording: what a server's scheduler was given and what it decided, pass by pass,
// as JSON lines, so that `gpucloud sim --trace FILE` can replay it through the same snapshot
// builder (sched/snapshot.h) and scheduler and show that it decides the same (sim/replay.h).
//
//   {"kind":"header","version":1,"config":{SchedulerConfiguration}}
//   {"kind":"queues","t":MS,"queues":[{Queue}, ...]}     whenever the queues change
//   {"kind":"node","t":MS,"node":{node}}                 a node the scheduler sees, new or changed
//                                                        (a join, a cordon, GPU health)
//   {"kind":"node-gone","t":MS,"name":NAME}              one it no longer sees (lost, removed)
//   {"kind":"nodes-changed","t":MS}                       after a change's node lines
//   The scheduler's nodes are those in name order.
//   {"kind":"job","t":MS,"event":E,"key":"ns/name","spec":{Job},"view":{...}}
//        a job whose view changed; E says how: arrival, bound, started, checkpoint, stopping,
//        requeued, ended, changed; spec only when it is new or changed
//   {"kind":"gone","t":MS,"key":"ns/name"}              a job no longer stored
//   {"kind":"pass","t":MS,"pending":["ns/name", ...],"decisions":[{decision}, ...]}
//        one scheduling cycle: the waiting jobs it was given, in order, and its decisions
// Objects are manifest::ToJson's gpucloud/v1 form; nodes, views and decisions are written by
// the functions below, placements in the keys of a job status's placement (GPUs as
// {index, mode, migProfile, migStart, fractionMilli, memoryMiB, mps}). Times are the server's
// clock in ms.
//
// RecordingWriter writes to a stream it does not own; not thread-safe (the controller's thread).
// The codec functions are pure and thread-safe.
#ifndef GPUCLOUD_SIM_RECORDING_H_
#define GPUCLOUD_SIM_RECORDING_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/node.h"
#include "core/queue.h"
#include "core/sched_config.h"
#include "sched/cluster_state.h"
#include "sched/scheduler.h"
#include "sched/snapshot.h"

namespace gpucloud::sim {

inline constexpr int kRecordingVersion = 1;

nlohmann::json NodeToJson(const Node& n);
absl::StatusOr<Node> NodeFromJson(const nlohmann::json& j);
nlohmann::json ViewToJson(const sched::JobView& v);
absl::StatusOr<sched::JobView> ViewFromJson(const nlohmann::json& j);
// A decision with node names from `state` (a bind's replicas, its GPUs and what it expects).
nlohmann::json DecisionToJson(const sched::Decision& d, const sched::ClusterState& state);

// Whether `first_line` is a recording's header (for `gpucloud sim --trace`).
bool IsRecording(std::string_view first_line);

class RecordingWriter {
 public:
  explicit RecordingWriter(std::ostream& out) : out_(out) {}

  void Header(const SchedulerConfig& config);
  void Queues(int64_t t_ms, const std::map<std::string, QueueSpec>& queues);
  // The scheduler's nodes now, in name order: the nodes that differ from the last written
  // (a large cluster's join writes each node once, not the whole list per join).
  void Nodes(int64_t t_ms, const std::vector<Node>& nodes);
  // A pass sees every stored job once, in key order, before Pass; a job line is written only
  // when its view (or spec) differs from the last one written.
  void Job(int64_t t_ms, const std::string& key, const gpucloud::Job& job,
           const sched::JobView& view);
  // Ends a pass: jobs not seen since the last Pass are written as gone; then the cycle's line
  // (only when the scheduler ran: `ran`).
  void Pass(int64_t t_ms, bool ran, const std::vector<const sched::PendingJob*>& pending,
            const std::vector<sched::Decision>& decisions, const sched::ClusterState& state);

 private:
  void Line(const nlohmann::json& j);
  struct Seen {
    sched::JobView view;
    size_t spec_hash = 0;  // of manifest::ToJson of the job (not the text: 2 KB a job)
    bool this_pass = false;
  };
  std::ostream& out_;
  std::map<std::string, Node> nodes_;  // as last written
  std::map<std::string, Seen> jobs_;
};

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_RECORDING_H_
