// Discovery, as Kubernetes serves it, so that typed clients (kubectl, the Kubernetes Python
// client) find gpucloud's resources: GET /api (APIVersions: gpucloud serves no core group),
// /apis (APIGroupList: the group gpucloud, preferred version v1), /apis/gpucloud/v1
// (APIResourceList) and /version, and the OpenAPI documents (openapi.h) under /openapi. Readable
// by every authenticated identity but the bootstrap token (IsDiscoveryPath).
#include <string_view>
#include <vector>

#include "core/text.h"
#include "server/authorizer.h"
#include "server/openapi.h"
#include "server/rest.h"
#include "server/rest_util.h"

#ifndef GPUCLOUD_VERSION
#define GPUCLOUD_VERSION "0.0.0"
#endif

namespace gpucloud::server {
namespace {

constexpr std::string_view kGroup = "gpucloud";
constexpr std::string_view kGroupVersion = "gpucloud/v1";

// What a resource of the API takes, as discovery lists it. "patch" only where PATCH is served.
struct DiscoveredResource {
  std::string_view name;  // plural, or "plural/subresource"
  std::string_view singular;
  bool namespaced;
  std::string_view kind;
  std::vector<std::string_view> verbs;
  std::vector<std::string_view> short_names;
};

const std::vector<std::string_view> kReadOnly = {"get"};
const std::vector<std::string_view> kAllVerbs = {"create", "delete", "get",  "list",
                                                 "patch",  "update", "watch"};

// Every resource and sub-resource the API serves (rest.h lists their paths); the test
// DiscoveryListsWhatTheApiServes checks each collection answers.
const DiscoveredResource kDiscovered[] = {
    {"jobs", "job", true, "Job", kAllVerbs, {}},
    {"jobs/status", "", true, "Job", kReadOnly, {}},
    {"jobs/logs", "", true, "Job", kReadOnly, {}},
    {"jobs/events", "", true, "EventList", kReadOnly, {}},
    {"jobs/cancel", "", true, "Status", {"create"}, {}},
    {"queues", "queue", false, "Queue", kAllVerbs, {"q"}},
    {"nodepools", "nodepool", false, "NodePool", kAllVerbs, {"np"}},
    {"runtimeclasses", "runtimeclass", false, "RuntimeClass", kAllVerbs, {}},
    {"inferenceservices", "inferenceservice", true, "InferenceService", kAllVerbs, {"isvc"}},
    {"namespaces", "namespace", false, "Namespace", kAllVerbs, {"ns"}},
    {"nodes", "node", false, "Node", {"delete", "get", "list", "update", "watch"}, {"no"}},
    {"nodes/cordon", "", false, "Node", {"create"}, {}},
    {"nodes/uncordon", "", false, "Node", {"create"}, {}},
    {"nodes/drain", "", false, "Node", {"create"}, {}},
    {"secrets", "secret", true, "Secret", {"create", "delete", "get", "list", "update"}, {}},
    {"serviceaccounts",
     "serviceaccount",
     true,
     "ServiceAccount",
     {"create", "delete", "get", "list", "update"},
     {"sa"}},
    {"users", "user", false, "User", {"create", "delete", "get", "list", "update"}, {}},
    {"groups", "group", false, "Group", {"create", "delete", "get", "list", "update"}, {}},
    {"policies", "policy", false, "Policy", {"create", "delete", "get", "list", "update"}, {}},
    {"tokens", "token", false, "Token", {"create", "delete", "get", "list"}, {}},
};

Json Strings(const std::vector<std::string_view>& list) {
  Json out = Json::array();
  for (std::string_view s : list) out.push_back(s);
  return out;
}

Json ResourceList() {
  Json resources = Json::array();
  for (const DiscoveredResource& d : kDiscovered) {
    Json j{{"name", d.name},
           {"singularName", d.singular},
           {"namespaced", d.namespaced},
           {"kind", d.kind},
           {"verbs", Strings(d.verbs)}};
    if (!d.short_names.empty()) j["shortNames"] = Strings(d.short_names);
    resources.push_back(std::move(j));
  }
  return Json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", kGroupVersion},
              {"resources", std::move(resources)}};
}

Json Group() {
  Json version{{"groupVersion", kGroupVersion}, {"version", "v1"}};
  return Json{
      {"name", kGroup}, {"versions", Json::array({version})}, {"preferredVersion", version}};
}

Json ApiGroup() {
  Json j{{"kind", "APIGroup"}, {"apiVersion", "v1"}};
  j.update(Group());
  return j;
}

Json GroupList() {
  return Json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", Json::array({Group()})}};
}

// gpucloud serves no core ("v1") resources: an empty version list, so that clients ask no
// /api/v1.
Json Versions() {
  return Json{{"kind", "APIVersions"},
              {"versions", Json::array()},
              {"serverAddressByClientCIDRs", Json::array()}};
}

constexpr std::string_view Platform() {
#if defined(__x86_64__)
  return "linux/amd64";
#elif defined(__aarch64__)
  return "linux/arm64";
#else
  return "linux/unknown";
#endif
}

// Kubernetes' version.Info; every field present (the Python client requires each).
Json VersionInfo() {
  std::string_view version = GPUCLOUD_VERSION;  // the project's version (CMakeLists.txt)
  std::vector<std::string> parts = SplitAny(version, ".");
  return Json{{"major", parts.size() > 0 ? parts[0] : "0"},
              {"minor", parts.size() > 1 ? parts[1] : "0"},
              {"gitVersion", Cat("v", version)},
              {"gitCommit", ""},
              {"gitTreeState", ""},
              {"buildDate", ""},
              {"goVersion", ""},
              {"compiler", "c++"},
              {"platform", Platform()}};
}

}  // namespace

std::vector<OpenApiResource> DiscoveredResources() {
  std::vector<OpenApiResource> out;
  for (const DiscoveredResource& d : kDiscovered) {
    if (d.name.find('/') == std::string_view::npos) {
      out.push_back({d.name, d.kind, d.namespaced, d.verbs});
    }
  }
  return out;
}

Response RestApi::Discovery(const Request& r) {
  if (r.path.starts_with("/openapi/")) return ServeOpenApi(r);
  if (r.method != "GET") {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  // kubectl sends ?timeout=32s with its discovery requests.
  if (std::optional<Response> bad = RefuseQuery(r, {"timeout"})) return *bad;
  std::string_view path = r.path;
  if (path.ends_with('/')) path.remove_suffix(1);
  Json out = path == "/api"                ? Versions()
             : path == "/apis"             ? GroupList()
             : path == "/apis/gpucloud/v1" ? ResourceList()
             : path == "/apis/gpucloud"    ? ApiGroup()
                                           : VersionInfo();
  Response res{200, out.dump(2) + "\n"};
  res.authorization = {"discovery", std::string(path), "allow",
                       "discovery is readable by every authenticated identity"};
  return res;
}

}  // namespace gpucloud::server
