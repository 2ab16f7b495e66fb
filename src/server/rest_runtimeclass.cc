// RuntimeClasses in the API: what a stored one does to the jobs that name it.
#include <string>
#include <vector>

#include "core/text.h"
#include "manifest/manifest.h"
#include "server/rest_util.h"

namespace gpucloud::server {

std::optional<Response> ResolveRuntimeClass(store::Store& store, manifest::Object& o,
                                            std::string* warning) {
  Job* job = std::get_if<Job>(&o);
  if (job == nullptr || job->spec.runtime_class.empty()) return std::nullopt;
  absl::StatusOr<store::KeyValue> kv = store.Get(Cat("/runtimeclasses/", job->spec.runtime_class));
  if (absl::IsNotFound(kv.status())) {
    *warning = Cat("299 - \"RuntimeClass ", job->spec.runtime_class,
                   " does not exist: its node selector and tolerations are not applied\"");
    return std::nullopt;
  }
  if (!kv.ok()) return FromStatus(kv.status());
  manifest::ParseResult stored = manifest::ParseManifests(kv->value, kv->key);
  if (!stored.ok() || stored.manifests.size() != 1) {
    return Status(500, "InternalError", Cat(kv->key, ": the stored object does not parse"));
  }
  std::vector<manifest::Manifest> both(2);
  both[0].file = "body";
  both[0].object = std::move(o);
  both[1] = std::move(stored.manifests[0]);
  std::vector<manifest::Diagnostic> errors = manifest::ResolveRuntimeClasses(both);
  o = std::move(both[0].object);
  if (errors.empty()) return std::nullopt;
  std::vector<std::string> lines;
  for (const manifest::Diagnostic& d : errors) lines.push_back(d.ToString());
  return Status(422, "Invalid", Join(lines, "\n"));
}

}  // namespace gpucloud::server
