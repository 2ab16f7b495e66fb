#include "autoscale/autoscaler.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string_view>

#include "autoscale/pool_nodes.h"
#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::autoscale {

using sched::Allocation;
using sched::ClusterState;
using sched::NodeIndex;
using sched::PendingJob;

bool Scales(const NodePoolSpec& pool) { return pool.provider != kStaticProvider; }

// One pool's part of a round: its hypothetical new nodes (the pool's template, borrowed for the
// round) and what this round placed there.
struct Autoscaler::PoolPlan {
  const PoolState* pool = nullptr;
  MicroUsd price;                    // per GPU-hour
  int32_t count = 0;                 // nodes it has or has requested (not counting this round's)
  ClusterState* state = nullptr;     // Template::plan, with this round's commits
  std::vector<std::string> commits;  // what this round committed there (released at its end)
  std::vector<bool> opened;          // by hypothetical node: this round requests it
  int32_t opened_count = 0;
  int32_t min_opened = 0;  // the first this many are opened for minNodes
  std::vector<std::pair<std::string, std::vector<NodeIndex>>> jobs;  // placed here
  // By the round's shape id (shape and spot): the state version at which it last failed here
  // (unchanged, it fails again, so alike jobs are not searched twice), kNever when it failed on
  // nodes still empty (it never fits this pool), 0 when not tried.
  static constexpr uint64_t kNever = UINT64_MAX;
  std::vector<uint64_t> failed_at;

  int32_t Headroom(int32_t max_round) const {
    return std::clamp(pool->pool.spec.max_nodes - count, 0, max_round);
  }
};

// One Decide's working state. The string views point into the AutoscalerInput.
struct Autoscaler::Round {
  int64_t now_ms = 0;
  std::vector<PoolPlan> pools;                 // cheapest first
  std::set<std::string_view> in_flight_names;  // nodes of requests in flight, even cancelled
  std::set<std::string_view> covered;          // jobs a live request in flight was made for
  std::set<std::string_view> held_nodes;       // nodes of live requests in flight
  std::set<std::string_view> cancelled;        // request ids cancelled this round
  int64_t gpus = 0;                            // cluster-wide, existing and requested
  int64_t usd_micro_per_hour = 0;
};

namespace {

bool Absent(const AutoscalerInput& in, NodeIndex n) {
  return static_cast<size_t>(n) < in.absent.size() && in.absent[n];
}

std::string AboutMs(int64_t ms) {
  if (ms % 60'000 == 0) return Cat(ms / 60'000, " min");
  return Cat(ms / 1000, " s");
}

}  // namespace

Autoscaler::Template& Autoscaler::TemplateOf(const NodePool& pool) const {
  Template& t = templates_[pool.metadata.name];
  if (!t.empty || !(t.spec == pool.spec)) {
    t.spec = pool.spec;
    t.empty = EmptyPoolState(pool, std::min(pool.spec.max_nodes, options_.max_new_nodes_per_round));
    t.plan = std::make_unique<ClusterState>(*t.empty);
    t.answers.clear();
  }
  return t;
}

void Autoscaler::Prepare(PoolPlan& plan) const {
  if (plan.state) return;
  const int32_t headroom = plan.Headroom(options_.max_new_nodes_per_round);
  plan.state = TemplateOf(plan.pool->pool).plan.get();
  plan.opened.assign(headroom, false);
  // The template has a node for every node the pool could add in one round; those beyond this
  // round's headroom are held by one placeholder (everything of theirs) until the round ends.
  sched::Allocation beyond;
  beyond.job = "#beyond-headroom";
  beyond.placeholder = true;
  for (NodeIndex n = headroom; n < plan.state->node_count(); ++n) {
    beyond.replicas.push_back(sched::WholeNodeHold(plan.state->node(n), n));
  }
  if (beyond.replicas.empty()) return;
  if (!plan.state->Commit(beyond).ok()) {
    // Left over from a round that did not finish (an exception): start the template afresh.
    Template& t = TemplateOf(plan.pool->pool);
    t.plan = std::make_unique<ClusterState>(*t.empty);
    plan.state = t.plan.get();
    if (!plan.state->Commit(beyond).ok()) std::abort();  // cannot happen on empty nodes
  }
  plan.commits.push_back(beyond.job);
}

void Autoscaler::Release(Round& round) const {
  for (PoolPlan& plan : round.pools) {
    for (const std::string& key : plan.commits) (void)plan.state->Release(key);
    plan.commits.clear();
  }
}

