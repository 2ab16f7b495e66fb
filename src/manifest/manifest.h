// Manifests: the YAML and JSON documents users already write, read into gpucloud's specs and
// printed back in the normalized gpucloud/v1 form.
//
// Kinds read: gpucloud/v1 Job, Queue, NodePool, RuntimeClass, SchedulerConfiguration and Policy
// (the last into ParseResult::policies, with ParsePolicyDocument for a lone IAM document);
// Secret, v1 or gpucloud/v1 (into ParseResult::secrets); Kubernetes v1 Pod and node.k8s.io/v1
// RuntimeClass; Volcano batch.volcano.sh/v1alpha1 Job;
// Kubeflow kubeflow.org/v1 PyTorchJob and kubeflow.org/v2beta1 MPIJob.
// Kubernetes, Volcano and Kubeflow objects are converted to gpucloud Jobs (GPU resources from
// `nvidia.com/gpu`, `nvidia.com/mig-<profile>` and `nvidia.com/gpu.shared`; GPU types from
// `nodeSelector` accelerator labels). Validation is strict, like `kubectl --validate=strict`; every
// error names file, document, field path, line and column. Nothing here does I/O. Stateless
// functions; thread-safe.
#ifndef GPUCLOUD_MANIFEST_MANIFEST_H_
#define GPUCLOUD_MANIFEST_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/inference_service.h"
#include "core/job.h"
#include "core/node_pool.h"
#include "core/policy.h"
#include "core/queue.h"
#include "core/runtime_class.h"
#include "core/sched_config.h"
#include "manifest/diagnostic.h"

