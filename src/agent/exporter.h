// The GPU metrics exporter's text: dcgm-exporter's metric and label names in the Prometheus
// text exposition format (version 0.0.4), so existing Grafana dashboards (id 12239) work
// unchanged. Stateless; thread-safe.
#ifndef GPUCLOUD_AGENT_EXPORTER_H_
#define GPUCLOUD_AGENT_EXPORTER_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_backend.h"
#include "agent/health.h"

namespace gpucloud::agent {

// One HELP and TYPE line per metric, then one sample per GPU that reports it (a field the
// backend cannot read is left out, never shown as 0), labelled gpu, UUID, pci_bus_id, device,
// modelName, Hostname and DCGM_FI_DRIVER_VERSION (in that order). A GPU in MIG mode shows the
// readings NVML gives per MIG instance (framebuffer, profiling ratios) once per instance,
// labelled GPU_I_PROFILE and GPU_I_ID too (after modelName), as dcgm-exporter does.
// A GPU a task uses also carries that task's labels namespace, job_name and task (as
// dcgm-exporter adds namespace, pod and container on Kubernetes); a MIG instance, its task's.
// Never `job`: Prometheus sets `job` on every series it scrapes (the scrape job), so a target's
// own `job` label would be renamed `exported_job`.
struct GpuOwner {
  std::string namespace_;
  std::string job;
  std::string task;    // "{task}-{replica}"
  int mig_start = -1;  // the MIG instance the task has (its first memory slice); -1: whole GPU
};
struct ExportContext {
  std::string_view hostname;  // the node's name (the agent's --node-name)
  // GPU index -> the tasks on it (several on a GPU in MIG mode, one per instance; several on a
  // shared GPU, whose series then carry no task's labels).
  const std::multimap<int, GpuOwner>* owners = nullptr;
  // With `health`, the families gpucloud_gpu_healthy (1/0, with the first cause as `reason`
  // when 0) and gpucloud_gpu_at_risk (1/0) follow, one sample per GPU of `node`, lost ones too.
  const std::map<int, GpuCondition>* health = nullptr;
};
std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            const ExportContext& context);
// The same, with whole-GPU owners only and no health.
std::string DcgmMetricsText(const NodeGpus& node, const std::vector<GpuSample>& samples,
                            std::string_view hostname,
                            const std::map<int, GpuOwner>* owners = nullptr);

// The GPU energy one task used while it ran (its share of its GPUs' energy), for
// TaskEnergyMetricsText.
struct TaskEnergy {
  std::string namespace_, job, task;  // task: "{task}-{replica}"
  int rank = 0, attempt = 0;
  double joules = 0;
};
// The counter family gpucloud_task_energy_joules_total (HELP and TYPE even without tasks), one
// sample per task labelled namespace, job_name, task, rank, attempt and Hostname.
std::string TaskEnergyMetricsText(const std::vector<TaskEnergy>& tasks, std::string_view hostname);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_EXPORTER_H_
