// The job arrays' parallelism gate, part of the scheduler's input (sched/snapshot.h): of an
// array's pending elements, only as many as its parallelism leaves beside its running ones are
// handed to the scheduler, lowest indices first (core/job_array.h says what arrays are). The
// server's controller and the replay of a recording (BuildSnapshot) gate alike.
// Pure functions and a value-type collector; thread-compatible.
#ifndef GPUCLOUD_SCHED_ARRAY_GATE_H_
#define GPUCLOUD_SCHED_ARRAY_GATE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/text.h"

namespace gpucloud::sched {

// One element of an array whose parallelism is bounded, as a controller pass sees it.
struct ArrayMember {
  std::string array;  // "namespace/name": arrays of different namespaces are apart
  int32_t index = 0;
  int32_t parallelism = 0;  // > 0
  bool holding = false;     // admitted (Scheduled, Running or stopping); else a pending candidate
};

// The parallelism gate: for each member, whether it is admitted. Holding members are. Per array,
// the pending candidates with the lowest indices are, as many as the array's parallelism leaves
// beside its holding members (none when they already fill it); the others wait. The bound of an
// array is the smallest parallelism its members carry (they all carry the same, as created).
std::vector<bool> AdmitArrayMembers(const std::vector<ArrayMember>& members);

// Whether the gate bounds this job: an element of an array with a parallelism.
inline bool Gated(const JobSpec& spec) {
  return spec.array && spec.array->element() && spec.array->parallelism > 0;
}

// Collects a pass's gated elements, then decides them together (AdmitArrayMembers). `Handle` is
// the caller's name for a candidate (the controller's cached object, the replay's index).
template <typename Handle>
class ArrayGate {
 public:
  // An element holding its allocation: it counts against its array's parallelism.
  void Holding(std::string_view ns, const JobArraySpec& a) {
    members_.push_back({Cat(ns, "/", a.name), a.index, a.parallelism, true});
    handles_.emplace_back();
  }
  // A pending element the scheduler could place.
  void Candidate(std::string_view ns, const JobArraySpec& a, Handle handle) {
    members_.push_back({Cat(ns, "/", a.name), a.index, a.parallelism, false});
    handles_.push_back(std::move(handle));
  }
  struct Verdict {
    std::vector<Handle> admitted;  // to the scheduler
    std::vector<Handle> held;      // Pending with reason ArrayParallelism
  };
  Verdict Decide() const {
    Verdict v;
    std::vector<bool> admit = AdmitArrayMembers(members_);
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].holding) continue;
      (admit[i] ? v.admitted : v.held).push_back(handles_[i]);
    }
    return v;
  }

 private:
  std::vector<ArrayMember> members_;
  std::vector<Handle> handles_;  // per member; default for holding ones
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_ARRAY_GATE_H_
