// gpucloud-shim: a task's first process when the agent starts it with posix_spawn (issue 17).
// A fork of the agent copies its page tables and then takes copy-on-write faults in every one
// of its threads, for each task; spawning this small static program costs a vfork-style clone
// and one exec instead. It runs shim::RunTaskChild, the very steps the fork path runs in its
// child, and becomes the task (or stays as its waiting parent, with --status).
//
// Its interface is the executor's own (src/agent/executor.cc), not a user's:
//   gpucloud-shim --workdir DIR [--uid U --gid G] [--status PATH --status-tmp PATH] [--stdin FIFO]
//                 [--join TASKS_FILE]... [--sweep N] -- ARGV...
// with the task's log on 1 (and 2), the "go" pipe on 3 and the "failed" pipe on 4; the
// environment is the task's. Plain libc, no allocation: the task's environment (a tenant's)
// reaches nothing here but glibc's start-up, which in a static program reads GLIBC_TUNABLES
// only (malloc tuning for a program that does not allocate).
//
// A second mode empties a task's directory as its owner (agent/sandbox.h, RemoveTaskDir):
//   gpucloud-shim --remove-contents DIR --uid U --gid G
// becomes U:G (no supplementary groups) and removes everything under DIR, never following a
// link, so what the task left or plants meanwhile reaches only what is its own; what U may not
// remove stays. DIR itself stays (its parent is the agent's). Exit 0; 1 when it cannot become
// U:G; 127 on a usage error.
#include <ftw.h>
#include <grp.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/task_shim.h"

namespace {

using gpucloud::agent::shim::TaskChild;

constexpr int kGoFd = 3;
constexpr int kFailedFd = 4;
constexpr int kMaxJoins = 16;

// Reports a usage error the way the executor reads failures (an errno on the failed pipe).
[[noreturn]] void Usage() {
  int e = EINVAL;
  (void)!write(kFailedFd, &e, sizeof e);
  _exit(127);
}

bool ParseId(const char* s, unsigned* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != 0 || v > 0xFFFFFFFEUL) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

// Fills `c` from the options; returns the index of the task's argv[0].
int ParseOptions(int argc, char** argv, TaskChild& c, const char** joins) {
  int njoins = 0;
  bool uid = false, gid = false;
  int i = 1;
  for (; i < argc; ++i) {
    const char* flag = argv[i];
    if (std::strcmp(flag, "--") == 0) break;
    if (i + 1 >= argc) Usage();
    const char* value = argv[++i];
    if (std::strcmp(flag, "--workdir") == 0) {
      c.creds.workdir = value;
    } else if (std::strcmp(flag, "--uid") == 0) {
      if (!ParseId(value, &c.creds.uid)) Usage();
      uid = true;
    } else if (std::strcmp(flag, "--gid") == 0) {
      if (!ParseId(value, &c.creds.gid)) Usage();
      gid = true;
    } else if (std::strcmp(flag, "--status") == 0) {
      c.status_path = value;
    } else if (std::strcmp(flag, "--status-tmp") == 0) {
      c.status_tmp = value;
    } else if (std::strcmp(flag, "--stdin") == 0) {
      c.stdin_path = value;
    } else if (std::strcmp(flag, "--join") == 0) {
      if (njoins == kMaxJoins) Usage();
      joins[njoins++] = value;
    } else if (std::strcmp(flag, "--sweep") == 0) {
      unsigned n = 0;
      if (!ParseId(value, &n)) Usage();
      c.sweep_limit = static_cast<int>(n);
    } else {
      Usage();
    }
  }
  joins[njoins] = nullptr;
  if (uid != gid || c.creds.workdir == nullptr || i + 1 >= argc) Usage();
  if (c.status_path != nullptr && c.status_tmp == nullptr) Usage();
  c.creds.set = uid;
  return i + 1;
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW* at) {
  if (at->level > 0) remove(path);  // best effort: what cannot go stays
  return 0;
}

// --remove-contents DIR --uid U --gid G (argv[1] is --remove-contents).
int RemoveContents(int argc, char** argv) {
  unsigned uid = 0, gid = 0;
  if (argc != 7 || std::strcmp(argv[3], "--uid") != 0 || std::strcmp(argv[5], "--gid") != 0 ||
      !ParseId(argv[4], &uid) || !ParseId(argv[6], &gid)) {
    _exit(127);
  }
  if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(1);
  // Depth first (a directory after what is in it), physical (a link is removed, not followed),
  // within one file system.
  nftw(argv[2], RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--remove-contents") == 0) return RemoveContents(argc, argv);
  // The pipes came through posix_spawn's dup2, which clears close-on-exec; RunTaskChild marks
  // every descriptor above 2 close-on-exec before it execs or spawns the task.
  TaskChild c;
  const char* joins[kMaxJoins + 1];
  int first = ParseOptions(argc, argv, c, joins);
  c.log_fd = STDOUT_FILENO;
  c.go_fd = kGoFd;
  c.failed_fd = kFailedFd;
  c.join_paths = joins;
  c.argv = argv + first;
  c.envp = environ;
  gpucloud::agent::shim::RunTaskChild(c);
}
