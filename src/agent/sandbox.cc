#include "agent/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <tuple>

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
  // A host process keeps its namespace's user and group.
  for (auto [field, what, value] : {std::tuple("runAsUser", "user", run_as_user),
                                    std::tuple("runAsGroup", "group", run_as_group)}) {
    if (value && !has_image && *value != own) {
      return absl::InvalidArgumentError(
          Cat("securityContext.", field, ": ", *value,
              " applies only to a task with an image; a host process runs as its namespace's ",
              what, " ", own));
    }
  }
  TaskIdentity id{own, own};
  if (run_as_user) id.uid = id.gid = static_cast<uid_t>(*run_as_user);
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
  for (const char* sub : {"/tasks", "/logs", "/run", "/pull"}) {
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

namespace {

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::InternalError(Cat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

// Opens directory `name` in `dirfd` without following a symbolic link that is not root's (the
// kernel's protected_symlinks rule: a tenant's link is never followed by the agent, an
// operator's is).
int OpenDirAt(int dirfd, const std::string& name) {
  int fd = openat(dirfd, name.c_str(), O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
  if (fd >= 0 || (errno != ELOOP && errno != ENOTDIR)) return fd;
  struct stat st {};
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
  if (!S_ISLNK(st.st_mode) || st.st_uid != 0) {
    errno = ELOOP;
    return -1;
  }
  return openat(dirfd, name.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
}

}  // namespace

absl::StatusOr<int> OpenTaskDir(const std::string& dir) {
  fs::path target = fs::path(dir).lexically_normal();
  if (!target.is_absolute()) target = fs::absolute(target).lexically_normal();
  int fd = open("/", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  fs::path at = "/";
  for (const fs::path& part : target.relative_path()) {
    if (part.empty() || part == ".") continue;
    at /= part;
    int next = OpenDirAt(fd, part.string());
    if (next < 0 && errno == ENOENT) {
      if (mkdirat(fd, part.c_str(), 0711) != 0 && errno != EEXIST) {
        close(fd);
        return Errno("create", at.string());
      }
      next = OpenDirAt(fd, part.string());
      if (next >= 0 && fchmod(next, at == target ? 0700 : 0711) != 0) {  // whatever the umask
        close(next);
        next = -1;
      }
    }
    close(fd);
    if (next < 0) {
      return errno == ELOOP ? absl::InternalError(Cat("cannot use ", at.string(),
                                                      ": a symbolic link that is not root's"))
                            : Errno("open", at.string());
    }
    fd = next;
  }
  return fd;
}

absl::Status GiveTaskDir(int fd, const std::string& dir, const TaskIdentity& id) {
  if (fchown(fd, id.uid, id.gid) != 0 || fchmod(fd, 0700) != 0) {
    return absl::InternalError(
        Cat("cannot give ", dir, " to user ", id.uid, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// Reaps `pid` (its wait status in `status`, if given), killing it (SIGKILL) when it has not ended
// after `timeout_ms` (< 0: no bound; also none where pidfd_open is missing: Linux before 5.3).
// False when it had to be killed; a child that does not die even then (stuck in the kernel) is
// left unreaped after another second.
bool WaitBounded(pid_t pid, int timeout_ms, int* status) {
  const int fd = timeout_ms < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  bool ended = true;
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    int rc;
    while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
    }
    if (rc == 0) {
      ended = false;
      kill(pid, SIGKILL);
      while ((rc = poll(&p, 1, 1000)) < 0 && errno == EINTR) {
      }
      if (rc == 0) {
        close(fd);
        return false;
      }
    }
    close(fd);
  }
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  return ended;
}

// Empties `dir` as uid:gid in a child: gpucloud-shim --remove-contents when `shim` is given,
// else a fork of this process. Waits for it, at most `timeout_ms` (WaitBounded): false when it
// was cut off (then nothing more is tried).
bool RemoveContentsAs(const std::string& dir, uid_t uid, gid_t gid, const std::string& shim,
                      int timeout_ms) {
  pid_t pid = -1;
  if (!shim.empty()) {
    std::string u = std::to_string(uid), g = std::to_string(gid);
    const char* argv[] = {"gpucloud-shim", "--remove-contents", dir.c_str(), "--uid", u.c_str(),
                          "--gid",         g.c_str(),           nullptr};
    const char* envp[] = {nullptr};
    // Nothing of the caller's but 0-2, and a clean signal state: it runs as the task's user.
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    if (posix_spawn(&pid, shim.c_str(), &fa, &attr, const_cast<char**>(argv),
                    const_cast<char**>(envp)) != 0) {
      pid = -1;
    }
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    if (pid > 0 && !WaitBounded(pid, timeout_ms, &status)) return false;
    // A shim that did not do it (an older one without --remove-contents): by fork, then.
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    pid = -1;
  }
  if (pid < 0) {
    pid = fork();
    if (pid == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(1);
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
      _exit(0);
    }
  }
  return pid <= 0 || WaitBounded(pid, timeout_ms, nullptr);  // the fork's
}

}  // namespace

bool RemoveTaskDir(const std::string& dir, const std::string& shim, int timeout_ms) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return true;
  std::error_code ec;
  if (st.st_uid == geteuid()) {
    fs::remove_all(dir, ec);  // the agent's own (it never gave it away)
    return true;
  }
  if (!RemoveContentsAs(dir, st.st_uid, st.st_gid, shim, timeout_ms)) return false;
  rmdir(dir.c_str());  // left when the task's user could not empty it: kept, not forced
  return true;
}

absl::Status PrepareTaskDir(const std::string& dir, const TaskIdentity& id) {
  absl::StatusOr<int> fd = OpenTaskDir(dir);
  if (!fd.ok()) return fd.status();
  absl::Status s = GiveTaskDir(*fd, dir, id);
  close(*fd);
  return s;
}

}  // namespace gpucloud::agent
