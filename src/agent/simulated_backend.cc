#include "agent/simulated_backend.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

class SimulatedBackend final : public GpuBackend {
 public:
  // `mig`: the MIG instances of each GPU in MIG mode, as samples show them (their memory).
  SimulatedBackend(NodeGpus gpus, std::map<int, std::vector<GpuSample::MigInstance>> mig)
      : gpus_(std::move(gpus)), mig_(std::move(mig)), faults_(gpus_.gpus.size()) {
    // Simulated wiring: NV18 (an NVSwitch) within an NVLink island, SYS otherwise.
    const size_t n = gpus_.gpus.size();
    gpus_.topology.assign(n, std::vector<std::string>(n));
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        int a = gpus_.gpus[i].nvlink_island, b = gpus_.gpus[j].nvlink_island;
        gpus_.topology[i][j] = i == j ? "X" : a >= 0 && a == b ? "NV18" : "SYS";
      }
    }
  }
  std::string_view Name() const override { return "simulated"; }
  absl::StatusOr<NodeGpus> Discover() override { return gpus_; }
  absl::StatusOr<std::vector<GpuSample>> Sample() override {
    std::lock_guard lock(mu_);
    ++samples_;
    std::vector<GpuSample> out;
    for (const GpuDevice& g : gpus_.gpus) {
      const Faults& f = faults_[g.index];
      if (f.lost) continue;
      const bool busy = busy_.contains(g.index);
      GpuSample s;
      s.index = g.index;
      s.gpu_util_percent = busy ? kSimulatedBusyUtilization : 0;
      s.mem_copy_util_percent = busy ? 40 : 0;
      s.fb_used = busy ? MiB(g.memory.raw() / 2) : MiB(0);
      s.fb_free = MiB(g.memory.raw() - s.fb_used->raw());
      s.temperature_c = f.temperature_c.value_or(35);
      s.power_w = 60.0;
      s.energy_mj = static_cast<uint64_t>(samples_ - f.reset_at) * 60'000;  // 60 W, 1 s a sample
      s.sm_clock_mhz = 1980;
      s.mem_clock_mhz = 2619;
      s.ecc_corrected = f.ecc_corrected;
      s.ecc_uncorrected = f.ecc_uncorrected;
      s.remapped_rows = f.remapped_rows;
      // Remapped rows injected count as correctable ones; a remapping never fails here.
      s.remapped_rows_correctable = f.remapped_rows;
      s.remapped_rows_uncorrectable = 0;
      s.row_remap_failed = false;
      s.memory_temperature_c = *s.temperature_c + 5;  // HBM runs a little warmer
      s.enc_util_percent = 0;
      s.dec_util_percent = 0;
      s.pcie_replays = 0;
      // Idle NVLinks still carry link-maintenance traffic: 1 KiB a sample.
      if (g.nvlink_island >= 0) s.nvlink_kib = static_cast<uint64_t>(samples_ - f.reset_at);
      s.last_xid = f.last_xid;
      s.gr_engine_active = busy ? 0.9 : 0.0;  // as GPU_UTIL says
      s.tensor_active = busy ? 0.5 : 0.0;
      if (auto m = mig_.find(g.index); m != mig_.end()) s.mig = m->second;
      for (GpuSample::MigInstance& i : s.mig) {
        if (!busy || !i.fb_free) continue;
        MiB all = MiB(i.fb_free->raw() + i.fb_used.value_or(MiB(0)).raw());
        i.fb_used = MiB(all.raw() / 2);
        i.fb_free = MiB(all.raw() - i.fb_used->raw());
        i.gr_engine_active = 0.9;
        i.tensor_active = 0.5;
      }
      out.push_back(s);
    }
    return out;
  }
  void SetBusyGpus(const std::set<int>& gpus) override {
    std::lock_guard lock(mu_);
    busy_ = gpus;
  }
  std::vector<XidEvent> TakeXids() override {
    std::lock_guard lock(mu_);
    return std::exchange(xids_, {});
  }
  absl::Status Inject(std::string_view fault, int gpu, int64_t value) override {
    std::lock_guard lock(mu_);
    if (gpu < 0 || gpu >= static_cast<int>(faults_.size())) {
      return absl::InvalidArgumentError(
          Cat("gpu: ", gpu, " is not a GPU index here (0 to ", faults_.size() - 1, ")"));
    }
    Faults& f = faults_[gpu];
    if (fault == "xid") {
      xids_.push_back({gpu, static_cast<int>(value)});
      f.last_xid = static_cast<int>(value);
    } else if (fault == "temperature") {
      f.temperature_c = static_cast<int>(value);
    } else if (fault == "ecc") {
      f.ecc_uncorrected += static_cast<uint64_t>(std::max<int64_t>(value, 1));
    } else if (fault == "ecc-corrected") {
      f.ecc_corrected += static_cast<uint64_t>(std::max<int64_t>(value, 1));
    } else if (fault == "remap") {
      f.remapped_rows += static_cast<uint64_t>(std::max<int64_t>(value, 1));
    } else if (fault == "lost") {
      f.lost = true;
    } else if (fault == "reset") {
      f = Faults{};
      f.reset_at = samples_;
    } else {
      return absl::InvalidArgumentError(
          Cat("fault: \"", fault,
              "\" is not xid, temperature, ecc, ecc-corrected, remap, lost or reset"));
    }
    return absl::OkStatus();
  }

 private:
  struct Faults {
    std::optional<int> temperature_c;
    uint64_t ecc_uncorrected = 0;
    uint64_t ecc_corrected = 0;  // precursors: the risk model's evidence
    uint64_t remapped_rows = 0;
    bool lost = false;
    int last_xid = 0;      // DCGM_FI_DEV_XID_ERRORS: the last one injected
    int64_t reset_at = 0;  // the sample count when the GPU was last reset
  };
  NodeGpus gpus_;
  const std::map<int, std::vector<GpuSample::MigInstance>> mig_;
  std::mutex mu_;
  int64_t samples_ = 0;
  std::vector<Faults> faults_;
  std::vector<XidEvent> xids_;
  std::set<int> busy_;  // the GPUs tasks hold
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuBackend>> MakeSimulatedBackend(std::string_view spec,
                                                                 const GpuCatalog& catalog,
                                                                 const std::string& node_name) {
  NodeGpus node;
  std::map<int, std::vector<GpuSample::MigInstance>> mig;
  node.backend = "simulated";
  node.driver_version = "simulated";
  node.cuda_driver_version = 12040;
  // Appends one GPU of `type`.
  auto add = [&](const GpuType& type, int island, const std::vector<MigPlacement>& layout) {
    GpuDevice g;
    g.index = static_cast<int>(node.gpus.size());
    g.uuid = node_name.empty() ? Cat("GPU-simulated-", g.index)
                               : Cat("GPU-sim-", node_name, "-", g.index);
    g.name = Cat("Simulated ", type.name);
    g.pci_bus_id = fmt::format("00000000:{:02X}:00.0", 0x10 + g.index);
    g.memory = type.memory;
    g.catalog_type = type.name;
    g.nvlink_island = island;
    g.mig_enabled = !layout.empty();
    g.mig_layout = layout;
    for (const MigPlacement& m : layout)
      g.mig_uuid_by_start[m.start] = Cat("MIG-", g.uuid.substr(4), "-", m.start);
    // GPU instance ids as NVML numbers them: in creation order (here, the layout's), from 1.
    for (size_t i = 0; i < layout.size(); ++i) {
      GpuSample::MigInstance instance;
      instance.gpu_instance_id = static_cast<int>(i) + 1;
      instance.profile = layout[i].profile;
      instance.start = layout[i].start;
      instance.fb_used = MiB(0);
      for (const MigProfile& p : type.mig_profiles) {
        if (p.name == layout[i].profile) instance.fb_free = p.memory;
      }
      instance.gr_engine_active = 0.0;
      instance.tensor_active = 0.0;
      mig[g.index].push_back(std::move(instance));
    }
    node.gpus.push_back(std::move(g));
  };
  std::string path(spec);
  if (path.ends_with(".yaml") || path.ends_with(".yml")) {
    // A file: per group of GPUs their type, count, NVLink island and MIG layout.
    YAML::Node doc;
    try {
      doc = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(Cat("--simulate: ", path, ": ", e.what()));
    }
    if (!doc.IsMap() || !doc["gpus"] || !doc["gpus"].IsSequence()) {
      return absl::InvalidArgumentError(Cat("--simulate: ", path, ": gpus: a list is required"));
    }
    for (size_t i = 0; i < doc["gpus"].size(); ++i) {
      const YAML::Node& group = doc["gpus"][i];
      std::string where = Cat("--simulate: ", path, ": gpus[", i, "]");
      for (auto it = group.begin(); group.IsMap() && it != group.end(); ++it) {
        std::string key = it->first.Scalar();
        if (key != "type" && key != "count" && key != "nvlinkIsland" && key != "mig") {
          return absl::InvalidArgumentError(Cat(where, ".", key, ": unknown field"));
        }
      }
      if (!group.IsMap() || !group["type"])
        return absl::InvalidArgumentError(Cat(where, ".type: is required"));
      std::vector<const GpuType*> types = catalog.Resolve(group["type"].Scalar());
      if (types.empty()) {
        return absl::InvalidArgumentError(Cat(where, ".type: unknown GPU type \"",
                                              group["type"].Scalar(),
                                              "\" (known: ", catalog.KnownNames(), ")"));
      }
      const GpuType* type = types.back();
      int count = 1, island = -1;
      try {
        if (group["count"]) count = group["count"].as<int>();
        if (group["nvlinkIsland"]) island = group["nvlinkIsland"].as<int>();
      } catch (const YAML::Exception&) {
        return absl::InvalidArgumentError(Cat(where, ": count and nvlinkIsland are integers"));
      }
      if (count < 1 || count > 64)
        return absl::InvalidArgumentError(Cat(where, ".count: 1 to 64, got ", count));
      std::vector<MigPlacement> layout;
      if (group["mig"]) {
        if (!group["mig"].IsSequence()) {
          return absl::InvalidArgumentError(
              Cat(where, ".mig: a list of PROFILE@START, e.g. [3g.40gb@0, 3g.40gb@4]"));
        }
        for (size_t k = 0; k < group["mig"].size(); ++k) {
          std::string m = group["mig"][k].Scalar();
          size_t at = m.find('@');
          int start = -1;
          if (at != std::string::npos) {
            auto [e, ec] = std::from_chars(m.data() + at + 1, m.data() + m.size(), start);
            if (ec != std::errc() || e != m.data() + m.size()) start = -1;
          }
          if (start < 0) {
            return absl::InvalidArgumentError(
                Cat(where, ".mig[", k, "]: \"", m, "\" is not PROFILE@START"));
          }
          layout.push_back({m.substr(0, at), start});
        }
        if (absl::Status st = ValidateMigLayout(*type, layout); !st.ok()) {
          return absl::InvalidArgumentError(Cat(where, ".mig: ", st.message()));
        }
      }
      for (int c = 0; c < count; ++c) add(*type, island, layout);
    }
    if (node.gpus.empty())
      return absl::InvalidArgumentError(Cat("--simulate: ", path, ": no GPUs given"));
    return std::make_unique<SimulatedBackend>(std::move(node), std::move(mig));
  }
  for (const std::string& part : SplitAny(spec, ",")) {
    size_t x = part.find('x');
    int count = 0;
    auto [end, ec] =
        std::from_chars(part.data(), part.data() + (x == std::string::npos ? 0 : x), count);
    if (x == std::string::npos || ec != std::errc() || end != part.data() + x || count < 1 ||
        count > 64) {
      return absl::InvalidArgumentError(
          Cat("--simulate: \"", part, "\" is not COUNTxTYPE such as 8xH100 (1 to 64 GPUs)"));
    }
    std::vector<const GpuType*> types = catalog.Resolve(part.substr(x + 1));
    if (types.empty()) {
      return absl::InvalidArgumentError(
          Cat("--simulate: \"", part, "\": unknown GPU type (known: ", catalog.KnownNames(), ")"));
    }
    const GpuType* type = types.back();  // a family names its largest model ("a100": 80GB)
    for (int i = 0; i < count; ++i) add(*type, -1, {});
  }
  if (node.gpus.empty()) return absl::InvalidArgumentError("--simulate: no GPUs given");
  return std::make_unique<SimulatedBackend>(std::move(node), std::move(mig));
}

}  // namespace gpucloud::agent
