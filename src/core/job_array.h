// Job arrays (Slurm's `sbatch --array=0-999%50`): one job per index, the idiom of
// hyperparameter sweeps. A client asks for an array with a Job whose spec.array names the
// indices (JobArraySpec::indices); the server makes one ordinary job per index, NAME-INDEX,
// labelled kArrayLabel=NAME and kArrayIndexLabel=INDEX, all in one store transaction. Each
// element's spec.array says which array it belongs to (JobArraySpec::name, index), so that the
// controller admits at most `parallelism` elements of one array at once and the agent's task
// gets GPUCLOUD_ARRAY_INDEX and SLURM_ARRAY_TASK_ID. Plain value types and pure functions;
// thread-compatible.
#ifndef GPUCLOUD_CORE_JOB_ARRAY_H_
#define GPUCLOUD_CORE_JOB_ARRAY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud {

inline constexpr int32_t kMaxArrayElements = 10'000;  // elements of one array
inline constexpr int32_t kMaxArrayIndex = 999'999;    // indices are 0..kMaxArrayIndex
inline constexpr std::string_view kArrayLabel = "gpucloud.io/array";
inline constexpr std::string_view kArrayIndexLabel = "gpucloud.io/array-index";

// Indices first..last, both included.
struct IndexRange {
  int32_t first = 0;
  int32_t last = 0;
  bool operator==(const IndexRange&) const = default;
};

struct JobArraySpec {
  // An array asked for: its indices, sorted, disjoint and not adjacent (as NormalizeIndices
  // leaves them). Empty on an element.
  std::vector<IndexRange> indices;
  // At most this many elements admitted (scheduled, running or stopping) at once; 0 = no bound.
  int32_t parallelism = 0;
  // An element (a job the server made from an array): the array's name, this element's index
  // (-1 on an array asked for) and how many elements the array has.
  std::string name;
  int32_t index = -1;
  int32_t count = 0;

  bool element() const { return index >= 0; }
  bool operator==(const JobArraySpec&) const = default;
};

// What `gpuctl run --array` and a manifest's spec.array.indices take, as Slurm writes it:
// comma-separated indices and ranges with an optional step, then an optional %PARALLELISM:
// "0-999", "0-999%50", "1,3,5-7", "0-15:4". InvalidArgument naming the offending part when the
// text is not of that form, an index is outside 0..kMaxArrayIndex, a range runs backwards, or it
// names more than kMaxArrayElements indices (counted as written, before overlapping ranges
// are merged: "0-5000,0-9999" is 15,001). `parallelism` is 0 without "%".
absl::StatusOr<JobArraySpec> ParseArrayIndices(std::string_view text);
// Sorts and merges overlapping or adjacent ranges.
std::vector<IndexRange> NormalizeIndices(std::vector<IndexRange> ranges);
// "0-999", "1,3,5-7" (ranges as NormalizeIndices leaves them; no parallelism).
std::string FormatArrayIndices(const std::vector<IndexRange>& ranges);
// How many indices the ranges hold.
int64_t CountIndices(const std::vector<IndexRange>& ranges);
// The name of element `index` of array `array`: "sweep-7".
std::string ArrayElementName(std::string_view array, int32_t index);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_JOB_ARRAY_H_
