#include "agent/cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status Write(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.close();
  if (!f) return absl::FailedPreconditionError(Cat("cannot write ", path));
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

}  // namespace

absl::StatusOr<std::unique_ptr<TaskCgroup>> TaskCgroup::Create(const std::string& name,
                                                               std::optional<MilliCpu> cpu,
                                                               std::optional<MiB> memory,
                                                               const std::string& root) {
  std::unique_ptr<TaskCgroup> g(new TaskCgroup());
  if (Exists(root + "/cgroup.controllers")) {
    g->v2_ = true;
    std::string parent = root + "/gpucloud";
    if (absl::Status s = MakeDir(parent); !s.ok()) return s;
    (void)Write(root + "/cgroup.subtree_control", "+cpu +memory");
    (void)Write(parent + "/cgroup.subtree_control", "+cpu +memory");
    g->memory_dir_ = parent + "/" + name;
    if (absl::Status s = MakeDir(g->memory_dir_); !s.ok()) return s;
    if (memory) {
      if (absl::Status s = Write(g->memory_dir_ + "/memory.max",
                                 std::to_string(memory->raw() * 1024 * 1024));
          !s.ok()) {
        return s;
      }
    }
    if (cpu) {
      if (absl::Status s = Write(g->memory_dir_ + "/cpu.max", Cat(cpu->raw() * 100, " 100000"));
          !s.ok()) {
        return s;
      }
    }
    return g;
  }
  if (!Exists(root + "/memory") || !Exists(root + "/cpu")) {
    return absl::FailedPreconditionError(Cat("no cgroup v2 or v1 memory and cpu under ", root));
  }
  for (const char* controller : {"memory", "cpu"}) {
    std::string parent = Cat(root, "/", controller, "/gpucloud");
    if (absl::Status s = MakeDir(parent); !s.ok()) return s;
    std::string dir = parent + "/" + name;
    if (absl::Status s = MakeDir(dir); !s.ok()) return s;
    (std::string(controller) == "memory" ? g->memory_dir_ : g->cpu_dir_) = dir;
  }
  if (memory) {
    if (absl::Status s = Write(g->memory_dir_ + "/memory.limit_in_bytes",
                               std::to_string(memory->raw() * 1024 * 1024));
        !s.ok()) {
      return s;
    }
  }
  if (cpu) {
    if (absl::Status s = Write(g->cpu_dir_ + "/cpu.cfs_period_us", "100000"); !s.ok()) return s;
    if (absl::Status s = Write(g->cpu_dir_ + "/cpu.cfs_quota_us", std::to_string(cpu->raw() * 100));
        !s.ok()) {
      return s;
    }
  }
  return g;
}

TaskCgroup::~TaskCgroup() {
  if (!memory_dir_.empty()) rmdir(memory_dir_.c_str());
  if (!cpu_dir_.empty()) rmdir(cpu_dir_.c_str());
}

absl::Status TaskCgroup::Attach(pid_t pid) {
  if (absl::Status s = Write(memory_dir_ + "/cgroup.procs", std::to_string(pid)); !s.ok()) {
    return s;
  }
  if (!cpu_dir_.empty()) return Write(cpu_dir_ + "/cgroup.procs", std::to_string(pid));
  return absl::OkStatus();
}

int64_t TaskCgroup::OomKills() const {
  return v2_ ? Field(memory_dir_ + "/memory.events", "oom_kill")
             : Field(memory_dir_ + "/memory.oom_control", "oom_kill");
}

}  // namespace gpucloud::agent
