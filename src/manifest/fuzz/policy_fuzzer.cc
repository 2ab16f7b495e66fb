// libFuzzer target for the policy parser: any byte string given to ParsePolicyDocument (a bare
// IAM document or a gpucloud/v1 Policy) or to ParseManifests must produce either a document or
// diagnostics, never a crash, a hang or a sanitizer report; a valid document must print
// (PolicyToJson) and parse back to itself. Build with `make fuzz` (clang, GPUCLOUD_FUZZ=ON).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "manifest/manifest.h"

namespace m = gpucloud::manifest;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  m::PolicyDocumentResult r = m::ParsePolicyDocument(text, "fuzz.json");
  for (const m::Diagnostic& d : r.errors) (void)d.ToString();
  if (r.ok()) {
    gpucloud::Policy policy{.spec = r.document};
    policy.metadata.name = r.name.empty() ? "fuzz" : r.name;
    policy.metadata.namespace_.clear();
    m::PolicyDocumentResult again = m::ParsePolicyDocument(m::PolicyToJson(policy), "printed");
    if (!again.ok() || !(again.document == r.document)) std::abort();  // round-trip broken
  }
  m::ParseResult all = m::ParseManifests(text, "fuzz.yaml");
  for (const m::PolicyManifest& p : all.policies) {
    m::PolicyDocumentResult again = m::ParsePolicyDocument(m::PolicyToJson(p.policy), "printed");
    if (!again.ok() || !(again.document == p.policy.spec)) std::abort();
  }
  return 0;
}
