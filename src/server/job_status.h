// JobStatus: the server-owned `status` of a stored Job document, and where its replicas run.
//
// Phases (design.md): Pending -> Scheduled -> Running -> Succeeded | Failed | Cancelled, with
// the stopping phases Preempting, Restarting, Cancelling and Stopping in between: the job's
// assignments are gone, its tasks are being stopped (SIGTERM, grace, SIGKILL) and its GPUs stay
// reserved until every task reported that it ended, its node is lost, or the deadline passed;
// then the job moves to `next` (Pending again for a restart or a preemption, or a final phase).
// Only the controller loop writes phases; the REST API sets cancel/delete requests.
// Value type; thread-compatible.
#ifndef GPUCLOUD_SERVER_JOB_STATUS_H_
#define GPUCLOUD_SERVER_JOB_STATUS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sched/cluster_state.h"

namespace gpucloud::server {

struct PlacedReplica {
  std::string name;  // the assignment's name: "{ns}.{job}.{rank}"
  std::string node;
  int rank = 0;
  sched::ReplicaPlacement placement;  // `node` index is meaningless here; see `node`
  bool operator==(const PlacedReplica&) const = default;
};

struct JobStatus {
  std::string phase = "Pending";
  std::string next;  // stopping phases: the phase after the tasks stopped
  int attempt = 0;       // attempts started so far; the current one when scheduled
  int restarts = 0;      // restarts after a task failed (counted against restartPolicy)
  int interruptions = 0;  // restarts after a preemption, a drain or a lost node (not counted)
  std::string reason;    // machine-readable: Unschedulable, Waiting, TaskFailed, NodeLost, ...
  std::string message;   // for people
  int64_t submitted_ms = 0;   // when the API accepted it (ms precision, unlike metadata)
  int64_t not_before_ms = 0;  // back-off: not scheduled before
  int64_t scheduled_ms = 0;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  int64_t stop_deadline_ms = 0;
  int64_t interrupted_ms = 0;     // when the current interruption began (0: none)
  int64_t last_recovery_ms = 0;   // the last interruption's time to running again
  int recoveries = 0;
  bool cancel_requested = false;
  bool delete_requested = false;
  std::string checkpoint_dir;
  std::vector<PlacedReplica> placement;
  std::map<std::string, std::string> tasks;  // assignment name -> last reported state
  bool operator==(const JobStatus&) const = default;

  bool Terminal() const { return phase == "Succeeded" || phase == "Failed" || phase == "Cancelled"; }
  bool Stopping() const {
    return phase == "Preempting" || phase == "Restarting" || phase == "Cancelling" ||
           phase == "Stopping";
  }
  bool Active() const { return phase == "Scheduled" || phase == "Running"; }
};

// Reads doc["status"] (absent: a new Pending job). Unknown fields are ignored.
JobStatus JobStatusFromJson(const nlohmann::ordered_json& doc);
void JobStatusToJson(const JobStatus& s, nlohmann::ordered_json& doc);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_JOB_STATUS_H_
