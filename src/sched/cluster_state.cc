#include "sched/cluster_state.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/text.h"

namespace gpucloud::sched {
namespace {

int32_t MigSlicesUsed(const GpuType* type, const std::vector<MigPlacement>& layout) {
  int32_t used = 0;
  for (const MigPlacement& m : layout) {
    if (const MigProfile* p = type->FindMigProfile(m.profile)) used += p->memory_slices;
  }
  return used;
}

// Where to put a new instance of `profile`: the free start that leaves the most room for every
// other profile (the number of places each could still go, summed), highest start on ties.
// So a 3g.40gb goes to slice 4 and a later 4g.40gb still fits at slice 0.
int ChooseMigStart(const GpuType& type, const std::vector<MigPlacement>& layout,
                   const MigProfile& profile, const std::vector<int>& starts) {
  int best = starts.front();
  int best_room = -1;
  std::vector<MigPlacement> trial = layout;
  trial.push_back({profile.name, 0});
  for (int start : starts) {
    trial.back().start = start;
    int room = 0;
    for (const MigProfile& other : type.mig_profiles) {
      room += static_cast<int>(FreeMigStarts(type, trial, other).size());
    }
    if (room >= best_room) {
      best_room = room;
      best = start;
    }
  }
  return best;
}

// Node-set ids and allocation stamps, from one counter: never equal across states.
uint64_t NextStamp() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

ClusterState::ClusterState(std::vector<Node> nodes, const GpuCatalog& catalog)
    : nodes_(std::move(nodes)),
      catalog_(&catalog),
      use_(nodes_.size()),
      nodes_id_(NextStamp()),
      shape_id_(nodes_id_),
      version_(NextStamp()),
      free_whole_(nodes_.size()),
      free_slots_(nodes_.size()) {
  size_t max_gpus = 0;
  MilliGpu* last_count = nullptr;  // most nodes have one type: skip the map lookup for runs
  const std::string* last_type = nullptr;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    use_[i].gpus.resize(nodes_[i].gpus.size());
    max_gpus = std::max(max_gpus, nodes_[i].gpus.size());
    for (const Gpu& g : nodes_[i].gpus) {
      if (!g.healthy) continue;
      if (last_type == nullptr || *last_type != g.type) {
        last_type = &g.type;
        last_count = &healthy_by_type_[g.type];
      }
      *last_count += WholeGpus(1);
    }
  }
  by_free_.resize(max_gpus + 1);
  for (NodeIndex n = 0; n < node_count(); ++n) {
    (void)topology_.AddNode(Cat("#", n), nodes_[n].topology);  // unique by construction
  }
  for (NodeIndex n = 0; n < node_count(); ++n) {
    free_whole_[n] = CountFreeWholeGpus(n);
    total_free_whole_ += free_whole_[n];
    by_free_[free_whole_[n]].insert(n);
    free_slots_[n] = std::max(0, nodes_[n].max_tasks);
  }
}

ReplicaPlacement WholeNodeHold(const Node& node, NodeIndex n) {
  ReplicaPlacement hold{.task = "hold", .node = n, .cpu = node.cpu, .memory = node.memory};
  for (int32_t g = 0; g < static_cast<int32_t>(node.gpus.size()); ++g) {
    if (!node.gpus[g].mig_enabled) hold.gpus.push_back({.gpu = g});
  }
  return hold;
}

int64_t LastCheckpointMs(const Allocation& a, int64_t now_ms) {
  int64_t last = std::max(a.start_ms, a.last_checkpoint_ms);
  if (a.checkpoint_interval_ms > 0 && now_ms > a.start_ms) {
    const int64_t periods = (now_ms - a.start_ms) / a.checkpoint_interval_ms;
    last = std::max(last, a.start_ms + periods * a.checkpoint_interval_ms);
  }
  return last;
}

absl::Status ClusterState::SetNodeGpusHealthy(NodeIndex n, bool healthy) {
  if (!healthy && use_[n].tasks > 0) {
    return absl::FailedPreconditionError(
        Cat("node ", nodes_[n].name, " still holds replicas; release them first"));
  }
  bool changed = false;
  for (Gpu& g : nodes_[n].gpus) {
    if (g.healthy == healthy) continue;
    g.healthy = healthy;
    healthy_by_type_[g.type] += healthy ? WholeGpus(1) : WholeGpus(-1);
    changed = true;
  }
  if (!changed) return absl::OkStatus();
  UpdateIndex(n);
  nodes_id_ = NextStamp();
  return absl::OkStatus();
}

const std::set<NodeIndex>& ClusterState::NodesWithFreeWholeGpus(int32_t free) const {
  static const std::set<NodeIndex> kNone;
  if (free < 0 || free >= static_cast<int32_t>(by_free_.size())) return kNone;
  return by_free_[free];
}

void ClusterState::UpdateIndex(NodeIndex n) {
  free_slots_[n] = std::max(0, nodes_[n].max_tasks - use_[n].tasks);
  int32_t now = CountFreeWholeGpus(n);
  if (now == free_whole_[n]) return;
  by_free_[free_whole_[n]].erase(n);
  by_free_[now].insert(n);
  total_free_whole_ += now - free_whole_[n];
  free_whole_[n] = now;
}

const GpuType* ClusterState::TypeOf(const Gpu& gpu) const { return catalog_->Find(gpu.type); }

bool ClusterState::TypeAccepted(const Gpu& gpu, const GpuRequest& req) const {
  return req.types.empty() ||
         std::find(req.types.begin(), req.types.end(), gpu.type) != req.types.end();
}

MiB ClusterState::SharedMemoryBound(const Gpu& gpu, const GpuRequest& req) const {
  if (req.memory.raw() > 0) return req.memory;
  // Proportional to the fraction, rounded down: shares whose fractions sum to at most one GPU
  // then never sum past its memory (the sum of floors is at most the floor of the sum), and a
  // share gets under a MiB less than its exact part. Rounded up, 0.3 + 0.7 of a 16 GiB GPU
  // asked for 4,916 + 11,469 MiB and could not run together.
  return MiB(gpu.memory.raw() * req.fraction.raw() / kMilliPerUnit);
}

std::optional<std::vector<GpuAssignment>> ClusterState::FitReplica(
    NodeIndex n, const ReplicaRequest& req) const {
  const Node& node = nodes_[n];
  const NodeUse& use = use_[n];
  if (use.tasks >= node.max_tasks) return std::nullopt;
  if (use.cpu + CountedCpu(req.cpu) > node.cpu ||
      use.memory + CountedMemory(req.memory) > node.memory) {
    return std::nullopt;
  }
  switch (req.gpu.mode) {
    case GpuMode::kNone:
      return std::vector<GpuAssignment>{};
    case GpuMode::kWhole:
      return FitWhole(n, req.gpu);
    case GpuMode::kMig:
      return FitMig(n, req.gpu);
    case GpuMode::kShared:
      return FitShared(n, req.gpu);
  }
  return std::nullopt;
}

std::optional<std::vector<GpuAssignment>> ClusterState::FitWhole(NodeIndex n,
                                                                 const GpuRequest& req) const {
  const Node& node = nodes_[n];
  if (free_whole_[n] < req.count) return std::nullopt;  // the common case, in O(1)
  // Free GPUs per NVLink island (-1, no NVLink, counts as one island per GPU).
  std::map<int, std::vector<int32_t>> islands;
  int32_t free = 0;
  for (int32_t g = 0; g < static_cast<int32_t>(node.gpus.size()); ++g) {
    const Gpu& gpu = node.gpus[g];
    if (!gpu.healthy || gpu.mig_enabled || use_[n].gpus[g].mode != GpuMode::kNone) continue;
    if (!TypeAccepted(gpu, req)) continue;
    islands[gpu.nvlink_island < 0 ? -1 - g : gpu.nvlink_island].push_back(g);
    ++free;
  }
  if (free < req.count) return std::nullopt;
  std::vector<const std::vector<int32_t>*> order;
  for (const auto& [id, gpus] : islands) order.push_back(&gpus);
  // Best fit: the smallest island that holds the whole request; otherwise span as few islands
  // as possible, largest first. Ties keep island order, so the result is deterministic.
  const std::vector<int32_t>* best = nullptr;
  for (const std::vector<int32_t>* island : order) {
    if (static_cast<int32_t>(island->size()) >= req.count &&
        (best == nullptr || island->size() < best->size())) {
      best = island;
    }
  }
  std::vector<int32_t> chosen;
  if (best != nullptr) {
    chosen.assign(best->begin(), best->begin() + req.count);
  } else {
    std::stable_sort(order.begin(), order.end(),
                     [](auto* a, auto* b) { return a->size() > b->size(); });
    for (const std::vector<int32_t>* island : order) {
      for (int32_t g : *island) {
        if (static_cast<int32_t>(chosen.size()) < req.count) chosen.push_back(g);
      }
    }
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<GpuAssignment> out;
  for (int32_t g : chosen) out.push_back({.gpu = g, .mode = GpuMode::kWhole});
  return out;
}

std::optional<std::vector<GpuAssignment>> ClusterState::FitMig(NodeIndex n,
                                                               const GpuRequest& req) const {
  const Node& node = nodes_[n];
  struct Candidate {
    int32_t gpu;
    int32_t used;
    const GpuType* type;
    const MigProfile* profile;
  };
  std::vector<Candidate> candidates;
  for (int32_t g = 0; g < static_cast<int32_t>(node.gpus.size()); ++g) {
    const Gpu& gpu = node.gpus[g];
    if (!gpu.healthy || !gpu.mig_enabled || !TypeAccepted(gpu, req)) continue;
    const GpuType* type = TypeOf(gpu);
    const MigProfile* profile = type ? type->FindMigProfile(req.mig_profile) : nullptr;
    if (profile == nullptr) continue;
    candidates.push_back({g, MigSlicesUsed(type, use_[n].gpus[g].mig), type, profile});
  }
  // Best fit: the fullest GPU first, keeping emptier GPUs free for large instances.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.used > b.used; });
  std::vector<GpuAssignment> out;
  for (const Candidate& c : candidates) {
    std::vector<MigPlacement> layout = use_[n].gpus[c.gpu].mig;
    while (static_cast<int32_t>(out.size()) < req.count) {
      std::vector<int> starts = FreeMigStarts(*c.type, layout, *c.profile);
      if (starts.empty()) break;
      MigPlacement m{c.profile->name, ChooseMigStart(*c.type, layout, *c.profile, starts)};
      layout.push_back(m);
      out.push_back({.gpu = c.gpu, .mode = GpuMode::kMig, .mig = m});
    }
    if (static_cast<int32_t>(out.size()) == req.count) return out;
  }
  return std::nullopt;
}

std::optional<std::vector<GpuAssignment>> ClusterState::FitShared(NodeIndex n,
                                                                  const GpuRequest& req) const {
  const Node& node = nodes_[n];
  std::optional<GpuAssignment> best;
  MilliGpu best_used(-1);
  for (int32_t g = 0; g < static_cast<int32_t>(node.gpus.size()); ++g) {
    const Gpu& gpu = node.gpus[g];
    const GpuUse& u = use_[n].gpus[g];
    if (!gpu.healthy || gpu.mig_enabled || !TypeAccepted(gpu, req)) continue;
    if (u.mode != GpuMode::kNone && (u.mode != GpuMode::kShared || u.sharing != req.sharing)) {
      continue;
    }
    MiB memory = SharedMemoryBound(gpu, req);
    if (u.shared_fraction + req.fraction > WholeGpus(1)) continue;
    if (u.shared_memory + memory > gpu.memory) continue;
    if (u.shared_fraction > best_used) {  // best fit: the fullest shared GPU
      best_used = u.shared_fraction;
      best = GpuAssignment{.gpu = g,
                           .mode = GpuMode::kShared,
                           .fraction = req.fraction,
                           .memory = memory,
                           .sharing = req.sharing};
    }
  }
  if (!best) return std::nullopt;
  return std::vector<GpuAssignment>{*best};
}

absl::Status ClusterState::Apply(const ReplicaPlacement& r, std::vector<NodeUse>& use) const {
  auto fail = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        Cat("replica ", r.task, "[", r.replica, "] on ", nodes_[r.node].name, ": ", why));
  };
  if (r.node < 0 || r.node >= node_count()) {
    return absl::FailedPreconditionError(
        Cat("replica ", r.task, "[", r.replica, "]: no node ", r.node));
  }
  const Node& node = nodes_[r.node];
  NodeUse nu = use[r.node];  // a copy: on any failure, `use` stays as it was
  if (nu.tasks >= node.max_tasks) {
    return fail(Cat("no task slot left (the node runs at most ", node.max_tasks, " tasks)"));
  }
  const MilliCpu cpu = CountedCpu(r.cpu);
  const MiB memory = CountedMemory(r.memory);
  if (nu.cpu + cpu > node.cpu) return fail("not enough CPU");
  if (nu.memory + memory > node.memory) return fail("not enough memory");
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    const GpuAssignment& a = r.gpus[i];
    if (a.gpu < 0 || a.gpu >= static_cast<int32_t>(node.gpus.size())) {
      return fail(Cat("no GPU ", a.gpu));
    }
    for (size_t k = 0; k < i; ++k) {
      if (r.gpus[k].gpu == a.gpu && a.mode != GpuMode::kMig)
        return fail(Cat("GPU ", a.gpu, " twice"));
    }
    const Gpu& gpu = node.gpus[a.gpu];
    GpuUse& u = nu.gpus[a.gpu];
    if (!gpu.healthy) return fail(Cat("GPU ", a.gpu, " is unhealthy"));
    switch (a.mode) {
      case GpuMode::kWhole:
        if (gpu.mig_enabled) return fail(Cat("GPU ", a.gpu, " is MIG-enabled"));
        if (u.mode != GpuMode::kNone) return fail(Cat("GPU ", a.gpu, " is in use"));
        u.mode = GpuMode::kWhole;
        break;
      case GpuMode::kMig: {
        if (!gpu.mig_enabled) return fail(Cat("GPU ", a.gpu, " is not MIG-enabled"));
        const GpuType* type = TypeOf(gpu);
        if (type == nullptr) return fail(Cat("GPU ", a.gpu, " has no MIG profiles"));
        std::vector<MigPlacement> layout = u.mig;
        layout.push_back(a.mig);
        if (absl::Status s = ValidateMigLayout(*type, layout); !s.ok()) {
          return fail(Cat("GPU ", a.gpu, ": ", s.message()));
        }
        u.mig = std::move(layout);
        u.mode = GpuMode::kMig;
        break;
      }
      case GpuMode::kShared:
        if (gpu.mig_enabled) return fail(Cat("GPU ", a.gpu, " is MIG-enabled"));
        if (u.mode == GpuMode::kWhole || u.mode == GpuMode::kMig ||
            (u.mode == GpuMode::kShared && u.sharing != a.sharing)) {
          return fail(Cat("GPU ", a.gpu, " is not shareable this way"));
        }
        if (a.fraction.raw() <= 0 || u.shared_fraction + a.fraction > WholeGpus(1)) {
          return fail(Cat("GPU ", a.gpu, " has no room for a share of ", a.fraction.raw(), "m"));
        }
        if (u.shared_memory + a.memory > gpu.memory) {
          return fail(Cat("GPU ", a.gpu, " has not enough memory for the share"));
        }
        u.mode = GpuMode::kShared;
        u.sharing = a.sharing;
        u.shared_fraction += a.fraction;
        u.shared_memory += a.memory;
        ++u.shared_replicas;
        break;
      case GpuMode::kNone:
        return fail("GPU assignment without a mode");
    }
  }
  nu.cpu += cpu;
  nu.memory += memory;
  ++nu.tasks;
  use[r.node] = std::move(nu);
  return absl::OkStatus();
}