void Autoscaler::Open(PoolPlan& plan, NodeIndex n, Round& round) const {
  if (plan.opened[n]) return;
  plan.opened[n] = true;
  ++plan.opened_count;
  const int64_t gpus = plan.pool->pool.spec.gpus_per_node;
  round.gpus += gpus;
  round.usd_micro_per_hour += gpus * plan.price.raw();
}

bool Autoscaler::WithinMaxima(const Round& round, int64_t gpus, MicroUsd price) const {
  return (options_.max_gpus <= 0 || round.gpus + gpus <= options_.max_gpus) &&
         (options_.max_usd_per_hour.raw() <= 0 ||
          round.usd_micro_per_hour + gpus * price.raw() <= options_.max_usd_per_hour.raw());
}

void Autoscaler::OpenMinNodes(Round& round) const {
  for (PoolPlan& plan : round.pools) {
    const NodePoolSpec& spec = plan.pool->pool.spec;
    if (!Scales(spec) || plan.pool->backoff_until_ms > round.now_ms) continue;
    const int32_t need =
        std::min(spec.min_nodes - plan.count, plan.Headroom(options_.max_new_nodes_per_round));
    if (need <= 0) continue;
    Prepare(plan);
    for (NodeIndex n = 0; n < need && WithinMaxima(round, spec.gpus_per_node, plan.price); ++n) {
      Open(plan, n, round);
      plan.min_opened = n + 1;
    }
  }
}

const std::optional<std::string>& Autoscaler::NeverFits(const NodePool& pool,
                                                        const PendingJob& p) const {
  Template& t = TemplateOf(pool);
  std::string key = p.shape_key;
  for (const sched::TaskRequest& task : p.request.tasks) key += Cat("|n", task.name);
  auto it = t.answers.find(key);
  if (it == t.answers.end()) {
    if (t.answers.size() >= 4096) t.answers.clear();  // a bound, not a working set
    it = t.answers.emplace(std::move(key), scheduler_.WhyNeverFitsOn(*t.empty, p)).first;
  }
  return it->second;
}

std::unique_ptr<ClusterState> Autoscaler::EmptyPoolState(const NodePool& pool, int nodes) const {
  std::vector<Node> out;
  out.reserve(nodes);
  const int per_leaf = NodesPerLeaf(pool.spec);
  for (int i = 0; i < nodes; ++i) {
    TopologyPath path{"zone-new", Cat("spine-", pool.metadata.name, "-new"),
                      Cat("leaf-", pool.metadata.name, "-new-", i / per_leaf)};
    out.push_back(PoolNode(pool, i, std::move(path), catalog_));
  }
  return std::make_unique<ClusterState>(std::move(out), catalog_);
}

void Autoscaler::Expire(const AutoscalerInput& in, Round& round, Plan& plan) const {
  std::map<std::string, Backoff> backoffs;
  for (const ProvisioningRequest& r : in.in_flight) {
    std::string why;
    if (!r.failure.empty()) {
      why = Cat("provisioning failed: ", r.failure);
    } else if (r.ready < static_cast<int32_t>(r.nodes.size()) &&
               in.now_ms - r.created_ms >= options_.boot_timeout_ms) {
      why = Cat(r.ready, " of ", r.nodes.size(), " nodes Ready after ",
                AboutMs(in.now_ms - r.created_ms), " (boot timeout ",
                AboutMs(options_.boot_timeout_ms), ")");
    }
    if (why.empty()) continue;
    round.cancelled.insert(r.id);  // a view into `in`
    plan.cancels.push_back({r.id, Cat("cancel ", r.id, " in pool ", r.pool, ": ", why)});
    backoffs[r.pool] = {r.pool, in.now_ms + options_.backoff_ms,
                        Cat(why, "; backing off until +", AboutMs(options_.backoff_ms))};
  }
  for (auto& [name, b] : backoffs) plan.backoffs.push_back(std::move(b));
}

