#include "gateway/balancer.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace gpucloud::gateway {
namespace {

TEST(BalancerTest, LeastOutstandingAmongReadyUntried) {
  std::vector<ReplicaLoad> r = {{.ready = true, .in_flight = 3},
                                {.ready = false, .in_flight = 0},
                                {.ready = true, .in_flight = 1},
                                {.ready = true, .in_flight = 1, .tried = true}};
  for (uint64_t turn = 0; turn < 8; ++turn) EXPECT_EQ(PickReplica(r, turn), 2u);
  r[2].tried = true;
  EXPECT_EQ(PickReplica(r, 0), 0u);
  r[0].ready = false;
  EXPECT_EQ(PickReplica(r, 0), std::nullopt);
  EXPECT_EQ(PickReplica({}, 0), std::nullopt);
}

TEST(BalancerTest, TiesAreTakenInTurn) {
  std::vector<ReplicaLoad> r(3, ReplicaLoad{.ready = true});
  std::map<size_t, int> picked;
  for (uint64_t turn = 0; turn < 300; ++turn) ++picked[*PickReplica(r, turn)];
  EXPECT_EQ(picked.size(), 3u);
  for (const auto& [i, n] : picked) EXPECT_EQ(n, 100) << i;
}

TEST(BalancerTest, SpreadsConcurrentRequests) {
  // Requests that stay in flight: each goes to the least loaded, so loads stay within one.
  std::vector<ReplicaLoad> r(4, ReplicaLoad{.ready = true});
  for (uint64_t turn = 0; turn < 41; ++turn) ++r[*PickReplica(r, turn)].in_flight;
  int64_t lo = r[0].in_flight, hi = r[0].in_flight;
  for (const ReplicaLoad& x : r) {
    lo = std::min(lo, x.in_flight);
    hi = std::max(hi, x.in_flight);
  }
  EXPECT_LE(hi - lo, 1);
}

}  // namespace
}  // namespace gpucloud::gateway
