#include "agent/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status Write(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(Cat("cannot write ", path, ": ", std::strerror(errno)));
  }
  ssize_t n = write(fd, value.data(), value.size());
  int e = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return absl::FailedPreconditionError(Cat("cannot write ", path, ": ", std::strerror(e)));
  }
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(Cat("cannot create ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The number after `key` in a "key value" per line file (memory.events, memory.oom_control).
int64_t Field(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string k;
  int64_t v = 0;
  while (f >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

std::string Bytes(MiB m) { return std::to_string(m.raw() * 1024 * 1024); }

}  // namespace

CgroupPlan PlanTaskCgroup(const std::string& root, const std::string& name,
                          const TaskLimits& limits, bool v2) {
  CgroupPlan p;
  p.v2 = v2;
  if (v2) {
    std::string parent = root + "/gpucloud";
    p.memory_dir = parent + "/" + name;
    p.dirs = {parent, p.memory_dir};
    // One controller per write: a write naming one the kernel lacks fails as a whole.
    for (const std::string& at : {root, parent}) {
      for (const char* c : {"+cpu", "+memory", "+pids"})
        p.enable.emplace_back(at + "/cgroup.subtree_control", c);
    }
    if (limits.memory) p.writes.emplace_back(p.memory_dir + "/memory.max", Bytes(*limits.memory));
    if (limits.cpu)
      p.writes.emplace_back(p.memory_dir + "/cpu.max", Cat(limits.cpu->raw() * 100, " 100000"));
    if (limits.pids_max > 0)
      p.writes.emplace_back(p.memory_dir + "/pids.max", std::to_string(limits.pids_max));
    return p;
  }
  auto group = [&](const char* controller, std::string& dir) {
    std::string parent = Cat(root, "/", controller, "/gpucloud");
    dir = parent + "/" + name;
    p.dirs.push_back(parent);
    p.dirs.push_back(dir);
  };
  if (limits.cpu || limits.memory) {
    group("memory", p.memory_dir);
    group("cpu", p.cpu_dir);
  }
  if (limits.pids_max > 0) group("pids", p.pids_dir);
  if (limits.memory)
    p.writes.emplace_back(p.memory_dir + "/memory.limit_in_bytes", Bytes(*limits.memory));
  if (limits.cpu) {
    p.writes.emplace_back(p.cpu_dir + "/cpu.cfs_period_us", "100000");
    p.writes.emplace_back(p.cpu_dir + "/cpu.cfs_quota_us", std::to_string(limits.cpu->raw() * 100));
  }
  if (limits.pids_max > 0)
    p.writes.emplace_back(p.pids_dir + "/pids.max", std::to_string(limits.pids_max));
  return p;
}

absl::StatusOr<std::unique_ptr<TaskCgroup>> TaskCgroup::Create(const std::string& name,
                                                               const TaskLimits& limits,
                                                               const std::string& root) {
  if (!limits.any()) return absl::InvalidArgumentError("no limit to set");
  bool v2 = Exists(root + "/cgroup.controllers");
  if (!v2) {
    if ((limits.cpu || limits.memory) && (!Exists(root + "/memory") || !Exists(root + "/cpu"))) {
      return absl::FailedPreconditionError(Cat("no cgroup v2 or v1 memory and cpu under ", root));
    }
    if (limits.pids_max > 0 && !Exists(root + "/pids")) {
      return absl::FailedPreconditionError(Cat("no cgroup v2 or v1 pids under ", root));
    }
  }
  std::unique_ptr<TaskCgroup> g(new TaskCgroup());
  g->plan_ = PlanTaskCgroup(root, name, limits, v2);
  for (const std::string& dir : g->plan_.dirs) {
    if (absl::Status s = MakeDir(dir); !s.ok()) return s;
  }
  for (const auto& [path, value] : g->plan_.enable) (void)Write(path, value);
  for (const auto& [path, value] : g->plan_.writes) {
    if (absl::Status s = Write(path, value); !s.ok()) return s;  // the destructor removes the dirs
  }
  return g;
}

TaskCgroup::~TaskCgroup() {
  for (const std::string* dir : {&plan_.memory_dir, &plan_.cpu_dir, &plan_.pids_dir}) {
    if (!dir->empty()) rmdir(dir->c_str());
  }
}

absl::Status TaskCgroup::Attach(pid_t pid) {
  for (const std::string* dir : {&plan_.memory_dir, &plan_.cpu_dir, &plan_.pids_dir}) {
    if (dir->empty()) continue;
    if (absl::Status s = Write(*dir + "/cgroup.procs", std::to_string(pid)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::string> TaskCgroup::SelfAttachFiles() const {
  std::vector<std::string> out;
  if (plan_.v2) return out;
  for (const std::string* dir : {&plan_.memory_dir, &plan_.cpu_dir, &plan_.pids_dir}) {
    if (!dir->empty()) out.push_back(*dir + "/tasks");
  }
  return out;
}

std::vector<std::string> TaskCgroup::JoinFiles() const {
  if (!plan_.v2) return SelfAttachFiles();
  if (plan_.memory_dir.empty()) return {};
  return {plan_.memory_dir + "/cgroup.procs"};
}

int64_t TaskCgroup::OomKills() const {
  if (plan_.memory_dir.empty()) return 0;
  return plan_.v2 ? Field(plan_.memory_dir + "/memory.events", "oom_kill")
                  : Field(plan_.memory_dir + "/memory.oom_control", "oom_kill");
}

}  // namespace gpucloud::agent
