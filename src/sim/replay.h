// Replays a scheduler recording (sim/recording.h): every recorded pass is decided again from the
// recorded nodes, queues and job views, through the one snapshot builder (sched::BuildSnapshot)
// and the production scheduler, and compared with what the server decided: the waiting jobs it
// was given, then each decision (binds with their nodes and GPUs, preemptions with their
// preemptor and grace, rejections and waits with their reasons), in order.
//
// With the recorded configuration this is the proof that the simulator is the server's twin:
// any difference is a bug, and the first one is reported. With another policy it is a what-if,
// pass by pass: the same inputs, the other policy's decisions, counted where they differ (the
// recorded job views still follow what the server decided; replaying a recording does not model
// what would have happened after a different decision: that is what trace replays are for).
//
// No I/O; deterministic. Thread-safe (no shared state).
#ifndef GPUCLOUD_SIM_REPLAY_H_
#define GPUCLOUD_SIM_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/gpu_catalog.h"
#include "core/sched_config.h"

namespace gpucloud::sim {

struct ReplayOptions {
  // Decide with this configuration instead of the recorded one (a what-if).
  std::optional<SchedulerConfig> policy;
};

// Where the replay first decided differently from the server.
struct Divergence {
  int64_t pass = 0;  // 1-based, among the recorded passes
  int64_t t_ms = 0;
  int64_t index = 0;   // the decision's position in the pass (or -1: the waiting jobs differ)
  std::string server;  // the recorded decision (JSON), or "" when the replay made one more
  std::string replay;  // the replay's, or "" when the server made one more
};

struct ReplayResult {
  int64_t passes = 0;
  int64_t decisions = 0;  // the server's
  int64_t binds = 0, preemptions = 0, rejections = 0, waits = 0;
  int64_t jobs = 0;              // distinct jobs seen
  int64_t node_changes = 0;      // changes of the scheduler's nodes after the first
  int64_t differing_passes = 0;  // passes whose waiting jobs or decisions differ
  std::optional<Divergence> first;
  // Jobs whose recorded holdings did not fit the recorded nodes (a recording from a server that
  // over-committed; never expected).
  int64_t holding_conflicts = 0;
  // Lines cut short by a crash of the server (the file's last line, or one followed by the
  // restarted server's header): skipped.
  int64_t torn_lines = 0;
};

// InvalidArgument, naming the line, for a text that is not a recording of a known version or a
// line that does not parse; a policy naming an unknown plugin.
absl::StatusOr<ReplayResult> Replay(std::string_view recording, const ReplayOptions& options,
                                    const GpuCatalog& catalog = GpuCatalog::Default());

// "first difference at pass 12 (t=...ms), decision 3:\n  server: ...\n  replay: ..."
std::string DescribeDivergence(const Divergence& d);

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_REPLAY_H_
