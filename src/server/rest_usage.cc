// Usage records (api/usage.h) over the API: GET namespaces/{ns}/usage and GET usage (every
// namespace), read-only, authorized as jobs:List of the namespace (or of every namespace): who
// may list a namespace's jobs may see what they used. Query: since and until (unix ms) keep the
// records that overlap [since, until).
#include <nlohmann/json.hpp>

#include "api/usage.h"
#include "core/query.h"
#include "core/text.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kUsageQuery[] = {"since", "until"};
constexpr int64_t kMaxMs = 999'999'999'999'999;

}  // namespace

Response RestApi::HandleUsage(const Request& r, const std::string& ns) {
  if (r.method != "GET") {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  if (std::optional<Response> bad = RefuseQuery(r, kUsageQuery)) return *bad;
  int64_t bounds[2] = {0, kMaxMs};
  const char* names[2] = {"since", "until"};
  for (int i = 0; i < 2; ++i) {
    std::optional<int64_t> v = QueryInt(r, names[i], kMaxMs);
    if (v && *v < 0) {
      return Status(
          400, "BadRequest",
          Cat(names[i], ": \"", r.query.at(names[i]), "\" is not a time in unix milliseconds"));
    }
    if (v) bounds[i] = *v;
  }
  if (bounds[1] < bounds[0]) {
    return Status(400, "BadRequest", "until: is before since");
  }
  absl::StatusOr<store::ListResult> list =
      store_.List(ns.empty() ? "/usage/" : Cat("/usage/", ns, "/"));
  if (!list.ok()) return FromStatus(list.status());
  nlohmann::json items = nlohmann::json::array();
  for (const store::KeyValue& kv : list->items) {
    nlohmann::json j = nlohmann::json::parse(kv.value, nullptr, false);
    absl::StatusOr<api::AttemptUsage> u = api::UsageFromJson(j);
    if (!u.ok() || u->end_ms <= bounds[0] || u->start_ms >= bounds[1]) continue;
    items.push_back(std::move(j));
  }
  nlohmann::json out{{"apiVersion", "gpucloud/v1"},
                     {"kind", "UsageList"},
                     {"metadata", {{"resourceVersion", std::to_string(list->revision)}}},
                     {"items", std::move(items)}};
  return {200, out.dump(2) + "\n"};
}

}  // namespace gpucloud::server
