// gpuctl's interactive commands (docs/interactive.md), with kubectl's syntax:
//   exec JOB [-n NS] [--rank R] [-i] [-t] -- COMMAND ARGS...   run a command in a running task;
//        exits with its exit code (126 or 127 when it could not run, 1 when the session failed)
//   port-forward JOB [-n NS] [--rank R] [--address A] [LOCAL:]REMOTE...  local ports to the
//        task's, until Ctrl-C
//   cp [-n NS] [--rank R] SRC DST       one file to or from a task, JOB:/path on either side
//   attach JOB [-n NS] [--rank R] [-i]  the task's output from now on (its log, followed) and,
//        with -i, this stdin into the task's own (an interactive job's task); until the task
//        ends (exit 0) or Ctrl-C
//   notebook [--gpus N] [--type T] [--image I] [-n NS] [--name N] [--port P] [--idle-timeout D]
//        [--max-duration D]             an interactive job running Jupyter, its port forwarded,
//                                       its URL (with its token) printed; Ctrl-C ends the job
// `gpuctl run -it` (gpuctl.cc) is an interactive job with a shell through RunInteractive.
// InteractiveCommands is thread-compatible (it holds the flags CLI11 writes).
#ifndef GPUCLOUD_CLI_INTERACTIVE_COMMANDS_H_
#define GPUCLOUD_CLI_INTERACTIVE_COMMANDS_H_

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/job_status.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

// "JOB:/path" split; nullopt for a local path (no ':' before the first '/').
struct RemotePath {
  std::string job, path;
};
std::optional<RemotePath> ParseRemotePath(const std::string& arg);

// Job `ns`/`name`'s phase, read through api::JobStatus; NotFound with the server's message.
absl::StatusOr<api::JobPhase> PhaseOf(const api::Client& client, const std::string& ns,
                                      const std::string& name);

// Waits until job `ns`/`name` runs (its rank 0 reported running), saying on `err` why it waits
// when that changes; FailedPrecondition when it ended first, DeadlineExceeded after `timeout_s`.
absl::Status AwaitRunning(const api::Client& client, const std::string& ns, const std::string& name,
                          int timeout_s, std::ostream& err);

// A shell (or `command`) in a terminal in the running job `ns`/`name`, rank 0: exec -it. The
// remote exit code, or 1 with the reason on `err`.
int ExecInteractive(const api::Client& client, const std::string& ns, const std::string& name,
                    const std::vector<std::string>& command, std::ostream& err);

class InteractiveCommands {
 public:
  explicit InteractiveCommands(CLI::App& app);
  ~InteractiveCommands();
  InteractiveCommands(const InteractiveCommands&) = delete;
  InteractiveCommands& operator=(const InteractiveCommands&) = delete;

  bool parsed() const;
  int Run(const std::string& config_flag, std::ostream& out, std::ostream& err);

 private:
  int Notebook(const std::string& config_flag, std::ostream& out, std::ostream& err);
  int Attach(const api::Client& client, std::ostream& err);
  int ForwardNotebook(const api::ClientConfig& config, const std::string& name, int remote,
                      const std::string& token, std::ostream& out, std::ostream& err);
  struct Flags;
  std::unique_ptr<Flags> flags_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_INTERACTIVE_COMMANDS_H_
