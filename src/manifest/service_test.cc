// gpucloud/v1 InferenceService: defaults, round trip, and bad values named with their field.
#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string Service(const std::string& spec_extra, const std::string& name = "resnet") {
  return "apiVersion: gpucloud/v1\nkind: InferenceService\nmetadata: {name: " + name +
         ", namespace: team-a}\nspec:\n  template:\n    name: server\n    command: [serve]\n" +
         "    resources: {gpu: {fraction: \"0.5\"}}\n" + spec_extra;
}

// The first error's "path: message".
std::string Error(const std::string& text) {
  ParseResult r = ParseManifests(text, "svc.yaml");
  if (r.ok()) return "no error";
  return r.errors[0].path + ": " + r.errors[0].message;
}

TEST(InferenceServiceManifest, DefaultsAndRoundTrip) {
  ParseResult r = ParseManifests(Service(""), "svc.yaml");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const auto& svc = std::get<InferenceService>(r.manifests[0].object);
  EXPECT_EQ(svc.metadata.namespace_, "team-a");
  EXPECT_EQ(svc.spec.min_replicas, 1);
  EXPECT_EQ(svc.spec.max_replicas, 1);
  EXPECT_EQ(svc.spec.autoscaling.target, 10);
  EXPECT_EQ(svc.spec.autoscaling.stable_window_seconds, 60);
  EXPECT_EQ(svc.spec.autoscaling.panic_window_seconds, 6);
  EXPECT_EQ(svc.spec.autoscaling.scale_to_zero_after_seconds, 30);
  EXPECT_EQ(svc.spec.readiness_path, "/");
  EXPECT_EQ(svc.spec.task.resources.gpu.mode, GpuMode::kShared);
  EXPECT_FALSE(svc.spec.batching.has_value());
  r = ParseManifests(Service("  replicas: {min: 0, max: 8}\n"
                             "  autoscaling: {metric: rps, target: 50, stableWindow: 2m}\n"
                             "  batching: {path: /predict, maxBatchSize: 32, maxQueueDelayMs: 3}\n"
                             "  rollout: {maxSurge: 0, maxUnavailable: 1}\n"
                             "  requestTimeout: 5s\n  retries: 0\n  priority: 900\n"
                             "  readinessPath: /ready\n"),
                     "svc.yaml");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const auto& full = std::get<InferenceService>(r.manifests[0].object);
  EXPECT_EQ(full.spec.autoscaling.metric, ServiceMetric::kRps);
  EXPECT_EQ(full.spec.autoscaling.stable_window_seconds, 120);
  ASSERT_TRUE(full.spec.batching.has_value());
  EXPECT_EQ(full.spec.batching->max_batch_size, 32);
  EXPECT_EQ(full.spec.batching->max_queue_delay_ms, 3);
  EXPECT_EQ(full.spec.max_unavailable, 1);
  EXPECT_EQ(full.spec.priority, 900);
  ParseResult lr =
      ParseManifests(Service("  autoscaling: {metric: p95Latency, target: 250}\n"), "svc.yaml");
  ASSERT_TRUE(lr.ok()) << lr.errors[0].ToString();
  const auto& latency = std::get<InferenceService>(lr.manifests[0].object);
  EXPECT_EQ(latency.spec.autoscaling.metric, ServiceMetric::kP95Latency);
  EXPECT_EQ(latency.spec.autoscaling.target, 250);
  EXPECT_NE(ToYaml(latency).find("p95Latency"), std::string::npos);
  for (bool json : {false, true}) {
    const std::string text = json ? ToJson(full) : ToYaml(full);
    ParseResult back = ParseManifests(text, "rt");
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_TRUE(std::get<InferenceService>(back.manifests[0].object) == full) << text;
  }
}

TEST(InferenceServiceManifest, BadValuesNameTheirField) {
  EXPECT_EQ(Error(Service("  replicas: {min: 3, max: 2}\n")),
            "spec.replicas.min: is 3, more than max (2)");
  EXPECT_EQ(Error(Service("  autoscaling: {stableWindow: 10s, panicWindow: 20s}\n")),
            "spec.autoscaling.panicWindow: is 20s, longer than stableWindow (10s)");
  EXPECT_EQ(Error(Service("  rollout: {maxSurge: 0, maxUnavailable: 0}\n")),
            "spec.rollout.maxSurge: maxSurge and maxUnavailable are both 0: a rollout could never "
            "proceed");
  EXPECT_EQ(Error(Service("  batching: {path: predict}\n")),
            "spec.batching.path: must start with '/', got \"predict\"");
  EXPECT_EQ(Error(Service("  readinessPath: healthz\n")),
            "spec.readinessPath: must start with '/', got \"healthz\"");
  EXPECT_EQ(Error(Service("  autoscaling: {metric: latency}\n")).substr(0, 30),
            "spec.autoscaling.metric: must ");
  EXPECT_EQ(Error(Service("  requestTimeout: 2h\n")),
            "spec.requestTimeout: must be between 1s and 3600s, got 7200s");
  EXPECT_EQ(Error(Service("  replicaz: 3\n")).substr(0, 16), "spec.replicaz: u");
  EXPECT_EQ(Error(Service("", std::string(58, 'a'))),
            "metadata.name: is 58 characters; a service's name has at most 57 (its replicas' "
            "jobs add 6)");
  std::string two = Service("");
  two.replace(two.find("    command"), 0, "    replicas: 2\n");
  EXPECT_EQ(Error(two),
            "spec.template.replicas: a service's replica count is spec.replicas (min and max), "
            "not its template's");
  EXPECT_EQ(Error("apiVersion: gpucloud/v1\nkind: InferenceService\nmetadata: {name: x}\n"
                  "spec: {replicas: {max: 2}}\n"),
            "spec.template: is required");
}

}  // namespace
}  // namespace gpucloud::manifest
