#include "manifest/manifest.h"

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/yaml_reader.h"

namespace gpucloud::manifest {
namespace {

using internal::Context;

constexpr std::string_view kSupportedApiVersions =
    "gpucloud/v1, v1, batch.volcano.sh/v1alpha1, kubeflow.org/v1, kubeflow.org/v2beta1, "
    "node.k8s.io/v1";

// The text of one YAML document and the 0-based line of the file where it starts.
struct DocumentText {
  std::string_view text;
  int first_line = 0;
};

bool IsMarkerLine(std::string_view line, std::string_view marker) {
  return line.starts_with(marker) &&
         (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
}

// Splits a YAML stream at its document markers: a line that starts with "---" or "..." followed
// by a blank or the end of the line is always a marker in YAML (it may not occur inside any
// scalar), so this is exact. The "---" line begins the next document (it may carry content).
// Parsing documents one at a time also keeps yaml-cpp 0.7's LoadAll from looping forever on
// some malformed streams (jbeder/yaml-cpp#1319, fixed after the version Debian 12 ships).
std::vector<DocumentText> SplitDocuments(std::string_view text) {
  std::vector<DocumentText> docs;
  size_t doc_start = 0;
  int doc_line = 0;
  int line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    size_t next = end == std::string_view::npos ? text.size() : end + 1;
    std::string_view l = text.substr(pos, next - pos);
    if (!l.empty() && l.back() == '\n') l.remove_suffix(1);
    if (IsMarkerLine(l, "---") && pos > doc_start) {
      docs.push_back({text.substr(doc_start, pos - doc_start), doc_line});
      doc_start = pos;
      doc_line = line;
    } else if (IsMarkerLine(l, "...")) {
      docs.push_back({text.substr(doc_start, pos - doc_start), doc_line});
      doc_start = next;
      doc_line = line + 1;
    }
    pos = next;
    ++line;
  }
  if (doc_start < text.size()) docs.push_back({text.substr(doc_start), doc_line});
  return docs;
}

struct Decoded {
  bool recognized = false;  // the apiVersion and kind are known, so the decoder ran
  std::optional<Object> object;
};

Decoded DecodeDocument(Context& ctx, MapReader& m, const std::string& api_version,
                       const Field& api_field, const std::string& kind, const Field& kind_field) {
  auto lift = [](auto opt) {
    Decoded d{.recognized = true};
    if (opt) d.object = Object(std::move(*opt));
    return d;
  };
  auto unknown_kind = [&](std::string_view known) {
    ctx.sink.Error(
        kind_field.mark, kind_field.path,
        Cat("unknown kind \"", kind, "\" for apiVersion ", api_version, " (known: ", known, ")"));
    return Decoded{};
  };
  if (api_version == kApiVersion) {
    if (kind == "Job") return lift(internal::DecodeJob(ctx, m));
    if (kind == "Queue") return lift(internal::DecodeQueue(ctx, m));
    if (kind == "NodePool") return lift(internal::DecodeNodePool(ctx, m));
    if (kind == "RuntimeClass") return lift(internal::DecodeRuntimeClass(ctx, m));
    if (kind == "SchedulerConfiguration") {
      return lift(internal::DecodeSchedulerConfiguration(ctx, m));
    }
    if (kind == "InferenceService") return lift(internal::DecodeInferenceService(ctx, m));
    return unknown_kind(
        "Job, Queue, NodePool, RuntimeClass, SchedulerConfiguration, InferenceService");
  }
  if (api_version == "v1") {
    if (kind == "Pod") return lift(internal::DecodePod(ctx, m));
    return unknown_kind("Pod");
  }
  if (api_version == "batch.volcano.sh/v1alpha1") {
    if (kind == "Job") return lift(internal::DecodeVolcanoJob(ctx, m));
    return unknown_kind("Job");
  }
  if (api_version == "kubeflow.org/v1") {
    if (kind == "PyTorchJob") return lift(internal::DecodePyTorchJob(ctx, m));
    return unknown_kind("PyTorchJob");
  }
  if (api_version == "kubeflow.org/v2beta1") {
    if (kind == "MPIJob") return lift(internal::DecodeMpiJob(ctx, m));
    return unknown_kind("MPIJob");
  }
  if (api_version == "node.k8s.io/v1") {
    if (kind == "RuntimeClass") return lift(internal::DecodeRuntimeClass(ctx, m));
    return unknown_kind("RuntimeClass");
  }
  ctx.sink.Error(
      api_field.mark, api_field.path,
      Cat("unsupported apiVersion \"", api_version, "\" (supported: ", kSupportedApiVersions, ")"));
  return Decoded{};
}

// What the documents of one file decoded to.
struct Collected {
  std::vector<Manifest> manifests;
  std::vector<PolicyManifest> policies;
  std::vector<SecretManifest> secrets;
  // Each object's key ("Job ns/name") to its index in `manifests`.
  std::unordered_map<std::string, size_t> seen;
};

// A gpucloud/v1 Policy into out->policies; the same policy twice is harmless, two different ones
// of one name an error.
void DecodePolicyObject(Context& ctx, MapReader& m, const Field& root, int document,
                        Collected* out) {
  int errors_before = ctx.sink.error_count();
  std::optional<Policy> policy = internal::DecodePolicy(ctx, m);
  m.Ignore("status");
  m.Finish();
  if (!policy || ctx.sink.error_count() > errors_before) return;
  for (const PolicyManifest& earlier : out->policies) {
    if (earlier.policy.metadata.name != policy->metadata.name) continue;
    if (!(earlier.policy == *policy)) {
      ctx.sink.Error(root.mark, ChildPath(root.path, "metadata.name"),
                     Cat("duplicate Policy ", policy->metadata.name,
                         " with different content (also document ", earlier.document, ")"));
    }
    return;
  }
  out->policies.push_back(PolicyManifest{ctx.sink.file(), document, std::move(*policy)});
}

// A Secret into out->secrets; the same secret twice is harmless, two different ones of one
// namespace and name an error (which never quotes a value).
void DecodeSecretObject(Context& ctx, MapReader& m, const Field& root, bool gpucloud, int document,
                        Collected* out) {
  int errors_before = ctx.sink.error_count();
  std::optional<SecretObject> secret = internal::DecodeSecret(ctx, m, root);
  if (gpucloud) m.Ignore("status");  // the server's sizes, as `gpuctl get -o yaml` prints them
  m.Finish();
  if (!secret || ctx.sink.error_count() > errors_before) return;
  for (const SecretManifest& earlier : out->secrets) {
    const ObjectMeta& e = earlier.secret.metadata;
    if (e.name != secret->metadata.name || e.namespace_ != secret->metadata.namespace_) continue;
    if (!(earlier.secret == *secret)) {
      ctx.sink.Error(root.mark, ChildPath(root.path, "metadata.name"),
                     Cat("duplicate Secret ", e.namespace_, "/", e.name,
                         " with different content (also document ", earlier.document, ")"));
    }
    return;
  }
  out->secrets.push_back(SecretManifest{ctx.sink.file(), document, std::move(*secret)});
}

// Decodes one object at `root` (a document, or an item of a List) into `collected`.
void DecodeObject(Context& ctx, const Field& root, int document, Collected* collected) {
  std::vector<Manifest>* out = &collected->manifests;
  std::unordered_map<std::string, size_t>* seen = &collected->seen;
  Sink& sink = ctx.sink;
  int errors_before = sink.error_count();
  MapReader m(sink, root);
  if (!m.valid()) return;
  std::optional<Field> api_field = m.Require("apiVersion");
  std::optional<Field> kind_field = m.Require("kind");
  std::optional<std::string> api = api_field ? ReadString(sink, *api_field) : std::nullopt;
  std::optional<std::string> kind = kind_field ? ReadString(sink, *kind_field) : std::nullopt;
  if (!api || !kind) return;
  if (*api == kApiVersion && *kind == "Policy") {
    DecodePolicyObject(ctx, m, root, document, collected);
    return;
  }
  if ((*api == kApiVersion || *api == "v1") && *kind == "Secret") {
    DecodeSecretObject(ctx, m, root, *api == kApiVersion, document, collected);
    return;
  }
  Decoded decoded = DecodeDocument(ctx, m, *api, *api_field, *kind, *kind_field);
  // A stored object's status is the server's; reading it back (gpuctl get -o yaml, then apply)
  // must not fail on it, and it never changes a spec.
  if (decoded.recognized && *api == kApiVersion) m.Ignore("status");
  if (decoded.recognized) m.Finish();
  if (!decoded.object || sink.error_count() > errors_before) return;
  std::string key = ObjectKey(*decoded.object);
  // The same object twice is harmless (apply is idempotent); two different ones of one name
  // would silently overwrite each other.
  auto [it, inserted] = seen->emplace(key, out->size());
  if (!inserted) {
    const Manifest& earlier = (*out)[it->second];
    if (!(earlier.object == *decoded.object)) {
      sink.Error(
          root.mark, ChildPath(root.path, "metadata.name"),
          Cat("duplicate ", key, " with different content (also document ", earlier.document, ")"));
    }
    return;
  }
  out->push_back(Manifest{sink.file(), document, *api, *kind, std::move(*decoded.object)});
}

}  // namespace

std::string_view KindOf(const Object& object) {
  switch (object.index()) {
    case 0:
      return "Job";
    case 1:
      return "Queue";
    case 2:
      return "NodePool";
    case 3:
      return "RuntimeClass";
    case 5:
      return "InferenceService";
    default:
      break;
  }
  return "SchedulerConfiguration";
}

std::string ObjectKey(const Object& object) {
  const ObjectMeta& m = MetaOf(object);
  return Cat(KindOf(object), " ", m.namespace_.empty() ? "" : m.namespace_ + "/", m.name);
}

const ObjectMeta& MetaOf(const Object& object) {
  return std::visit([](const auto& o) -> const ObjectMeta& { return o.metadata; }, object);
}

namespace internal {

std::vector<LoadedDocument> LoadDocuments(std::string_view text, const std::string& file_name,
                                          std::vector<Diagnostic>* errors) {
  std::vector<LoadedDocument> docs;
  if (text.size() > kMaxManifestBytes) {
    errors->push_back(Diagnostic{.file = file_name,
                                 .message = Cat("file is too large: ", text.size(),
                                                " bytes (the limit is ", kMaxManifestBytes, ")")});
    return docs;
  }
  if (size_t bad = FirstInvalidUtf8(text); bad != std::string_view::npos) {
    size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
    line_start = (line_start == std::string_view::npos || bad == 0) ? 0 : line_start + 1;
    int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + bad, '\n'));
    errors->push_back(Diagnostic{
        .file = file_name,
        .line = line,
        .column = static_cast<int>(bad - line_start) + 1,
        .message = fmt::format("invalid UTF-8 (byte 0x{:02X}): manifests must be UTF-8 text",
                               static_cast<unsigned char>(text[bad]))});
    return docs;
  }
  // Load every document first, so that diagnostics can say how many there are.
  std::vector<Diagnostic> syntax_errors;
  for (const DocumentText& doc : SplitDocuments(text)) {
    try {
      YAML::Node node = YAML::Load(std::string(doc.text));
      if (!node.IsNull()) docs.push_back({node, doc.first_line});  // skip empty documents
    } catch (const YAML::Exception& e) {
      docs.push_back({YAML::Node(), doc.first_line, /*syntax_error=*/true});
      syntax_errors.push_back(Diagnostic{
          .file = file_name,
          .document = static_cast<int>(docs.size()),
          .line = e.mark.is_null() ? 0 : doc.first_line + e.mark.line + 1,
          .column = e.mark.is_null() ? 0 : e.mark.column + 1,
          .message = Cat("invalid YAML: ", e.msg,
                         " (check the indentation of this line and the lines above it)")});
    } catch (const std::exception& e) {
      docs.push_back({YAML::Node(), doc.first_line, /*syntax_error=*/true});
      syntax_errors.push_back(Diagnostic{.file = file_name,
                                         .document = static_cast<int>(docs.size()),
                                         .message = Cat("invalid YAML: ", e.what())});
    }
  }
  for (Diagnostic& d : syntax_errors) {
    d.document_count = static_cast<int>(docs.size());
    errors->push_back(std::move(d));
  }
  return docs;
}

}  // namespace internal

