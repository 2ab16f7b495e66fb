#include "manifest/manifest.h"

#include <algorithm>
#include <exception>
#include <tuple>
#include <optional>

#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/yaml_reader.h"

namespace gpucloud::manifest {
namespace {

using internal::Context;

constexpr std::string_view kSupportedApiVersions =
    "gpucloud/v1, v1, batch.volcano.sh/v1alpha1, node.k8s.io/v1";

int CountDocumentsBefore(std::string_view text, int line) {
  // Documents start after each "---" line; used to place a syntax error in its document.
  int docs = 1;
  int current = 1;
  size_t pos = 0;
  bool seen_content = false;
  while (pos < text.size() && current < line) {
    size_t end = text.find('\n', pos);
    std::string_view l = text.substr(pos, end == std::string_view::npos ? text.size() - pos : end - pos);
    if (l.starts_with("---")) {
      if (seen_content) ++docs;
      seen_content = false;
    } else if (!l.empty() && l[0] != '#') {
      seen_content = true;
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
    ++current;
  }
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
    ctx.sink.Error(kind_field.mark, kind_field.path,
                   Cat("unknown kind \"", kind, "\" for apiVersion ", api_version, " (known: ",
                       known, ")"));
    return Decoded{};
  };
  if (api_version == kApiVersion) {
    if (kind == "Job") return lift(internal::DecodeJob(ctx, m));
    if (kind == "Queue") return lift(internal::DecodeQueue(ctx, m));
    if (kind == "NodePool") return lift(internal::DecodeNodePool(ctx, m));
    if (kind == "RuntimeClass") return lift(internal::DecodeRuntimeClass(ctx, m));
    return unknown_kind("Job, Queue, NodePool, RuntimeClass");
  }
  if (api_version == "v1") {
    if (kind == "Pod") return lift(internal::DecodePod(ctx, m));
    return unknown_kind("Pod");
  }
  if (api_version == "batch.volcano.sh/v1alpha1") {
    if (kind == "Job") return lift(internal::DecodeVolcanoJob(ctx, m));
    return unknown_kind("Job");
  }
  if (api_version == "node.k8s.io/v1") {
    if (kind == "RuntimeClass") return lift(internal::DecodeRuntimeClass(ctx, m));
    return unknown_kind("RuntimeClass");
  }
  ctx.sink.Error(api_field.mark, api_field.path,
                 Cat("unsupported apiVersion \"", api_version, "\" (supported: ",
                     kSupportedApiVersions, ")"));
  return Decoded{};
}

std::string ObjectKey(const Object& o) {
  const ObjectMeta& m = MetaOf(o);
  return Cat(KindOf(o), " ", m.namespace_.empty() ? "" : m.namespace_ + "/", m.name);
}


// Decodes one object at `root` (a document, or an item of a List) and appends it to `out`.
void DecodeObject(Context& ctx, const Field& root, int document, std::vector<Manifest>* out) {
  Sink& sink = ctx.sink;
  int errors_before = sink.error_count();
  MapReader m(sink, root);
  if (!m.valid()) return;
  std::optional<Field> api_field = m.Require("apiVersion");
  std::optional<Field> kind_field = m.Require("kind");
  std::optional<std::string> api = api_field ? ReadString(sink, *api_field) : std::nullopt;
  std::optional<std::string> kind = kind_field ? ReadString(sink, *kind_field) : std::nullopt;
  if (!api || !kind) return;
  Decoded decoded = DecodeDocument(ctx, m, *api, *api_field, *kind, *kind_field);
  if (decoded.recognized) m.Finish();
  if (!decoded.object || sink.error_count() > errors_before) return;
  std::string key = ObjectKey(*decoded.object);
  // The same object twice is harmless (apply is idempotent); two different ones of one name
  // would silently overwrite each other.
  for (const Manifest& earlier : *out) {
    if (ObjectKey(earlier.object) == key && !(earlier.object == *decoded.object)) {
      sink.Error(root.mark, ChildPath(root.path, "metadata.name"),
                 Cat("duplicate ", key, " with different content (also document ",
                     earlier.document, ")"));
      return;
    }
  }
  out->push_back(Manifest{sink.file(), document, *api, *kind, std::move(*decoded.object)});
}

}  // namespace

std::string_view KindOf(const Object& object) {
  switch (object.index()) {
    case 0: return "Job";
    case 1: return "Queue";
    case 2: return "NodePool";
    default: break;
  }
  return "RuntimeClass";
}

const ObjectMeta& MetaOf(const Object& object) {
  return std::visit([](const auto& o) -> const ObjectMeta& { return o.metadata; }, object);
}

ParseResult ParseManifests(std::string_view text, std::string_view file,
                           const GpuCatalog& catalog) {
  ParseResult result;
  std::string file_name(file);
  if (text.size() > kMaxManifestBytes) {
    result.errors.push_back(Diagnostic{
        .file = file_name,
        .message = Cat("file is too large: ", text.size(), " bytes (the limit is ",
                       kMaxManifestBytes, ")")});
    return result;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    int line = e.mark.line + 1;
    result.errors.push_back(Diagnostic{
        .file = file_name,
        .document = CountDocumentsBefore(text, line),
        .document_count = 1,
        .line = e.mark.is_null() ? 0 : line,
        .column = e.mark.is_null() ? 0 : e.mark.column + 1,
        .message = Cat("invalid YAML: ", e.msg,
                       " (check the indentation of this line and the lines above it)")});
    return result;
  } catch (const std::exception& e) {
    result.errors.push_back(
        Diagnostic{.file = file_name, .message = Cat("invalid YAML: ", e.what())});
    return result;
  }

  const int count = static_cast<int>(docs.size());
  std::vector<Manifest> manifests;
  for (int i = 0; i < count; ++i) {
    const YAML::Node& doc = docs[i];
    if (doc.IsNull()) continue;  // an empty document, e.g. after a trailing "---"
    Sink sink(file_name, i + 1, count, &result.errors, &result.warnings);
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
        for (const Field& item : *items) DecodeObject(ctx, item, i + 1, &manifests);
      }
      continue;
    }
    DecodeObject(ctx, root, i + 1, &manifests);
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
  if (result.errors.empty()) result.manifests = std::move(manifests);
  return result;
}

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
          errors.push_back(Diagnostic{
              .file = m.file,
              .document = m.document,
              .path = Cat("spec.nodeSelector.", k),
              .message = Cat("is ", it->second, ", but RuntimeClass ", rc->metadata.name,
                             " requires ", v)});
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
