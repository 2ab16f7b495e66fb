// Which of the agent's tasks its heartbeat reports, and when an ended one is forgotten
// (pure decisions; the node agent applies them).
// A task is reported while it runs, and while it has ended but its assignment (the same job
// uid and attempt) is still there: the controller reads the level, so it sees the end however
// many heartbeats it skips. Once the assignment is gone, an ended task is reported until the
// server acknowledges its report as it is now (the server's heartbeat answer lists the ended
// reports its controller has read: NodeTable::Acknowledged), and then dropped — so a heartbeat
// carries what is running and what is not yet known, not every task of the last minutes. A
// lost heartbeat or answer acknowledges nothing, so the report goes again. A server that never
// acknowledges (an older one, or one away) is sent the report for `kEndedReportRetention` after
// the task ended, as before.
#ifndef GPUCLOUD_AGENT_HEARTBEAT_REPORTS_H_
#define GPUCLOUD_AGENT_HEARTBEAT_REPORTS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/gpu_backend.h"
#include "api/wire.h"

namespace gpucloud::agent {

inline constexpr absl::Duration kEndedReportRetention = absl::Minutes(5);

struct ReportedTask {
  bool ended = false;
  bool assigned = false;      // its assignment (job uid and attempt) is still there
  bool acknowledged = false;  // the server acknowledged its report as it is now
  absl::Duration since_end;   // how long ago it ended (when ended)
  bool log_shipped = false;   // all its output is on the server (or given up)
};

// Whether the next heartbeat carries the task's report.
bool InHeartbeat(const ReportedTask& t);
// Whether the agent may forget the task (its record, run directory and sandbox go): ended,
// unassigned, and acknowledged with its log shipped, or past the retention.
bool Forgettable(const ReportedTask& t);

// Each GPU's usage from the heartbeat's sample, into its health entry (same index): utilization,
// framebuffer used, and used plus free as the total. A reading the sample lacks, or a GPU
// without a sample (lost), stays unset: unknown to the server.
void AddGpuUsage(const std::vector<GpuSample>& samples, std::vector<api::GpuHealth>& gpus);

// The reports a heartbeat answer acknowledges ("acknowledged": task reports in the heartbeat's
// encoding); empty when it names none or cannot be read.
std::vector<api::TaskReport> AcknowledgedReports(const std::string& answer_body);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_HEARTBEAT_REPORTS_H_