void ClusterState::Remove(const ReplicaPlacement& r) {
  RemoveUse(r);
  UpdateIndex(r.node);
}

void ClusterState::RemoveUse(const ReplicaPlacement& r) {
  NodeUse& nu = use_[r.node];
  nu.cpu -= CountedCpu(r.cpu);
  nu.memory -= CountedMemory(r.memory);
  --nu.tasks;
  for (const GpuAssignment& a : r.gpus) {
    GpuUse& u = nu.gpus[a.gpu];
    switch (a.mode) {
      case GpuMode::kWhole:
        u.mode = GpuMode::kNone;
        break;
      case GpuMode::kMig:
        std::erase(u.mig, a.mig);
        if (u.mig.empty()) u.mode = GpuMode::kNone;
        break;
      case GpuMode::kShared:
        u.shared_fraction -= a.fraction;
        u.shared_memory -= a.memory;
        if (--u.shared_replicas == 0) u = GpuUse{};
        break;
      case GpuMode::kNone:
        break;
    }
  }
}

absl::Status ClusterState::Commit(const Allocation& allocation) {
  if (allocations_.contains(allocation.job)) {
    return absl::AlreadyExistsError(Cat("job ", allocation.job, " already holds an allocation"));
  }
  for (size_t i = 0; i < allocation.replicas.size(); ++i) {
    if (absl::Status s = Apply(allocation.replicas[i], use_); !s.ok()) {
      for (size_t k = i; k-- > 0;) Remove(allocation.replicas[k]);  // all or nothing
      return s;
    }
    UpdateIndex(allocation.replicas[i].node);
  }
  allocations_.emplace(allocation.job, allocation);
  version_ = NextStamp();
  CountQueueUsage(allocation, +1);
  return absl::OkStatus();
}

