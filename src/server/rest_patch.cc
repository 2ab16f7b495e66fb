// PATCH of an object: a JSON merge patch (merge_patch.h) applied to the stored object, then
// served as the PUT of the result, so that it is authorized, validated and written exactly like
// one (a compare-and-swap on the revision it was merged onto, retried when another write came
// first and the patch named no resourceVersion of its own).
#include <string_view>

#include "core/text.h"
#include "server/merge_patch.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kMergePatch = "application/merge-patch+json";

// The store key of an object PATCH is served on (jobs, inferenceservices, queues, nodepools,
// runtimeclasses, namespaces), or "" for any other path. `parts` is the path below
// /apis/gpucloud/v1/.
std::string PatchableKey(const std::vector<std::string>& parts) {
  if (parts.size() == 4 && parts[0] == "namespaces" &&
      (parts[2] == "jobs" || parts[2] == "inferenceservices")) {
    return Cat("/", parts[2], "/", parts[1], "/", parts[3]);
  }
  if (parts.size() == 2 && (parts[0] == "queues" || parts[0] == "nodepools" ||
                            parts[0] == "runtimeclasses" || parts[0] == "namespaces")) {
    return Cat("/", parts[0], "/", parts[1]);
  }
  return "";
}

// 415 unless the body is a merge patch. A request that names no Content-Type (curl -X PATCH -d)
// is read as one, the only kind taken; a JSON patch sent so (an array) is then 400.
std::optional<Response> RefuseContentType(const Request& r) {
  std::string_view type = r.content_type;
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  if (type.empty() || type == kMergePatch) return std::nullopt;
  return Status(
      415, "UnsupportedMediaType",
      Cat("PATCH takes Content-Type ", kMergePatch, " (RFC 7386); ", type, " is not supported"));
}

// The patch's own metadata.resourceVersion (a precondition), 0 when it names none, -1 when it
// is not a revision.
int64_t PatchPrecondition(const Json& patch) {
  auto meta = patch.find("metadata");
  if (meta == patch.end() || !meta->is_object()) return 0;
  auto rv = meta->find("resourceVersion");
  if (rv == meta->end() || rv->is_null()) return 0;
  if (!rv->is_string()) return -1;
  Request probe;
  probe.query["rv"] = rv->get<std::string>();
  return QueryInt(probe, "rv").value_or(-1);
}

}  // namespace

Response RestApi::Patch(const Request& r, const std::vector<std::string>& parts) {
  const std::string key = PatchableKey(parts);
  if (parts.size() == 5 && parts[2] == "jobs" && parts[4] == "status") {
    return Status(405, "MethodNotAllowed",
                  Cat("PATCH is not allowed on ", r.path,
                      ": a job's status is written by the controller alone"));
  }
  if (key.empty()) {
    // As for any request that names no action: only admins are told more than 404.
    if (!r.who.admin) return Status(404, "NotFound", Cat("no such path PATCH ", r.path));
    return Status(
        405, "MethodNotAllowed",
        Cat("PATCH is not allowed on ", r.path,
            " (it is served on jobs, inferenceservices, queues, nodepools, runtimeclasses and "
            "namespaces)"));
  }
  if (std::optional<Response> bad = RefuseContentType(r)) return *bad;
  if (std::optional<Response> bad = RefuseQuery(r, kWriteQuery)) return *bad;
  Json patch = Json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!patch.is_object()) {
    return Status(400, "BadRequest", "body: a merge patch is a JSON object");
  }
  const int64_t precondition = PatchPrecondition(patch);
  if (precondition < 0) {
    return Status(400, "BadRequest", "metadata.resourceVersion: is not a revision");
  }
  Response out;
  for (int tries = 0; tries < 5; ++tries) {
    // The object as its GET answers it: one who may not read it learns nothing more (its 403 or
    // 404), whatever the patch holds.
    Response read = Handle(Request{"GET", r.path, {}, "", r.who});
    if (read.status != 200) return read;
    Json current = Json::parse(read.body, nullptr, /*allow_exceptions=*/false);
    Request probe;
    probe.query["rv"] = current.is_object() && current["metadata"].is_object()
                            ? current["metadata"].value("resourceVersion", "")
                            : "";
    const int64_t revision = QueryInt(probe, "rv").value_or(-1);
    if (revision <= 0) return Status(500, "InternalError", Cat(key, ": the stored object is bad"));
    if (precondition > 0 && precondition != revision) {
      return FromStatus(absl::AbortedError(
          Cat(key, " was changed: it is at revision ", revision, ", not ", precondition)));
    }
    Json merged = MergePatch(current, patch);
    if (!merged["metadata"].is_object()) {  // the patch replaced it with a scalar or a list
      return Status(400, "BadRequest", "metadata: must be an object");
    }
    merged["metadata"]["resourceVersion"] = std::to_string(revision);
    out = Handle(Request{"PUT", r.path, r.query, merged.dump(), r.who});
    const bool raced = out.status == 409 && out.body.find("\"Conflict\"") != std::string::npos;
    if (!raced || precondition > 0) return out;
  }
  return out;
}

}  // namespace gpucloud::server
