#include "sched/gang_placer.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/text.h"

namespace gpucloud::sched {
namespace {

// "0/5 nodes are available: 3 have no H100-80GB GPU, 2 are cordoned" in kube-scheduler's style.
std::string SummarizeRejections(int total, const std::map<std::string, int>& rejections) {
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [reason, count] : rejections) sorted.push_back({-count, reason});
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> parts;
  for (const auto& [neg, reason] : sorted) parts.push_back(Cat(-neg, " x ", reason));
  return Cat("0/", total, " nodes are available: ", Join(parts, "; "));
}

// Free whole GPUs left in `domain` (the best-fit measure between domains).
int64_t FreeGpusIn(const ClusterState& state, const std::vector<NodeIndex>& domain) {
  int64_t free = 0;
  for (NodeIndex n : domain) free += state.FreeWholeGpus(n);
  return free;
}

// Free task slots in `domain`: a domain with fewer than a job's replicas cannot hold it.
int64_t FreeTaskSlotsIn(const ClusterState& state, const std::vector<NodeIndex>& domain) {
  int64_t free = 0;
  for (NodeIndex n : domain) free += state.FreeTaskSlots(n);
  return free;
}

}  // namespace

const GangPlacer::Eligibility& GangPlacer::EligibleNodes(const ClusterState& state,
                                                         const JobRequest& job) const {
  if (!eligible_cache_.contains(state.nodes_id()) && eligible_cache_.size() >= 2) {
    eligible_cache_.clear();
  }
  std::unordered_map<std::string, Eligibility>& by_signature = eligible_cache_[state.nodes_id()];
  auto [it, inserted] = by_signature.try_emplace(FilterSignature(job));
  if (!inserted) return it->second;
  Eligibility& e = it->second;
  for (NodeIndex n = 0; n < state.node_count(); ++n) {
    std::optional<std::string> why;
    for (const std::unique_ptr<FilterPlugin>& f : filters_) {
      why = f->Filter(job, state.node(n));
      if (why) break;
    }
    if (why) {
      ++e.rejections[*why];
    } else {
      e.nodes.push_back(n);
    }
  }
  return e;
}

const std::vector<std::vector<NodeIndex>>& GangPlacer::GroupsByDomain(const ClusterState& state,
                                                                      const Eligibility& e,
                                                                      int level_index) const {
  static constexpr TopologyLevel kLevels[] = {TopologyLevel::kNode, TopologyLevel::kLeaf,
                                              TopologyLevel::kSpine, TopologyLevel::kZone};
  if (e.groups.empty()) e.groups.resize(4);
  std::vector<std::vector<NodeIndex>>& groups = e.groups[level_index];
  if (!groups.empty() || e.nodes.empty()) return groups;
  const TopologyLevel level = kLevels[level_index];
  const ClusterTopology& topology = state.topology();
  std::vector<int32_t> group_of(topology.DomainCount(level), -1);
  for (NodeIndex n : e.nodes) {
    int32_t& g = group_of[topology.DomainOf(n, level)];
    if (g < 0) {
      g = static_cast<int32_t>(groups.size());
      groups.emplace_back();
    }
    groups[g].push_back(n);
  }
  return groups;
}

std::vector<bool> GangPlacer::EligibleMask(const ClusterState& state, const JobRequest& job) const {
  std::vector<bool> mask(state.node_count(), false);
  for (NodeIndex n : EligibleNodes(state, job).nodes) mask[n] = true;
  return mask;
}