bool Autoscaler::PlaceOnNewNodes(const PendingJob& p, size_t shape, Round& round,
                                 std::string* why) const {
  for (PoolPlan& plan : round.pools) {
    const PoolState& ps = *plan.pool;
    const NodePoolSpec& spec = ps.pool.spec;
    if (!Scales(spec)) continue;
    const std::string& name = ps.pool.metadata.name;
    if (ps.backoff_until_ms > round.now_ms) {
      if (why) *why += Cat("; ", name, ": backing off (", ps.backoff_reason, ")");
      continue;
    }
    if (spec.billing == BillingClass::kSpot && !p.preemptible) continue;
    const int32_t headroom = plan.Headroom(options_.max_new_nodes_per_round);
    if (headroom == 0) {
      if (why) *why += Cat("; ", name, ": at maxNodes ", spec.max_nodes);
      continue;
    }
    if (plan.failed_at.size() <= shape) plan.failed_at.resize(shape + 1, 0);
    uint64_t& failed = plan.failed_at[shape];
    if (failed == 0) {
      if (const std::optional<std::string>& never = NeverFits(ps.pool, p)) {
        failed = PoolPlan::kNever;
        if (why) *why += Cat("; ", name, ": ", *never);
        continue;
      }
    }
    Prepare(plan);
    if (failed == PoolPlan::kNever || failed == plan.state->version()) {
      if (why)
        *why += Cat("; ", name, ": ",
                    failed == PoolPlan::kNever ? "does not fit its nodes" : "no room left");
      continue;
    }
    sched::PlacementResult r = scheduler_.PlaceOn(*plan.state, p);
    if (!r.allocation) {
      failed = plan.opened_count == 0 ? PoolPlan::kNever : plan.state->version();
      if (why) *why += Cat("; ", name, ": ", r.reason);
      continue;
    }
    std::vector<NodeIndex> nodes;
    int64_t new_gpus = 0;
    for (const sched::ReplicaPlacement& rp : r.allocation->replicas) {
      if (std::find(nodes.begin(), nodes.end(), rp.node) != nodes.end()) continue;
      nodes.push_back(rp.node);
      if (!plan.opened[rp.node]) new_gpus += spec.gpus_per_node;
    }
    if (!WithinMaxima(round, new_gpus, plan.price)) {
      if (why) *why += Cat("; ", name, ": would pass the cluster's maximum GPUs or dollars/hour");
      continue;
    }
    if (!plan.state->Commit(*r.allocation).ok()) continue;  // cannot happen: the placer checked
    plan.commits.push_back(r.allocation->job);
    for (NodeIndex n : nodes) Open(plan, n, round);
    std::sort(nodes.begin(), nodes.end());
    plan.jobs.emplace_back(p.request.key, std::move(nodes));
    return true;
  }
  return false;
}

void Autoscaler::Requests(const AutoscalerInput& in, Round& round, Plan& plan) const {
  for (PoolPlan& pp : round.pools) {
    if (pp.opened_count == 0) continue;
    // The new nodes take the pool's lowest free names, in the order of the hypothetical ones.
    const std::string& pool_name = pp.pool->pool.metadata.name;
    std::set<std::string_view> used = round.in_flight_names;
    for (const auto& [name, nr] : in.not_ready) used.insert(name);
    used.insert(in.leaving.begin(), in.leaving.end());
    for (NodeIndex n = 0; n < in.state->node_count(); ++n) {
      if (!Absent(in, n) && in.state->node(n).pool == pool_name)
        used.insert(in.state->node(n).name);
    }
    std::vector<std::string> names;
    for (int i = 0; static_cast<size_t>(names.size()) < pp.opened.size(); ++i) {
      std::string name = PoolNodeName(pool_name, i);
      if (!used.contains(name)) names.push_back(std::move(name));
    }
    // Union-find over the opened nodes: nodes that share a job (and the minNodes ones) are one
    // request.
    std::vector<NodeIndex> parent(pp.opened.size());
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](NodeIndex x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    auto unite = [&](NodeIndex a, NodeIndex b) { parent[find(a)] = find(b); };
    for (NodeIndex n = 1; n < pp.min_opened; ++n) unite(n, 0);
    for (const auto& [job, nodes] : pp.jobs) {
      for (size_t i = 1; i < nodes.size(); ++i) unite(nodes[i], nodes[0]);
    }
    std::map<NodeIndex, ScaleUp> by_root;  // ordered by the group's first node
    for (NodeIndex n = 0; n < static_cast<NodeIndex>(pp.opened.size()); ++n) {
      if (!pp.opened[n]) continue;
      ScaleUp& up = by_root[find(n)];
      up.request.pool = pp.pool->pool.metadata.name;
      up.request.created_ms = in.now_ms;
      up.request.nodes.push_back(names[n]);
    }
    for (const auto& [job, nodes] : pp.jobs) by_root[find(nodes[0])].request.jobs.push_back(job);
    int64_t node_gpus = pp.pool->pool.spec.gpus_per_node;
    for (auto& [root, up] : by_root) {
      const ProvisioningRequest& r = up.request;
      int64_t gpus = node_gpus * static_cast<int64_t>(r.nodes.size());
      std::string what = r.jobs.empty() ? Cat("to reach minNodes ", pp.pool->pool.spec.min_nodes)
                         : r.jobs.size() == 1
                             ? Cat("for ", r.nodes.size() > 1 ? "gang " : "job ", r.jobs[0])
                             : Cat("for ", r.jobs.size(), " jobs (", r.jobs[0], ", ...)");
      up.reason = Cat("scale up ", r.pool, " by ", r.nodes.size(), " ", what, ": ", gpus,
                      " GPUs at $", FormatPrice(pp.price),
                      "/GPU-hour, the cheapest pool "
                      "that fits");
      plan.ups.push_back(std::move(up));
    }
  }
}

