#include "agent/exporter.h"

#include <functional>
#include <optional>

#include "core/prom_text.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

// A metric of dcgm-exporter's: its GPU-level reading and, for the readings NVML gives per MIG
// instance, the instance's (then a GPU in MIG mode shows one series per instance instead).
struct Metric {
  const char* name;
  const char* type;
  const char* help;
  std::function<std::optional<double>(const GpuSample&)> value;
  std::function<std::optional<double>(const GpuSample::MigInstance&)> instance_value = nullptr;
};

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}
std::optional<double> AsDouble(const std::optional<MiB>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(v->raw());
}

// In default-counters.csv's order (ECC and profiling fields where dcgm-exporter's other
// lists put them), with its names, types and help texts.
const std::vector<Metric>& Metrics() {
  using S = GpuSample;
  using I = GpuSample::MigInstance;
  static const std::vector<Metric> kMetrics = {
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
       [](const S& s) { return AsDouble(s.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
       [](const S& s) { return AsDouble(s.mem_clock_mhz); }},
      {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).",
       [](const S& s) { return AsDouble(s.memory_temperature_c); }},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
       [](const S& s) { return AsDouble(s.temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
       [](const S& s) { return s.power_w; }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since boot (in mJ).",
       [](const S& s) { return AsDouble(s.energy_mj); }},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
       [](const S& s) { return AsDouble(s.pcie_replays); }},
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
       [](const S& s) { return AsDouble(s.gpu_util_percent); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
       [](const S& s) { return AsDouble(s.mem_copy_util_percent); }},
      {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).",
       [](const S& s) { return AsDouble(s.enc_util_percent); }},
      {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).",
       [](const S& s) { return AsDouble(s.dec_util_percent); }},
      {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
       [](const S& s) { return AsDouble(s.last_xid); }},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
       [](const S& s) { return AsDouble(s.fb_free); },
       [](const I& i) { return AsDouble(i.fb_free); }},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
       [](const S& s) { return AsDouble(s.fb_used); },
       [](const I& i) { return AsDouble(i.fb_used); }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
       "Total number of single-bit volatile ECC errors.",
       [](const S& s) { return AsDouble(s.ecc_corrected); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
       "Total number of double-bit volatile ECC errors.",
       [](const S& s) { return AsDouble(s.ecc_uncorrected); }},
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
       "Total number of NVLink bandwidth counters for all lanes.",
       [](const S& s) { return AsDouble(s.nvlink_kib); }},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
       "Number of remapped rows for uncorrectable errors",
       [](const S& s) { return AsDouble(s.remapped_rows_uncorrectable); }},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
       "Number of remapped rows for correctable errors",
       [](const S& s) { return AsDouble(s.remapped_rows_correctable); }},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
       [](const S& s) { return AsDouble(s.row_remap_failed); }},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
       [](const S& s) { return s.gr_engine_active; },
       [](const I& i) { return i.gr_engine_active; }},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
       "Ratio of cycles the tensor (HMMA) pipe is active.",
       [](const S& s) { return s.tensor_active; }, [](const I& i) { return i.tensor_active; }},
  };
  return kMetrics;
}

// The labels of a GPU (and of one of its MIG instances), in dcgm-exporter's order: gpu, UUID,
// pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID,] Hostname, DCGM_FI_DRIVER_VERSION.
PromLabels GpuLabels(const NodeGpus& node, const GpuDevice& g, std::string_view hostname,
                     const GpuSample::MigInstance* instance) {
  PromLabels l = {{"gpu", std::to_string(g.index)},
                  {"UUID", g.uuid},
                  {"pci_bus_id", g.pci_bus_id},
                  {"device", Cat("nvidia", g.index)},
                  {"modelName", g.name}};
  if (instance != nullptr) {
    l.emplace_back("GPU_I_PROFILE", instance->profile);
    l.emplace_back("GPU_I_ID", std::to_string(instance->gpu_instance_id));
  }
  l.emplace_back("Hostname", std::string(hostname));
  l.emplace_back("DCGM_FI_DRIVER_VERSION", node.driver_version);
  return l;
}

// The labels with those of the task that holds the GPU, if one does.
PromLabels WithOwner(PromLabels l, const GpuOwner* o) {
  if (o == nullptr) return l;
  l.emplace_back("namespace", o->namespace_);
  l.emplace_back("job_name", o->job);
  l.emplace_back("task", o->task);
  return l;
}

