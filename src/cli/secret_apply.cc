#include "cli/secret_apply.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <ostream>

#include "absl/strings/escaping.h"
#include "api/paths.h"
#include "cli/apply_prune.h"
#include "cli/remote.h"
#include "cli/unified_diff.h"
#include "core/text.h"
#include "manifest/json_yaml.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kDigestKeyLabel = "gpuctl secret digest v1";
constexpr size_t kDigestHexDigits = 56;  // "h1-" and these fit a label value (63)

std::string HmacSha256(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &size);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

// "NAME" of a Secret as kubectl prints a v1 Secret's lines.
std::string LineName(const manifest::SecretObject& s) { return "secret/" + s.metadata.name; }

// Each key of the server's object and its size (status.data), as the API shows them.
std::map<std::string, int64_t> LiveSizes(const Json& live) {
  std::map<std::string, int64_t> sizes;
  const Json status = live.value("status", Json::object());
  if (!status.is_object() || !status.contains("data") || !status["data"].is_object()) return sizes;
  for (const auto& [key, v] : status["data"].items()) {
    sizes[key] = v.is_object() ? v.value("bytes", int64_t{-1}) : -1;
  }
  return sizes;
}

std::map<std::string, std::string> LiveLabels(const Json& live) {
  std::map<std::string, std::string> labels;
  const Json meta = live.value("metadata", Json::object());
  if (!meta.is_object() || !meta.contains("labels") || !meta["labels"].is_object()) return labels;
  for (const auto& [k, v] : meta["labels"].items()) {
    if (v.is_string()) labels[k] = v.get<std::string>();
  }
  return labels;
}

Json DiffView(const std::string& name, const std::string& ns,
              const std::map<std::string, std::string>& labels, const std::string& type,
              const std::map<std::string, int64_t>& sizes) {
  Json meta = {{"name", name}, {"namespace", ns}};
  if (!labels.empty()) meta["labels"] = labels;
  Json view = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", meta}, {"type", type}};
  if (!sizes.empty()) {
    for (const auto& [key, bytes] : sizes) view["data"][key] = Cat("*** (", bytes, " bytes)");
  }
  return view;
}

std::map<std::string, int64_t> Sizes(const manifest::SecretObject& s) {
  std::map<std::string, int64_t> sizes;
  for (const auto& [key, value] : s.values) sizes[key] = static_cast<int64_t>(value.size());
  return sizes;
}

// The PUT body: gpucloud/v1, every value in `data` as base64.
std::string Body(const manifest::SecretObject& s,
                 const std::map<std::string, std::string>& labels) {
  Json meta = {{"name", s.metadata.name}, {"namespace", s.metadata.namespace_}, {"labels", labels}};
  if (s.metadata.resource_version > 0) {
    meta["resourceVersion"] = std::to_string(s.metadata.resource_version);
  }
  Json data = Json::object();
  for (const auto& [key, value] : s.values) data[key] = absl::Base64Escape(value);
  return Json{{"apiVersion", "gpucloud/v1"},
              {"kind", "Secret"},
              {"metadata", meta},
              {"type", s.type},
              {"data", data}}
      .dump();
}

}  // namespace

std::string_view DryRunSuffix(DryRun mode) {
  return mode == DryRun::kClient   ? " (dry run)"
         : mode == DryRun::kServer ? " (server dry run)"
                                   : "";
}

std::string SecretDigest(const manifest::SecretObject& secret, std::string_view token) {
  if (token.empty()) return "";
  // Lengths before each part, so that no two different secrets read as the same message.
  std::string message = Cat(secret.type.size(), ":", secret.type);
  for (const auto& [key, value] : secret.values) {
    message += Cat(key.size(), ":", key, value.size(), ":", value);
  }
  std::string mac = HmacSha256(HmacSha256(token, kDigestKeyLabel), message);
  std::string hex;
  for (unsigned char c : mac) hex += fmt::format("{:02x}", c);
  return "h1-" + hex.substr(0, kDigestHexDigits);
}

