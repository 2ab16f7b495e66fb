#include "api/paths.h"

#include <gtest/gtest.h>

namespace gpucloud::api {
namespace {

TEST(Paths, EveryHelperBuildsTheServersPath) {
  struct Case {
    std::string got;
    const char* want;
  };
  const Case kCases[] = {
      {ApiPath("whoami"), "/apis/gpucloud/v1/whoami"},
      {ClusterScopedPath("queues"), "/apis/gpucloud/v1/queues"},
      {NamespacedPath("team-a", "serviceaccounts"),
       "/apis/gpucloud/v1/namespaces/team-a/serviceaccounts"},
      {JobsPath("team-a"), "/apis/gpucloud/v1/namespaces/team-a/jobs"},
      {AllJobsPath(), "/apis/gpucloud/v1/jobs"},
      {JobPath("team-a", "train"), "/apis/gpucloud/v1/namespaces/team-a/jobs/train"},
      {JobSubresourcePath("team-a", "train", "cancel"),
       "/apis/gpucloud/v1/namespaces/team-a/jobs/train/cancel"},
      {SecretPath("team-a", "hf"), "/apis/gpucloud/v1/namespaces/team-a/secrets/hf"},
      {NodesPath(), "/apis/gpucloud/v1/nodes"},
      {NodePath("node-a"), "/apis/gpucloud/v1/nodes/node-a"},
      {NodeVerbPath("node-a", "heartbeat"), "/apis/gpucloud/v1/nodes/node-a/heartbeat"},
      {AssignmentsPath("node-a"), "/apis/gpucloud/v1/nodes/node-a/assignments"},
      {TaskSecretsPath("node-a", "ns.job.0"),
       "/apis/gpucloud/v1/nodes/node-a/assignments/ns.job.0/secrets"},
      {PoolPath("spot", "reclaim?seconds=60"), "/apis/gpucloud/v1/pools/spot/reclaim?seconds=60"},
      {ClusterPath(), "/apis/gpucloud/v1/cluster"},
  };
  for (const Case& c : kCases) EXPECT_EQ(c.got, c.want);
}

}  // namespace
}  // namespace gpucloud::api