namespace {

// The YAML tree of a JSON value, as yaml-cpp would load its text: strings tagged as quoted
// scalars (so "4" stays a string), numbers, booleans and null as plain scalars.
YAML::Node NodeOfJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object: {
      YAML::Node map(YAML::NodeType::Map);
      for (const auto& [k, v] : j.items()) map.force_insert(k, NodeOfJson(v));
      return map;
    }
    case nlohmann::ordered_json::value_t::array: {
      YAML::Node seq(YAML::NodeType::Sequence);
      for (const auto& v : j) seq.push_back(NodeOfJson(v));
      return seq;
    }
    case nlohmann::ordered_json::value_t::string: {
      YAML::Node n(j.get_ref<const std::string&>());
      n.SetTag("!");
      return n;
    }
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return YAML::Node(YAML::NodeType::Null);
    default:
      return YAML::Node(j.dump());
  }
}

ParseResult DecodeDocuments(std::vector<internal::LoadedDocument> docs, ParseResult result,
                            const std::string& file_name, const GpuCatalog& catalog);

}  // namespace

ParseResult ParseManifests(std::string_view text, std::string_view file,
                           const GpuCatalog& catalog) {
  ParseResult result;
  std::string file_name(file);
  std::vector<internal::LoadedDocument> docs =
      internal::LoadDocuments(text, file_name, &result.errors);
  return DecodeDocuments(std::move(docs), std::move(result), file_name, catalog);
}

