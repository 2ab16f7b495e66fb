#include "server/autoscaling.h"

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/events.h"
#include "server/node_certs.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kRequestsPrefix = "/autoscaler/requests/";

std::string RequestJson(const autoscale::ProvisioningRequest& r) {
  return nlohmann::json{{"id", r.id},
                        {"pool", r.pool},
                        {"nodes", r.nodes},
                        {"jobs", r.jobs},
                        {"createdMs", r.created_ms}}
      .dump();
}

std::optional<autoscale::ProvisioningRequest> ParseRequest(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  autoscale::ProvisioningRequest r;
  try {
    r.id = j.at("id").get<std::string>();
    r.pool = j.at("pool").get<std::string>();
    r.nodes = j.at("nodes").get<std::vector<std::string>>();
    r.jobs = j.at("jobs").get<std::vector<std::string>>();
    r.created_ms = j.at("createdMs").get<int64_t>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return r;
}

// The ScaleUp event on each job a request was made for.
std::vector<store::Op> EventsOf(const autoscale::ScaleUp& up, int64_t now_ms, uint64_t& seq) {
  std::vector<store::Op> ops;
  for (const std::string& key : up.request.jobs) {
    size_t slash = key.find('/');
    if (slash == std::string::npos) continue;
    ops.push_back(MakeEventOp(key.substr(0, slash), key.substr(slash + 1), "",
                              {"Normal", "ScaleUp", up.reason}, now_ms, seq++));
  }
  return ops;
}

}  // namespace

std::string RenderAutoscalingMetrics(const AutoscalingMetrics& m) {
  std::string out;
  auto counter = [&](const char* name, const char* help,
                     const std::map<std::string, int64_t>& by_pool) {
    out += Cat("# HELP ", name, " ", help, "\n# TYPE ", name, " counter\n");
    for (const auto& [pool, n] : by_pool) out += Cat(name, "{pool=\"", pool, "\"} ", n, "\n");
  };
  counter("gpucloud_autoscaler_scale_ups_total", "Provisioning requests made.", m.scale_ups);
  counter("gpucloud_autoscaler_nodes_added_total", "Nodes requested.", m.nodes_added);
  counter("gpucloud_autoscaler_scale_downs_total", "Idle nodes removed.", m.scale_downs);
  counter("gpucloud_autoscaler_cancelled_requests_total",
          "Provisioning requests cancelled (provider failure or boot timeout).", m.cancels);
  out += Cat("# HELP gpucloud_autoscaler_requests_in_flight Provisioning requests not Ready yet.\n",
             "# TYPE gpucloud_autoscaler_requests_in_flight gauge\n",
             "gpucloud_autoscaler_requests_in_flight ", m.requests_in_flight, "\n");
  out += Cat("# HELP gpucloud_autoscaler_unmet_jobs Jobs waiting for room no pool can add.\n",
             "# TYPE gpucloud_autoscaler_unmet_jobs gauge\n", "gpucloud_autoscaler_unmet_jobs ",
             m.unmet_jobs, "\n");
  return out;
}

Autoscaling::Autoscaling(store::Store& store, const GpuCatalog& catalog, AutoscalingOptions options)
    : store_(store), catalog_(catalog), options_(std::move(options)) {}

Autoscaling::~Autoscaling() { Stop(); }

void Autoscaling::Start() {
  LoadRequests();
  worker_ = std::thread([this] { Work(); });
}

void Autoscaling::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  providers_.clear();  // a local provider stops its agents
}

std::set<std::string> Autoscaling::HeldNodes() const {
  std::lock_guard lock(mu_);
  return HeldNodesLocked();
}

std::set<std::string> Autoscaling::HeldNodesLocked() const {
  std::set<std::string> held;
  for (const auto& [node, pool] : draining_) held.insert(node);
  for (const auto& [node, pool] : removing_) held.insert(node);
  for (const auto& [id, r] : requests_) {
    if (!r.complete) held.insert(r.spec.nodes.begin(), r.spec.nodes.end());
  }
  return held;
}

AutoscalingMetrics Autoscaling::Metrics() const {
  std::lock_guard lock(mu_);
  AutoscalingMetrics m = metrics_;
  m.requests_in_flight = static_cast<int64_t>(requests_.size());
  return m;
}

void Autoscaling::Queue(Action a) {
  actions_.push_back(std::move(a));
  cv_.notify_all();
}

