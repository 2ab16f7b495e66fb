// Any JSON document as YAML, for `gpuctl get -o yaml`: the same object `-o json` prints (every
// field, status and metadata included, keys in the server's order), only encoded differently.
// Strings that YAML would read as something else ("1", "true", "null", "", "0x10") are quoted,
// so that reading the YAML back gives the JSON again. Pure functions.
#ifndef GPUCLOUD_MANIFEST_JSON_YAML_H_
#define GPUCLOUD_MANIFEST_JSON_YAML_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpucloud::manifest {

// One YAML document (no leading "---"). InvalidArgument when `json` is not JSON.
absl::StatusOr<std::string> JsonToYaml(std::string_view json);
// A YAML document read back as JSON text (compact): for tests and round trips. Scalars are
// typed as YAML 1.2's core schema reads them (quoted ones stay strings).
absl::StatusOr<std::string> YamlToJson(std::string_view yaml);

}  // namespace gpucloud::manifest

#endif  // GPUCLOUD_MANIFEST_JSON_YAML_H_
