#include "agent/sandbox.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/text.h"

namespace gpucloud::agent {

namespace fs = std::filesystem;

uid_t NamespaceUid(std::string_view ns) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (unsigned char c : ns) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<uid_t>(1'000'000'000u + h % 100'000'000u);
}

absl::StatusOr<TaskIdentity> ResolveTaskIdentity(std::string_view ns, bool has_image,
                                                 std::optional<int64_t> run_as_user,
                                                 std::optional<int64_t> run_as_group,
                                                 bool allow_root) {
  const uid_t own = NamespaceUid(ns);
  TaskIdentity id{own, own};
  if (run_as_user) {
    if (!has_image && *run_as_user != own) {
      return absl::InvalidArgumentError(
          Cat("securityContext.runAsUser: ", *run_as_user,
              " applies only to a task with an image; a host process runs as its namespace's "
              "user ",
              own));
    }
    id.uid = static_cast<uid_t>(*run_as_user);
    id.gid = id.uid;
  }
  if (run_as_group) id.gid = static_cast<gid_t>(*run_as_group);
  if ((id.uid == 0 || id.gid == 0) && !allow_root) {
    return absl::InvalidArgumentError(
        Cat(id.uid == 0 ? "securityContext.runAsUser" : "securityContext.runAsGroup",
            ": 0 (root) is not allowed on this node (gpucloud agent run --allow-root-tasks)"));
  }
  return id;
}

bool PathInside(const std::string& path, const std::string& dir) {
  fs::path p = fs::path(path).lexically_normal();
  fs::path d = fs::path(dir).lexically_normal();
  if (p.is_relative() || d.is_relative() || dir.empty()) return false;
  fs::path rel = p.lexically_relative(d);
  return !rel.empty() && *rel.begin() != "..";
}

absl::StatusOr<std::string> ResolveHostWorkdir(const std::string& requested,
                                               const std::string& sandbox,
                                               const std::string& checkpoint_dir,
                                               const std::string& operator_default) {
  if (requested.empty()) return operator_default.empty() ? sandbox : operator_default;
  std::string path = fs::path(requested).is_absolute()
                         ? fs::path(requested).lexically_normal().string()
                         : (fs::path(sandbox) / requested).lexically_normal().string();
  for (const std::string* dir : {&sandbox, &checkpoint_dir, &operator_default}) {
    if (PathInside(path, *dir)) return path;
  }
  return absl::InvalidArgumentError(
      Cat("spec.tasks[].workingDir: ", requested,
          " is outside the task's own directories (its sandbox, its checkpoint directory, or "
          "the node's --workdir)"));
}

absl::Status PrepareStateDir(const std::string& state_dir, bool for_other_users) {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) return absl::InternalError(Cat("--state-dir ", state_dir, ": ", ec.message()));
  fs::permissions(state_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::replace, ec);
  for (const char* sub : {"/tasks", "/logs", "/run"}) {
    if (!ec) fs::create_directories(state_dir + sub, ec);
    if (!ec) fs::permissions(state_dir + sub, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  if (ec) return absl::InternalError(Cat("--state-dir ", state_dir, ": ", ec.message()));
  if (!for_other_users) return absl::OkStatus();
  for (fs::path p = fs::absolute(state_dir).lexically_normal(); p != p.parent_path();
       p = p.parent_path()) {
    struct stat st {};
    if (stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      return absl::FailedPreconditionError(
          Cat("--state-dir ", state_dir, ": ", p.string(), " (mode ",
              fmt::format("{:o}", st.st_mode & 07777),
              ") does not let other users pass, so tasks, which run as unprivileged users, could "
              "not reach their directories: chmod o+x it, or choose another --state-dir"));
    }
  }
  return absl::OkStatus();
}

absl::Status PrepareTaskDir(const std::string& dir, const TaskIdentity& id) {
  fs::path target = fs::path(dir).lexically_normal();
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = target; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (mkdir(it->c_str(), 0711) != 0 && errno != EEXIST) {
      return absl::InternalError(Cat("cannot create ", it->string(), ": ", std::strerror(errno)));
    }
    (void)chmod(it->c_str(), 0711);  // whatever the umask
  }
  if (chown(target.c_str(), id.uid, id.gid) != 0 || chmod(target.c_str(), 0700) != 0) {
    return absl::InternalError(
        Cat("cannot give ", target.string(), " to user ", id.uid, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gpucloud::agent