void Autoscaling::AfterPass(const sched::Scheduler& scheduler, const sched::ClusterState& state,
                            const std::vector<const sched::PendingJob*>& waiting,
                            const NotReadyNodes& not_ready,
                            const std::map<std::string, NodePool>& pools, int64_t now_ms,
                            const std::set<std::string>& reserved) {
  std::lock_guard lock(mu_);
  if (!(pools_ == pools)) pools_ = pools;
  bool any = false;
  for (const auto& [name, p] : pools_) any = any || autoscale::Scales(p.spec);
  if (!any && requests_.empty() && draining_.empty()) return;
  if (!autoscaler_ || scheduler_ != &scheduler) {
    autoscaler_ = std::make_unique<autoscale::Autoscaler>(scheduler, catalog_, options_.autoscaler);
    scheduler_ = &scheduler;
  }
  // Which nodes run something, and since when the others have not.
  std::vector<bool> busy(state.node_count(), false);
  for (const auto& [key, a] : state.allocations()) {
    if (a.placeholder) continue;
    for (const sched::ReplicaPlacement& r : a.replicas) busy[r.node] = true;
  }
  std::map<std::string, sched::NodeIndex> index;
  const std::set<std::string> ours = HeldNodesLocked();
  for (sched::NodeIndex n = 0; n < state.node_count(); ++n) {
    const Node& node = state.node(n);
    index[node.name] = n;
    // A node someone else cordoned is not idle: it is being looked at.
    if (busy[n] || (node.cordoned && !ours.contains(node.name))) {
      idle_since_ms_.erase(node.name);
    } else {
      idle_since_ms_.emplace(node.name, now_ms);
    }
  }
  std::erase_if(idle_since_ms_, [&](const auto& e) { return !index.contains(e.first); });
  for (const auto& [name, pool] : not_ready) not_ready_since_ms_.emplace(name, now_ms);
  std::erase_if(not_ready_since_ms_, [&](const auto& e) { return !not_ready.contains(e.first); });
  // Nodes held for a whole pass since their scale-down: still idle, they go.
  for (auto it = draining_.begin(); it != draining_.end();) {
    auto n = index.find(it->first);
    if (n != index.end() && busy[n->second]) {  // a job bound before the hold: keep it
      it = draining_.erase(it);
      continue;
    }
    Queue({Action::Kind::kDelete, it->second, {it->first}, "", {}});
    removing_.insert(*it);
    it = draining_.erase(it);
  }
  // Requests whose nodes are all Ready are released to the scheduler for one pass, then done.
  for (auto it = requests_.begin(); it != requests_.end();) {
    autoscale::ProvisioningRequest& r = it->second.spec;
    if (it->second.complete) {
      Queue({Action::Kind::kForget, r.pool, {}, r.id, {}});
      it = requests_.erase(it);
      continue;
    }
    r.ready = 0;
    for (const std::string& n : r.nodes) r.ready += index.contains(n) ? 1 : 0;
    r.failure = it->second.failure;
    if (r.ready == static_cast<int32_t>(r.nodes.size())) {
      log::Info("autoscaler", "provisioning request Ready", {{"request", r.id}, {"pool", r.pool}});
      it->second.complete = true;
    }
    ++it;
  }

  autoscale::AutoscalerInput in;
  in.state = &state;
  in.waiting = waiting;
  for (const auto& [name, p] : pools_) {
    autoscale::PoolState ps{p};
    if (auto b = backoffs_.find(name); b != backoffs_.end()) {
      ps.backoff_until_ms = b->second.until_ms;
      ps.backoff_reason = b->second.reason;
    }
    in.pools.push_back(std::move(ps));
  }
  for (const auto& [id, r] : requests_) in.in_flight.push_back(r.spec);
  in.idle_since_ms.swap(idle_since_ms_);  // lent for the round, not copied
  for (const auto& [node, pool] : removing_) in.leaving.insert(node);
  for (const auto& [name, what] : not_ready) {
    in.not_ready[name] = {what.first, what.second, not_ready_since_ms_[name]};
  }
  in.reserved_nodes = reserved;
  in.now_ms = now_ms;
  autoscale::Plan plan = autoscaler_->Decide(in);
  idle_since_ms_.swap(in.idle_since_ms);

  for (const autoscale::Backoff& b : plan.backoffs) backoffs_[b.pool] = b;
  for (const autoscale::Cancel& c : plan.cancels) {
    auto it = requests_.find(c.request);
    if (it == requests_.end()) continue;
    log::Warn("autoscaler", c.reason, {{"request", c.request}, {"pool", it->second.spec.pool}});
    ++metrics_.cancels[it->second.spec.pool];
    // Its machines that did join are kept out of the scheduler's way until they are gone.
    for (const std::string& node : it->second.spec.nodes) removing_[node] = it->second.spec.pool;
    Queue({Action::Kind::kDelete, it->second.spec.pool, it->second.spec.nodes, "", {}});
    Queue({Action::Kind::kForget, it->second.spec.pool, {}, c.request, {}});
    requests_.erase(it);
  }
  for (autoscale::ScaleUp& up : plan.ups) {
    up.request.id = Cat(up.request.pool, "-", now_ms, "-", ++seq_);
    log::Info("autoscaler", up.reason, {{"request", up.request.id}});
    ++metrics_.scale_ups[up.request.pool];
    metrics_.nodes_added[up.request.pool] += static_cast<int64_t>(up.request.nodes.size());
    std::vector<store::Op> ops = EventsOf(up, now_ms, seq_);
    ops.insert(ops.begin(), {store::Op::Kind::kPut, Cat(kRequestsPrefix, up.request.id),
                             RequestJson(up.request), std::nullopt});
    requests_[up.request.id] = {up.request, ""};
    Queue(
        {Action::Kind::kCreate, up.request.pool, up.request.nodes, up.request.id, std::move(ops)});
  }
  for (const autoscale::ScaleDown& d : plan.downs) {
    log::Info("autoscaler", d.reason, {{"node", d.node}, {"pool", d.pool}});
    ++metrics_.scale_downs[d.pool];
    draining_[d.node] = d.pool;
  }
  metrics_.unmet_jobs = 0;
  for (const autoscale::Unmet& u : plan.unmet) {
    metrics_.unmet_jobs += static_cast<int64_t>(u.jobs.size());
  }
}

