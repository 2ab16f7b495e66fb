// Task records (STATE_DIR/tasks): saved as tasks change, re-adopted or reported after a restart;
// and how a task's exit reads.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "agent/adopted_target.h"
#include "agent/node_agent_impl.h"
#include "agent/task_times.h"
#include "core/private_file.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json ReportToJson(const api::TaskReport& r) {
  Json j{{"state", api::TaskStateName(r.state)},
         {"exitCode", r.exit_code},
         {"signal", r.signal},
         {"oomKilled", r.oom_killed},
         {"message", r.message}};
  if (r.started_ms) j["startedMs"] = r.started_ms;
  if (r.finished_ms) j["finishedMs"] = r.finished_ms;
  return j;
}

}  // namespace

void NodeAgent::Impl::SaveRecord(const Local& t) {
  Json j{{"assignment", Json::parse(api::AssignmentToJson(t.a))},
         {"pid", t.in_executor ? exec.Pid(t.exec_id) : t.adopted_pid},
         {"startTime", 0},
         {"report", ReportToJson(t.report)},
         {"logPath", t.log_path},
         {"container", t.container_name},
         {"shim", t.shim},
         {"logShipped", t.log.shipped},
         {"logReadPos", t.log.read_pos}};
  pid_t pid = j["pid"].get<pid_t>();
  if (pid > 0) {
    std::optional<ProcStat> st = ReadProcStat(pid);
    j["startTime"] = st ? st->start_time : 0;
  }
  std::error_code ec;
  fs::create_directories(Cat(o.state_dir, "/tasks"), ec);
  if (absl::Status s = WritePrivateFile(RecordPath(t.exec_id), j.dump()); !s.ok()) {
    Log(Cat("task ", t.a.name, ": its record is not saved: ", s.message()));
  }
}

void NodeAgent::Impl::LoadRecords() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Cat(o.state_dir, "/tasks"), ec)) {
    if (e.path().extension() != ".json") continue;
    std::optional<Local> t = ReadRecord(e.path().string());
    if (!t) continue;
    SetCheckpointDir(*t);
    const std::string name = t->a.name;
    tasks[name] = *std::move(t);
    SaveRecord(tasks[name]);
  }
}

std::optional<NodeAgent::Impl::Local> NodeAgent::Impl::ReadRecord(const std::string& path) {
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("assignment")) return std::nullopt;
  absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(j["assignment"].dump());
  if (!a.ok()) return std::nullopt;
  Local t;
  t.a = *a;
  t.exec_id = fs::path(path).stem().string();
  t.report = {a->name, a->job_uid, a->attempt, api::TaskState::kLost, -1, 0, false, ""};
  t.log_path = j.value("logPath", "");
  t.container_name = j.value("container", "");
  t.shim = j.value("shim", "");
  t.log.shipped = j.value("logShipped", 0);
  t.log.read_pos = j.value("logReadPos", 0);
  const Json& rep = j["report"];
  std::string state = rep.is_object() ? rep.value("state", "") : "";
  pid_t pid = j.value("pid", 0);
  uint64_t start = j.value("startTime", uint64_t{0});
  if (state == "Starting" && pid == 0) {
    // It waited for its image and never ran: it starts again from its assignment.
    std::error_code ec;
    fs::remove(path, ec);
    return std::nullopt;
  }
  if (rep.is_object()) {
    t.report.started_ms = rep.value("startedMs", int64_t{0});
    t.report.finished_ms = rep.value("finishedMs", int64_t{0});
  }
  if (state != "Running" && state != "Starting" && !state.empty()) {
    for (api::TaskState s : {api::TaskState::kSucceeded, api::TaskState::kFailed,
                             api::TaskState::kStopped, api::TaskState::kLost}) {
      if (api::TaskStateName(s) == state) t.report.state = s;
    }
    t.report.exit_code = rep.value("exitCode", -1);
    t.report.signal = rep.value("signal", 0);
    t.report.message = rep.value("message", "");
    t.ended_at = Now();
  } else {
    Readopt(t, pid, start);
  }
  return t;
}

