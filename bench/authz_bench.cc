// Policy decisions per identity: BM_Evaluate/N evaluates requests against N policies of 10
// statements each (issue 14's budget: under 5 us at N = 100). Statements mix exact actions,
// wildcards and NotAction, namespaced resources with policy variables, and conditions on GPU
// type, count, cost, hour and groups, about one in five a Deny (always with conditions), so
// that a decision visits realistic statement lists; the counters say how decisions ended.
// Requests cycle through a fixed, seeded set.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "authz/policy_set.h"

namespace gpucloud::authz {
namespace {

std::vector<NamedPolicy> MakePolicies(int count, std::mt19937& rng) {
  const std::vector<std::string> actions(PolicyActions().begin(), PolicyActions().end());
  const std::vector<std::string> wildcards = {"jobs:*", "nodes:*", "*:Get", "*:List", "queues:*"};
  const std::vector<std::string> namespaces = {"team-a", "team-b", "team-c", "team-d",
                                               "${gpucloud:PrincipalNamespace}"};
  auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
  std::vector<NamedPolicy> policies;
  for (int p = 0; p < count; ++p) {
    NamedPolicy np{"policy-" + std::to_string(p), {}};
    for (int s = 0; s < 10; ++s) {
      Statement st;
      st.sid = "S" + std::to_string(s);
      st.effect = rng() % 5 == 0 ? PolicyEffect::kDeny : PolicyEffect::kAllow;
      int shape = static_cast<int>(rng() % 10);
      if (shape == 0) {
        st.actions = {pick(wildcards)};
      } else if (shape == 1) {
        st.not_action = true;
        st.actions = {"policies:*", "users:*"};
      } else {
        st.actions = {pick(actions), pick(actions)};
      }
      st.resources = {"gpucloud:job/" + pick(namespaces) + "/*",
                      "gpucloud:node/gpu-" + std::to_string(rng() % 50) + "*"};
      // A Deny always has conditions (a cap, a GPU type, working hours), as real ones do.
      unsigned condition_shape = rng() % 4;
      if (st.effect == PolicyEffect::kDeny && condition_shape % 2 == 1) --condition_shape;
      switch (condition_shape) {
        case 0:
          st.conditions.push_back({ConditionOperator::kStringLike,
                                   false,
                                   SetQualifier::kNone,
                                   "gpucloud:GpuType",
                                   {"H100*", "A100*"}});
          break;
        case 1:
          st.conditions.push_back({ConditionOperator::kNumericLessThanEquals,
                                   true,
                                   SetQualifier::kNone,
                                   "gpucloud:GpuCount",
                                   {"8"}});
          st.conditions.push_back({ConditionOperator::kNumericLessThan,
                                   false,
                                   SetQualifier::kNone,
                                   "gpucloud:EstimatedHourlyCost",
                                   {"40"}});
          break;
        case 2:
          st.conditions.push_back({ConditionOperator::kStringNotEquals,
                                   false,
                                   SetQualifier::kForAllValues,
                                   "gpucloud:Groups",
                                   {"ml-platform"}});
          st.conditions.push_back({ConditionOperator::kNumericGreaterThanEquals,
                                   false,
                                   SetQualifier::kNone,
                                   "gpucloud:HourOfDay",
                                   {"20"}});
          break;
        default:
          break;
      }
      np.document.statements.push_back(std::move(st));
    }
    policies.push_back(std::move(np));
  }
  return policies;
}

std::vector<Request> MakeRequests(std::mt19937& rng) {
  const std::vector<std::string> actions = {"jobs:Create", "jobs:Get",  "jobs:List",
                                            "jobs:Logs",   "nodes:Get", "queues:List"};
  std::vector<Request> requests;
  for (int i = 0; i < 64; ++i) {
    Request r;
    r.principal = {"alice", PrincipalType::kUser, {"ml-team"}, "team-a", ""};
    r.action = actions[rng() % actions.size()];
    r.resource = r.action.starts_with("jobs:")
                     ? "gpucloud:job/team-" + std::string(1, char('a' + rng() % 4)) + "/train"
                     : "gpucloud:node/gpu-" + std::to_string(rng() % 60);
    (void)r.context.Set(ConditionKeyId::kGpuType, rng() % 2 ? "H100-80GB" : "L4");
    (void)r.context.Set(ConditionKeyId::kGpuCount, std::to_string(1 << (rng() % 5)));
    (void)r.context.Set(ConditionKeyId::kEstimatedHourlyCost, std::to_string(rng() % 80));
    (void)r.context.Set(ConditionKeyId::kHourOfDay, std::to_string(rng() % 24));
    requests.push_back(std::move(r));
  }
  return requests;
}

void BM_Evaluate(benchmark::State& state) {
  std::mt19937 rng(14);
  std::vector<NamedPolicy> policies = MakePolicies(static_cast<int>(state.range(0)), rng);
  absl::StatusOr<PolicySet> set = PolicySet::Compile(policies);
  if (!set.ok()) {
    state.SkipWithError(std::string(set.status().message()).c_str());
    return;
  }
  std::vector<Request> requests = MakeRequests(rng);
  size_t i = 0, allowed = 0, denied = 0;
  for (auto _ : state) {
    Decision d = set->Evaluate(requests[i++ % requests.size()]);
    allowed += d.effect == Effect::kAllow;
    denied += d.effect == Effect::kExplicitDeny;
    benchmark::DoNotOptimize(d);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["allow"] = benchmark::Counter(static_cast<double>(allowed) / n);
  state.counters["explicit_deny"] = benchmark::Counter(static_cast<double>(denied) / n);
}
BENCHMARK(BM_Evaluate)->Arg(1)->Arg(10)->Arg(100)->Arg(1000);

// Building the index for one identity (done once per identity and policy change).
void BM_Compile(benchmark::State& state) {
  std::mt19937 rng(14);
  std::vector<NamedPolicy> policies = MakePolicies(static_cast<int>(state.range(0)), rng);
  for (auto _ : state) {
    absl::StatusOr<PolicySet> set = PolicySet::Compile(policies);
    benchmark::DoNotOptimize(set);
  }
}
BENCHMARK(BM_Compile)->Arg(100)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpucloud::authz

BENCHMARK_MAIN();
