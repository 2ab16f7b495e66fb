// What binding a job to a placement writes: ranks, node ranks, local ranks, the rendezvous
// (rank 0's address and a master port), every task's hosts, and one api::Assignment per rank
// for its node's agent. A pure function of the job, the scheduler's placement and the nodes:
// the controller resolves the nodes and writes the result. Thread-safe (no state).
#ifndef GPUCLOUD_SERVER_ASSIGNMENTS_H_
#define GPUCLOUD_SERVER_ASSIGNMENTS_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/wire.h"
#include "core/job.h"
#include "sched/cluster_state.h"
#include "server/job_status.h"

namespace gpucloud::server {

// The master port range: [kMasterPortBase, kMasterPortBase + kMasterPortCount).
inline constexpr int kMasterPortBase = 20000;
inline constexpr int kMasterPortCount = 20000;

// The job's master port for `attempt`: from a stable hash (FNV-1a 64 of the uid and the
// attempt; the same on every standard library and every run), moved to the next port of the
// range that is not in `taken` (the master ports of other jobs whose rank 0 is on the same
// node). Falls back to the hashed port when the whole range is taken.
int MasterPort(std::string_view job_uid, int attempt, const std::set<int>& taken);

// One replica of the placement with its node resolved.
struct PlacedOn {
  sched::ReplicaPlacement replica;      // as the scheduler placed it (`node` is the state's index)
  std::string node;                     // the node's name
  const api::NodeInfo* info = nullptr;  // never null; the node's registration
};

struct BindInput {
  const Job* job = nullptr;  // never null
  std::string uid;
  int attempt = 1;  // the attempt being bound (1 = the first)
  std::string checkpoint_dir;
  int master_port = 0;  // MasterPort's choice
  int64_t grace_seconds = 30;
};

struct Binding {
  std::vector<PlacedReplica> placement;      // in rank order
  std::vector<api::Assignment> assignments;  // one per rank, same order
  std::vector<std::string> where;  // per rank: "node" or "node (GPU 0,1)", for the message
};

// Where the other nodes of a gang reach `node`: its registered address, else its host name.
const std::string& NodeAddress(const api::NodeInfo& node);

// Ranks follow the spec's task order, then each task's replica order. Node ranks follow each
// node's lowest rank; local ranks count within a node.
Binding AssignmentsFor(const BindInput& in, std::vector<PlacedOn> replicas);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_ASSIGNMENTS_H_
