// Decoder of a gpucloud/v1 Job's spec.array (core/job_array.h; docs/manifests.md, "Job
// arrays"): an array asked for ({count | indices, parallelism}) or an element of one ({name,
// index, count, parallelism}, as the server stores it).
#include <optional>

#include "core/job_array.h"
#include "core/text.h"
#include "manifest/decode.h"

namespace gpucloud::manifest::internal {
namespace {

constexpr size_t kMaxNameLength = 63;  // a DNS label

// count or indices, as the array's indices (and the parallelism "%P" in indices gives).
bool DecodeIndices(Context& ctx, const Field& at, const std::optional<Field>& count,
                   const std::optional<Field>& indices, JobArraySpec* out) {
  if (count && indices) {
    ctx.sink.Error(indices->mark, indices->path, "give either count or indices, not both");
    return false;
  }
  if (!count && !indices) {
    ctx.sink.Error(at.mark, at.path,
                   Cat("needs count (1 to ", kMaxArrayElements,
                       ": indices 0 to count-1) or indices (such as \"1,3,5-7\")"));
    return false;
  }
  if (count) {
    std::optional<int64_t> n = ReadInt(ctx.sink, *count, 1, kMaxArrayElements);
    if (!n) return false;
    out->indices = {{0, static_cast<int32_t>(*n - 1)}};
    out->count = static_cast<int32_t>(*n);
    return true;
  }
  std::optional<std::string> text = ReadString(ctx.sink, *indices);
  if (!text) return false;
  absl::StatusOr<JobArraySpec> parsed = ParseArrayIndices(*text);
  if (!parsed.ok()) {
    ctx.sink.Error(indices->mark, indices->path, std::string(parsed.status().message()));
    return false;
  }
  if (parsed->parallelism > 0 && out->parallelism > 0 && parsed->parallelism != out->parallelism) {
    ctx.sink.Error(indices->mark, indices->path,
                   Cat("says %", parsed->parallelism, " but parallelism is ", out->parallelism));
    return false;
  }
  if (parsed->parallelism > 0) out->parallelism = parsed->parallelism;
  out->indices = std::move(parsed->indices);
  out->count = parsed->count;
  return true;
}

// The longest element name, NAME-INDEX, must still be a DNS label.
bool CheckElementNames(Context& ctx, const Field& at, const std::string& job_name,
                       const JobArraySpec& a) {
  if (a.indices.empty() || job_name.empty()) return true;
  std::string longest = ArrayElementName(job_name, a.indices.back().last);
  if (longest.size() <= kMaxNameLength) return true;
  ctx.sink.Error(
      at.mark, at.path,
      Cat("makes element names such as ", longest, " (", longest.size(),
          " characters); names are at most ", kMaxNameLength, ": shorten metadata.name"));
  return false;
}

}  // namespace

bool DecodeJobArray(Context& ctx, const Field& f, const std::string& job_name,
                    std::optional<JobArraySpec>* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  JobArraySpec a;
  bool ok = m.Int32("parallelism", &a.parallelism, 1, kMaxArrayElements);
  std::optional<Field> count = m.Take("count");
  std::optional<Field> indices = m.Take("indices");
  std::optional<Field> name = m.Take("name");
  std::optional<Field> index = m.Take("index");
  m.Finish();
  if (index) {  // an element, as the server stores it
    std::optional<int64_t> i = ReadInt(ctx.sink, *index, 0, kMaxArrayIndex);
    ok = i.has_value() && ok;
    a.index = static_cast<int32_t>(i.value_or(0));
    if (!name) {
      ctx.sink.Error(index->mark, ChildPath(f.path, "name"),
                     "is required with index: the array this job is an element of");
      ok = false;
    } else if (std::optional<std::string> n = ReadDnsLabel(ctx, *name)) {
      a.name = *n;
    } else {
      ok = false;
    }
    if (indices) {
      ctx.sink.Error(indices->mark, indices->path,
                     "is not allowed with index: an element of an array has one index");
      ok = false;
    }
    if (count) {
      std::optional<int64_t> n = ReadInt(ctx.sink, *count, 1, kMaxArrayElements);
      ok = n.has_value() && ok;
      a.count = static_cast<int32_t>(n.value_or(0));
    }
  } else {
    if (name) {
      ctx.sink.Error(name->mark, name->path,
                     "is only allowed with index (an element); an array's name is metadata.name");
      ok = false;
    }
    ok = DecodeIndices(ctx, f, count, indices, &a) && ok;
    ok = ok && CheckElementNames(ctx, f, job_name, a);
  }
  if (!ok) return false;
  *out = std::move(a);
  return true;
}

}  // namespace gpucloud::manifest::internal
