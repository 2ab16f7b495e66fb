#include "sim/elastic.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace gpucloud::sim {

ElasticCapacity::ElasticCapacity(const SimCluster& cluster, const ElasticOptions& options,
                                 const sched::Scheduler& scheduler, const GpuCatalog& catalog,
                                 uint64_t seed)
    : cluster_(cluster),
      options_(options),
      autoscaler_(scheduler, catalog, options.autoscaler),
      rng_(seed * 104729 + 7),
      reclaim_rng_(seed * 7907 + 11),
      life_(cluster.nodes.size(), Life::kAbsent),
      generation_(cluster.nodes.size(), 0),
      tasks_(cluster.nodes.size(), 0),
      billed_since_(cluster.nodes.size(), -1) {
  for (const NodePool& p : cluster.pools) pools_[p.metadata.name] = {p};
  std::map<int, int32_t> seen;  // nodes of each pool so far
  for (NodeIndex n = 0; n < static_cast<NodeIndex>(cluster.nodes.size()); ++n) {
    by_name_[cluster.nodes[n].name] = n;
    const int pool = cluster.pool_of_node[n];
    const NodePoolSpec& spec = cluster.pools[pool].spec;
    const bool exists =
        !options.enabled || !autoscale::Scales(spec) || seen[pool]++ < spec.min_nodes;
    if (!exists) continue;
    life_[n] = Life::kUp;
    StartBilling(n, 0);
    ++up_count_;
    idle_since_ms_[cluster.nodes[n].name] = 0;
  }
  result_.peak_nodes = up_count_;
}

void ElasticCapacity::Remove(NodeIndex n, int64_t now_s, Effects& fx) {
  if (life_[n] == Life::kUp) {
    fx.remove.push_back(n);  // a booting machine has nothing in the simulation's state yet
    --up_count_;
  }
  Bill(n, now_s);
  life_[n] = Life::kAbsent;
  ++generation_[n];  // its boot or notice events, if any, are stale now
  idle_since_ms_.erase(cluster_.nodes[n].name);
  ++result_.nodes_removed;
}

void ElasticCapacity::StartBilling(NodeIndex n, int64_t now_s) { billed_since_[n] = now_s; }

void ElasticCapacity::Bill(NodeIndex n, int64_t now_s) {
  if (billed_since_[n] < 0) return;
  const int pool = cluster_.pool_of_node[n];
  const double gpu_hours = static_cast<double>(cluster_.nodes[n].gpus.size()) *
                           static_cast<double>(now_s - billed_since_[n]) / 3600.0;
  result_.gpu_hours_provisioned += gpu_hours;
  result_.capacity_cost_usd[std::string(BillingClassName(cluster_.pools[pool].spec.billing))] +=
      gpu_hours * static_cast<double>(cluster_.price_of_pool[pool].raw()) / 1e6;
  billed_since_[n] = -1;
}

void ElasticCapacity::Placed(const sched::Allocation& a) {
  if (a.placeholder) return;
  for (const sched::ReplicaPlacement& r : a.replicas) {
    if (tasks_[r.node]++ == 0) idle_since_ms_.erase(cluster_.nodes[r.node].name);
  }
}

void ElasticCapacity::Released(const sched::Allocation& a, int64_t now_s) {
  if (a.placeholder) return;
  for (const sched::ReplicaPlacement& r : a.replicas) {
    if (--tasks_[r.node] == 0 && life_[r.node] == Life::kUp) {
      idle_since_ms_[cluster_.nodes[r.node].name] = now_s * 1000;
      if (options_.enabled) {
        idle_wakes_s_.push_back(now_s + (options_.autoscaler.scale_down_after_ms + 999) / 1000);
      }
    }
  }
}

bool ElasticCapacity::IdleDue(int64_t now_s) const {
  const int64_t after = options_.autoscaler.scale_down_after_ms;
  return std::any_of(idle_since_ms_.begin(), idle_since_ms_.end(),
                     [&](const auto& e) { return e.second + after <= now_s * 1000; });
}