MilliGpu GpuShareOf(const GpuAssignment& g, const GpuType* type) {
  switch (g.mode) {
    case GpuMode::kWhole:
      return WholeGpus(1);
    case GpuMode::kShared:
      return g.fraction;
    case GpuMode::kMig: {
      const MigProfile* p = type ? type->FindMigProfile(g.mig.profile) : nullptr;
      int64_t slices = p ? p->compute_slices : std::max(1, std::atoi(g.mig.profile.c_str()));
      slices = std::min<int64_t>(slices, kMigComputeSlices);
      return MilliGpu((slices * kMilliPerUnit + kMigComputeSlices - 1) / kMigComputeSlices);
    }
    case GpuMode::kNone:
      break;
  }
  return MilliGpu(0);
}

MilliGpu ClusterState::ShareOf(NodeIndex n, const GpuAssignment& g) const {
  return GpuShareOf(g, TypeOf(nodes_[n].gpus[g.gpu]));
}

std::map<std::string, MilliGpu> ClusterState::UsageByType(const Allocation& a) const {
  std::map<std::string, MilliGpu> out;
  for (const ReplicaPlacement& r : a.replicas) {
    for (const GpuAssignment& g : r.gpus) {
      const std::string& type = nodes_[r.node].gpus[g.gpu].type;
      MilliGpu amount = ShareOf(r.node, g);
      out[type] += amount;
      out[std::string(kAnyGpuType)] += amount;
    }
  }
  return out;
}

