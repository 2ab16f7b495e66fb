#include "sched/snapshot.h"

#include <algorithm>
#include <utility>

#include "sched/array_gate.h"
#include "sched/backlog.h"
#include "sched/job_request.h"
#include "sched/plugins/scores.h"
#include "sched/usage_window.h"

namespace gpucloud::sched {

PendingJob PendingOf(std::string_view key, const Job& job, const JobView& v) {
  PendingJob p;
  p.request = MakeJobRequest(job);
  p.request.key = std::string(key);
  p.queue = job.spec.queue;
  p.priority = job.spec.priority;
  p.submit_ms = v.submit_ms;
  p.runtime_estimate_s = job.spec.runtime_estimate_seconds;
  p.preemptible = job.spec.billing == BillingClass::kSpot;
  p.attained_gpu_ms = v.attained_gpu_ms;
  p.waiting_since_ms = v.waiting_since_ms;
  return p;
}

Allocation AllocationOf(std::string_view key, const Job& job, const JobView& v,
                        const std::map<std::string, NodeIndex>& index, const ClusterState& state) {
  Allocation a;
  a.job = std::string(key);
  a.queue = job.spec.queue;
  a.priority = job.spec.priority;
  a.preemptible = job.spec.billing == BillingClass::kSpot;
  a.start_ms = v.started_ms ? v.started_ms : v.bound_ms;
  a.last_checkpoint_ms = v.last_checkpoint_ms;
  a.las_service_gpu_ms = v.las_service_gpu_ms;
  // As the scheduler set it when it bound the job (the pass's time was bound_ms).
  if (job.spec.runtime_estimate_seconds) {
    a.expected_end_ms = v.bound_ms + *job.spec.runtime_estimate_seconds * 1000;
  }
  a.terminating = v.phase == JobViewPhase::kStopping;
  for (const HeldReplica& r : v.placement) {
    auto it = index.find(r.node);
    if (it == index.end()) continue;  // a lost node: nothing to reserve there
    ReplicaPlacement p = r.placement;
    p.node = it->second;
    const Node& node = state.node(p.node);
    std::erase_if(p.gpus, [&](const GpuAssignment& g) {
      return g.gpu < 0 || g.gpu >= static_cast<int>(node.gpus.size()) || !node.gpus[g.gpu].healthy;
    });
    a.replicas.push_back(std::move(p));
  }
  return a;
}

void AddToWindow(UsageWindow& window, const std::string& queue, const JobView& v) {
  for (const UsageSpan& u : v.usage) window.Add(u.end_ms, queue, u.gpu_type, u.gpu_seconds / 3600);
}

Snapshot BuildSnapshot(std::vector<Node> nodes, const std::vector<SnapshotJob>& jobs,
                       int64_t window_ms, int64_t now_ms, const GpuCatalog& catalog) {
  Snapshot out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    out.index[nodes[i].name] = static_cast<NodeIndex>(i);
  }
  out.state = std::make_unique<ClusterState>(std::move(nodes), catalog);
  UsageWindow usage(window_ms);
  usage.Advance(now_ms);
  WorkloadCounter mix;
  ArrayGate<const SnapshotJob*> arrays;  // as the server: admitted elements after the others
  for (const SnapshotJob& j : jobs) {
    const JobView& v = *j.view;
    AddToWindow(usage, j.job->spec.queue, v);
    if (InWorkload(v)) {
      for (const TaskSpec& t : j.job->spec.tasks) mix.Add(t.resources.gpu);
    }
    const std::string_view ns = NamespaceOfKey(j.key);
    if (v.phase == JobViewPhase::kHolding || v.phase == JobViewPhase::kStopping) {
      if (Gated(j.job->spec)) arrays.Holding(ns, *j.job->spec.array);
      Allocation a = AllocationOf(j.key, *j.job, v, out.index, *out.state);
      if (!a.replicas.empty() && !out.state->Commit(a).ok()) {
        out.holding_conflicts.emplace_back(j.key);
      }
    } else if (v.phase == JobViewPhase::kWaiting && v.not_before_ms <= now_ms) {
      if (Gated(j.job->spec)) {
        arrays.Candidate(ns, *j.job->spec.array, &j);
      } else {
        out.pending.push_back(PendingOf(j.key, *j.job, v));
      }
    }
  }
  for (const SnapshotJob* j : arrays.Decide().admitted) {
    out.pending.push_back(PendingOf(j->key, *j->job, *j->view));
  }
  out.history = usage.history();
  out.workload = mix.Shares();
  return out;
}

}  // namespace gpucloud::sched