std::map<std::string, std::string> AppliedSecretLabels(const manifest::SecretObject& secret,
                                                       const std::string& digest) {
  std::map<std::string, std::string> labels = secret.metadata.labels;
  labels[std::string(kLastAppliedLabel)] = digest.empty() ? "true" : digest;
  return labels;
}

bool SecretIsUnchanged(const Json& live, const manifest::SecretObject& secret,
                       const std::map<std::string, std::string>& labels,
                       const std::string& digest) {
  if (digest.empty() || !live.is_object()) return false;
  return live.value("type", "") == secret.type && LiveLabels(live) == labels &&
         LiveSizes(live) == Sizes(secret);
}

Json SecretDiffView(const Json& live) {
  const Json meta = live.value("metadata", Json::object());
  return DiffView(meta.is_object() ? meta.value("name", "") : "",
                  meta.is_object() ? meta.value("namespace", "") : "", LiveLabels(live),
                  live.value("type", ""), LiveSizes(live));
}

Json SecretDiffView(const manifest::SecretObject& secret,
                    const std::map<std::string, std::string>& labels) {
  return DiffView(secret.metadata.name, secret.metadata.namespace_, labels, secret.type,
                  Sizes(secret));
}

absl::StatusOr<std::optional<Json>> ReadLive(const api::Client& client, const std::string& path) {
  absl::StatusOr<api::HttpResponse> r = client.Call("GET", path);
  if (!r.ok()) return r.status();
  if (r->status == 404) return std::optional<Json>();
  if (r->status != 200) return absl::UnavailableError(StatusMessage(*r));
  Json j = Json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return absl::UnavailableError("the server's answer is not JSON");
  return std::optional<Json>(std::move(j));
}

std::string SecretPath(const manifest::SecretObject& secret) {
  return api::SecretPath(secret.metadata.namespace_, secret.metadata.name);
}

bool ApplySecret(const api::Client& client, const manifest::SecretObject& secret, DryRun mode,
                 std::ostream& out, std::ostream& err) {
  const std::string what = LineName(secret), path = SecretPath(secret);
  absl::StatusOr<std::optional<Json>> live = ReadLive(client, path);
  if (!live.ok()) {
    err << "gpuctl: " << what << ": " << live.status().message() << "\n";
    return false;
  }
  const std::string digest = SecretDigest(secret, client.config().token);
  const std::map<std::string, std::string> labels = AppliedSecretLabels(secret, digest);
  const std::string_view suffix = DryRunSuffix(mode);
  if (live->has_value() && SecretIsUnchanged(**live, secret, labels, digest)) {
    out << what << " unchanged" << suffix << "\n";
    return true;
  }
  if (mode == DryRun::kClient) {
    out << what << (live->has_value() ? " configured" : " created") << suffix << "\n";
    return true;
  }
  const std::string target = mode == DryRun::kServer ? path + "?dryRun=All" : path;
  std::optional<api::HttpResponse> r = Send(client, "PUT", target, Body(secret, labels), err, what);
  if (!r) return false;
  out << what << (r->status == 201 ? " created" : " configured") << suffix << "\n";
  return true;
}

bool DeleteSecret(const api::Client& client, const manifest::SecretObject& secret,
                  std::ostream& out, std::ostream& err) {
  const std::string what = LineName(secret);
  if (!Send(client, "DELETE", SecretPath(secret), "", err, what)) return false;
  out << what << " deleted\n";
  return true;
}

absl::StatusOr<std::string> DiffSecret(const api::Client& client,
                                       const manifest::SecretObject& secret) {
  absl::StatusOr<std::optional<Json>> live = ReadLive(client, SecretPath(secret));
  if (!live.ok()) return live.status();
  const std::string what = LineName(secret);
  auto yaml = [](const Json& j) { return manifest::JsonToYaml(j.dump()).value_or(""); };
  const std::string digest = SecretDigest(secret, client.config().token);
  const std::string file = yaml(SecretDiffView(secret, AppliedSecretLabels(secret, digest)));
  if (!live->has_value()) return UnifiedDiff("", file, "/dev/null", "file/" + what);
  return UnifiedDiff(yaml(SecretDiffView(**live)), file, "live/" + what, "file/" + what);
}

}  // namespace gpucloud::cli
