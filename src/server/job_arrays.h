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
#include "sched/array_gate.h"
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

// The parallelism gate is part of the scheduler's input (sched/array_gate.h).
using sched::AdmitArrayMembers;
using sched::ArrayGate;
using sched::ArrayMember;
using sched::Gated;

// The write that holds a pending element back: its stored document `doc` (read at
// `mod_revision`, compare-and-swap) with `status` given reason ArrayParallelism. nullopt when
// the status says so already (nothing to write).
std::optional<store::Op> HoldArrayElementOp(const std::string& key,
                                            const nlohmann::ordered_json& doc, int64_t mod_revision,
                                            JobStatus status, const JobArraySpec& element);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_JOB_ARRAYS_H_
