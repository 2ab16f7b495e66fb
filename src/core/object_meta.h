// Metadata shared by every API object (Kubernetes-style): name, namespace (= tenant), labels,
// annotations, and the fields the store fills in (uid, resourceVersion, creation time).
// Value type; thread-compatible.
#ifndef GPUCLOUD_CORE_OBJECT_META_H_
#define GPUCLOUD_CORE_OBJECT_META_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpucloud {

inline constexpr std::string_view kDefaultNamespace = "default";

struct ObjectMeta {
  std::string name;
  std::string namespace_ = std::string(kDefaultNamespace);  // the tenant
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // Set by the store; empty / zero in manifests.
  std::string uid;
  int64_t resource_version = 0;
  int64_t creation_unix_seconds = 0;

  bool operator==(const ObjectMeta&) const = default;
};

// RFC 1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric, at most
// 63 characters. Used for object names, namespaces, task names.
absl::Status ValidateDnsLabel(std::string_view value);

// Kubernetes label key: optional DNS-subdomain prefix and '/', then a name of at most 63
// characters of alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
absl::Status ValidateLabelKey(std::string_view key);

// Kubernetes label value: empty, or at most 63 characters like a label name.
absl::Status ValidateLabelValue(std::string_view value);

// A key of a Secret's data, as Kubernetes takes it: 1 to 253 of [-._a-zA-Z0-9], not "." or "..".
absl::Status ValidateSecretKey(std::string_view key);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_OBJECT_META_H_