std::vector<ReplicaPlacement> GangPlacer::Trial(ClusterState& state, const JobRequest& job,
                                                const std::vector<NodeIndex>& domain) const {
  std::vector<ReplicaPlacement> placed;
  std::vector<std::string> tentative;
  bool stop = false;
  for (const TaskRequest& task : job.tasks) {
    for (int32_t r = 0; r < task.replicas && !stop; ++r) {
      NodeIndex best = -1;
      int32_t best_left = 0;
      std::vector<GpuAssignment> best_fit;
      for (NodeIndex n : domain) {
        std::optional<std::vector<GpuAssignment>> fit = state.FitReplica(n, task.per_replica);
        if (!fit) continue;
        int32_t left = state.FreeWholeGpus(n);
        if (task.per_replica.gpu.mode == GpuMode::kWhole) left -= task.per_replica.gpu.count;
        if (best < 0 || left < best_left) {
          best = n;
          best_left = left;
          best_fit = std::move(*fit);
        }
      }
      if (best < 0) {
        stop = true;
        break;
      }
      ReplicaPlacement p{
          task.name, r, best, std::move(best_fit), task.per_replica.cpu, task.per_replica.memory};
      std::string key = Cat(job.key, "#trial#", placed.size());
      Allocation trial{key, {p}};
      trial.placeholder = true;
      if (!state.Commit(trial).ok()) {  // FitReplica said yes: cannot happen
        stop = true;
        break;
      }
      tentative.push_back(std::move(key));
      placed.push_back(std::move(p));
    }
  }
  for (const std::string& key : tentative) (void)state.Release(key);
  return placed;
}

bool GangPlacer::PassesFilters(const JobRequest& job, const Node& node) const {
  for (const std::unique_ptr<FilterPlugin>& f : filters_) {
    if (f->Filter(job, node)) return false;
  }
  return true;
}

std::optional<Allocation> GangPlacer::PlaceOnOneNodeIndexed(ClusterState& state,
                                                            const JobRequest& job,
                                                            int64_t needed) const {
  const int32_t total = job.TotalReplicas();
  // With score plugins: up to this many fitting nodes per free-GPU count are scored.
  constexpr int kCandidatesPerBucket = 2;
  std::vector<Candidate> candidates;
  for (int64_t free = needed; free <= state.MaxGpusPerNode(); ++free) {
    int found = 0;
    // Trial commits and releases, which moves the node out of and back into this bucket, so
    // walk it by value (upper_bound) rather than by a held iterator.
    const std::set<NodeIndex>& bucket = state.NodesWithFreeWholeGpus(static_cast<int32_t>(free));
    for (auto it = bucket.begin(); it != bucket.end();) {
      NodeIndex n = *it;
      // O(1) first: CPU-only jobs walk every bucket, and most nodes lack the slots for a big one.
      if (state.FreeTaskSlots(n) >= total && PassesFilters(job, state.node(n))) {
        std::vector<ReplicaPlacement> placed = Trial(state, job, {n});
        if (static_cast<int32_t>(placed.size()) == total) {
          if (!Scoring()) return Allocation{job.key, std::move(placed)};
          candidates.push_back({n, std::move(placed)});
          if (++found == kCandidatesPerBucket) break;
        }
      }
      it = bucket.upper_bound(n);
    }
  }
  if (candidates.empty()) return std::nullopt;
  size_t best = BestByScore(state, job, candidates);
  return Allocation{job.key, std::move(candidates[best].placed)};
}

size_t GangPlacer::BestByScore(const ClusterState& state, const JobRequest& job,
                               const std::vector<Candidate>& candidates) const {
  if (candidates.size() <= 1) return 0;
  std::vector<double> total(candidates.size(), 0.0);
  std::vector<double> raw(candidates.size());
  std::vector<NodeView> before(candidates.size()), after(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    before[c] = ViewOfNode(state, candidates[c].node);
    after[c] = before[c];
    for (const ReplicaPlacement& r : candidates[c].placed) {
      for (const GpuAssignment& a : r.gpus) {
        if (a.mode == GpuMode::kWhole) after[c].free[a.gpu] = MilliGpu(0);
        if (a.mode == GpuMode::kShared) after[c].free[a.gpu] -= a.fraction;
      }
    }
  }
  for (const WeightedScore& s : *scores_) {
    for (size_t c = 0; c < candidates.size(); ++c) {
      raw[c] = s.plugin->Score(job, before[c], after[c]);
    }
    auto [lo, hi] = std::minmax_element(raw.begin(), raw.end());
    double min = *lo, span = *hi - *lo;
    for (size_t c = 0; c < candidates.size(); ++c) {
      total[c] += s.weight * (span > 0 ? 100.0 * (raw[c] - min) / span : 100.0);
    }
  }
  size_t best = 0;
  for (size_t c = 1; c < candidates.size(); ++c) {
    if (total[c] > total[best] + 1e-9) best = c;
  }
  return best;
}