void Autoscaling::Work() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (actions_.empty()) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.tick_ms));
      if (stopping_) break;
      if (actions_.empty()) {
        for (Action& a : retry_) actions_.push_back(std::move(a));
        retry_.clear();
        continue;
      }
    }
    Action a = std::move(actions_.front());
    actions_.pop_front();
    lock.unlock();
    Do(a);
    lock.lock();
  }
}

void Autoscaling::LoadRequests() {
  absl::StatusOr<store::ListResult> list = store_.List(std::string(kRequestsPrefix));
  if (!list.ok()) return;
  std::lock_guard lock(mu_);
  for (const store::KeyValue& kv : list->items) {
    if (std::optional<autoscale::ProvisioningRequest> r = ParseRequest(kv.value)) {
      requests_[r->id] = {*r, ""};
    }
  }
}

absl::StatusOr<NodeProvider*> Autoscaling::ProviderOf(const std::string& pool_name,
                                                      NodePool* pool) {
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(pool_name);
    if (it == pools_.end()) {
      return absl::FailedPreconditionError(Cat("pool ", pool_name, " is not known (any more)"));
    }
    *pool = it->second;
  }
  auto it = providers_.find(pool_name);
  if (it != providers_.end() && provider_specs_[pool_name] == pool->spec.provider) {
    return it->second.get();
  }
  absl::StatusOr<std::unique_ptr<NodeProvider>> p =
      MakeNodeProvider(*pool, options_.local ? &*options_.local : nullptr, options_.join);
  if (!p.ok()) return p.status();
  provider_specs_[pool_name] = pool->spec.provider;
  return (providers_[pool_name] = std::move(*p)).get();
}

void Autoscaling::Do(Action& a) {
  NodePool pool;
  switch (a.kind) {
    case Action::Kind::kCreate: {
      if (absl::StatusOr<int64_t> rev = store_.Txn(a.ops); !rev.ok()) {
        log::Warn("autoscaler", "could not record a provisioning request",
                  {{"request", a.request}, {"error", rev.status().message()}});
      }
      absl::StatusOr<NodeProvider*> provider = ProviderOf(a.pool, &pool);
      absl::Status s = provider.ok() ? (*provider)->Create(pool, a.nodes) : provider.status();
      if (!s.ok()) {
        log::Warn("autoscaler", "provisioning failed",
                  {{"request", a.request}, {"error", s.message()}});
        std::lock_guard lock(mu_);
        if (auto r = requests_.find(a.request); r != requests_.end()) {
          r->second.failure = std::string(s.message());
        }
      }
      return;
    }
    case Action::Kind::kDelete: {
      absl::StatusOr<NodeProvider*> provider = ProviderOf(a.pool, &pool);
      absl::Status deleted = provider.ok() ? (*provider)->Delete(pool, a.nodes) : provider.status();
      if (!deleted.ok()) {
        // The machines may still run (and cost money): kept out of the scheduler's way, and
        // tried again on the next tick.
        log::Warn("autoscaler", "deleting machines failed; trying again",
                  {{"pool", a.pool}, {"error", deleted.message()}});
        std::lock_guard lock(mu_);
        retry_.push_back(a);
        return;
      }
      for (const std::string& node : a.nodes) {
        std::vector<store::Op> ops = {
            {store::Op::Kind::kDelete, Cat("/nodes/", node), "", std::nullopt}};
        if (store_.Get(NodeCertificates::ForgetOp(node).key).ok()) {
          ops.push_back(NodeCertificates::ForgetOp(node));
        }
        absl::StatusOr<int64_t> rev = store_.Txn(ops);
        if (rev.ok() && options_.forget_node) options_.forget_node(node, *rev);
        std::lock_guard lock(mu_);
        removing_.erase(node);
      }
      return;
    }
    case Action::Kind::kForget:
      (void)store_.Txn(
          {{store::Op::Kind::kDelete, Cat(kRequestsPrefix, a.request), "", std::nullopt}});
      return;
  }
}

}  // namespace gpucloud::server
