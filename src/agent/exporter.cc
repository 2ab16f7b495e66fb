#include "agent/exporter.h"

#include <functional>
#include <optional>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

// A label value with \, " and newline escaped, as the text format requires.
std::string LabelValue(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

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

// The labels of a GPU (and of one of its MIG instances), in dcgm-exporter's order, without
// braces: gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID,] Hostname,
// DCGM_FI_DRIVER_VERSION.
std::string GpuLabels(const NodeGpus& node, const GpuDevice& g, std::string_view hostname,
                      const GpuSample::MigInstance* instance) {
  std::string mig;
  if (instance != nullptr) {
    mig = fmt::format(",GPU_I_PROFILE=\"{}\",GPU_I_ID=\"{}\"", LabelValue(instance->profile),
                      instance->gpu_instance_id);
  }
  return fmt::format(
      "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"nvidia{}\",modelName=\"{}\"{},"
      "Hostname=\"{}\",DCGM_FI_DRIVER_VERSION=\"{}\"",
      g.index, LabelValue(g.uuid), LabelValue(g.pci_bus_id), g.index, LabelValue(g.name), mig,
      LabelValue(hostname), LabelValue(node.driver_version));
}

std::string OwnerLabels(const GpuOwner* o) {
  if (o == nullptr) return "";
  return fmt::format(",namespace=\"{}\",job_name=\"{}\",task=\"{}\"", LabelValue(o->namespace_),
                     LabelValue(o->job), LabelValue(o->task));
}

// The owner of a GPU (mig_start -1) or of its MIG instance at `mig_start`.
const GpuOwner* OwnerOf(const ExportContext& c, int gpu, int mig_start) {
  if (c.owners == nullptr) return nullptr;
  auto [from, to] = c.owners->equal_range(gpu);
  for (auto it = from; it != to; ++it) {
    if (it->second.mig_start == mig_start) return &it->second;
  }
  return nullptr;
}

// gpucloud_gpu_healthy and gpucloud_gpu_at_risk of every GPU the node has (a lost GPU too).
std::string HealthText(const NodeGpus& node, const ExportContext& c) {
  if (c.health == nullptr || node.gpus.empty()) return "";
  std::string healthy, at_risk;
  for (const GpuDevice& g : node.gpus) {
    auto it = c.health->find(g.index);
    GpuCondition cond = it == c.health->end() ? GpuCondition{} : it->second;
    std::string labels = GpuLabels(node, g, c.hostname, nullptr);
    healthy +=
        fmt::format("gpucloud_gpu_healthy{{{}{}}} {}\n", labels,
                    cond.healthy ? "" : fmt::format(",reason=\"{}\"", LabelValue(cond.reason)),
                    cond.healthy ? 1 : 0);
    at_risk += fmt::format("gpucloud_gpu_at_risk{{{}}} {}\n", labels, cond.at_risk ? 1 : 0);
  }
  return Cat(
      "# HELP gpucloud_gpu_healthy Whether the agent reports the GPU healthy (1) or not (0, "
      "with the first cause as reason).\n# TYPE gpucloud_gpu_healthy gauge\n",
      healthy,
      "# HELP gpucloud_gpu_at_risk Whether the failure-risk model expects the GPU to fail.\n"
      "# TYPE gpucloud_gpu_at_risk gauge\n",
      at_risk);
}

}  // namespace

std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            const ExportContext& context) {
  std::string out;
  for (const Metric& m : Metrics()) {
    std::string lines;
    for (const GpuSample& s : samples) {
      if (s.index < 0 || s.index >= static_cast<int>(node.gpus.size())) continue;
      const GpuDevice& g = node.gpus[s.index];
      if (m.instance_value && !s.mig.empty()) {
        for (const GpuSample::MigInstance& i : s.mig) {
          std::optional<double> v = m.instance_value(i);
          if (!v) continue;
          lines += fmt::format("{}{{{}{}}} {}\n", m.name, GpuLabels(node, g, context.hostname, &i),
                               OwnerLabels(OwnerOf(context, g.index, i.start)), *v);
        }
        continue;
      }
      std::optional<double> v = m.value(s);
      if (!v) continue;
      lines += fmt::format("{}{{{}{}}} {}\n", m.name, GpuLabels(node, g, context.hostname, nullptr),
                           OwnerLabels(OwnerOf(context, g.index, -1)), *v);
    }
    if (lines.empty()) continue;
    out += Cat("# HELP ", m.name, " ", m.help, "\n# TYPE ", m.name, " ", m.type, "\n", lines);
  }
  return out + HealthText(node, context);
}

std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            std::string_view hostname, const std::map<int, GpuOwner>* owners) {
  std::multimap<int, GpuOwner> all;
  if (owners != nullptr) all.insert(owners->begin(), owners->end());
  return DcgmMetricsText(node, samples, {hostname, owners != nullptr ? &all : nullptr});
}

std::string TaskEnergyMetricsText(const std::vector<TaskEnergy>& tasks, std::string_view hostname) {
  std::string out =
      "# HELP gpucloud_task_energy_joules_total Energy of the GPUs a task used while it ran.\n"
      "# TYPE gpucloud_task_energy_joules_total counter\n";
  for (const TaskEnergy& e : tasks) {
    out += fmt::format(
        "gpucloud_task_energy_joules_total{{namespace=\"{}\",job_name=\"{}\",task=\"{}\","
        "rank=\"{}\",attempt=\"{}\",Hostname=\"{}\"}} {}\n",
        LabelValue(e.namespace_), LabelValue(e.job), LabelValue(e.task), e.rank, e.attempt,
        LabelValue(hostname), e.joules);
  }
  return out;
}

}  // namespace gpucloud::agent