PlacementResult GangPlacer::PlaceNow(ClusterState& state, const JobRequest& job) const {
  std::optional<int64_t> needed = job.WholeGpusNeeded();
  if (!needed) return PlaceAcrossDomains(state, job, 0, /*pruned=*/true);
  if (std::optional<Allocation> a = PlaceOnOneNodeIndexed(state, job, *needed)) {
    return {std::move(a), ""};
  }
  return PlaceAcrossDomains(state, job, 1, /*pruned=*/true);
}

PlacementResult GangPlacer::PlaceNowLinearForTest(ClusterState& state,
                                                  const JobRequest& job) const {
  return PlaceAcrossDomains(state, job, 0, /*pruned=*/false);
}

PlacementResult GangPlacer::PlaceAcrossDomains(ClusterState& state, const JobRequest& job,
                                               int first_level, bool pruned) const {
  const Eligibility& eligibility = EligibleNodes(state, job);
  const std::vector<NodeIndex>& eligible = eligibility.nodes;
  if (eligible.empty()) {
    return {std::nullopt, SummarizeRejections(state.node_count(), eligibility.rejections)};
  }
  const int32_t total = job.TotalReplicas();
  // Whole GPUs the job needs in one domain; 0 (no pruning) when it asks for MIG or shares.
  const int64_t needed = job.WholeGpusNeeded().value_or(0);

  // Tightest first: node, leaf switch, spine, zone.
  static constexpr TopologyLevel kLevels[] = {TopologyLevel::kNode, TopologyLevel::kLeaf,
                                              TopologyLevel::kSpine, TopologyLevel::kZone};
  for (int level_index = first_level; level_index < 4; ++level_index) {
    const TopologyLevel level = kLevels[level_index];
    const std::vector<std::vector<NodeIndex>>& groups =
        GroupsByDomain(state, eligibility, level_index);
    std::vector<int64_t> free(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) free[g] = FreeGpusIn(state, groups[g]);
    std::vector<size_t> order;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!pruned || free[g] >= needed) order.push_back(g);  // fewer free GPUs cannot hold it
    }
    // Nor can fewer task slots; summed only for the domains tried (pruned search stops early).
    auto lacks_slots = [&](size_t g) {
      return pruned && FreeTaskSlotsIn(state, groups[g]) < total;
    };
    if (pruned) {
      // Best fit first: the first domain that holds the job is the one the full scan picks.
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return free[a] < free[b]; });
    }
    std::optional<std::vector<ReplicaPlacement>> best;
    int64_t best_left = 0;
    if (level == TopologyLevel::kNode && pruned && Scoring()) {
      // Score the first few nodes that hold the job, in best-fit order.
      constexpr size_t kMaxScored = 8;
      std::vector<Candidate> candidates;
      for (size_t g : order) {
        if (lacks_slots(g)) continue;
        std::vector<ReplicaPlacement> placed = Trial(state, job, groups[g]);
        if (static_cast<int32_t>(placed.size()) < total) continue;
        candidates.push_back({groups[g][0], std::move(placed)});
        if (candidates.size() == kMaxScored) break;
      }
      if (!candidates.empty()) {
        size_t pick = BestByScore(state, job, candidates);
        return {Allocation{job.key, std::move(candidates[pick].placed)}, ""};
      }
      continue;
    }
    for (size_t g : order) {
      if (lacks_slots(g)) continue;
      std::vector<ReplicaPlacement> placed = Trial(state, job, groups[g]);
      if (static_cast<int32_t>(placed.size()) < total) continue;
      if (!best || free[g] < best_left) {
        best = std::move(placed);
        best_left = free[g];
      }
      if (pruned) break;
    }
    if (best) return {Allocation{job.key, std::move(*best)}, ""};
  }
  // No single domain holds everything: spread over the cluster, keeping at least the gang.
  std::vector<ReplicaPlacement> placed = Trial(state, job, eligible);
  if (static_cast<int32_t>(placed.size()) >= job.gang_size) {
    return {Allocation{job.key, std::move(placed)}, ""};
  }
  return {std::nullopt,
          Cat("waiting for capacity: ", Plural(placed.size(), "replica fits", "replicas fit"),
              " now, the gang needs ", job.gang_size, " together")};
}

