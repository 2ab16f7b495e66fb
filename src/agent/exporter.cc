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

struct Metric {
  const char* name;
  const char* type;
  const char* help;
  std::function<std::optional<double>(const GpuSample&)> value;
};

}  // namespace

std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            std::string_view hostname, const std::map<int, GpuOwner>* owners) {
  const Metric kMetrics[] = {
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
       [](const GpuSample& s) -> std::optional<double> { return s.sm_clock_mhz; }},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
       [](const GpuSample& s) -> std::optional<double> { return s.mem_clock_mhz; }},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
       [](const GpuSample& s) -> std::optional<double> { return s.temperature_c; }},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
       [](const GpuSample& s) { return s.power_w; }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since boot (in mJ).",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.energy_mj) return std::nullopt;
         return static_cast<double>(*s.energy_mj);
       }},
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
       [](const GpuSample& s) -> std::optional<double> { return s.gpu_util_percent; }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
       [](const GpuSample& s) -> std::optional<double> { return s.mem_copy_util_percent; }},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.fb_free) return std::nullopt;
         return static_cast<double>(s.fb_free->raw());
       }},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.fb_used) return std::nullopt;
         return static_cast<double>(s.fb_used->raw());
       }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
       "Total number of single-bit volatile ECC errors.",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.ecc_corrected) return std::nullopt;
         return static_cast<double>(*s.ecc_corrected);
       }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
       "Total number of double-bit volatile ECC errors.",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.ecc_uncorrected) return std::nullopt;
         return static_cast<double>(*s.ecc_uncorrected);
       }},
  };
  std::string out;
  for (const Metric& m : kMetrics) {
    std::string lines;
    for (const GpuSample& s : samples) {
      std::optional<double> v = m.value(s);
      if (!v || s.index < 0 || s.index >= static_cast<int>(node.gpus.size())) continue;
      const GpuDevice& g = node.gpus[s.index];
      std::string owner;
      if (owners != nullptr) {
        if (auto o = owners->find(g.index); o != owners->end()) {
          owner = fmt::format(",namespace=\"{}\",job_name=\"{}\",task=\"{}\"",
                              LabelValue(o->second.namespace_), LabelValue(o->second.job),
                              LabelValue(o->second.task));
        }
      }
      lines += fmt::format(
          "{}{{gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",device=\"nvidia{}\",modelName=\"{}\","
          "Hostname=\"{}\",DCGM_FI_DRIVER_VERSION=\"{}\"{}}} {}\n",
          m.name, g.index, LabelValue(g.uuid), LabelValue(g.pci_bus_id), g.index,
          LabelValue(g.name), LabelValue(hostname), LabelValue(node.driver_version), owner, *v);
    }
    if (lines.empty()) continue;
    out += Cat("# HELP ", m.name, " ", m.help, "\n# TYPE ", m.name, " ", m.type, "\n", lines);
  }
  return out;
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