ParseResult ParseStoredManifest(const nlohmann::ordered_json& doc, std::string_view file,
                                const GpuCatalog& catalog) {
  std::vector<internal::LoadedDocument> docs;
  if (!doc.is_null()) docs.push_back({NodeOfJson(doc), 0});
  return DecodeDocuments(std::move(docs), ParseResult{}, std::string(file), catalog);
}

namespace {

ParseResult DecodeDocuments(std::vector<internal::LoadedDocument> docs, ParseResult result,
                            const std::string& file_name, const GpuCatalog& catalog) {
  const int count = static_cast<int>(docs.size());
  Collected collected;
  std::vector<Manifest>& manifests = collected.manifests;
  for (int i = 0; i < count; ++i) {
    const YAML::Node& doc = docs[i].node;
    if (docs[i].syntax_error) continue;
    Sink sink(file_name, i + 1, count, docs[i].first_line, &result.errors, &result.warnings);
    Context ctx{sink, catalog};
    Field root{doc, doc.Mark(), ""};
    // A Kubernetes List (what `kubectl get -o json` prints for several objects) holds objects
    // in `items`.
    if (doc.IsMap() && doc["kind"] && doc["kind"].IsScalar() && doc["kind"].Scalar() == "List") {
      MapReader list(sink, root);
      std::optional<Field> api = list.Require("apiVersion");
      if (api && ReadString(sink, *api) != "v1") {
        sink.Error(api->mark, api->path, "must be v1 for kind List");
      }
      list.Take("kind");
      list.Ignore("metadata");
      std::optional<Field> items_field = list.Require("items");
      list.Finish();
      if (!items_field) continue;
      if (std::optional<std::vector<Field>> items = ReadList(sink, *items_field)) {
        for (const Field& item : *items) DecodeObject(ctx, item, i + 1, &collected);
      }
      continue;
    }
    DecodeObject(ctx, root, i + 1, &collected);
  }
  // Report in reading order: by document, then line, then column.
  auto in_reading_order = [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.document, a.line, a.column) < std::tie(b.document, b.line, b.column);
  };
  std::stable_sort(result.errors.begin(), result.errors.end(), in_reading_order);
  std::stable_sort(result.warnings.begin(), result.warnings.end(), in_reading_order);
  if (result.errors.empty()) {
    std::vector<Diagnostic> errors = ResolveRuntimeClasses(manifests);
    result.errors.insert(result.errors.end(), errors.begin(), errors.end());
  }
  if (result.errors.empty()) {
    result.manifests = std::move(manifests);
    result.policies = std::move(collected.policies);
    result.secrets = std::move(collected.secrets);
  }
  return result;
}

}  // namespace

