#include "agent/adopted_target.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "agent/proc_stat.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;

// The NUL-separated entries of a /proc list (a trailing NUL ends the last one).
std::vector<std::string> SplitNul(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\0', at);
    if (end == std::string::npos) end = text.size();
    out.emplace_back(text, at, end - at);
    at = end + 1;
  }
  return out;
}

absl::Status NotAShim(std::string_view why) {
  return absl::FailedPreconditionError(Cat("its first process is not a gpucloud-shim ", why));
}

// Reads the executor's flags (ShimArgs) up to "--" into `t`; v1's --join files into `joins`.
absl::Status ReadShimFlags(const std::vector<std::string>& argv, SessionTarget& t,
                           std::vector<std::string>& joins) {
  bool uid = false, gid = false, dashes = false;
  for (size_t i = 1; i < argv.size() && !dashes; ++i) {
    const std::string& flag = argv[i];
    if (flag == "--") {
      dashes = true;
      break;
    }
    if (i + 1 >= argv.size()) return NotAShim(Cat("(", flag, " has no value)"));
    const std::string& value = argv[++i];
    if (flag == "--workdir") {
      t.workdir = value;
    } else if (flag == "--uid" || flag == "--gid") {
      uint32_t id = 0;
      if (!absl::SimpleAtoi(value, &id) || id == 0xFFFFFFFFu) {
        return NotAShim(Cat("(", flag, " ", value, ")"));
      }
      if (flag == "--uid") {
        t.uid = static_cast<uid_t>(id);
        uid = true;
      } else {
        t.gid = static_cast<gid_t>(id);
        gid = true;
      }
    } else if (flag == "--stdin") {
      t.stdin_path = value;
    } else if (flag == "--join") {
      joins.push_back(value);
    } else if (flag != "--status" && flag != "--status-tmp" && flag != "--sweep") {
      return NotAShim(Cat("(an unknown flag ", flag, ")"));
    }
  }
  if (!dashes || t.workdir.empty() || uid != gid) return NotAShim("(its command line is cut)");
  return absl::OkStatus();
}

// v2: the group "/gpucloud/NAME" of the "0::" line, as the file a process writes to join it.
std::vector<std::string> V2JoinFiles(const std::string& cgroup, const std::string& root) {
  size_t at = 0;
  while (at < cgroup.size()) {
    size_t end = cgroup.find('\n', at);
    if (end == std::string::npos) end = cgroup.size();
    std::string_view line(cgroup.data() + at, end - at);
    if (line.starts_with("0::/gpucloud/") && line.find("/..") == std::string_view::npos) {
      return {Cat(root, line.substr(3), "/cgroup.procs")};
    }
    at = end + 1;
  }
  return {};
}

// The whole file; nullopt when it cannot be opened or read (unreadable is not empty).
std::optional<std::string> Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::string text(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>{});
  if (f.bad()) return std::nullopt;
  return text;
}

}  // namespace

absl::StatusOr<SessionTarget> SessionTargetOfShim(const ShimProcess& p, const std::string& shim,
                                                  uid_t agent_uid,
                                                  const std::string& cgroup2_root) {
  if (shim.empty()) {
    return absl::FailedPreconditionError("it was started without a gpucloud-shim (a fork)");
  }
  std::string_view exe = p.exe;
  if (exe.ends_with(" (deleted)")) exe.remove_suffix(10);  // the agent was upgraded since
  if (exe != shim) return NotAShim(Cat("(it is ", exe.empty() ? "unknown" : exe, ")"));
  if (p.uid != agent_uid) return NotAShim(Cat("of the agent's user (it runs as ", p.uid, ")"));
  SessionTarget t;
  std::vector<std::string> joins;
  if (absl::Status s = ReadShimFlags(SplitNul(p.cmdline), t, joins); !s.ok()) return s;
  for (const std::string& kv : SplitNul(p.environ)) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) t.env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  t.cgroup_join = cgroup2_root.empty() ? std::move(joins) : V2JoinFiles(p.cgroup, cgroup2_root);
  return t;
}

absl::StatusOr<SessionTarget> ReadAdoptedSessionTarget(pid_t pid, uint64_t start_time,
                                                       const std::string& shim) {
  const std::string dir = Cat("/proc/", pid);
  auto gone = [&] { return absl::NotFoundError(Cat("process ", pid, " is gone")); };
  if (!Alive(pid, start_time)) return gone();
  ShimProcess p;
  std::error_code ec;
  p.exe = fs::read_symlink(dir + "/exe", ec).string();
  if (ec) return absl::NotFoundError(Cat("process ", pid, ": ", ec.message()));
  std::ifstream status(dir + "/status");
  std::string line;
  bool uid = false;
  while (!uid && std::getline(status, line)) {
    if (!line.starts_with("Uid:")) continue;
    std::istringstream fields(line.substr(4));  // real, effective, saved, filesystem
    uid = static_cast<bool>(fields >> p.uid);
  }
  if (!uid) return absl::NotFoundError(Cat("process ", pid, " has no user to read"));
  for (auto [file, into] : {std::pair{"cmdline", &p.cmdline}, std::pair{"environ", &p.environ},
                            std::pair{"cgroup", &p.cgroup}}) {
    std::optional<std::string> text = Slurp(Cat(dir, "/", file));
    if (!text) return absl::NotFoundError(Cat("cannot read ", dir, "/", file));
    *into = *std::move(text);
  }
  if (!Alive(pid, start_time)) return gone();  // the pid was reused while it was read
  const bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers", ec);
  // The record's path as /proc/PID/exe names it (absolute, links resolved).
  const std::string canonical = shim.empty() ? "" : fs::weakly_canonical(shim, ec).string();
  return SessionTargetOfShim(p, canonical, geteuid(), v2 ? "/sys/fs/cgroup" : "");
}

}  // namespace gpucloud::agent
