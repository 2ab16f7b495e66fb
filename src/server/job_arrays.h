// Job arrays on the server (core/job_array.h says what they are): the jobs a created array
// becomes, the parallelism gate through which the controller admits pending elements, and the
// environment an element's tasks get. The REST API (rest_array.cc) creates, cancels and
// deletes an array as one transaction; the controller gates (controller.cc, Schedule).
// Pure functions and a value-type collector; thread-compatible.
#ifndef GPUCLOUD_SERVER_JOB_ARRAYS_H_
#define GPUCLOUD_SERVER_JOB_ARRAYS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/text.h"
#include "server/job_status.h"
#include "store/store.h"

namespace gpucloud::server {

// The reason in a pending element's status while its array runs `parallelism` elements.
inline constexpr std::string_view kArrayParallelismReason = "ArrayParallelism";

// Whether `spec` asks for an array (the server makes its elements; it is never stored).
inline bool AsksForArray(const JobSpec& spec) { return spec.array && !spec.array->element(); }

// The elements of `request` (a job whose spec.array asks for indices), in index order: each a
// copy of it named NAME-INDEX, labelled kArrayLabel=NAME and kArrayIndexLabel=INDEX, whose
// spec.array is the element's (the array's name, the index, the count, the parallelism). The
// caller gives them uids and creation times.
std::vector<Job> ArrayElements(const Job& request);

// The message of an element the gate holds back.
std::string ArrayParallelismMessage(const JobArraySpec& element);

// What an element's tasks get in their environment (over the spec's own env):
// GPUCLOUD_ARRAY_INDEX and SLURM_ARRAY_TASK_ID (the index), GPUCLOUD_ARRAY_NAME and
// SLURM_ARRAY_JOB_ID (the array's name: gpucloud has no numeric job ids), GPUCLOUD_ARRAY_COUNT
// and SLURM_ARRAY_TASK_COUNT. Nothing for a job that is not an element.
void AddArrayEnv(const JobSpec& spec, std::map<std::string, std::string>* env);

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

// The write that holds a pending element back: its stored document `doc` (read at
// `mod_revision`, compare-and-swap) with `status` given reason ArrayParallelism. nullopt when
// the status says so already (nothing to write).
std::optional<store::Op> HoldArrayElementOp(const std::string& key,
                                            const nlohmann::ordered_json& doc, int64_t mod_revision,
                                            JobStatus status, const JobArraySpec& element);

// Whether the gate bounds this job: an element of an array with a parallelism.
inline bool Gated(const JobSpec& spec) {
  return spec.array && spec.array->element() && spec.array->parallelism > 0;
}

// Collects a pass's gated elements, then decides them together (AdmitArrayMembers). `Handle` is
// the caller's name for a candidate (the controller's cached object).
template <typename Handle>
class ArrayGate {
 public:
  // An element holding its allocation: it counts against its array's parallelism.
  void Holding(const std::string& ns, const JobArraySpec& a) {
    members_.push_back({Cat(ns, "/", a.name), a.index, a.parallelism, true});
    handles_.emplace_back();
  }
  // A pending element the scheduler could place.
  void Candidate(const std::string& ns, const JobArraySpec& a, Handle handle) {
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

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_JOB_ARRAYS_H_
