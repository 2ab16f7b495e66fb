#include "agent/simulated_backend.h"

#include <charconv>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

class SimulatedBackend final : public GpuBackend {
 public:
  explicit SimulatedBackend(NodeGpus gpus) : gpus_(std::move(gpus)) {}
  std::string_view Name() const override { return "simulated"; }
  absl::StatusOr<NodeGpus> Discover() override { return gpus_; }
  absl::StatusOr<std::vector<GpuSample>> Sample() override {
    ++samples_;
    std::vector<GpuSample> out;
    for (const GpuDevice& g : gpus_.gpus) {
      GpuSample s;
      s.index = g.index;
      s.gpu_util_percent = 0;
      s.mem_copy_util_percent = 0;
      s.fb_used = MiB(0);
      s.fb_free = g.memory;
      s.temperature_c = 35;
      s.power_w = 60.0;
      s.energy_mj = static_cast<uint64_t>(samples_) * 60'000;  // 60 W for 1 s per sample
      s.sm_clock_mhz = 1980;
      s.mem_clock_mhz = 2619;
      s.ecc_corrected = 0;
      s.ecc_uncorrected = 0;
      out.push_back(s);
    }
    return out;
  }

 private:
  NodeGpus gpus_;
  int64_t samples_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuBackend>> MakeSimulatedBackend(std::string_view spec,
                                                                 const GpuCatalog& catalog,
                                                                 const std::string& node_name) {
  NodeGpus node;
  node.backend = "simulated";
  node.driver_version = "simulated";
  node.cuda_driver_version = 12040;
  for (const std::string& part : SplitAny(spec, ",")) {
    size_t x = part.find('x');
    int count = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + (x == std::string::npos ? 0 : x),
                                     count);
    if (x == std::string::npos || ec != std::errc() || end != part.data() + x || count < 1 ||
        count > 64) {
      return absl::InvalidArgumentError(
          Cat("--simulate: \"", part, "\" is not COUNTxTYPE such as 8xH100 (1 to 64 GPUs)"));
    }
    std::vector<const GpuType*> types = catalog.Resolve(part.substr(x + 1));
    if (types.empty()) {
      return absl::InvalidArgumentError(Cat("--simulate: \"", part, "\": unknown GPU type (known: ",
                                            catalog.KnownNames(), ")"));
    }
    const GpuType* type = types.back();  // a family names its largest model ("a100": 80GB)
    for (int i = 0; i < count; ++i) {
      GpuDevice g;
      g.index = static_cast<int>(node.gpus.size());
      g.uuid = node_name.empty() ? Cat("GPU-simulated-", g.index) : Cat("GPU-sim-", node_name, "-", g.index);
      g.name = Cat("Simulated ", type->name);
      g.pci_bus_id = fmt::format("00000000:{:02X}:00.0", 0x10 + g.index);
      g.memory = type->memory;
      g.catalog_type = type->name;
      node.gpus.push_back(std::move(g));
    }
  }
  if (node.gpus.empty()) return absl::InvalidArgumentError("--simulate: no GPUs given");
  return std::make_unique<SimulatedBackend>(std::move(node));
}

}  // namespace gpucloud::agent
