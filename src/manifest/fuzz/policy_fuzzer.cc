// libFuzzer target for the policy parser: any byte string given to ParsePolicyDocument (a bare
// IAM document or a gpucloud/v1 Policy) or to ParseManifests must produce either a document or
// diagnostics, never a crash, a hang or a sanitizer report; a valid document must print
// (PolicyToJson) and parse back to itself, and compile for evaluation (whatever parses also
// evaluates), and evaluating it must not crash or hang. Build with `make fuzz` (clang,
// GPUCLOUD_FUZZ=ON).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "authz/policy_set.h"
#include "manifest/manifest.h"

namespace m = gpucloud::manifest;
namespace authz = gpucloud::authz;

namespace {

void Evaluate(const gpucloud::PolicyDocument& document) {
  std::vector<authz::NamedPolicy> policies = {{"fuzz", document}};
  absl::StatusOr<authz::PolicySet> set = authz::PolicySet::Compile(policies);
  if (!set.ok()) std::abort();  // the parser accepted what the evaluator rejects
  authz::Request r{{"alice", authz::PrincipalType::kUser, {"ml-team"}, "team-a", ""},
                   "jobs:Create",
                   "gpucloud:job/team-a/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                   {}};
  (void)r.context.Set(gpucloud::ConditionKeyId::kGpuType, "H100-80GB");
  (void)r.context.Set(gpucloud::ConditionKeyId::kGpuCount, "8");
  (void)r.context.Set(gpucloud::ConditionKeyId::kSourceIp, "10.1.2.3");
  (void)r.context.Set(gpucloud::ConditionKeyId::kCurrentTime, "2026-12-01T20:00:00Z");
  (void)set->Evaluate(r);
  r.principal = {"n1", authz::PrincipalType::kNode, {}, "", "n1"};
  r.action = "nodes:Heartbeat";
  r.resource = "gpucloud:node/n1";
  (void)set->Evaluate(r);
}

}  // namespace

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
    Evaluate(r.document);
  }
  m::ParseResult all = m::ParseManifests(text, "fuzz.yaml");
  for (const m::PolicyManifest& p : all.policies) {
    m::PolicyDocumentResult again = m::ParsePolicyDocument(m::PolicyToJson(p.policy), "printed");
    if (!again.ok() || !(again.document == p.policy.spec)) std::abort();
  }
  return 0;
}
