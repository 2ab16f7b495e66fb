// Helpers the REST API's files share: Kubernetes Status answers and stored documents with their
// revision. Thread-safe (pure functions).
#ifndef GPUCLOUD_SERVER_REST_UTIL_H_
#define GPUCLOUD_SERVER_REST_UTIL_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/text.h"
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

// The stored document with the store's revision as metadata.resourceVersion.
Json WithRevision(const store::KeyValue& kv);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_REST_UTIL_H_
