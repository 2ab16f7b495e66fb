// Printing of objects in the normalized gpucloud/v1 form. Objects are first built as ordered
// JSON (field order as in docs/manifests.md); YAML is emitted from that tree, quoting every
// string that would otherwise read back as a number, boolean or null.
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "core/parse.h"
#include "manifest/manifest.h"
#include "manifest/yaml_reader.h"

namespace gpucloud::manifest {
namespace {

using Json = nlohmann::ordered_json;

Json StringMap(const std::map<std::string, std::string>& m) {
  Json out = Json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

Json Metadata(const ObjectMeta& m) {
  Json out = Json::object();
  out["name"] = m.name;
  if (!m.namespace_.empty()) out["namespace"] = m.namespace_;
  if (!m.labels.empty()) out["labels"] = StringMap(m.labels);
  if (!m.annotations.empty()) out["annotations"] = StringMap(m.annotations);
  // Set by the store (API answers); absent in manifests.
  if (!m.uid.empty()) out["uid"] = m.uid;
  if (m.resource_version > 0) out["resourceVersion"] = std::to_string(m.resource_version);
  if (m.creation_unix_seconds > 0) {
    std::time_t t = static_cast<std::time_t>(m.creation_unix_seconds);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    out["creationTimestamp"] = buf;
  }
  return out;
}

Json Tolerations(const std::vector<Toleration>& tolerations) {
  Json out = Json::array();
  for (const Toleration& t : tolerations) {
    Json j = Json::object();
    if (!t.key.empty()) j["key"] = t.key;
    j["operator"] = t.exists ? "Exists" : "Equal";
    if (!t.value.empty()) j["value"] = t.value;
    if (!t.effect.empty()) j["effect"] = t.effect;
    out.push_back(std::move(j));
  }
  return out;
}

Json Gpu(const GpuRequest& g) {
  Json out = Json::object();
  switch (g.mode) {
    case GpuMode::kNone:
      out["count"] = 0;
      break;
    case GpuMode::kWhole:
      out["count"] = g.count;
      break;
    case GpuMode::kMig:
      out["mig"] = g.mig_profile;
      out["count"] = g.count;
      break;
    case GpuMode::kShared:
      out["fraction"] = FormatMilli(g.fraction.raw());
      if (g.memory.raw() > 0) out["memory"] = FormatMemory(g.memory);
      out["sharing"] = GpuSharingName(g.sharing);
      break;
  }
  if (!g.types.empty()) out["types"] = g.types;
  return out;
}

// envFrom, volumes and imagePullSecrets (secretEnv goes with env).
void SecretsJson(const TaskSpec& t, Json& out) {
  if (!t.env_from.empty()) {
    Json list = Json::array();
    for (const SecretEnvFrom& e : t.env_from) {
      Json ref{{"name", e.secret}};
      if (e.optional) ref["optional"] = true;
      Json item{{"secretRef", std::move(ref)}};
      if (!e.prefix.empty()) item["prefix"] = e.prefix;
      list.push_back(std::move(item));
    }
    out["envFrom"] = std::move(list);
  }
  if (!t.secret_volumes.empty()) {
    Json list = Json::array();
    for (const SecretVolume& v : t.secret_volumes) {
      Json secret{{"secretName", v.secret}};
      if (!v.items.empty()) {
        Json items = Json::array();
        for (const SecretVolume::Item& i : v.items) {
          items.push_back(Json{{"key", i.key}, {"path", i.path}});
        }
        secret["items"] = std::move(items);
      }
      if (v.optional) secret["optional"] = true;
      list.push_back(Json{{"name", v.name}, {"mountPath", v.mount_path}, {"secret", secret}});
    }
    out["volumes"] = std::move(list);
  }
  if (!t.image_pull_secrets.empty()) {
    Json list = Json::array();
    for (const std::string& s : t.image_pull_secrets) list.push_back(Json{{"name", s}});
    out["imagePullSecrets"] = std::move(list);
  }
}

Json Task(const TaskSpec& t) {
  Json out = Json::object();
  out["name"] = t.name;
  out["replicas"] = t.replicas;
  if (!t.image.empty()) out["image"] = t.image;
  if (t.image_pull_policy != PullPolicy::kDefault) {
    out["imagePullPolicy"] = PullPolicyName(t.image_pull_policy);
  }
  if (!t.security_context.empty()) {
    const SecurityContext& sc = t.security_context;
    Json j = Json::object();
    if (sc.run_as_user) j["runAsUser"] = *sc.run_as_user;
    if (sc.run_as_group) j["runAsGroup"] = *sc.run_as_group;
    if (sc.run_as_non_root) j["runAsNonRoot"] = true;
    out["securityContext"] = std::move(j);
  }
  if (!t.command.empty()) out["command"] = t.command;
  if (!t.args.empty()) out["args"] = t.args;
  if (!t.env.empty() || !t.secret_env.empty()) {
    Json env = Json::array();
    for (const EnvVar& e : t.env) env.push_back(Json{{"name", e.name}, {"value", e.value}});
    for (const SecretEnvVar& e : t.secret_env) {
      Json ref{{"name", e.ref.secret}, {"key", e.ref.key}};
      if (e.ref.optional) ref["optional"] = true;
      env.push_back(Json{{"name", e.name}, {"valueFrom", {{"secretKeyRef", std::move(ref)}}}});
    }
    out["env"] = std::move(env);
  }
  SecretsJson(t, out);
  if (!t.working_dir.empty()) out["workingDir"] = t.working_dir;
  Json res = Json::object();
  if (t.resources.gpu.mode != GpuMode::kNone) res["gpu"] = Gpu(t.resources.gpu);
  if (t.resources.cpu.raw() > 0) res["cpu"] = FormatMilli(t.resources.cpu.raw());
  if (t.resources.memory.raw() > 0) res["memory"] = FormatMemory(t.resources.memory);
  if (!res.empty()) out["resources"] = std::move(res);
  return out;
}

// Lifecycle policies in JobSpec::policies' order (task-level first), which the decoder keeps.
Json Policies(const std::vector<LifecyclePolicy>& policies) {
  Json out = Json::array();
  for (const LifecyclePolicy& p : policies) {
    Json j = Json::object();
    if (p.exit_code) {
      j["exitCode"] = *p.exit_code;
    } else {
      Json events = Json::array();
      for (LifecycleEvent e : p.events) events.push_back(LifecycleEventName(e));
      j["events"] = std::move(events);
    }
    j["action"] = LifecycleActionName(p.action);
    if (!p.task.empty()) j["task"] = p.task;
    out.push_back(std::move(j));
  }
  return out;
}

// An array asked for prints count when its indices are 0..count-1, else indices; an element
// prints its array, index and count.
Json JobArrayJson(const JobArraySpec& a) {
  Json out = Json::object();
  if (a.element()) {
    out["name"] = a.name;
    out["index"] = a.index;
    if (a.count > 0) out["count"] = a.count;
  } else if (a.indices.size() == 1 && a.indices[0].first == 0) {
    out["count"] = a.indices[0].last + 1;
  } else {
    out["indices"] = FormatArrayIndices(a.indices);
  }
  if (a.parallelism > 0) out["parallelism"] = a.parallelism;
  return out;
}

Json JobSpecJson(const JobSpec& s) {
  Json out = Json::object();
  out["queue"] = s.queue;
  out["priority"] = s.priority;
  out["billing"] = BillingClassName(s.billing);
  out["minAvailable"] = s.GangSize();
  if (s.runtime_estimate_seconds)
    out["runtimeEstimate"] = FormatDuration(*s.runtime_estimate_seconds);
  if (!s.node_selector.empty()) out["nodeSelector"] = StringMap(s.node_selector);
  if (!s.tolerations.empty()) out["tolerations"] = Tolerations(s.tolerations);
  if (s.min_cuda_version > 0) out["minCudaVersion"] = FormatCudaVersion(s.min_cuda_version);
  if (!s.runtime_class.empty()) out["runtimeClass"] = s.runtime_class;
  if (!s.checkpoint.dir.empty() || s.checkpoint.interval_seconds > 0 || s.checkpoint.node_local) {
    Json c = Json::object();
    if (!s.checkpoint.dir.empty()) c["dir"] = s.checkpoint.dir;
    if (s.checkpoint.interval_seconds > 0)
      c["interval"] = FormatDuration(s.checkpoint.interval_seconds);
    if (s.checkpoint.node_local) c["nodeLocal"] = true;
    if (s.checkpoint.replicate) c["replicate"] = true;
    out["checkpoint"] = std::move(c);
  }
  out["restartPolicy"] = Json{{"maxRestarts", s.restart.max_restarts},
                              {"backoff", FormatDuration(s.restart.backoff_seconds)}};
  Json tasks = Json::array();
  for (const TaskSpec& t : s.tasks) tasks.push_back(Task(t));
  out["tasks"] = std::move(tasks);
  if (!s.policies.empty()) out["policies"] = Policies(s.policies);
  if (s.array) out["array"] = JobArrayJson(*s.array);
  if (s.ssh) out["ssh"] = Json{{"mountPath", s.ssh->mount_path}};
  if (s.interactive) {
    out["interactive"] = Json{{"idleTimeout", FormatDuration(s.interactive->idle_timeout_seconds)},
                              {"maxDuration", FormatDuration(s.interactive->max_duration_seconds)}};
  }
  return out;
}

Json QueueSpecJson(const QueueSpec& s) {
  Json out = Json::object();
  out["weight"] = s.weight;
  out["mayBorrow"] = s.may_borrow;
  out["mayLend"] = s.may_lend;
  out["ordering"] = QueueOrderingName(s.ordering);
  Json quota = Json::array();
  for (const GpuQuota& q : s.quota) {
    Json j = Json::object();
    j["gpuType"] = q.gpu_type;
    j["guaranteed"] = FormatMilli(q.guaranteed.raw());
    if (q.max) j["max"] = FormatMilli(q.max->raw());
    quota.push_back(std::move(j));
  }
  if (!quota.empty()) out["quota"] = std::move(quota);
  return out;
}

Json NodePoolSpecJson(const NodePoolSpec& s) {
  Json out = Json::object();
  out["gpuType"] = s.gpu_type;
  out["gpusPerNode"] = s.gpus_per_node;
  out["minNodes"] = s.min_nodes;
  out["maxNodes"] = s.max_nodes;
  out["billing"] = BillingClassName(s.billing);
  if (s.price_per_gpu_hour) out["pricePerGpuHour"] = FormatPrice(*s.price_per_gpu_hour);
  out["provider"] = s.provider;
  if (s.carbon_intensity > 0) out["carbonIntensity"] = s.carbon_intensity;
  if (!s.price_schedule.empty()) {
    Json periods = Json::array();
    for (const PricePeriod& p : s.price_schedule) {
      Json j = Json::object();
      j["from"] = absl::FormatTime(absl::RFC3339_full, absl::FromUnixMillis(p.from_ms),
                                   absl::UTCTimeZone());
      if (p.until_ms != 0) {
        j["until"] = absl::FormatTime(absl::RFC3339_full, absl::FromUnixMillis(p.until_ms),
                                      absl::UTCTimeZone());
      }
      j["pricePerGpuHour"] = FormatPrice(p.price_per_gpu_hour);
      periods.push_back(std::move(j));
    }
    out["priceSchedule"] = std::move(periods);
  }
  if (!s.labels.empty()) out["labels"] = StringMap(s.labels);
  if (!s.taints.empty()) {
    Json taints = Json::array();
    for (const Taint& t : s.taints) {
      Json j = Json::object();
      j["key"] = t.key;
      if (!t.value.empty()) j["value"] = t.value;
      j["effect"] = t.effect;
      taints.push_back(std::move(j));
    }
    out["taints"] = std::move(taints);
  }
  return out;
}

Json SchedulerConfigJson(const SchedulerConfig& s) {
  Json out = Json::object();
  out["ordering"] = QueueOrderingName(s.ordering);
  out["backfill"] = s.backfill;
  out["estimateStartTimes"] = s.estimate_start_times;
  out["fairShare"] =
      Json{{"enabled", s.fair_share}, {"window", FormatDuration(s.fair_share_window_s)}};
  out["preemption"] =
      Json{{"enabled", s.preemption}, {"gracePeriod", FormatDuration(s.preemption_grace_s)}};
  Json plugins = Json::object();
  if (!s.filters.empty()) plugins["filter"] = s.filters;
  Json scores = Json::array();
  for (const ScorePluginConfig& c : s.scores) {
    Json j = Json::object();
    j["name"] = c.name;
    j["weight"] = c.weight;
    if (!c.workload.empty()) {
      Json w = Json::array();
      for (const WorkloadShare& share : c.workload) {
        w.push_back(Json{{"gpus", FormatMilli(share.gpus.raw())},
                         {"weight", FormatMilli(std::llround(share.weight * kMilliPerUnit))}});
      }
      j["workload"] = std::move(w);
    }
    scores.push_back(std::move(j));
  }
  plugins["score"] = std::move(scores);
  out["plugins"] = std::move(plugins);
  out["namespaceBudget"] = Json{{"maxWaiting", s.namespace_budget.max_waiting},
                                {"maxSearches", s.namespace_budget.max_searches}};
  Json thresholds = Json::array();
  for (int64_t t : s.las.thresholds_gpu_s) thresholds.push_back(FormatDuration(t));
  out["las"] = Json{
      {"thresholds", std::move(thresholds)},
      {"starvationFactor", FormatMilli(std::llround(s.las.starvation_factor * kMilliPerUnit))}};
  return out;
}

Json ServiceSpecJson(const InferenceServiceSpec& s) {
  Json out = Json::object();
  out["template"] = Task(s.task);
  out["readinessPath"] = s.readiness_path;
  out["replicas"] = Json{{"min", s.min_replicas}, {"max", s.max_replicas}};
  const ServiceAutoscaling& a = s.autoscaling;
  out["autoscaling"] = Json{{"metric", ServiceMetricName(a.metric)},
                            {"target", a.target},
                            {"stableWindow", FormatDuration(a.stable_window_seconds)},
                            {"panicWindow", FormatDuration(a.panic_window_seconds)},
                            {"scaleToZeroAfter", FormatDuration(a.scale_to_zero_after_seconds)}};
  if (s.batching) {
    out["batching"] = Json{{"path", s.batching->path},
                           {"maxBatchSize", s.batching->max_batch_size},
                           {"maxQueueDelayMs", s.batching->max_queue_delay_ms}};
  }
  out["rollout"] = Json{{"maxSurge", s.max_surge}, {"maxUnavailable", s.max_unavailable}};
  out["requestTimeout"] = FormatDuration(s.request_timeout_seconds);
  out["retries"] = s.retries;
  out["maxRequestBytes"] = s.max_request_bytes;
  out["queue"] = s.queue;
  out["priority"] = s.priority;
  out["billing"] = BillingClassName(s.billing);
  if (!s.node_selector.empty()) out["nodeSelector"] = StringMap(s.node_selector);
  if (!s.tolerations.empty()) out["tolerations"] = Tolerations(s.tolerations);
  return out;
}

Json ToJsonTree(const Object& object) {
  Json out = Json::object();
  out["apiVersion"] = kApiVersion;
  out["kind"] = KindOf(object);
  out["metadata"] = Metadata(MetaOf(object));
  if (const Job* j = std::get_if<Job>(&object)) out["spec"] = JobSpecJson(j->spec);
  if (const Queue* q = std::get_if<Queue>(&object)) out["spec"] = QueueSpecJson(q->spec);
  if (const NodePool* p = std::get_if<NodePool>(&object)) out["spec"] = NodePoolSpecJson(p->spec);
  if (const auto* svc = std::get_if<InferenceService>(&object)) {
    out["spec"] = ServiceSpecJson(svc->spec);
  }
  if (const auto* c = std::get_if<SchedulerConfiguration>(&object)) {
    out["spec"] = SchedulerConfigJson(c->spec);
  }
  if (const RuntimeClass* rc = std::get_if<RuntimeClass>(&object)) {
    out["handler"] = rc->spec.handler;
    if (!rc->spec.node_selector.empty() || !rc->spec.tolerations.empty()) {
      Json sched = Json::object();
      if (!rc->spec.node_selector.empty())
        sched["nodeSelector"] = StringMap(rc->spec.node_selector);
      if (!rc->spec.tolerations.empty()) sched["tolerations"] = Tolerations(rc->spec.tolerations);
      out["scheduling"] = std::move(sched);
    }
  }
  return out;
}

void EmitYaml(YAML::Emitter& e, const Json& j) {
  if (j.is_object()) {
    if (j.empty()) {
      e << YAML::Flow << YAML::BeginMap << YAML::EndMap;
      return;
    }
    e << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      e << YAML::Key;
      if (PlainScalarIsNotString(k)) e << YAML::DoubleQuoted;
      e << k << YAML::Value;
      EmitYaml(e, v);
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    if (j.empty()) {
      e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
      return;
    }
    e << YAML::BeginSeq;
    for (const Json& v : j) EmitYaml(e, v);
    e << YAML::EndSeq;
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (PlainScalarIsNotString(s)) e << YAML::DoubleQuoted;
    e << s;
  } else if (j.is_boolean()) {
    e << j.get<bool>();
  } else if (j.is_number_integer()) {
    e << j.get<int64_t>();
  } else {
    e << YAML::Null;
  }
}

}  // namespace

std::string ToJson(const Object& object) { return ToJsonTree(object).dump(2) + "\n"; }

std::string ToYaml(const Object& object) {
  YAML::Emitter e;
  EmitYaml(e, ToJsonTree(object));
  return std::string(e.c_str()) + "\n";
}

}  // namespace gpucloud::manifest