// The owner of a GPU (mig_start -1) or of its MIG instance at `mig_start`.
// A GPU several tasks share (time-slicing, MPS) has no one owner: its series carry none rather
// than one of them picked at random.
const GpuOwner* OwnerOf(const ExportContext& c, int gpu, int mig_start) {
  if (c.owners == nullptr) return nullptr;
  auto [from, to] = c.owners->equal_range(gpu);
  const GpuOwner* owner = nullptr;
  for (auto it = from; it != to; ++it) {
    if (it->second.mig_start != mig_start) continue;
    if (owner != nullptr) return nullptr;
    owner = &it->second;
  }
  return owner;
}

// gpucloud_gpu_healthy and gpucloud_gpu_at_risk of every GPU the node has (a lost GPU too).
void HealthText(const NodeGpus& node, const ExportContext& c, PromText& p) {
  if (c.health == nullptr || node.gpus.empty()) return;
  auto condition = [&](const GpuDevice& g) {
    auto it = c.health->find(g.index);
    return it == c.health->end() ? GpuCondition{} : it->second;
  };
  p.Family("gpucloud_gpu_healthy", "gauge",
           "Whether the agent reports the GPU healthy (1) or not (0, with the first cause as "
           "reason).");
  for (const GpuDevice& g : node.gpus) {
    GpuCondition cond = condition(g);
    PromLabels l = GpuLabels(node, g, c.hostname, nullptr);
    if (!cond.healthy) l.emplace_back("reason", cond.reason);
    p.Sample(l, cond.healthy ? 1 : 0);
  }
  p.Family("gpucloud_gpu_at_risk", "gauge",
           "Whether the failure-risk model expects the GPU to fail.");
  for (const GpuDevice& g : node.gpus) {
    p.Sample(GpuLabels(node, g, c.hostname, nullptr), condition(g).at_risk ? 1 : 0);
  }
}

}  // namespace

std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            const ExportContext& context) {
  PromText p;
  for (const Metric& m : Metrics()) {
    // A family only when some GPU has a reading: a field the backend cannot read is left out.
    std::vector<std::pair<PromLabels, double>> rows;
    for (const GpuSample& s : samples) {
      if (s.index < 0 || s.index >= static_cast<int>(node.gpus.size())) continue;
      const GpuDevice& g = node.gpus[s.index];
      if (m.instance_value && !s.mig.empty()) {
        for (const GpuSample::MigInstance& i : s.mig) {
          if (std::optional<double> v = m.instance_value(i)) {
            rows.emplace_back(WithOwner(GpuLabels(node, g, context.hostname, &i),
                                        OwnerOf(context, g.index, i.start)),
                              *v);
          }
        }
        continue;
      }
      if (std::optional<double> v = m.value(s)) {
        rows.emplace_back(
            WithOwner(GpuLabels(node, g, context.hostname, nullptr), OwnerOf(context, g.index, -1)),
            *v);
      }
    }
    if (rows.empty()) continue;
    p.Family(m.name, m.type, m.help);
    for (const auto& [labels, v] : rows) p.Sample(labels, v);
  }
  HealthText(node, context, p);
  return p.Take();
}

std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            std::string_view hostname, const std::map<int, GpuOwner>* owners) {
  std::multimap<int, GpuOwner> all;
  if (owners != nullptr) all.insert(owners->begin(), owners->end());
  return DcgmMetricsText(node, samples, {hostname, owners != nullptr ? &all : nullptr});
}

std::string TaskEnergyMetricsText(const std::vector<TaskEnergy>& tasks, std::string_view hostname) {
  PromText p;
  p.Family("gpucloud_task_energy_joules_total", "counter",
           "Energy of the GPUs a task used while it ran.");
  for (const TaskEnergy& e : tasks) {
    p.Sample({{"namespace", e.namespace_},
              {"job_name", e.job},
              {"task", e.task},
              {"rank", std::to_string(e.rank)},
              {"attempt", std::to_string(e.attempt)},
              {"Hostname", std::string(hostname)}},
             e.joules);
  }
  return p.Take();
}

}  // namespace gpucloud::agent
