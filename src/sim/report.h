// Simulation reports: the JSON summary (per run: completion times and queueing delays overall,
// per job-size class and per queue; makespan; utilization and fragmentation over time;
// preemptions, restarts, cost; lower bounds) and a self-contained HTML page with SVG charts
// (utilization over time, JCT CDF per policy). Deterministic: the same results give the same
// bytes. Stateless functions; thread-safe.
#ifndef GPUCLOUD_SIM_REPORT_H_
#define GPUCLOUD_SIM_REPORT_H_

#include <string>
#include <vector>

#include "sim/cluster.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpucloud::sim {

struct ReportInput {
  std::string trace_file;
  const Trace* trace = nullptr;
  const SimCluster* cluster = nullptr;
  std::vector<SimResult> runs;  // one per policy, in the order asked
};

// Percentile p (0..100) of `values` by the nearest-rank method; 0 when empty.
double Percentile(std::vector<double> values, double p);

std::string ReportJson(const ReportInput& in);
std::string ReportHtml(const ReportInput& in);
// One line per job and run: policy,id,queue,gpus,submit_s,start_s,end_s,state,restarts,
// preemptions.
std::string JobsCsv(const ReportInput& in);
// A short table for the terminal: one row per policy.
std::string SummaryTable(const ReportInput& in);

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_REPORT_H_
