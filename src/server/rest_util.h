// Helpers the REST API's files share: Kubernetes Status answers and stored documents with their
// revision. Thread-safe (pure functions).
#ifndef GPUCLOUD_SERVER_REST_UTIL_H_
#define GPUCLOUD_SERVER_REST_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/rest.h"
#include "store/store.h"

namespace gpucloud::server {

using Json = nlohmann::ordered_json;

struct Resource {
  std::string_view plural;
  std::string_view kind;
  bool namespaced;
};

struct RestApi::Route {
  const Resource* resource = nullptr;
  std::string namespace_;
  std::string name;
  std::string Prefix() const {
    return resource->namespaced ? Cat("/", resource->plural, "/", namespace_, "/")
                                : Cat("/", resource->plural, "/");
  }
  std::string Key() const { return Prefix() + name; }
};

// The request's body read as manifests, parsed on the first call and kept in the request.
const manifest::ParseResult& ParsedBody(const Request& r);

// A request body as JSON (YAML is read too, as YAML 1.2's core schema types it) into `out`:
// "" when it is an object, else the error ("body: ...").
std::string ParseJsonBody(const std::string& body, Json* out);

// A Kubernetes Status object as the answer.
Response Status(int code, std::string_view reason, std::string message);
// The answer for a store or validation error (404, 409, 410, 400, 500).
Response FromStatus(const absl::Status& s);
// Splits a request target ("/path?k=v&k2") into r->path and r->query, percent-decoded.
void ParseTarget(std::string_view target, Request* r);
// A non-negative integer query parameter of at most `max`: nullopt when absent, -1 when it is
// not one or is over `max` (the caller answers 400 naming it). Never wraps: 4294967297 is not 1.
std::optional<int64_t> QueryInt(const Request& r, const char* key,
                                int64_t max = std::numeric_limits<int64_t>::max());
// A boolean query parameter, read as Kubernetes does: "true", "True", "TRUE" and "1" are true;
// "false", "False", "FALSE" and "0" are false; absent is `absent`. nullopt for anything else
// (the caller answers 400 naming it).
std::optional<bool> QueryBool(const Request& r, const char* key, bool absent = false);
// True when `key` is present and reads as true (QueryBool). The HTTPS front's test for
// watch, follow and allowWatchBookmarks: a bad value reads false there, and the API then
// refuses it with 400.
inline bool QueryTrue(const Request& r, const char* key) {
  return QueryBool(r, key).value_or(false);
}
// 400 BadRequest naming the first query parameter of `r` that is not in `allowed` (a
// parameter this path does not implement is refused, never ignored: a delete that ignored its
// fieldSelector would delete everything), or naming a boolean one of them that is not a
// boolean (watch, follow, allowWatchBookmarks). nullopt when the query is acceptable.
std::optional<Response> RefuseQuery(const Request& r, std::span<const std::string_view> allowed);
inline std::optional<Response> RefuseQuery(const Request& r,
                                           std::initializer_list<std::string_view> allowed) {
  return RefuseQuery(r, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}
// True for a dry run (dryRun=All; RefuseQuery refuses any other value): the request is
// authorized and validated exactly as it would be, nothing is written, and the would-be object
// is answered.
inline bool DryRun(const Request& r) { return r.query.contains("dryRun"); }
// What a create, update or patch of an object takes: dryRun=All; fieldManager (kubectl sends
// one: gpucloud keeps no managedFields, so it names nothing stored); fieldValidation (Strict,
// Warn or Ignore: whatever it says, a field the kind does not have is an error, as Strict makes
// it, never dropped).
inline constexpr std::string_view kWriteQuery[] = {"dryRun", "fieldManager", "fieldValidation"};
// A job's create also takes whatIf=true, with dryRun=All: the answer's status.whatIf says what
// the scheduler would do with it now (RestApi::SetWhatIf).
inline constexpr std::string_view kJobCreateQuery[] = {"dryRun", "fieldManager", "fieldValidation",
                                                       "whatIf"};
// A path that takes no query parameter.
inline constexpr std::span<const std::string_view> kNoQuery{};
// What a GET of a collection takes (a list or, with watch=true, a watch). A list always reads
// the newest state, which every resourceVersion a list may ask for allows ("", 0, not older
// than R); timeoutSeconds bounds a watch (a list answers at once).
// limit and continue page a list (rest_paging.h); a watch ignores limit, as Kubernetes does.
inline constexpr std::string_view kCollectionQuery[] = {
    "labelSelector",       "watch", "resourceVersion", "timeoutSeconds",
    "allowWatchBookmarks", "limit", "continue"};

// The stored document with the store's revision as metadata.resourceVersion.
Json WithRevision(const store::KeyValue& kv);
// The 200 answer listing the events under `prefix` (an EventList at the store's revision).
Response EventListOf(store::Store& store, const std::string& prefix);

// A stored job that holds nothing and runs nothing: ended, or Pending and never placed. A cancel
// or delete of it takes effect at once (rest_cluster.cc; the job arrays' too).
bool HoldsNothing(const Json& job);

// A job naming a RuntimeClass the store holds gets its node selector and tolerations, as
// `gpuctl validate` applies one from the same files (manifest::ResolveRuntimeClasses): the 422
// answer when the job's own selector contradicts it. One the store lacks is applied by nobody:
// `warning` says so (a Kubernetes Warning header's value). Objects of other kinds are left.
std::optional<Response> ResolveRuntimeClass(store::Store& store, manifest::Object& o,
                                            std::string* warning);

// A node object (`doc`) with its GPUs' live health from its agent's latest heartbeat in
// `nodes` (status.gpus[i].healthy, reason, atRisk, risk; status.lastHeartbeatMs): what the
// controller schedules by, so that every reader of the API sees the one truth. A node without a
// heartbeat is left as registered.
void ApplyLiveGpuHealth(const NodeTable& nodes, Json& doc);

// A Namespace object's body checked for the name `name` (apiVersion gpucloud/v1 or v1, kind
// Namespace, metadata name/labels/annotations, spec.owner a user's name, spec.budget in
// `currency`: budgets.h): "" when it is one, else the error naming the field (rest_namespaces.cc).
std::string ValidateNamespaceObject(const Json& doc, const std::string& name,
                                    std::string_view currency = "USD");
// A Namespace object named `name`, owned by `owner` ("" for none), without server fields.
Json NewNamespaceObject(const std::string& name, const std::string& owner);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_REST_UTIL_H_