namespace gpucloud::manifest {

inline constexpr std::string_view kApiVersion = "gpucloud/v1";
// Largest manifest file accepted.
inline constexpr size_t kMaxManifestBytes = 8 << 20;

// Bounds on what one object may ask for (docs/manifests.md, "Limits"); each violation is a
// located error naming the field. Generous for real jobs, so that no tenant can make the
// scheduler or an agent do unbounded work with one request.
inline constexpr int32_t kMaxTasksPerJob = 100;
inline constexpr int32_t kMaxReplicasPerJob = 10'000;  // all tasks together; so also per task
// Per task: entries of command + args, and of env.
inline constexpr size_t kMaxExecArgs = 4096;
inline constexpr size_t kMaxEnvVars = 4096;
// One command or args entry, or one env entry as NAME=value: Linux's MAX_ARG_STRLEN.
inline constexpr size_t kMaxExecStringBytes = 128 << 10;
// command + args + env of one task, each counted with its terminating NUL (exec's limit,
// ARG_MAX, is usually 2 MiB including the platform's own variables).
inline constexpr size_t kMaxExecBytes = 1 << 20;
inline constexpr size_t kMaxWorkingDirBytes = 4096;  // PATH_MAX
inline constexpr size_t kMaxImageReferenceBytes = 4096;
inline constexpr int64_t kMaxPosixId = (int64_t{1} << 31) - 1;  // runAsUser, runAsGroup
// Per object: labels (and node selectors) and the annotations' keys and values in all, as
// Kubernetes bounds them (256 KiB).
inline constexpr size_t kMaxLabels = 256;
inline constexpr size_t kMaxAnnotationBytes = 256 << 10;

using Object =
    std::variant<Job, Queue, NodePool, RuntimeClass, SchedulerConfiguration, InferenceService>;

// One object read from one document.
struct Manifest {
  std::string file;
  int document = 0;                // 1-based index in its file
  std::string source_api_version;  // as written, e.g. "batch.volcano.sh/v1alpha1"
  std::string source_kind;         // as written, e.g. "Job"
  Object object;
};

// A gpucloud/v1 Policy read from one document. Policies are kept apart from `Object` (they are
// not scheduling objects: nothing prints, summarizes or stores them as such yet).
struct PolicyManifest {
  std::string file;
  int document = 0;  // 1-based index in its file
  Policy policy;
};

// A Secret (kind Secret, apiVersion v1 as kubectl writes it, or gpucloud/v1) read from one
// document: `data` (strict standard base64) and `stringData` (text, which wins for the same key)
// merged into `values`, in the clear. Kept apart from `Object`: nothing may print, summarize or
// encode it as it does a scheduling object, and no diagnostic quotes a value. `type` is
// "Opaque" or "kubernetes.io/dockerconfigjson" (what the server's Secrets take; the latter
// needs a ".dockerconfigjson" value that is JSON with an "auths" object); `immutable: true` and
// annotations are errors (the server keeps neither).
struct SecretObject {
  ObjectMeta metadata;  // name, namespace, labels (resourceVersion: a compare-and-swap)
  std::string type = "Opaque";
  std::map<std::string, std::string> values;  // key -> plaintext
  bool operator==(const SecretObject&) const = default;
};
struct SecretManifest {
  std::string file;
  int document = 0;  // 1-based index in its file
  SecretObject secret;
};

struct ParseResult {
  std::vector<Manifest> manifests;       // empty when there are errors
  std::vector<PolicyManifest> policies;  // the Policy documents; empty when there are errors
  std::vector<SecretManifest> secrets;   // the Secret documents; empty when there are errors
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  bool ok() const { return errors.empty(); }
};

// Reads every document of one file's text. `file` is used in diagnostics only. Either all
// documents are returned or, if any has an error, none (with the errors of every document).
ParseResult ParseManifests(std::string_view text, std::string_view file,
                           const GpuCatalog& catalog = GpuCatalog::Default());

// One document the server stored (the JSON of a manifest ParseManifests read, with status and
// server-set metadata), read exactly as ParseManifests reads its JSON text, but without
// scanning text: the YAML tree is built from the JSON value directly. For the controller, which
// reads every job document it is given (a scan of the text was most of the cost). Diagnostics
// carry no line or column.
ParseResult ParseStoredManifest(const nlohmann::ordered_json& doc, std::string_view file,
                                const GpuCatalog& catalog = GpuCatalog::Default());

// One IAM policy document, for `gpuctl policy simulate` and the server's policy API: either a
// gpucloud/v1 Policy manifest or a bare IAM document ({"Version": "2012-10-17", "Statement":
// [...]}), in YAML or JSON, validated as strictly as ParseManifests validates a Policy (every
// error names the field path, line and column). The file must hold exactly one document.
struct PolicyDocumentResult {
  std::string name;  // metadata.name of a Policy manifest; empty for a bare document
  PolicyDocument document;
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  bool ok() const { return errors.empty(); }
};
PolicyDocumentResult ParsePolicyDocument(std::string_view text, std::string_view file);

// The gpucloud/v1 Policy manifest of `policy`, as pretty-printed JSON (which is also YAML).
// Parsing it back yields an equal document; store-owned metadata fields are not printed.
std::string PolicyToJson(const Policy& policy);

// Applies RuntimeClasses among `manifests` to the Jobs that name them: their node selectors and
// tolerations are merged into the job. A selector key the job already sets to another value is
// an error. Jobs naming a class not present are left as they are (the server resolves them).
std::vector<Diagnostic> ResolveRuntimeClasses(std::vector<Manifest>& manifests);

// Kind name of an object in the gpucloud/v1 API: "Job", "Queue", "NodePool", "RuntimeClass",
// "SchedulerConfiguration", "InferenceService".
std::string_view KindOf(const Object& object);
const ObjectMeta& MetaOf(const Object& object);
// "Job team-a/train", "Queue team-a": what names an object uniquely.
std::string ObjectKey(const Object& object);

// The normalized gpucloud/v1 form of an object, as YAML (one document, no leading "---") or as
// pretty-printed JSON. Parsing either back yields an equal object.
std::string ToYaml(const Object& object);
std::string ToJson(const Object& object);

// One line saying what the object asks for, e.g.
// "Job default/pytorch-job: 4 x worker (1 GPU, any type); gang of 4; 4 GPUs in all; ..."
std::string Summarize(const Object& object);

}  // namespace gpucloud::manifest

#endif  // GPUCLOUD_MANIFEST_MANIFEST_H_