void Autoscaler::ScaleDowns(const AutoscalerInput& in, const Round& round, Plan& plan) const {
  const ClusterState& s = *in.state;
  std::vector<bool> busy(s.node_count(), false);
  for (const auto& [key, a] : s.allocations()) {
    for (const sched::ReplicaPlacement& r : a.replicas) busy[r.node] = true;
  }
  struct Candidate {
    const PoolPlan* pool;
    NodeIndex node;
  };
  std::vector<Candidate> candidates;
  std::map<std::string, const PoolPlan*> by_name;
  for (const PoolPlan& pp : round.pools) by_name[pp.pool->pool.metadata.name] = &pp;
  for (NodeIndex n = 0; n < s.node_count(); ++n) {
    if (Absent(in, n)) continue;
    const Node& node = s.node(n);
    auto pool = by_name.find(node.pool);
    if (pool == by_name.end()) continue;
    const PoolPlan& pp = *pool->second;
    const NodePoolSpec& spec = pp.pool->pool.spec;
    if (!Scales(spec) || spec.billing == BillingClass::kReserved || pp.opened_count > 0) continue;
    if (busy[n] || round.held_nodes.contains(node.name) || in.reserved_nodes.contains(node.name) ||
        in.leaving.contains(node.name)) {
      continue;
    }
    auto idle = in.idle_since_ms.find(node.name);
    if (idle == in.idle_since_ms.end() || in.now_ms - idle->second < options_.scale_down_after_ms) {
      continue;
    }
    candidates.push_back({&pp, n});
  }
  std::map<const PoolPlan*, int32_t> removed;
  // Nodes not Ready for scale_down_after_ms go first, whatever their price: broken or gone
  // machines still cost money.
  for (const auto& [name, nr] : in.not_ready) {
    auto pool = by_name.find(nr.pool);
    if (pool == by_name.end() || round.held_nodes.contains(name) || in.leaving.contains(name) ||
        in.reserved_nodes.contains(name) ||
        in.now_ms - nr.since_ms < options_.scale_down_after_ms) {
      continue;
    }
    const PoolPlan& pp = *pool->second;
    if (!Scales(pp.pool->pool.spec) || pp.pool->pool.spec.billing == BillingClass::kReserved) {
      continue;
    }
    ++removed[&pp];
    plan.downs.push_back({name, nr.pool,
                          Cat("scale down ", nr.pool, ": node ", name, " not Ready for ",
                              AboutMs(in.now_ms - nr.since_ms), " (scaleDownAfter ",
                              AboutMs(options_.scale_down_after_ms), ")")});
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.pool->price > b.pool->price; });
  for (const Candidate& c : candidates) {
    const NodePoolSpec& spec = c.pool->pool->pool.spec;
    if (c.pool->count - removed[c.pool] <= spec.min_nodes) continue;
    ++removed[c.pool];
    const Node& node = s.node(c.node);
    plan.downs.push_back({node.name, node.pool,
                          Cat("scale down ", node.pool, ": node ", node.name, " idle for ",
                              AboutMs(in.now_ms - in.idle_since_ms.at(node.name)),
                              " (scaleDownAfter ", AboutMs(options_.scale_down_after_ms), ")")});
  }
}

