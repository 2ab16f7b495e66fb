#include "core/job_array.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "core/text.h"

namespace gpucloud {
namespace {

// A decimal number in 0..max (no sign, at most 9 digits), or nullopt.
std::optional<int64_t> Number(std::string_view s, int64_t max) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  int64_t v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  if (v > max) return std::nullopt;
  return v;
}

absl::Status Bad(std::string_view text, std::string_view part, std::string_view why) {
  return absl::InvalidArgumentError(Cat("array \"", text, "\": \"", part, "\" ", why,
                                        " (indices are written like 0-999, 1,3,5-7, 0-15:4, "
                                        "with an optional %PARALLELISM)"));
}

// One comma-separated entry, "N", "N-M" or "N-M:STEP", appended to `out` (one range, or one per
// index with a step above 1); `*count` adds its indices.
absl::Status ParseEntry(std::string_view text, std::string_view entry, std::vector<IndexRange>* out,
                        int64_t* count) {
  if (entry.empty()) return Bad(text, entry, "is an empty entry");
  std::string_view range = entry, step_text;
  if (size_t colon = entry.find(':'); colon != std::string_view::npos) {
    range = entry.substr(0, colon);
    step_text = entry.substr(colon + 1);
  }
  size_t dash = range.find('-');
  std::optional<int64_t> first = Number(range.substr(0, dash), kMaxArrayIndex);
  std::optional<int64_t> last =
      dash == std::string_view::npos ? first : Number(range.substr(dash + 1), kMaxArrayIndex);
  if (!first || !last) {
    return Bad(text, entry,
               Cat("is not an index or a range of indices from 0 to ", kMaxArrayIndex));
  }
  if (*last < *first) return Bad(text, entry, "runs backwards");
  int64_t step = 1;
  if (range.size() != entry.size()) {
    std::optional<int64_t> s = Number(step_text, kMaxArrayIndex);
    if (dash == std::string_view::npos || !s || *s < 1) {
      return Bad(text, entry, "has a step that is not a positive number after a range N-M");
    }
    step = *s;
  }
  const int64_t n = (*last - *first) / step + 1;
  *count += n;
  if (*count > kMaxArrayElements) return absl::OkStatus();  // the caller reports the total
  if (step == 1) {
    out->push_back({static_cast<int32_t>(*first), static_cast<int32_t>(*last)});
    return absl::OkStatus();
  }
  for (int64_t i = *first; i <= *last; i += step) {
    out->push_back({static_cast<int32_t>(i), static_cast<int32_t>(i)});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobArraySpec> ParseArrayIndices(std::string_view text) {
  JobArraySpec spec;
  std::string_view list = text;
  if (size_t pct = text.find('%'); pct != std::string_view::npos) {
    list = text.substr(0, pct);
    std::string_view p = text.substr(pct + 1);
    std::optional<int64_t> v = Number(p, kMaxArrayElements);
    if (!v || *v < 1) {
      return Bad(text, Cat("%", p),
                 Cat("is not a parallelism from 1 to ", kMaxArrayElements, " after %"));
    }
    spec.parallelism = static_cast<int32_t>(*v);
  }
  if (list.empty()) return Bad(text, list, "names no index");
  std::vector<IndexRange> ranges;
  int64_t count = 0;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string_view entry = list.substr(start, comma - start);
    if (absl::Status s = ParseEntry(text, entry, &ranges, &count); !s.ok()) return s;
    start = comma + 1;
  }
  if (count > kMaxArrayElements) {
    return absl::InvalidArgumentError(Cat("array \"", text, "\": names ", count,
                                          " indices; an array has at most ", kMaxArrayElements));
  }
  spec.indices = NormalizeIndices(std::move(ranges));
  spec.count = static_cast<int32_t>(CountIndices(spec.indices));
  return spec;
}

std::vector<IndexRange> NormalizeIndices(std::vector<IndexRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const IndexRange& a, const IndexRange& b) {
    return a.first != b.first ? a.first < b.first : a.last < b.last;
  });
  std::vector<IndexRange> out;
  for (const IndexRange& r : ranges) {
    if (!out.empty() && int64_t{r.first} <= int64_t{out.back().last} + 1) {
      out.back().last = std::max(out.back().last, r.last);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::string FormatArrayIndices(const std::vector<IndexRange>& ranges) {
  std::vector<std::string> parts;
  for (const IndexRange& r : ranges) {
    parts.push_back(r.first == r.last ? std::to_string(r.first) : Cat(r.first, "-", r.last));
  }
  return Join(parts, ",");
}

int64_t CountIndices(const std::vector<IndexRange>& ranges) {
  int64_t n = 0;
  for (const IndexRange& r : ranges) n += int64_t{r.last} - r.first + 1;
  return n;
}

std::string ArrayElementName(std::string_view array, int32_t index) {
  return Cat(array, "-", index);
}

}  // namespace gpucloud
