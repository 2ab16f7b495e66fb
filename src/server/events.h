// Events: what happened to a job and why ("Scheduled", "Waiting: queue team-a is over quota",
// "TaskFailed: rank 1 exit code 3; restart 1 of 3 in 10 s"), stored as objects under
// /events/{namespace}/{job}.{time}-{seq} in the same transaction as the change they explain,
// and served at .../jobs/{name}/events. Deleted with their job. Functions are thread-safe.
#ifndef GPUCLOUD_SERVER_EVENTS_H_
#define GPUCLOUD_SERVER_EVENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"

namespace gpucloud::server {

struct JobEvent {
  std::string type;  // "Normal" or "Warning"
  std::string reason;
  std::string message;
};

// The store write of one event about job {ns}/{job} (uid) at `now_ms`; `seq` orders events of
// the same millisecond.
store::Op MakeEventOp(const std::string& ns, const std::string& job, const std::string& uid,
                      const JobEvent& event, int64_t now_ms, uint64_t seq);
// The store write of one event about namespace `ns` itself (its budget's alerts), kept under
// the events of the pseudo-job "_namespace" (not a DNS label: no job has that name) and
// served at .../namespaces/{ns}/events.
store::Op MakeNamespaceEventOp(const std::string& ns, const std::string& uid, const JobEvent& event,
                               int64_t now_ms, uint64_t seq);
inline constexpr std::string_view kNamespaceEvents = "_namespace";
// The prefix of a job's events in the store.
std::string EventPrefix(const std::string& ns, const std::string& job);
// The keys of a job's events (for deleting them with it).
std::vector<std::string> EventKeysOf(store::Store& store, const std::string& ns,
                                     const std::string& job);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_EVENTS_H_