void NodeAgent::Impl::Readopt(Local& t, pid_t pid, uint64_t start) {
  if (Alive(pid, start)) {
    t.adopted_pid = pid;
    t.adopted_start = start;
    // Watched through a pidfd where there are pidfds (opened, then checked to be still the
    // same process, so a reused pid is not watched); else polled on the tick.
    t.adopted_pidfd = OpenPidFd(pid);
    if (t.adopted_pidfd >= 0 && !(Alive(pid, start) && exits.Add(t.adopted_pidfd))) {
      close(t.adopted_pidfd);
      t.adopted_pidfd = -1;
    }
    t.report.state = api::TaskState::kRunning;
    Log(Cat("re-adopted task ", t.a.name, " (attempt ", t.a.attempt, ", pid ", pid, ")"));
    if (t.container_name.empty()) {  // a container is entered by its name
      absl::StatusOr<SessionTarget> target = ReadAdoptedSessionTarget(pid, start, t.shim);
      if (target.ok()) {
        t.adopted_session = std::make_shared<const SessionTarget>(*std::move(target));
      } else {
        Log(Cat("task ", t.a.name,
                " cannot be entered by exec or attach: ", target.status().message()));
      }
    }
  } else if (std::optional<TaskExit> e = ReadExitStatus(StatusPath(t))) {
    Ended(t, *e);
    t.ended_at = Now();
    t.report.finished_ms =
        TaskEndedMs(StatusPath(t), t.report.started_ms, absl::ToUnixMillis(*t.ended_at));
    Log(Cat("task ", t.a.name, " ended while the agent was away: ", t.report.message));
  } else {
    t.report.message = "it ended while the agent was away; its exit status is unknown";
    t.ended_at = Now();
    t.report.finished_ms = absl::ToUnixMillis(*t.ended_at);
    Log(Cat("task ", t.a.name, " was lost while the agent was away"));
    if (!t.container_name.empty()) RemoveContainer(t);  // its podman run was killed
  }
}

void NodeAgent::Impl::Ended(Local& t, TaskExit e) {
  if (t.container_name.empty()) {
    SetExit(t, e);
    return;
  }
  e = ContainerExit(e);
  if (t.stopping || e.signal != 0) RemoveContainer(t);
  SetExit(t, e);
  t.report.message = DescribeContainerExit(e);
}

void NodeAgent::Impl::RemoveContainer(const Local& t) {
  std::string out;
  if (RunCaptured(PodmanRemoveArgv(o.container, t.container_name), &out) != 0) {
    Log(Cat("task ", t.a.name, ": cannot remove container ", t.container_name, ": ",
            PullErrorReason(out)));
  }
}

void NodeAgent::Impl::SetExit(Local& t, TaskExit e) {
  e.stopped = t.stopping;
  t.report.exit_code = e.exit_code;
  t.report.signal = e.signal;
  t.report.oom_killed = e.oom_killed;
  t.report.message = e.Describe();
  t.report.state = t.stopping                          ? api::TaskState::kStopped
                   : e.exit_code == 0 && e.signal == 0 ? api::TaskState::kSucceeded
                                                       : api::TaskState::kFailed;
}

void NodeAgent::Impl::SetCheckpointDir(Local& t) {
  const api::Assignment& a = t.a;
  if (!a.checkpoint_node_local) {
    t.checkpoint_dir = a.checkpoint_dir;
    return;
  }
  t.checkpoint_dir = Cat(o.state_dir, "/checkpoints/", a.namespace_, "/", a.job);
  if (a.checkpoint_replicate && !a.checkpoint_dir.empty()) {
    replicator.Track(t.exec_id, t.checkpoint_dir, a.checkpoint_dir);
  }
}

}  // namespace gpucloud::agent
