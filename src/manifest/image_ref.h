// Parsing of OCI image references by the Docker reference grammar (distribution/reference):
//   reference := name [":" tag] ["@" digest]
//   name      := [domain "/"] path-component ["/" path-component]*
//   domain    := host [":" port], where host is DNS components, or "localhost", or [IPv6]
//   path-component := [a-z0-9]+ (("." | "_" | "__" | "-"+) [a-z0-9]+)*
//   tag       := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//   digest    := algorithm ":" hex{32,}   (sha256: exactly 64 lowercase hex)
// The first component is a domain when it holds '.' or ':' or is "localhost", as Docker reads
// it. Pure functions; thread-safe.
#ifndef GPUCLOUD_MANIFEST_IMAGE_REF_H_
#define GPUCLOUD_MANIFEST_IMAGE_REF_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpucloud::manifest {

struct ImageReference {
  std::string domain;  // "registry.local:5000"; empty = the default registry
  std::string path;    // "team/trainer"
  std::string tag;     // "1"; empty = none given
  std::string digest;  // "sha256:..."; empty = none given
  bool operator==(const ImageReference&) const = default;
};

// InvalidArgument saying which part is wrong ("repository must be lowercase", "empty path
// component", ...), without the text itself.
absl::StatusOr<ImageReference> ParseImageReference(std::string_view text);

}  // namespace gpucloud::manifest

#endif  // GPUCLOUD_MANIFEST_IMAGE_REF_H_