Plan Autoscaler::Decide(const AutoscalerInput& in) const {
  Plan plan;
  Round round;
  round.now_ms = in.now_ms;
  Expire(in, round, plan);

  // Nodes by pool: those that exist (not counting any of a request in flight), then the nodes
  // of the live requests; and the cluster's GPUs and dollars per hour with them.
  std::unordered_map<std::string_view, size_t> pool_index;
  std::vector<MicroUsd> price(in.pools.size());
  std::vector<int32_t> count(in.pools.size(), 0);
  for (size_t i = 0; i < in.pools.size(); ++i) {
    pool_index[in.pools[i].pool.metadata.name] = i;
    price[i] = EffectivePricePerGpuHour(in.pools[i].pool.spec, catalog_);
  }
  for (const ProvisioningRequest& r : in.in_flight) {
    const bool live = !round.cancelled.contains(r.id);
    round.in_flight_names.insert(r.nodes.begin(), r.nodes.end());
    if (live) {
      round.held_nodes.insert(r.nodes.begin(), r.nodes.end());
      round.covered.insert(r.jobs.begin(), r.jobs.end());
    }
    auto p = pool_index.find(r.pool);
    if (!live || p == pool_index.end()) continue;
    const int64_t gpus = in.pools[p->second].pool.spec.gpus_per_node;
    count[p->second] += static_cast<int32_t>(r.nodes.size());
    round.gpus += gpus * static_cast<int64_t>(r.nodes.size());
    round.usd_micro_per_hour +=
        gpus * static_cast<int64_t>(r.nodes.size()) * price[p->second].raw();
  }
  const ClusterState& s = *in.state;
  for (NodeIndex n = 0; n < s.node_count(); ++n) {
    if (Absent(in, n)) continue;
    const Node& node = s.node(n);
    if (!round.in_flight_names.empty() && round.in_flight_names.contains(node.name)) continue;
    if (!in.leaving.empty() && in.leaving.contains(node.name)) continue;
    const int64_t gpus = static_cast<int64_t>(node.gpus.size());
    round.gpus += gpus;
    auto p = pool_index.find(node.pool);
    if (p == pool_index.end()) continue;
    ++count[p->second];
    round.usd_micro_per_hour += gpus * price[p->second].raw();
  }
  for (const auto& [name, nr] : in.not_ready) {
    if (round.in_flight_names.contains(name) || in.leaving.contains(name)) continue;
    round.gpus += nr.gpus;
    auto p = pool_index.find(nr.pool);
    if (p == pool_index.end()) continue;
    ++count[p->second];
    round.usd_micro_per_hour += int64_t{nr.gpus} * price[p->second].raw();
  }

  std::map<std::string, int64_t> backed_off;
  for (const Backoff& b : plan.backoffs) backed_off[b.pool] = b.until_ms;
  std::vector<PoolState> pools = in.pools;  // with this round's back-offs
  for (PoolState& p : pools) {
    auto b = backed_off.find(p.pool.metadata.name);
    if (b != backed_off.end() && b->second > p.backoff_until_ms) {
      p.backoff_until_ms = b->second;
      p.backoff_reason = "a request was just cancelled";
    }
  }
  for (size_t i = 0; i < pools.size(); ++i) {
    PoolPlan pp;
    pp.pool = &pools[i];
    pp.price = price[i];
    pp.count = count[i];
    round.pools.push_back(std::move(pp));
  }
  std::stable_sort(round.pools.begin(), round.pools.end(),
                   [](const PoolPlan& a, const PoolPlan& b) {
                     if (a.price != b.price) return a.price < b.price;
                     return a.pool->pool.metadata.name < b.pool->pool.metadata.name;
                   });
  OpenMinNodes(round);
  // Shape (and spot) -> a small id, and by id the reason it was not placed: rounds only use
  // room up, so a shape no pool took stays unplaced for the rest of the round.
  // The keys are the jobs' own shape_key strings (they outlive the round).
  std::unordered_map<std::string_view, size_t> shape_ids[2];  // [preemptible]
  std::vector<std::optional<size_t>> unmet_by_shape;          // index into plan.unmet
  for (const PendingJob* p : in.waiting) {
    if (!round.covered.empty() && round.covered.contains(p->request.key)) continue;
    if (p->shape_key.empty()) p->shape_key = sched::ShapeKey(p->request);
    auto [it, added] = shape_ids[p->preemptible].try_emplace(p->shape_key, unmet_by_shape.size());
    if (added) unmet_by_shape.emplace_back();
    const size_t shape = it->second;
    if (unmet_by_shape[shape]) {
      plan.unmet[*unmet_by_shape[shape]].jobs.push_back(p->request.key);
      continue;
    }
    if (PlaceOnNewNodes(*p, shape, round, nullptr)) continue;
    // Once per shape: ask again for the reasons (each pool answers from its caches).
    std::string why;
    PlaceOnNewNodes(*p, shape, round, &why);
    if (why.empty()) why = "; no pool that scales accepts it";
    unmet_by_shape[shape] = plan.unmet.size();
    plan.unmet.push_back({{p->request.key}, Cat("no pool can add nodes for it", why)});
  }
  Release(round);
  Requests(in, round, plan);
  ScaleDowns(in, round, plan);
  return plan;
}

}  // namespace gpucloud::autoscale
