#include "core/job.h"

#include <gtest/gtest.h>

#include "core/node_pool.h"
#include "core/queue.h"

namespace gpucloud {
namespace {

TEST(JobSpec, TotalsAndGang) {
  JobSpec j;
  TaskSpec w{.name = "worker", .replicas = 4};
  w.resources.gpu = {.mode = GpuMode::kWhole, .count = 2};
  TaskSpec s{.name = "sidecar", .replicas = 2};
  s.resources.gpu = {.mode = GpuMode::kShared, .fraction = MilliGpu(250)};
  TaskSpec m{.name = "mig", .replicas = 3};
  m.resources.gpu = {.mode = GpuMode::kMig, .count = 1, .mig_profile = "1g.10gb"};
  j.tasks = {w, s, m};
  EXPECT_EQ(j.TotalReplicas(), 9);
  EXPECT_EQ(j.GangSize(), 9);
  j.min_available = 4;
  EXPECT_EQ(j.GangSize(), 4);
  EXPECT_EQ(j.TotalGpus(), MilliGpu(8500));
}

TEST(Enums, NamesRoundTrip) {
  for (BillingClass c : {BillingClass::kOnDemand, BillingClass::kReserved, BillingClass::kSpot}) {
    EXPECT_EQ(ParseBillingClass(BillingClassName(c)), c);
  }
  for (QueueOrdering o : {QueueOrdering::kFifo, QueueOrdering::kSjf, QueueOrdering::kLas}) {
    EXPECT_EQ(ParseQueueOrdering(QueueOrderingName(o)), o);
  }
  EXPECT_EQ(ParseGpuSharing("mps"), GpuSharing::kMps);
  EXPECT_FALSE(ParseBillingClass("ondemand").has_value());
}

TEST(Enums, LifecycleNamesAreVolcanos) {
  for (LifecycleEvent e :
       {LifecycleEvent::kAny, LifecycleEvent::kPodFailed, LifecycleEvent::kPodEvicted,
        LifecycleEvent::kTaskCompleted, LifecycleEvent::kTaskFailed, LifecycleEvent::kJobUnknown}) {
    EXPECT_EQ(ParseLifecycleEvent(LifecycleEventName(e)), e);
  }
  EXPECT_EQ(LifecycleEventName(LifecycleEvent::kAny), "*");
  for (LifecycleAction a : {LifecycleAction::kRestartJob, LifecycleAction::kCompleteJob,
                            LifecycleAction::kAbortJob, LifecycleAction::kTerminateJob}) {
    EXPECT_EQ(ParseLifecycleAction(LifecycleActionName(a)), a);
  }
  EXPECT_EQ(ParseLifecycleAction("RestartTask"), LifecycleAction::kRestartJob);
  EXPECT_FALSE(ParseLifecycleEvent("podfailed").has_value());
  EXPECT_FALSE(ParseLifecycleAction("EnqueueJob").has_value());
}

TEST(NodePool, EffectivePriceUsesClassDiscount) {
  NodePoolSpec p{.gpu_type = "H100-80GB", .billing = BillingClass::kSpot};
  const GpuCatalog& cat = GpuCatalog::Default();
  EXPECT_EQ(EffectivePricePerGpuHour(p, cat).raw(),
            cat.Find("H100-80GB")->on_demand_price_per_hour.raw() * 30 / 100);
  p.price_per_gpu_hour = MicroUsd(1'200'000);
  EXPECT_EQ(EffectivePricePerGpuHour(p, cat).raw(), 1'200'000);
  NodePoolSpec unknown{.gpu_type = "generic-x"};
  EXPECT_EQ(EffectivePricePerGpuHour(unknown, cat).raw(), 0);
}

}  // namespace
}  // namespace gpucloud