std::vector<Diagnostic> ResolveRuntimeClasses(std::vector<Manifest>& manifests) {
  std::vector<Diagnostic> errors;
  for (Manifest& m : manifests) {
    Job* job = std::get_if<Job>(&m.object);
    if (job == nullptr || job->spec.runtime_class.empty()) continue;
    for (const Manifest& other : manifests) {
      const RuntimeClass* rc = std::get_if<RuntimeClass>(&other.object);
      if (rc == nullptr || rc->metadata.name != job->spec.runtime_class) continue;
      for (const auto& [k, v] : rc->spec.node_selector) {
        auto [it, inserted] = job->spec.node_selector.emplace(k, v);
        if (!inserted && it->second != v) {
          errors.push_back(Diagnostic{.file = m.file,
                                      .document = m.document,
                                      .path = Cat("spec.nodeSelector.", k),
                                      .message = Cat("is ", it->second, ", but RuntimeClass ",
                                                     rc->metadata.name, " requires ", v)});
        }
      }
      for (TaskSpec& task : job->spec.tasks) {
        internal::InferGpuTypesFromSelector(GpuCatalog::Default(), job->spec.node_selector,
                                            &task.resources.gpu);
      }
      for (const Toleration& t : rc->spec.tolerations) {
        if (std::find(job->spec.tolerations.begin(), job->spec.tolerations.end(), t) ==
            job->spec.tolerations.end()) {
          job->spec.tolerations.push_back(t);
        }
      }
    }
  }
  return errors;
}

}  // namespace gpucloud::manifest
