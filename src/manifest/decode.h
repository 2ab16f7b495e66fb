// Internal decoders, one per kind, from a strict MapReader over a document to a spec. Each
// reports its problems to the reader's Sink and returns nullopt when the document had errors.
// Shared helpers for fields several kinds use (metadata, tolerations, GPU requests) live in
// decode_common.cc. Not thread-safe per document; no shared state.
#ifndef GPUCLOUD_MANIFEST_DECODE_H_
#define GPUCLOUD_MANIFEST_DECODE_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_catalog.h"
#include "core/inference_service.h"
#include "core/job.h"
#include "core/node_pool.h"
#include "core/policy.h"
#include "core/queue.h"
#include "core/runtime_class.h"
#include "core/sched_config.h"
#include "manifest/manifest.h"
#include "manifest/yaml_reader.h"

namespace gpucloud::manifest::internal {

struct Context {
  Sink& sink;
  const GpuCatalog& catalog;
};

// A string that must be a DNS label (names, namespaces, queues).
std::optional<std::string> ReadDnsLabel(Context& ctx, const Field& f);
// A string that must be one of `allowed`; the error lists them ("must be a, b or c, got \"x\"").
std::optional<std::string> ReadOneOf(Context& ctx, const Field& f,
                                     std::initializer_list<std::string_view> allowed);
std::optional<BillingClass> ReadBillingClass(Context& ctx, const Field& f);
std::optional<std::string> ReadTaintEffect(Context& ctx, const Field& f);

// Reads the document's required `metadata` field. `namespaced` objects get a namespace.
bool DecodeMetadata(Context& ctx, MapReader& doc, ObjectMeta* meta, bool namespaced);
bool DecodeTolerations(Context& ctx, const Field& f, std::vector<Toleration>* out);
bool DecodeTaints(Context& ctx, const Field& f, std::vector<Taint>* out);

// Resolves what a user wrote for GPU types ("h100", "A100-80GB", "nvidia-a100") to canonical
// catalog names, without duplicates, in the order written. Reports unknown names.
bool ResolveGpuTypes(Context& ctx, const Field& f, const std::vector<std::string>& written,
                     std::vector<std::string>* out);

// Checks a GPU request against the catalog once its mode and types are known: MIG profiles
// exist on every acceptable type (and, when no type is named, the request is narrowed to the
// types that offer the profile); a shared GPU's memory bound fits the types. `at` locates the
// request for error messages.
bool CheckGpuRequest(Context& ctx, const Field& at, GpuRequest* gpu);

// When a GPU request names no type, a node selector on a GPU-model label (accelerator,
// nvidia.com/gpu.product, cloud.google.com/gke-accelerator) that the catalog knows narrows it.
void InferGpuTypesFromSelector(const GpuCatalog& catalog,
                               const std::map<std::string, std::string>& node_selector,
                               GpuRequest* gpu);

// Reads a quantity written as a number or a string and parses it with `parse` (a function of
// std::string_view returning absl::StatusOr<T>). A parse error is reported as `hint` followed by
// the text, or as the parser's own message when `hint` is empty.
template <typename Parse>
auto DecodeParsed(Context& ctx, const Field& f, Parse parse, std::string_view hint = {})
    -> std::optional<typename decltype(parse(std::string_view()))::value_type> {
  std::optional<std::string> text = ReadQuantityText(ctx.sink, f);
  if (!text) return std::nullopt;
  auto value = parse(*text);
  if (!value.ok()) {
    ctx.sink.Error(
        f.mark, f.path,
        hint.empty() ? std::string(value.status().message()) : std::string(hint) + *text);
    return std::nullopt;
  }
  return *std::move(value);
}

// A decimal fraction of a GPU in (0, 1], exactly, in milli-GPUs.
std::optional<MilliGpu> DecodeGpuFraction(Context& ctx, const Field& f);
std::optional<MilliCpu> DecodeCpu(Context& ctx, const Field& f);
std::optional<MiB> DecodeMemory(Context& ctx, const Field& f);
std::optional<int64_t> DecodeDuration(Context& ctx, const Field& f);

// The items of a job's required, non-empty `tasks` list of at most kMaxTasksPerJob; nullopt
// (with an error) otherwise.
std::optional<std::vector<Field>> RequireTasks(Context& ctx, MapReader& spec);

// Checks the replicas of all tasks against kMaxReplicasPerJob (an error at `tasks_field`) and
// minAvailable against them, and fills in its default (all replicas).
bool CheckGang(Context& ctx, const Field& tasks_field,
               const std::optional<Field>& min_available_field, JobSpec* spec);
// Task names are DNS labels and unique within a job.
bool CheckTaskName(Context& ctx, const Field& f, const std::string& name,
                   const std::vector<TaskSpec>& earlier);

// spec.array of a gpucloud/v1 Job (decode_array.cc): an array asked for or an element of one.
// `job_name` (metadata.name) bounds the element names NAME-INDEX.
bool DecodeJobArray(Context& ctx, const Field& f, const std::string& job_name,
                    std::optional<JobArraySpec>* out);
std::optional<Job> DecodeJob(Context& ctx, MapReader& doc);
std::optional<Queue> DecodeQueue(Context& ctx, MapReader& doc);
std::optional<NodePool> DecodeNodePool(Context& ctx, MapReader& doc);
std::optional<SchedulerConfiguration> DecodeSchedulerConfiguration(Context& ctx, MapReader& doc);
std::optional<RuntimeClass> DecodeRuntimeClass(Context& ctx, MapReader& doc);
std::optional<InferenceService> DecodeInferenceService(Context& ctx, MapReader& doc);
std::optional<Job> DecodePod(Context& ctx, MapReader& doc);
std::optional<Job> DecodeVolcanoJob(Context& ctx, MapReader& doc);
std::optional<Job> DecodePyTorchJob(Context& ctx, MapReader& doc);  // kubeflow.org/v1
std::optional<Job> DecodeMpiJob(Context& ctx, MapReader& doc);      // kubeflow.org/v2beta1
std::optional<Policy> DecodePolicy(Context& ctx, MapReader& doc);
// A Secret's document (decode_secret_object.cc); `root` locates fields DecodeMetadata takes.
std::optional<SecretObject> DecodeSecret(Context& ctx, MapReader& doc, const Field& root);
// Reads `Version` and `Statement` of an IAM document from `m` (the caller calls m.Finish()).
bool DecodePolicyDocument(Context& ctx, MapReader& m, PolicyDocument* doc);

// One YAML document of a file, parsed, and the 0-based line of the file where it starts.
struct LoadedDocument {
  YAML::Node node;
  int first_line = 0;
  bool syntax_error = false;  // reported already; nothing to decode
};
// Checks the file's size and UTF-8, splits it at its document markers and parses each document,
// skipping empty ones. Problems are appended to `errors` (a size or UTF-8 problem leaves no
// documents).
std::vector<LoadedDocument> LoadDocuments(std::string_view text, const std::string& file,
                                          std::vector<Diagnostic>* errors);

}  // namespace gpucloud::manifest::internal

#endif  // GPUCLOUD_MANIFEST_DECODE_H_
