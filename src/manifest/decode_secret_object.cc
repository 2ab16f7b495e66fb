// The Secret kind in a manifest (manifest.h's SecretObject): what `kubectl create secret
// --dry-run=client -o yaml` writes, and what `gpuctl get secret -o yaml` prints (its status,
// the server's sizes, is ignored). Checked as strictly as the server checks a Secret
// (server/rest_secrets.cc), but each error is located by line and field. No message quotes a
// value, nor its base64: a diagnostic may end up in a CI log.
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/decode.h"

namespace gpucloud::manifest::internal {
namespace {

constexpr std::string_view kOpaque = "Opaque";
constexpr std::string_view kDockerConfigJson = "kubernetes.io/dockerconfigjson";
constexpr std::string_view kDockerConfigKey = ".dockerconfigjson";

// One value of `data` or `stringData`: a string, never quoted back in an error.
std::optional<std::string> ReadSecretValue(Context& ctx, const Field& f) {
  if (!f.value.IsScalar() || ClassifyScalar(f.value) != ScalarKind::kString) {
    ctx.sink.Error(f.mark, f.path,
                   f.value.IsScalar() ? "must be a string (quote it)" : "must be a string");
    return std::nullopt;
  }
  return f.value.Scalar();
}

// `data` (base64 when `base64`) or `stringData` into `values`; false after an error.
bool ReadValues(Context& ctx, const Field& f, bool base64,
                std::map<std::string, std::string>* values) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = true;
  for (const std::string& key : m.Keys()) {
    std::optional<Field> v = m.Take(key);
    std::string path = Cat(f.path, "[", key, "]");
    if (absl::Status st = ValidateSecretKey(key); !st.ok()) {
      ctx.sink.Error(v->mark, path, "a key must be 1 to 253 of [-._a-zA-Z0-9], not . or ..");
      ok = false;
      continue;
    }
    Field at{v->value, v->mark, path};
    std::optional<std::string> text = ReadSecretValue(ctx, at);
    if (!text) {
      ok = false;
      continue;
    }
    std::string plain;
    if (base64 && (!absl::Base64Unescape(*text, &plain) || absl::Base64Escape(plain) != *text)) {
      ctx.sink.Error(at.mark, path, "is not standard base64 (with padding)");
      ok = false;
      continue;
    }
    (*values)[key] = base64 ? std::move(plain) : std::move(*text);
  }
  m.Finish();
  return ok;
}

// A registry secret's one value: JSON with an "auths" object, as the server requires.
bool CheckDockerConfig(Context& ctx, const YAML::Mark& at, const std::string& root_path,
                       const SecretObject& s) {
  auto it = s.values.find(std::string(kDockerConfigKey));
  if (it == s.values.end()) {
    ctx.sink.Error(at, ChildPath(root_path, "data"),
                   Cat("needs a ", kDockerConfigKey, " value for type ", kDockerConfigJson));
    return false;
  }
  nlohmann::json config = nlohmann::json::parse(it->second, nullptr, false);
  if (!config.is_object() || !config.contains("auths") || !config["auths"].is_object()) {
    ctx.sink.Error(at, ChildPath(root_path, Cat("data[", kDockerConfigKey, "]")),
                   "must be JSON with an \"auths\" object");
    return false;
  }
  return true;
}

}  // namespace

std::optional<SecretObject> DecodeSecret(Context& ctx, MapReader& doc, const Field& root) {
  SecretObject s;
  bool ok = DecodeMetadata(ctx, doc, &s.metadata, /*namespaced=*/true);
  if (!s.metadata.annotations.empty()) {
    YAML::Node n = root.value["metadata"]["annotations"];
    ctx.sink.Error(n.Mark(), ChildPath(root.path, "metadata.annotations"),
                   "gpucloud's Secrets keep no annotations (labels only)");
    ok = false;
  }
  if (std::optional<Field> t = doc.Take("type")) {
    std::optional<std::string> type = ReadOneOf(ctx, *t, {kOpaque, kDockerConfigJson});
    ok = type.has_value() && ok;
    if (type) s.type = *type;
  }
  bool immutable = false;
  std::optional<Field> immutable_field = doc.Take("immutable");
  if (immutable_field) {
    std::optional<bool> b = ReadBool(ctx.sink, *immutable_field);
    ok = b.has_value() && ok;
    immutable = b.value_or(false);
  }
  if (immutable) {
    ctx.sink.Error(immutable_field->mark, immutable_field->path,
                   "gpucloud's Secrets are not immutable: leave it out or false");
    ok = false;
  }
  std::optional<Field> data = doc.Take("data");
  std::optional<Field> string_data = doc.Take("stringData");
  if (data) ok = ReadValues(ctx, *data, /*base64=*/true, &s.values) && ok;
  // stringData wins over data for the same key, as in Kubernetes.
  if (string_data) ok = ReadValues(ctx, *string_data, /*base64=*/false, &s.values) && ok;
  if (ok && s.type == kDockerConfigJson) {
    const YAML::Mark& at = data ? data->mark : string_data ? string_data->mark : root.mark;
    ok = CheckDockerConfig(ctx, at, root.path, s);
  }
  if (!ok) return std::nullopt;
  return s;
}

}  // namespace gpucloud::manifest::internal
