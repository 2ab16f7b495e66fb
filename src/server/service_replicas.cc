#include "server/service_replicas.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/text.h"
#include "fmt/format.h"
#include "manifest/manifest.h"

namespace gpucloud::server {
namespace {

using State = ReplicaView::State;

void SetEnv(TaskSpec& t, const std::string& name, const std::string& value) {
  for (EnvVar& e : t.env) {
    if (e.name == name) {
      e.value = value;
      return;
    }
  }
  t.env.push_back({name, value});
}

// The order replicas go in when there are too many: those that serve nothing first.
int StopRank(const ReplicaView& r) {
  switch (r.state) {
    case State::kPending:
      return 0;
    case State::kStarting:
      return 1;
    default:
      return 2;
  }
}

// Picks up to `n` of `live` to stop, in StopRank order and, among ready ones, only idle ones.
// Returns how many ready ones it could not take because they were busy.
int TakeForStop(std::vector<const ReplicaView*> live, int n, std::vector<std::string>* stop) {
  std::stable_sort(live.begin(), live.end(), [](const ReplicaView* a, const ReplicaView* b) {
    if (StopRank(*a) != StopRank(*b)) return StopRank(*a) < StopRank(*b);
    return a->in_flight < b->in_flight;
  });
  int busy = 0;
  for (const ReplicaView* r : live) {
    if (n <= 0) break;
    if (r->state == State::kReady && r->in_flight > 0) {
      ++busy;
      continue;
    }
    stop->push_back(r->job);
    --n;
  }
  return n > 0 ? std::min(n, busy) : 0;
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
  TaskSpec task = s.task;
  task.replicas = 1;
  SetEnv(task, "PORT", std::to_string(port));
  SetEnv(task, "GPUCLOUD_SERVICE_PORT", std::to_string(port));
  SetEnv(task, "GPUCLOUD_SERVICE", svc.metadata.name);
  job.spec.tasks = {std::move(task)};
  job.spec.queue = s.queue;
  job.spec.priority = s.priority;
  job.spec.billing = s.billing;
  job.spec.node_selector = s.node_selector;
  job.spec.tolerations = s.tolerations;
  job.spec.restart.max_restarts = 3;
  job.spec.restart.backoff_seconds = 1;  // a replica down is capacity missing now
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

ReplicaPlan PlanReplicas(const InferenceServiceSpec& spec, int32_t desired,
                         const std::vector<ReplicaView>& replicas) {
  ReplicaPlan p;
  std::vector<const ReplicaView*> cur, old;
  int cur_ready = 0, old_ready = 0;
  for (const ReplicaView& r : replicas) {
    if (r.state == State::kEnded) {
      p.clear.push_back(r.job);
      continue;
    }
    if (r.state == State::kStopping) continue;
    (r.current ? cur : old).push_back(&r);
    if (r.state == State::kReady) ++(r.current ? cur_ready : old_ready);
  }
  const int n_cur = static_cast<int>(cur.size());
  if (old.empty()) {
    if (n_cur < desired) p.create = desired - n_cur;
    if (n_cur > desired) p.waiting_for_idle = TakeForStop(cur, n_cur - desired, &p.stop) > 0;
    return p;
  }
  // A rolling update: new replicas within the surge, old ones as the ready count allows.
  const int total = n_cur + static_cast<int>(old.size());
  p.create = std::max(0, std::min(desired - n_cur, desired + spec.max_surge - total));
  std::vector<const ReplicaView*> old_ready_ones;
  for (const ReplicaView* r : old) {
    if (r->state == State::kReady) {
      old_ready_ones.push_back(r);
    } else {
      p.stop.push_back(r->job);  // serves nothing yet: it would only be replaced later
    }
  }
  const int min_ready = std::max(0, desired - spec.max_unavailable);
  const int may_stop = std::min(old_ready, cur_ready + old_ready - min_ready);
  if (may_stop > 0) {
    p.waiting_for_idle = TakeForStop(old_ready_ones, may_stop, &p.stop) > 0;
  }
  return p;
}

}  // namespace gpucloud::server
