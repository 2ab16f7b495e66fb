// The API's OpenAPI documents, generated from the schema of its objects (manifest/schema.h)
// and the resources discovery lists (rest_discovery.cc), as Kubernetes serves them:
//   GET /openapi/v2                       Swagger 2.0: paths and `definitions` named
//                                         io.gpucloud.v1.KIND with x-kubernetes-group-version-kind
//   GET /openapi/v3                       the index: {"paths": {"apis/gpucloud/v1":
//                                         {"serverRelativeURL":
//                                         "/openapi/v3/apis/gpucloud/v1?hash=H"}}}
//   GET /openapi/v3/apis/gpucloud/v1      OpenAPI 3.0: paths and components.schemas
// so that kubectl explains the kinds (`kubectl explain jobs.spec.tasks`) and leaves the
// validation of what it writes to the server (its PATCH operations list fieldValidation, which
// kubectl reads as "the server validates"; the server refuses unknown fields itself).
// Readable by every authenticated identity, as discovery is (IsDiscoveryPath). JSON only: a
// client asking for protobuf (client-go's v2 OpenAPISchema) gets JSON it cannot read.
// Pure functions but ServeOpenApi's cache (built once, thread-safe).
#ifndef GPUCLOUD_SERVER_OPENAPI_H_
#define GPUCLOUD_SERVER_OPENAPI_H_

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/rest.h"

namespace gpucloud::server {

// A top-level resource of the API as discovery lists it.
struct OpenApiResource {
  std::string_view name;  // plural: "jobs"
  std::string_view kind;  // "Job"
  bool namespaced = false;
  std::vector<std::string_view> verbs;  // "get", "list", "create", "update", "patch", ...
};

// Every top-level resource discovery lists (sub-resources left out); rest_discovery.cc.
std::vector<OpenApiResource> DiscoveredResources();

// The documents for `resources`; a resource whose kind has no schema is left out.
nlohmann::ordered_json OpenApiV2(std::span<const OpenApiResource> resources);
nlohmann::ordered_json OpenApiV3(std::span<const OpenApiResource> resources);
// The /openapi/v3 index naming the group version's document by `hash` (of its text).
nlohmann::ordered_json OpenApiV3Index(std::string_view hash);

// GET /openapi/v2, /openapi/v3 and /openapi/v3/apis/gpucloud/v1 (each with or without a
// trailing '/'; `timeout` and, on the last, `hash` taken and ignored): 200 with the document;
// 405 for another method, 400 for another query parameter, 404 for another /openapi path.
Response ServeOpenApi(const Request& r);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_OPENAPI_H_
