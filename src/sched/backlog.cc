#include "sched/backlog.h"

#include <algorithm>

#include "sched/scheduler.h"

namespace gpucloud::sched {

std::string_view NamespaceOfKey(std::string_view job_key) {
  size_t slash = job_key.find('/');
  return slash == std::string_view::npos ? std::string_view() : job_key.substr(0, slash);
}

bool NamespaceBudget::Admits(std::string_view ns) const {
  auto it = used_.find(ns);
  if (it == used_.end()) return true;
  const Used& u = it->second;
  return (limits_.max_waiting <= 0 || u.waiting < limits_.max_waiting) &&
         (limits_.max_searches <= 0 || u.searches < limits_.max_searches);
}

void NamespaceBudget::Record(std::string_view ns, JobOutcome outcome) {
  if (outcome == JobOutcome::kBound) return;
  auto it = used_.find(ns);
  if (it == used_.end()) it = used_.emplace(std::string(ns), Used{}).first;
  Used& u = it->second;
  ++u.waiting;
  if (outcome == JobOutcome::kSearched) ++u.searches;
}

Lane::Lane(OrderContext order, const std::vector<const PendingJob*>& jobs) {
  std::unordered_map<std::string_view, size_t> index;
  std::string_view last_ns;
  size_t last = 0;
  for (const PendingJob* p : jobs) {
    std::string_view ns = NamespaceOfKey(p->request.key);
    // Callers usually list a namespace's jobs together: look it up once per run.
    if (namespaces_.empty() || ns != last_ns) {
      auto [it, added] = index.try_emplace(ns, namespaces_.size());
      if (added) namespaces_.emplace_back();
      last_ns = ns;
      last = it->second;
    }
    namespaces_[last].push_back({-int64_t{p->priority}, QueueOrderKey(order, *p), p->submit_ms, p});
  }
  for (size_t i = 0; i < namespaces_.size(); ++i) {
    Heap& h = namespaces_[i];
    std::make_heap(h.begin(), h.end(), JobAfter);
    heads_.push_back(i);
  }
  std::make_heap(heads_.begin(), heads_.end(), [&](size_t a, size_t b) { return HeadAfter(a, b); });
}

bool Lane::JobAfter(const Entry& a, const Entry& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.order_key != b.order_key) return a.order_key > b.order_key;
  if (a.submit_ms != b.submit_ms) return a.submit_ms > b.submit_ms;
  return a.job->request.key > b.job->request.key;
}

bool Lane::HeadAfter(size_t a, size_t b) const {
  return JobAfter(namespaces_[a].front(), namespaces_[b].front());
}

const PendingJob& Lane::Next() const { return *namespaces_[heads_.front()].front().job; }

size_t Lane::PopHead() {
  std::pop_heap(heads_.begin(), heads_.end(), [&](size_t a, size_t b) { return HeadAfter(a, b); });
  size_t ns = heads_.back();
  heads_.pop_back();
  return ns;
}

void Lane::Pop() {
  size_t ns = PopHead();
  Heap& h = namespaces_[ns];
  std::pop_heap(h.begin(), h.end(), JobAfter);
  h.pop_back();
  if (h.empty()) return;
  heads_.push_back(ns);
  std::push_heap(heads_.begin(), heads_.end(), [&](size_t a, size_t b) { return HeadAfter(a, b); });
}

size_t Lane::DropNamespaceOfNext() {
  Heap& h = namespaces_[PopHead()];
  size_t dropped = h.size();
  Heap().swap(h);
  return dropped;
}

}  // namespace gpucloud::sched
