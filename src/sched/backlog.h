// How much of the pending backlog one scheduling cycle looks at, so that one namespace with a
// huge backlog cannot slow the cycle for the others.
//
// NamespaceBudget is the rule, a pure counter: in one cycle a namespace (a tenant; the part of a
// job's key before its first '/') gets at most `max_waiting` jobs decided without a bind (waits,
// rejects, preemptions), of which at most `max_searches` needed a placement search (the rest
// reused the answer of an alike job, which costs a lookup). Binds do not count: each takes a task
// slot, so a cycle binds at most as many jobs as the cluster has free slots. Once a namespace is
// out of budget its remaining jobs are deferred: the cycle neither looks at them nor decides
// them, and the next cycle starts afresh. A cycle's placement work is thereby at most
// (free task slots + namespaces x max_waiting) decisions, of which at most namespaces x
// max_searches are unsuccessful searches, whatever any namespace's backlog.
//
// Lane is one queue's pending jobs in the queue's order, grouped by namespace: set up in O(n),
// the next job in O(log n), and a namespace's remaining jobs dropped at once (O(1) per
// namespace, not per job), so deferring 100,000 jobs costs no more than holding them.
//
// Value types; thread-compatible.
#ifndef GPUCLOUD_SCHED_BACKLOG_H_
#define GPUCLOUD_SCHED_BACKLOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/queue.h"
#include "core/sched_config.h"

namespace gpucloud::sched {

struct PendingJob;

// What a queue's order depends on besides the jobs: the ordering and, for dlas, its bands and
// the cycle's time (the starvation guard). `las` must outlive its users; nullptr means
// LasConfig's defaults.
struct OrderContext {
  QueueOrdering ordering = QueueOrdering::kFifo;
  const LasConfig* las = nullptr;
  int64_t now_ms = 0;
};

// The namespace of a job key "namespace/name": the part before the first '/' ("" without one).
std::string_view NamespaceOfKey(std::string_view job_key);

// What one job that the cycle looked at came to.
enum class JobOutcome {
  kBound,       // bound (or nothing that costs budget)
  kRemembered,  // not bound; the answer of an alike job in this cycle was reused
  kSearched,    // not bound after a placement search (and perhaps a preemption search)
};

struct NamespaceBudgetLimits {
  int64_t max_waiting = 1000;  // non-binding decisions per namespace per cycle; 0: unbounded
  int64_t max_searches = 100;  // of those, ones that searched; 0: unbounded
};

class NamespaceBudget {
 public:
  explicit NamespaceBudget(NamespaceBudgetLimits limits) : limits_(limits) {}

  // Whether the cycle may look at another job of `ns`.
  bool Admits(std::string_view ns) const;
  // Counts what looking at a job of `ns` came to.
  void Record(std::string_view ns, JobOutcome outcome);

 private:
  struct Used {
    int64_t waiting = 0;
    int64_t searches = 0;
  };
  NamespaceBudgetLimits limits_;
  // Keyed by namespace, looked up by string_view without making a string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, Used, NameHash, std::equal_to<>> used_;
};

class Lane {
 public:
  // `jobs` must outlive the lane; QueueSortLess(order, ...) is the order (each job's keys are
  // computed here, once).
  Lane(OrderContext order, const std::vector<const PendingJob*>& jobs);

  bool empty() const { return heads_.empty(); }
  // The first job in the queue's order. Not when empty().
  const PendingJob& Next() const;
  // Removes Next().
  void Pop();
  // Removes every job of Next()'s namespace from the lane; returns how many.
  size_t DropNamespaceOfNext();

 private:
  // A job with its order's keys, computed once (QueueSortLess's order).
  struct Entry {
    int64_t priority = 0;  // negated: smaller first
    int64_t order_key = 0;
    int64_t submit_ms = 0;
    const PendingJob* job = nullptr;
  };
  // One namespace's jobs, a heap whose top is its first job.
  using Heap = std::vector<Entry>;
  static bool JobAfter(const Entry& a, const Entry& b);  // heap order: a after b
  bool HeadAfter(size_t a, size_t b) const;
  // Takes the namespace at the top of heads_ off it.
  size_t PopHead();

  std::vector<Heap> namespaces_;
  std::vector<size_t> heads_;  // indices into namespaces_ that are non-empty, a heap by top job
};

}  // namespace gpucloud::sched

#endif  // GPUCLOUD_SCHED_BACKLOG_H_
