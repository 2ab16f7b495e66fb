// One-line summaries of what an object asks for, for `gpuctl validate` and the demo.
#include <cmath>

#include "core/parse.h"
#include "core/text.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string TypesText(const GpuRequest& g) {
  if (g.types.empty()) return "any type";
  return Join(g.types, " or ");
}

std::string GpuText(const GpuRequest& g) {
  switch (g.mode) {
    case GpuMode::kNone:
      return "no GPU";
    case GpuMode::kWhole:
      return Cat(Plural(g.count, "GPU", "GPUs"), ", ", TypesText(g));
    case GpuMode::kMig:
      return Cat(Plural(g.count, "MIG instance", "MIG instances"), " ", g.mig_profile, ", ",
                 TypesText(g));
    case GpuMode::kShared: {
      std::string out =
          Cat(FormatMilli(g.fraction.raw()), " of a shared GPU (", GpuSharingName(g.sharing));
      if (g.memory.raw() > 0) out += Cat(", ", FormatMemory(g.memory), " memory");
      return Cat(out, "), ", TypesText(g));
    }
  }
  return "";
}

std::string JobSummary(const Job& job) {
  const JobSpec& s = job.spec;
  std::vector<std::string> tasks;
  for (const TaskSpec& t : s.tasks) {
    std::string text = Cat(t.replicas, " x ", t.name, " (", GpuText(t.resources.gpu));
    if (t.resources.cpu.raw() > 0) text += Cat(", ", FormatMilli(t.resources.cpu.raw()), " CPU");
    if (t.resources.memory.raw() > 0) text += Cat(", ", FormatMemory(t.resources.memory));
    tasks.push_back(text + ")");
  }
  std::string out = Cat("Job ", job.metadata.namespace_, "/", job.metadata.name, ": ",
                        Join(tasks, " + "), "; gang of ", s.GangSize());
  int64_t mig = 0;
  for (const TaskSpec& t : s.tasks) {
    if (t.resources.gpu.mode == GpuMode::kMig) mig += int64_t{t.resources.gpu.count} * t.replicas;
  }
  std::vector<std::string> totals;
  if (s.TotalGpus().raw() > 0 || mig == 0) {
    totals.push_back(
        Cat(FormatMilli(s.TotalGpus().raw()), s.TotalGpus() == WholeGpus(1) ? " GPU" : " GPUs"));
  }
  if (mig > 0) totals.push_back(Plural(mig, "MIG instance", "MIG instances"));
  out += Cat("; ", Join(totals, " + "), " in all");
  out += Cat("; queue ", s.queue, ", ", BillingClassName(s.billing));
  if (s.priority != 0) out += Cat(", priority ", s.priority);
  if (!s.node_selector.empty()) {
    std::vector<std::string> sel;
    for (const auto& [k, v] : s.node_selector) sel.push_back(Cat(k, "=", v));
    out += Cat("; nodes with ", Join(sel, ","));
  }
  if (s.min_cuda_version > 0) out += Cat("; CUDA >= ", FormatCudaVersion(s.min_cuda_version));
  if (s.runtime_estimate_seconds)
    out += Cat("; about ", FormatDuration(*s.runtime_estimate_seconds));
  if (const std::optional<JobArraySpec>& a = s.array) {
    out += a->element() ? Cat("; element ", a->index, " of array ", a->name)
                        : Cat("; array of ", a->count, " jobs (indices ",
                              FormatArrayIndices(a->indices), ")");
    if (a->parallelism > 0) out += Cat(", at most ", a->parallelism, " at once");
  }
  return out;
}

std::string QueueSummary(const Queue& q) {
  std::string out = Cat("Queue ", q.metadata.name, ": weight ", q.spec.weight, ", ",
                        QueueOrderingName(q.spec.ordering));
  for (const GpuQuota& quota : q.spec.quota) {
    out += Cat("; ", quota.gpu_type == kAnyGpuType ? "all GPUs" : quota.gpu_type, " guaranteed ",
               FormatMilli(quota.guaranteed.raw()));
    if (quota.max) out += Cat(", max ", FormatMilli(quota.max->raw()));
  }
  if (!q.spec.may_borrow) out += "; never borrows";
  if (!q.spec.may_lend) out += "; never lends";
  return out;
}

