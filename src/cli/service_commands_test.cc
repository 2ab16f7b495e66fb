#include "cli/service_commands.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

Json Svc() {
  return Json::parse(R"({
    "apiVersion": "gpucloud/v1", "kind": "InferenceService",
    "metadata": {"name": "resnet", "namespace": "team-a"},
    "spec": {"template": {"name": "server", "command": ["serve"],
                          "resources": {"gpu": {"count": 1}}},
             "replicas": {"min": 0, "max": 4},
             "autoscaling": {"metric": "concurrency", "target": 10, "stableWindow": "1m",
                             "panicWindow": "6s", "scaleToZeroAfter": "30s"},
             "batching": {"path": "/predict"}, "priority": 100, "queue": "inference"},
    "status": {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 2,
               "reason": "panic: 31.00 in flight over 6s",
               "load": {"stable": 24.5, "panic": 31, "queued": 2},
               "endpoints": [{"job": "resnet-00001", "node": "n1", "address": "10.0.0.1:10001",
                              "ready": true, "current": true},
                             {"job": "resnet-00002", "node": "n2", "address": "10.0.0.2:10002",
                              "ready": false, "current": false}],
               "history": [{"time": "2026-12-07T10:00:00Z", "from": 1, "to": 3,
                            "reason": "panic: 31.00 in flight over 6s"}]}})");
}

TEST(ServiceCommandsTest, TableRowSaysReadyOverDesiredTargetAndLoad) {
  std::ostringstream out;
  PrintServicesTable({Svc()}, /*with_namespace=*/true, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("NAMESPACE"), std::string::npos) << text;
  EXPECT_NE(text.find("team-a"), std::string::npos) << text;
  EXPECT_NE(text.find("2/3"), std::string::npos) << text;
  EXPECT_NE(text.find("3 (0-4)"), std::string::npos) << text;
  EXPECT_NE(text.find("10 concurrency"), std::string::npos) << text;
  EXPECT_NE(text.find("24.5 in flight (panic 31)"), std::string::npos) << text;
  EXPECT_NE(text.find("panic: 31.00 in flight over 6s"), std::string::npos) << text;
  // A service the controller has not seen yet: no status, no crash.
  Json fresh = Svc();
  fresh.erase("status");
  std::ostringstream out2;
  PrintServicesTable({fresh}, false, out2);
  EXPECT_NE(out2.str().find("0/0"), std::string::npos) << out2.str();
}

TEST(ServiceCommandsTest, DescribeListsReplicasAndScalingEvents) {
  std::ostringstream out;
  DescribeService(Svc(), out);
  const std::string text = out.str();
  EXPECT_NE(text.find("Replicas:      3 (ready 2, desired 3, min 0, max 4)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("resnet-00001"), std::string::npos) << text;
  EXPECT_NE(text.find("10.0.0.2:10002"), std::string::npos) << text;
  EXPECT_NE(text.find("old"), std::string::npos) << text;
  EXPECT_NE(text.find("1 -> 3"), std::string::npos) << text;
  EXPECT_NE(text.find("batching /predict"), std::string::npos) << text;
  EXPECT_NE(text.find("queued 2"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpucloud::cli
