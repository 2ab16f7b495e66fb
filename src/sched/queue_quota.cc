#include "sched/queue_quota.h"

#include <algorithm>

#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::sched {
namespace {

const std::string kAll(kAnyGpuType);

MilliGpu Get(const std::map<std::string, MilliGpu>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? MilliGpu(0) : it->second;
}

std::string GpusOf(const std::string& type) {
  return type == kAll ? std::string("GPUs") : Cat(type, " GPUs");
}

}  // namespace

QueueQuota::QueueQuota(const std::map<std::string, QueueSpec>& queues, const ClusterState& state,
                       const QueueHistory* history, double window_hours)
    : queues_(queues),
      state_(state),
      history_(history),
      window_hours_(window_hours > 0 ? window_hours : 1) {
  capacity_ = state.HealthyGpusByType();
  for (const auto& [type, count] : state.HealthyGpusByType()) capacity_[kAll] += count;
  used_ = state.QueueUsage();
  for (const auto& [queue, by_type] : used_) {
    for (const auto& [type, amount] : by_type) total_used_[type] += amount;
  }
}

const QueueSpec* QueueQuota::Spec(const std::string& queue) const {
  auto it = queues_.find(queue);
  return it == queues_.end() ? nullptr : &it->second;
}

std::map<std::string, MilliGpu> QueueQuota::Usage(const Allocation& a) const {
  return state_.UsageByType(a);
}

MilliGpu QueueQuota::Used(const std::string& queue, const std::string& type) const {
  auto it = used_.find(queue);
  return it == used_.end() ? MilliGpu(0) : Get(it->second, type);
}

MilliGpu QueueQuota::Guaranteed(const std::string& queue, const std::string& type) const {
  const QueueSpec* spec = Spec(queue);
  if (spec == nullptr) return MilliGpu(0);
  for (const GpuQuota& q : spec->quota) {
    if (q.gpu_type == type) return q.guaranteed;
  }
  return MilliGpu(0);
}

bool QueueQuota::Borrowing(const std::string& queue, const std::string& type) const {
  if (Used(queue, type) > Guaranteed(queue, type)) {
    // A guarantee on all types together covers types without their own.
    const QueueSpec* spec = Spec(queue);
    bool own = false;
    if (spec) {
      for (const GpuQuota& q : spec->quota) own = own || q.gpu_type == type;
    }
    if (own || type == kAll) return true;
    return Used(queue, kAll) > Guaranteed(queue, kAll);
  }
  return false;
}

bool QueueQuota::BelowGuarantee(const std::string& queue) const {
  const QueueSpec* spec = Spec(queue);
  if (spec == nullptr) return false;
  for (const GpuQuota& q : spec->quota) {
    if (Used(queue, q.gpu_type) < q.guaranteed) return true;
  }
  return false;
}

std::optional<std::string> QueueQuota::CheckMax(const std::string& queue,
                                                const Allocation& a) const {
  const QueueSpec* spec = Spec(queue);
  if (spec == nullptr) return std::nullopt;
  std::map<std::string, MilliGpu> need = Usage(a);
  for (const GpuQuota& q : spec->quota) {
    if (!q.max) continue;
    auto n = need.find(q.gpu_type);
    if (n == need.end()) continue;
    MilliGpu used = Used(queue, q.gpu_type);
    if (used + n->second > *q.max) {
      return Cat("queue ", queue, " is at its maximum of ", FormatMilli(q.max->raw()), " ",
                 GpusOf(q.gpu_type), " (", FormatMilli(used.raw()), " in use, the job needs ",
                 FormatMilli(n->second.raw()), ")");
    }
  }
  return std::nullopt;
}

std::optional<std::string> QueueQuota::CheckBorrow(const std::string& queue,
                                                   const Allocation& a) const {
  std::map<std::string, MilliGpu> need = Usage(a);
  const QueueSpec* spec = Spec(queue);
  for (const auto& [type, amount] : need) {
    MilliGpu after = Used(queue, type) + amount;
    MilliGpu guaranteed = Guaranteed(queue, type);
    if (after <= guaranteed) continue;
    if (spec != nullptr && !spec->may_borrow) {
      bool has_quota = false;
      for (const GpuQuota& q : spec->quota) has_quota = has_quota || q.gpu_type == type;
      if (has_quota) {
        return Cat("queue ", queue, " may not borrow beyond its guarantee of ",
                   FormatMilli(guaranteed.raw()), " ", GpusOf(type), " (",
                   FormatMilli(Used(queue, type).raw()), " in use, the job needs ",
                   FormatMilli(amount.raw()), ")");
      }
    }
    // Borrowing: what stays free must still cover the unused guarantees of queues that do not
    // lend them.
    MilliGpu kept;
    std::string keeper;
    for (const auto& [name, other] : queues_) {
      if (name == queue || other.may_lend) continue;
      MilliGpu unused = Guaranteed(name, type) - Used(name, type);
      if (unused > MilliGpu(0)) {
        kept += unused;
        keeper = name;
      }
    }
    if (kept == MilliGpu(0)) continue;
    MilliGpu free_after = Get(capacity_, type) - Get(total_used_, type) - amount;
    if (free_after < kept) {
      return Cat("borrowing ", FormatMilli(amount.raw()), " ", GpusOf(type),
                 " would take guaranteed capacity of queue ", keeper, ", which does not lend it");
    }
  }
  return std::nullopt;
}

void QueueQuota::Add(const std::string& queue, const Allocation& a) {
  for (const auto& [type, amount] : Usage(a)) {
    used_[queue][type] += amount;
    total_used_[type] += amount;
  }
}

void QueueQuota::Remove(const std::string& queue, const Allocation& a) {
  for (const auto& [type, amount] : Usage(a)) {
    used_[queue][type] -= amount;
    total_used_[type] -= amount;
  }
}

double QueueQuota::DominantShare(const std::string& queue) const {
  double share = 0;
  auto used = used_.find(queue);
  const std::map<std::string, double>* hist = nullptr;
  if (history_ != nullptr) {
    if (auto h = history_->find(queue); h != history_->end()) hist = &h->second;
  }
  for (const auto& [type, cap] : capacity_) {
    if (type == kAll || cap.raw() <= 0) continue;
    double gpus = 0;
    if (used != used_.end()) gpus = static_cast<double>(Get(used->second, type).raw()) / 1000;
    if (hist != nullptr) {
      if (auto h = hist->find(type); h != hist->end()) gpus += h->second / window_hours_;
    }
    share = std::max(share, gpus * kMilliPerUnit / static_cast<double>(cap.raw()));
  }
  const QueueSpec* spec = Spec(queue);
  return share / std::max(1, spec ? spec->weight : 1);
}

}  // namespace gpucloud::sched