std::optional<GangPlacer::StartEstimate> GangPlacer::EarliestStart(ClusterState& state,
                                                                   const JobRequest& job,
                                                                   int64_t now_ms) const {
  if (std::optional<Allocation> now = PlaceNow(state, job).allocation) {
    return StartEstimate{now_ms, std::move(*now)};
  }
  return EarliestLaterStart(state, job, now_ms);
}

std::optional<GangPlacer::StartEstimate> GangPlacer::EarliestLaterStart(ClusterState& state,
                                                                        const JobRequest& job,
                                                                        int64_t now_ms) const {
  // Running jobs with a known end, soonest first (ties by key, the map's order: deterministic).
  // Only the ones the search takes out of the state are copied (to be put back), so a job that
  // can start after the first few endings costs a few releases, not one per running job.
  const uint64_t version = state.version();
  std::vector<const Allocation*> order;
  for (const auto& [key, a] : state.allocations()) {
    if (a.expected_end_ms > 0) order.push_back(&a);
  }
  if (order.empty()) return std::nullopt;
  const size_t n = order.size();
  // Sorted as far as the search looks (it usually stops after a few): order[0, sorted) are the
  // soonest, in order. Before any of them is taken out, so the pointers sorted are valid.
  size_t sorted = 0;
  std::vector<int64_t> ends;  // ends[i] = order[i]'s expected end, for i < sorted
  auto sort_to = [&](size_t k) {
    if (k <= sorted) return;
    const size_t to = std::min(n, std::max(k, 2 * sorted + 16));
    std::partial_sort(order.begin() + sorted, order.begin() + to, order.end(),
                      [](const Allocation* a, const Allocation* b) {
                        return std::tie(a->expected_end_ms, a->job) <
                               std::tie(b->expected_end_ms, b->job);
                      });
    for (; sorted < to; ++sorted) ends.push_back(order[sorted]->expected_end_ms);
  };
  std::vector<Allocation> out;  // out[i] is ending i, once taken out (order[i] then dangles)
  size_t released = 0;          // endings [0, released) are out of the state
  bool put_back = true;         // every commit of what was taken out succeeded (it cannot fail)
  // Whole GPUs the job needs in all: with fewer free in the whole cluster, no search can place
  // it (a gang waiting for many endings is probed cheaply while the count is short).
  const int64_t whole_needed = job.WholeGpusNeeded().value_or(0);
  auto fits_after = [&](size_t k) -> std::optional<Allocation> {
    sort_to(k);
    for (; released < k; ++released) {
      if (released == out.size()) out.push_back(*order[released]);
      (void)state.Release(out[released].job);
    }
    while (released > k) put_back = state.Commit(out[--released]).ok() && put_back;
    if (state.TotalFreeWholeGpus() < whole_needed) return std::nullopt;
    return PlaceNow(state, job).allocation;
  };
  // Galloping: the fewest endings after which it fits lie in (lo, hi], then binary search. Like
  // the binary search before it, this takes "fits after k endings" to hold for every larger k
  // once it holds. A job that fits after no number of endings costs log2(n) + 1 placement
  // probes (the binary search made one, after taking every ending out, as this does too).
  size_t lo = 0;  // does not fit after lo endings (the caller's premise for 0)
  size_t hi = 0;  // fits after hi endings (0: not found yet)
  for (size_t k = 1;; k = std::min(n, 2 * k)) {
    if (fits_after(k)) {
      hi = k;
      break;
    }
    lo = k;
    if (k == n) break;
  }
  std::optional<StartEstimate> result;
  if (hi > 0) {
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      (fits_after(mid) ? hi : lo) = mid;
    }
    // Jobs that end at the same moment end together.
    for (sort_to(hi + 1); hi < n && ends[hi] == ends[hi - 1]; sort_to(hi + 1)) ++hi;
    std::optional<Allocation> placed = fits_after(hi);
    result = StartEstimate{std::max(now_ms, ends[hi - 1]), std::move(*placed)};
  }
  while (released > 0) put_back = state.Commit(out[--released]).ok() && put_back;
  if (put_back) state.RestoreVersion(version);  // everything is back: the state is as it was
  return result;
}