std::string PoolSummary(const NodePool& p) {
  const NodePoolSpec& s = p.spec;
  std::string out =
      Cat("NodePool ", p.metadata.name, ": ", s.min_nodes, "-", s.max_nodes, " nodes x ",
          s.gpus_per_node, " ", s.gpu_type, ", ", BillingClassName(s.billing), " at $",
          FormatPrice(EffectivePricePerGpuHour(s, GpuCatalog::Default())), " per GPU-hour");
  if (!s.price_per_gpu_hour) out += " (catalog price)";
  return Cat(out, ", provider ", s.provider);
}

std::string RuntimeClassSummary(const RuntimeClass& rc) {
  std::string out = Cat("RuntimeClass ", rc.metadata.name, ": handler ", rc.spec.handler);
  std::vector<std::string> sel;
  for (const auto& [k, v] : rc.spec.node_selector) sel.push_back(Cat(k, "=", v));
  if (!sel.empty()) out += Cat("; nodes with ", Join(sel, ","));
  return out;
}

// A namespace budget limit as text: 0 is no limit.
std::string BudgetLimit(int32_t limit) { return limit == 0 ? "unlimited" : Cat(limit); }

std::string SchedulerConfigSummary(const SchedulerConfiguration& c) {
  const SchedulerConfig& s = c.spec;
  std::vector<std::string> scores;
  for (const ScorePluginConfig& p : s.scores) scores.push_back(Cat(p.name, " x", p.weight));
  std::string bands;
  if (s.ordering == QueueOrdering::kDlas) {
    std::vector<std::string> t;
    for (int64_t v : s.las.thresholds_gpu_s) t.push_back(FormatDuration(v));
    bands =
        Cat(" (bands at ", Join(t, ", "), " of GPU-time",
            s.las.starvation_factor > 0
                ? Cat(", promoted after waiting ",
                      FormatMilli(std::llround(s.las.starvation_factor * 1000)), "x their service")
                : std::string(),
            ")");
  }
  return Cat("SchedulerConfiguration ", c.metadata.name, ": ", QueueOrderingName(s.ordering), bands,
             s.backfill ? ", backfill" : ", no backfill",
             s.fair_share ? Cat(", fair share over ", FormatDuration(s.fair_share_window_s))
                          : std::string(", no fair share"),
             s.preemption
                 ? Cat(", preemption with ", FormatDuration(s.preemption_grace_s), " grace")
                 : std::string(", no preemption"),
             "; filters ", s.filters.empty() ? std::string("default") : Join(s.filters, ","),
             "; scores ", scores.empty() ? std::string("none (best fit)") : Join(scores, ", "),
             "; per namespace and cycle ", BudgetLimit(s.namespace_budget.max_waiting),
             " waiting, ", BudgetLimit(s.namespace_budget.max_searches), " searches");
}

std::string ServiceSummary(const InferenceService& svc) {
  const InferenceServiceSpec& s = svc.spec;
  const ServiceAutoscaling& a = s.autoscaling;
  return Cat(
      "InferenceService ", svc.metadata.namespace_, "/", svc.metadata.name, ": ", s.min_replicas,
      "..", s.max_replicas, " replicas of ",
      s.task.image.empty() ? std::string("a host process") : s.task.image, ", ",
      a.metric == ServiceMetric::kP95Latency
          ? Cat("p95 latency ", a.target, " ms")
          : Cat(a.target, a.metric == ServiceMetric::kRps ? " requests/s" : " requests in flight",
                " per replica"),
      s.batching ? Cat(", batching ", s.batching->path) : std::string(), ", priority ", s.priority);
}

}  // namespace

std::string Summarize(const Object& object) {
  if (const auto* svc = std::get_if<InferenceService>(&object)) return ServiceSummary(*svc);
  if (const Job* j = std::get_if<Job>(&object)) return JobSummary(*j);
  if (const Queue* q = std::get_if<Queue>(&object)) return QueueSummary(*q);
  if (const NodePool* p = std::get_if<NodePool>(&object)) return PoolSummary(*p);
  if (const auto* c = std::get_if<SchedulerConfiguration>(&object)) {
    return SchedulerConfigSummary(*c);
  }
  return RuntimeClassSummary(std::get<RuntimeClass>(object));
}

}  // namespace gpucloud::manifest
