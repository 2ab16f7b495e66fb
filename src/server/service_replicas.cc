#include "server/service_replicas.h"

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/text.h"
#include "fmt/format.h"
#include "manifest/manifest.h"

namespace gpucloud::server {
namespace {

void SetEnv(TaskSpec& t, const std::string& name, const std::string& value) {
  for (EnvVar& e : t.env) {
    if (e.name == name) {
      e.value = value;
      return;
    }
  }
  t.env.push_back({name, value});
}

}  // namespace

std::string TemplateHash(const InferenceService& svc) {
  InferenceService copy;
  copy.spec = svc.spec;
  // What the replicas' jobs are made of; the gateway's and the scaler's settings roll nothing.
  nlohmann::json j = nlohmann::json::parse(manifest::ToJson(manifest::Object(copy)));
  nlohmann::json keep = {{"template", j["spec"]["template"]},
                         {"queue", j["spec"]["queue"]},
                         {"priority", j["spec"]["priority"]},
                         {"billing", j["spec"]["billing"]},
                         {"nodeSelector", j["spec"].value("nodeSelector", nlohmann::json())},
                         {"tolerations", j["spec"].value("tolerations", nlohmann::json())}};
  return fmt::format("{:016x}", Fnv1a64(keep.dump()));
}

std::string ReplicaName(std::string_view service, int64_t n) {
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string suffix(5, '0');
  uint64_t v = static_cast<uint64_t>(n) % (36ull * 36 * 36 * 36 * 36);
  for (int i = 4; i >= 0; --i) {
    suffix[i] = kDigits[v % 36];
    v /= 36;
  }
  return Cat(service, "-", suffix);
}

Job ReplicaJob(const InferenceService& svc, const std::string& name, int port,
               const std::string& template_hash) {
  const InferenceServiceSpec& s = svc.spec;
  Job job;
  job.metadata.name = name;
  job.metadata.namespace_ = svc.metadata.namespace_;
  job.metadata.labels[std::string(kServiceLabel)] = svc.metadata.name;
  job.metadata.labels[std::string(kServiceTemplateLabel)] = template_hash;
  job.spec = autoscale::ReplicaJobSpec(s);
  TaskSpec& task = job.spec.tasks[0];
  SetEnv(task, "PORT", std::to_string(port));
  SetEnv(task, "GPUCLOUD_SERVICE_PORT", std::to_string(port));
  SetEnv(task, "GPUCLOUD_SERVICE", svc.metadata.name);
  return job;
}

int FreeServicePort(const std::set<int>& used, std::string_view name) {
  const int start = static_cast<int>(Fnv1a64(name) % kServicePortCount);
  for (int k = 0; k < kServicePortCount; ++k) {
    const int port = kServicePortBase + (start + k) % kServicePortCount;
    if (!used.count(port)) return port;
  }
  return 0;
}

store::Op StopReplicaOp(const std::string& key, const nlohmann::ordered_json& doc,
                        int64_t mod_revision) {
  nlohmann::ordered_json out = doc;
  out["status"]["cancelRequested"] = true;
  out["status"]["deleteRequested"] = true;
  return {store::Op::Kind::kPut, key, out.dump(2), mod_revision};
}

}  // namespace gpucloud::server