void ClusterState::CountQueueUsage(const Allocation& a, int sign) {
  if (a.placeholder) return;  // not a job
  std::map<std::string, MilliGpu>& q = queue_usage_[a.queue];
  for (const auto& [type, amount] : UsageByType(a)) {
    q[type] += sign > 0 ? amount : MilliGpu(0) - amount;
  }
}

absl::Status ClusterState::Release(const std::string& job) {
  auto it = allocations_.find(job);
  if (it == allocations_.end()) return absl::NotFoundError(Cat("job ", job, " holds nothing"));
  for (const ReplicaPlacement& r : it->second.replicas) Remove(r);
  CountQueueUsage(it->second, -1);
  allocations_.erase(it);
  version_ = NextStamp();
  return absl::OkStatus();
}

int32_t ClusterState::CountFreeWholeGpus(NodeIndex n) const {
  int32_t free = 0;
  for (size_t g = 0; g < nodes_[n].gpus.size(); ++g) {
    const Gpu& gpu = nodes_[n].gpus[g];
    if (gpu.healthy && !gpu.mig_enabled && use_[n].gpus[g].mode == GpuMode::kNone) ++free;
  }
  return free;
}

MilliGpu ClusterState::FreeShare(NodeIndex n, int32_t g) const {
  const Gpu& gpu = nodes_[n].gpus[g];
  const GpuUse& u = use_[n].gpus[g];
  if (!gpu.healthy || gpu.mig_enabled) return MilliGpu(0);
  if (u.mode == GpuMode::kNone) return WholeGpus(1);
  if (u.mode == GpuMode::kShared) return WholeGpus(1) - u.shared_fraction;
  return MilliGpu(0);
}