ClusterState GangPlacer::EmptyCluster(const std::vector<Node>& nodes, const GpuCatalog& catalog) {
  std::vector<Node> empty = nodes;
  for (Node& n : empty) {
    n.cordoned = false;  // cordons and broken GPUs are temporary
    for (Gpu& g : n.gpus) g.healthy = true;
  }
  return ClusterState(std::move(empty), catalog);
}

std::optional<std::string> GangPlacer::WhyNeverFits(const std::vector<Node>& nodes,
                                                    const GpuCatalog& catalog,
                                                    const JobRequest& job) const {
  ClusterState empty = EmptyCluster(nodes, catalog);
  return WhyNeverFits(empty, job);
}

std::optional<std::string> GangPlacer::WhyNeverFits(ClusterState& state,
                                                    const JobRequest& job) const {
  const Eligibility& eligibility = EligibleNodes(state, job);
  const std::vector<NodeIndex>& eligible = eligibility.nodes;
  if (eligible.empty()) return SummarizeRejections(state.node_count(), eligibility.rejections);
  for (const TaskRequest& task : job.tasks) {
    bool fits_somewhere = false;
    int32_t largest = 0;
    for (NodeIndex n : eligible) {
      fits_somewhere = fits_somewhere || state.FitReplica(n, task.per_replica).has_value();
      int32_t gpus = 0;
      for (const Gpu& g : state.node(n).gpus) {
        const std::vector<std::string>& types = task.per_replica.gpu.types;
        if (!g.mig_enabled && (types.empty() || std::count(types.begin(), types.end(), g.type))) {
          ++gpus;
        }
      }
      largest = std::max(largest, gpus);
    }
    if (fits_somewhere) continue;
    const GpuRequest& gpu = task.per_replica.gpu;
    std::string types = gpu.types.empty() ? "any type" : Join(gpu.types, " or ");
    if (gpu.mode == GpuMode::kWhole && gpu.count > largest) {
      return Cat("task ", task.name, " needs ", gpu.count, " GPUs of ", types,
                 " on one node; the largest such node has ", largest);
    }
    return Cat("task ", task.name, " fits on no eligible node (", types,
               gpu.mode == GpuMode::kMig ? Cat(", MIG ", gpu.mig_profile) : std::string(), ", CPU ",
               CountedCpu(task.per_replica.cpu).raw(), "m, memory ",
               CountedMemory(task.per_replica.memory).raw(), "Mi)");
  }
  std::vector<ReplicaPlacement> placed = Trial(state, job, eligible);
  if (static_cast<int32_t>(placed.size()) < job.gang_size) {
    int64_t slots = FreeTaskSlotsIn(state, eligible);
    std::string why = slots < job.gang_size
                          ? Cat(" (", Plural(eligible.size(), "node runs", "nodes run"),
                                " at most ", slots, " tasks in all)")
                          : std::string();
    return Cat("the gang needs ", job.gang_size,
               " replicas together; the eligible nodes hold at most ", placed.size(), why);
  }
  return std::nullopt;
}

}  // namespace gpucloud::sched
