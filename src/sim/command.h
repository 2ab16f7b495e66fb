// `gpucloud sim`: the command behind the simulator (reads the files, runs each policy, writes
// the report). This layer does the file I/O and reads the wall clock for progress; the library
// underneath does neither.
//
//   gpucloud sim --trace FILE [--format auto|tiresias|philly|helios|pai|csv] [--tasks FILE]
//                --cluster PRESET|FILE.yaml --policy NAME|FILE.yaml [--policy ...]
//                [--compare A B ...] [--queues FILE.yaml] [--until DURATION] [--seed N]
//                [--mtbf-hours H|TYPE=H,...] [--repair DURATION] [--slowdown L,S,X]
//                [--checkpoint-interval DURATION] [--no-oracle-estimates] --out DIR
//
//   gpucloud sim --trace RECORDING [--policy NAME|FILE.yaml] [--out DIR]
//
// Writes DIR/report.json, DIR/report.html and DIR/jobs.csv and prints a summary table. A
// recording (gpucloud server --record-scheduler) is replayed instead (sim/replay.h): without
// --policy, a check that every pass decides as the server did; with one, a what-if; DIR gets
// replay.json. Exit codes: 0 done, 1 bad input (named), 2 usage error, 3 the recording replayed
// differently from the server (the first difference printed). Reentrant.
#ifndef GPUCLOUD_SIM_COMMAND_H_
#define GPUCLOUD_SIM_COMMAND_H_

#include <iosfwd>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/sched_config.h"

namespace gpucloud::sim {

// Built-in policies: "default" (the server's defaults), "fifo", "sjf", "las" (the defaults
// with that ordering), "best-fit" (no scores, no fair share, no preemption) and "fgd"
// (Fragmentation weighted twice BinPack).
inline constexpr std::string_view kPolicyNames = "default, fifo, sjf, las, dlas, best-fit, fgd";
absl::StatusOr<SchedulerConfig> BuiltinPolicy(std::string_view name);

int RunSim(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_COMMAND_H_