MilliCpu ClusterState::FreeCpu(NodeIndex n) const { return nodes_[n].cpu - use_[n].cpu; }
MiB ClusterState::FreeMemory(NodeIndex n) const { return nodes_[n].memory - use_[n].memory; }

absl::Status ClusterState::CheckInvariants() const {
  std::vector<NodeUse> fresh(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) fresh[i].gpus.resize(nodes_[i].gpus.size());
  for (const auto& [job, a] : allocations_) {
    for (const ReplicaPlacement& r : a.replicas) {
      if (absl::Status s = Apply(r, fresh); !s.ok()) {
        return absl::InternalError(Cat("job ", job, " over-commits: ", s.message()));
      }
    }
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const NodeUse& a = fresh[n];
    const NodeUse& b = use_[n];
    bool same = a.cpu == b.cpu && a.memory == b.memory && a.tasks == b.tasks;
    for (size_t g = 0; same && g < a.gpus.size(); ++g) {
      const GpuUse& x = a.gpus[g];
      const GpuUse& y = b.gpus[g];
      std::vector<MigPlacement> mx = x.mig, my = y.mig;
      auto by_start = [](const MigPlacement& p, const MigPlacement& q) {
        return p.start < q.start;
      };
      std::sort(mx.begin(), mx.end(), by_start);
      std::sort(my.begin(), my.end(), by_start);
      same = x.mode == y.mode && mx == my && x.shared_fraction == y.shared_fraction &&
             x.shared_memory == y.shared_memory && x.shared_replicas == y.shared_replicas;
    }
    same = same && free_slots_[n] == std::max(0, nodes_[n].max_tasks - a.tasks) &&
           free_whole_[n] == CountFreeWholeGpus(static_cast<NodeIndex>(n)) &&
           by_free_[free_whole_[n]].contains(static_cast<NodeIndex>(n));
    if (!same) return absl::InternalError(Cat("bookkeeping of node ", nodes_[n].name, " drifted"));
  }
  int64_t free_whole = 0;
  for (int32_t f : free_whole_) free_whole += f;
  if (free_whole != total_free_whole_) {
    return absl::InternalError(
        Cat("free whole GPUs counted ", total_free_whole_, ", are ", free_whole));
  }
  std::map<std::string, std::map<std::string, MilliGpu>> by_queue;
  for (const auto& [job, a] : allocations_) {
    if (a.placeholder) continue;
    for (const auto& [type, amount] : UsageByType(a)) by_queue[a.queue][type] += amount;
  }
  for (const auto& [queue, types] : queue_usage_) {
    for (const auto& [type, amount] : types) {
      MilliGpu want;
      if (auto q = by_queue.find(queue); q != by_queue.end()) {
        if (auto t = q->second.find(type); t != q->second.end()) want = t->second;
      }
      if (want != amount) return absl::InternalError(Cat("usage of queue ", queue, " drifted"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpucloud::sched