ElasticCapacity::Effects ElasticCapacity::Round(
    const sched::ClusterState& state, const std::vector<const sched::PendingJob*>& waiting,
    int64_t now_s, const std::vector<NodeIndex>& reserved) {
  Effects fx;
  if (!options_.enabled) return fx;
  autoscale::AutoscalerInput in;
  in.state = &state;
  in.waiting = waiting;
  for (const auto& [name, p] : pools_) in.pools.push_back(p);
  for (const auto& [id, r] : requests_) {
    autoscale::ProvisioningRequest spec = r.spec;
    for (NodeIndex n : r.nodes) spec.ready += life_[n] == Life::kUp ? 1 : 0;
    in.in_flight.push_back(std::move(spec));
  }
  in.idle_since_ms.swap(idle_since_ms_);  // lent for the round, not copied
  in.absent.resize(life_.size());
  for (size_t n = 0; n < life_.size(); ++n) in.absent[n] = life_[n] != Life::kUp;
  for (NodeIndex n : reserved) in.reserved_nodes.insert(state.node(n).name);
  in.now_ms = now_s * 1000;
  autoscale::Plan plan = autoscaler_.Decide(in);
  idle_since_ms_.swap(in.idle_since_ms);

  for (const autoscale::Backoff& b : plan.backoffs) {
    pools_[b.pool].backoff_until_ms = b.until_ms;
    pools_[b.pool].backoff_reason = b.reason;
  }
  for (const autoscale::Cancel& c : plan.cancels) {
    auto it = requests_.find(c.request);
    if (it == requests_.end()) continue;
    for (NodeIndex n : it->second.nodes) {
      request_of_.erase(n);
      Remove(n, now_s, fx);
    }
    ++result_.cancelled;
    requests_.erase(it);
  }
  for (autoscale::ScaleUp& up : plan.ups) {
    Request r;
    r.spec = std::move(up.request);
    r.spec.id = Cat("r", next_request_++);
    for (const std::string& name : r.spec.nodes) {
      auto n = by_name_.find(name);
      if (n == by_name_.end() || life_[n->second] != Life::kAbsent) continue;  // cannot happen
      const NodeIndex node = n->second;
      r.nodes.push_back(node);
      life_[node] = Life::kBooting;
      const int32_t generation = ++generation_[node];
      request_of_[node] = r.spec.id;
      StartBilling(node, now_s);
      ++result_.nodes_added;
      const double u = (static_cast<double>(rng_.Uniform(1'000'000)) + 0.5) / 1e6;
      const double fails = (static_cast<double>(rng_.Uniform(1'000'000)) + 0.5) / 1e6;
      auto by_pool = options_.boot_failure_by_pool.find(r.spec.pool);
      if (fails < (by_pool != options_.boot_failure_by_pool.end() ? by_pool->second
                                                                  : options_.boot_failure)) {
        continue;  // never comes up
      }
      const int64_t boot =
          std::max<int64_t>(1, std::llround(static_cast<double>(options_.boot_s) * (0.5 + u)));
      fx.boots.push_back({node, now_s + boot, generation});
    }
    ++result_.requests;
    requests_[r.spec.id] = std::move(r);
  }
  for (const autoscale::ScaleDown& d : plan.downs) {
    auto n = by_name_.find(d.node);
    if (n == by_name_.end() || life_[n->second] != Life::kUp) continue;
    Remove(n->second, now_s, fx);
  }
  NextWake(now_s, fx);
  return fx;
}

ElasticCapacity::Effects ElasticCapacity::Booted(NodeIndex n, int32_t generation, int64_t now_s) {
  Effects fx;
  if (generation_[n] != generation || life_[n] != Life::kBooting) return fx;
  life_[n] = Life::kUp;
  result_.peak_nodes = std::max(result_.peak_nodes, ++up_count_);
  idle_since_ms_[cluster_.nodes[n].name] = now_s * 1000;
  fx.up.push_back(n);
  ScheduleNotice(n, now_s, fx);
  auto id = request_of_.find(n);
  if (id == request_of_.end()) return fx;
  auto r = requests_.find(id->second);
  const bool complete = std::all_of(r->second.nodes.begin(), r->second.nodes.end(),
                                    [&](NodeIndex m) { return life_[m] == Life::kUp; });
  if (!complete) {
    fx.hold.push_back(n);
    return fx;
  }
  for (NodeIndex m : r->second.nodes) {
    if (m != n) fx.unhold.push_back(m);
    request_of_.erase(m);
  }
  requests_.erase(r);
  return fx;
}

void ElasticCapacity::NextWake(int64_t now_s, Effects& fx) const {
  const int64_t now_ms = now_s * 1000;
  auto consider = [&](int64_t t_ms, int64_t& wake_s) {
    if (t_ms > now_ms) wake_s = std::min(wake_s, (t_ms + 999) / 1000);
  };
  const autoscale::AutoscalerOptions& o = options_.autoscaler;
  for (const auto& [id, r] : requests_) {
    consider(r.spec.created_ms + o.boot_timeout_ms, fx.wake_live_s);
  }
  for (const auto& [name, p] : pools_) consider(p.backoff_until_ms, fx.wake_live_s);
  for (const auto& [name, since] : idle_since_ms_) {
    consider(since + o.scale_down_after_ms, fx.wake_idle_s);
  }
}

void ElasticCapacity::ScheduleNotice(NodeIndex n, int64_t now_s, Effects& fx) {
  const double rate = options_.spot_reclaims_per_hour;
  if (!options_.enabled || rate <= 0 ||
      cluster_.pools[cluster_.pool_of_node[n]].spec.billing != BillingClass::kSpot) {
    return;
  }
  const double u = (static_cast<double>(reclaim_rng_.Uniform(1'000'000)) + 0.5) / 1e6;
  const int64_t after = std::max<int64_t>(1, std::llround(-std::log(u) * 3600.0 / rate));
  fx.notices.push_back({n, now_s + after, generation_[n]});
}

ElasticCapacity::Effects ElasticCapacity::Start() {
  Effects fx;
  for (NodeIndex n = 0; n < static_cast<NodeIndex>(life_.size()); ++n) {
    if (life_[n] == Life::kUp) ScheduleNotice(n, 0, fx);
  }
  return fx;
}

ElasticCapacity::Effects ElasticCapacity::Notice(NodeIndex n, int32_t generation, int64_t now_s) {
  Effects fx;
  if (generation_[n] != generation || life_[n] != Life::kUp) return fx;
  if (Held(n)) {  // its request is not complete yet: taken back later
    ScheduleNotice(n, now_s, fx);
    return fx;
  }
  fx.noticed.push_back(n);
  fx.gone.push_back({n, now_s + options_.spot_notice_s, generation});
  return fx;
}

ElasticCapacity::Effects ElasticCapacity::Gone(NodeIndex n, int32_t generation, int64_t now_s) {
  Effects fx;
  if (generation_[n] != generation || life_[n] != Life::kUp || Held(n)) return fx;
  Remove(n, now_s, fx);
  ++result_.spot_reclaims;
  return fx;
}

ElasticResult ElasticCapacity::Finish(int64_t now_s) {
  for (NodeIndex n = 0; n < static_cast<NodeIndex>(life_.size()); ++n) Bill(n, now_s);
  return result_;
}

}  // namespace gpucloud::sim
