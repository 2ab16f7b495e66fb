#include "server/job_arrays.h"

#include <algorithm>
#include <limits>

namespace gpucloud::server {

std::vector<Job> ArrayElements(const Job& request) {
  std::vector<Job> out;
  if (!AsksForArray(request.spec)) return out;
  const JobArraySpec& asked = *request.spec.array;
  const std::string& array = request.metadata.name;
  const int32_t count = static_cast<int32_t>(CountIndices(asked.indices));
  out.reserve(count);
  for (const IndexRange& r : asked.indices) {
    for (int64_t i = r.first; i <= r.last; ++i) {
      Job e = request;
      const int32_t index = static_cast<int32_t>(i);
      e.metadata.name = ArrayElementName(array, index);
      e.metadata.labels[std::string(kArrayLabel)] = array;
      e.metadata.labels[std::string(kArrayIndexLabel)] = std::to_string(index);
      e.spec.array = JobArraySpec{
          .parallelism = asked.parallelism, .name = array, .index = index, .count = count};
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::string ArrayParallelismMessage(const JobArraySpec& element) {
  return Cat("array ", element.name, " runs at most ", element.parallelism,
             element.parallelism == 1 ? " element" : " elements", " at once");
}

void AddArrayEnv(const JobSpec& spec, std::map<std::string, std::string>* env) {
  if (!spec.array || !spec.array->element()) return;
  const JobArraySpec& a = *spec.array;
  const std::string index = std::to_string(a.index);
  (*env)["GPUCLOUD_ARRAY_INDEX"] = index;
  (*env)["SLURM_ARRAY_TASK_ID"] = index;
  (*env)["GPUCLOUD_ARRAY_NAME"] = a.name;
  (*env)["SLURM_ARRAY_JOB_ID"] = a.name;
  if (a.count > 0) {
    (*env)["GPUCLOUD_ARRAY_COUNT"] = std::to_string(a.count);
    (*env)["SLURM_ARRAY_TASK_COUNT"] = std::to_string(a.count);
  }
}

std::optional<store::Op> HoldArrayElementOp(const std::string& key,
                                            const nlohmann::ordered_json& doc, int64_t mod_revision,
                                            JobStatus status, const JobArraySpec& element) {
  std::string message = ArrayParallelismMessage(element);
  if (status.reason == kArrayParallelismReason && status.message == message) return std::nullopt;
  status.reason = std::string(kArrayParallelismReason);
  status.message = std::move(message);
  nlohmann::ordered_json out = doc;
  JobStatusToJson(status, out);
  return store::Op{store::Op::Kind::kPut, key, out.dump(2), mod_revision};
}

}  // namespace gpucloud::server
