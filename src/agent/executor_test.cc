// The executor with real processes (CTest label `integration`): environment, logs, exit codes,
// process groups, stop with a grace period, and cgroup memory limits where this machine allows.
#include "agent/executor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "agent/task_env.h"
#include "core/text.h"
#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {}
  TaskSpecToRun Shell(std::string id, std::string script) {
    TaskSpecToRun t;
    t.id = std::move(id);
    t.argv = {"/bin/sh", "-c", std::move(script)};
    t.log_path = (dir_ / (t.id + ".log")).string();
    return t;
  }
  // A FIFO the task writes a line to once it is ready; ReadLine blocks until it does (an event,
  // not a sleep).
  std::string Fifo(const std::string& name) {
    std::string path = (dir_ / name).string();
    EXPECT_EQ(mkfifo(path.c_str(), 0600), 0);
    return path;
  }
  static std::string ReadLine(const std::string& fifo) {
    std::ifstream f(fifo);
    std::string line;
    std::getline(f, line);
    return line;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  testing_util::TempDir tmp_{"gpucloud-exec"};
  const std::filesystem::path& dir_ = tmp_.path();
};

TEST_F(ExecutorTest, RunsWithItsEnvironmentAndLogsOutput) {
  Executor ex;
  TaskSpecToRun t = Shell("t1", "echo rank=$RANK world=$WORLD_SIZE; echo oops >&2; exit 3");
  t.env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}};
  ASSERT_TRUE(ex.Start(t).ok());
  TaskExit e = ex.Wait("t1");
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.signal, 0);
  EXPECT_EQ(e.Describe(), "exit code 3");
  EXPECT_EQ(Slurp(t.log_path), "rank=1 world=2\noops\n");
  EXPECT_EQ(ex.Poll("t1")->exit_code, 3);  // remembered
}

TEST_F(ExecutorTest, BadProgramsAreReportedAtStart) {
  Executor ex;
  TaskSpecToRun t = Shell("bad", "");
  t.argv = {"/nonexistent/trainer"};
  absl::Status s = ex.Start(t);
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_EQ(s.message(), "cannot run /nonexistent/trainer: No such file or directory");
  EXPECT_TRUE(absl::IsInvalidArgument(ex.Start(TaskSpecToRun{.id = "empty"})));
  ASSERT_TRUE(ex.Start(Shell("dup", "true")).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ex.Start(Shell("dup", "true"))));
}

// A host process without a command fails at Start, with the reason the agent reports, instead
// of being left waiting; nothing of it is kept.
TEST_F(ExecutorTest, ACommandlessTaskFailsAtStartWithNoCommand) {
  Executor ex;
  TaskSpecToRun t = Shell("image-only", "");
  t.argv.clear();
  absl::Status s = ex.Start(t);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s, NoCommandError());
  EXPECT_EQ(s.message(),
            "NoCommand: the task has no command and no image (give it a command to run on the "
            "node, or an image)");
  EXPECT_EQ(ex.Pid("image-only"), 0);
  EXPECT_FALSE(std::filesystem::exists(t.log_path));
  // Given a command, the same task starts.
  t.argv = {"/bin/sh", "-c", "exit 0"};
  ASSERT_TRUE(ex.Start(t).ok());
  EXPECT_EQ(ex.Wait("image-only").exit_code, 0);
}

// A task of another user runs as that user, with or without the shim, and cannot read the
// agent's private files; the shim still records its exit where the task cannot write.
TEST_F(ExecutorTest, ATaskRunsAsItsUserAndCannotReadTheAgentsFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a task as another user";
  std::string secret = (dir_ / "secret").string();
  std::ofstream(secret) << "admin-token";
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  for (bool shim : {false, true}) {
    Executor ex;
    std::string id = shim ? "shim" : "bare";
    TaskSpecToRun t = Shell(id, "id -u; id -g; id -G; cat " + secret + " || echo denied");
    t.workdir = "/";
    t.uid = 4242;
    t.gid = 4343;
    if (shim) t.status_path = (dir_ / "status").string();
    ASSERT_TRUE(ex.Start(t).ok());
    EXPECT_EQ(ex.Wait(id).exit_code, 0);
    std::string log = Slurp(t.log_path);
    EXPECT_EQ(log.substr(0, log.find("cat:")), "4242\n4343\n4343\n") << log;
    EXPECT_NE(log.find("denied"), std::string::npos) << log;
    EXPECT_EQ(log.find("admin-token"), std::string::npos) << log;
    if (shim) {
      EXPECT_EQ(ReadExitStatus(t.status_path)->exit_code, 0);
    }
  }
}

// The working directory is entered as the task's user: one under a directory only root may
// pass is refused, with or without the shim.
TEST_F(ExecutorTest, AWorkingDirectoryTheUserCannotReachIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a task as another user";
  std::string closed = (dir_ / "closed").string();
  ASSERT_TRUE(std::filesystem::create_directories(closed + "/inner"));
  ASSERT_EQ(chmod(closed.c_str(), 0700), 0);
  ASSERT_EQ(chmod((closed + "/inner").c_str(), 0777), 0);
  for (bool shim : {false, true}) {
    Executor ex;
    TaskSpecToRun t = Shell(shim ? "ws" : "wb", "pwd");
    t.workdir = closed + "/inner";
    t.uid = 4242;
    t.gid = 4242;
    if (shim) t.status_path = (dir_ / "wstatus").string();
    absl::Status s = ex.Start(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s;
  }
}

// A program the task's user may not execute is refused at start, as a missing one is.
TEST_F(ExecutorTest, AProgramTheUserMayNotRunIsReportedAtStart) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a task as another user";
  std::string prog = (dir_ / "private.sh").string();
  std::ofstream(prog) << "#!/bin/sh\necho ran\n";
  ASSERT_EQ(chmod(prog.c_str(), 0700), 0);
  for (bool shim : {false, true}) {
    Executor ex;
    TaskSpecToRun t;
    t.id = shim ? "s" : "b";
    t.argv = {prog};
    t.log_path = (dir_ / (t.id + ".log")).string();
    t.workdir = "/";
    t.uid = 4242;
    t.gid = 4242;
    if (shim) t.status_path = (dir_ / "status2").string();
    absl::Status s = ex.Start(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s;
  }
}

TEST_F(ExecutorTest, StopSignalsTheWholeGroupThenKills) {
  Executor ex;
  // The task and a child of it trap SIGTERM, write it down and go on: only SIGKILL ends them.
  std::string marker = (dir_ / "term").string();
  std::string parent_ready = Fifo("parent"), child_ready = Fifo("child");
  ASSERT_TRUE(ex.Start(Shell("stubborn", "trap 'echo term >> " + marker +
                                             "' TERM; sh -c 'trap \"echo child >> " + marker +
                                             "\" TERM; echo $$ > " + child_ready +
                                             "; while :; do sleep 0.05; done' & echo ready > " +
                                             parent_ready + "; while :; do sleep 0.05; done"))
                  .ok());
  EXPECT_EQ(ReadLine(parent_ready), "ready");
  pid_t child = std::stoi(ReadLine(child_ready));
  pid_t pid = ex.Pid("stubborn");
  EXPECT_FALSE(ex.Poll("stubborn").has_value());  // running
  absl::StatusOr<TaskExit> e = ex.Stop("stubborn", absl::Milliseconds(500));
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->stopped);
  EXPECT_EQ(e->signal, SIGKILL);
  std::string got = Slurp(marker);
  EXPECT_NE(got.find("term"), std::string::npos) << got;
  EXPECT_NE(got.find("child"), std::string::npos) << got;  // the group got SIGTERM
  // Nothing of the group is left: the leader and its child are reaped.
  EXPECT_NE(kill(pid, 0), 0);
  EXPECT_NE(kill(child, 0), 0);
}

TEST_F(ExecutorTest, StopWithinGraceLetsATaskCheckpointAndExit) {
  Executor ex;
  std::string ckpt = (dir_ / "ckpt").string();
  std::string ready = Fifo("ready");
  ASSERT_TRUE(
      ex.Start(Shell("polite", "trap 'echo saved > " + ckpt + "; exit 0' TERM; echo ready > " +
                                   ready + "; while :; do sleep 0.05; done"))
          .ok());
  EXPECT_EQ(ReadLine(ready), "ready");
  absl::StatusOr<TaskExit> e = ex.Stop("polite", absl::Seconds(30));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->exit_code, 0);
  EXPECT_EQ(e->signal, 0);
  EXPECT_EQ(Slurp(ckpt), "saved\n");
}

TEST_F(ExecutorTest, TheShimRecordsHowTheTaskEndedAndEndsTheSameWay) {
  Executor ex;
  auto with_shim = [&](std::string id, std::string script) {
    TaskSpecToRun t = Shell(id, std::move(script));
    t.status_path = (dir_ / (id + ".exit")).string();
    return t;
  };
  TaskSpecToRun exits = with_shim("exits", "echo hello; exit 3");
  ASSERT_TRUE(ex.Start(exits).ok());
  EXPECT_EQ(ex.Wait("exits").exit_code, 3);
  EXPECT_EQ(Slurp(exits.status_path), "exit 3\n");
  EXPECT_EQ(Slurp(exits.log_path), "hello\n");
  EXPECT_EQ(ReadExitStatus(exits.status_path)->exit_code, 3);
  // Killed from outside: the shim ends by the same signal, so the executor sees it too.
  std::string ready = Fifo("killed");
  TaskSpecToRun killed = with_shim("killed", "echo $$ > " + ready + "; exec sleep 30");
  ASSERT_TRUE(ex.Start(killed).ok());
  pid_t task = std::stoi(ReadLine(ready));
  EXPECT_NE(task, ex.Pid("killed"));  // the group's leader is the shim
  ASSERT_EQ(kill(task, SIGKILL), 0);
  TaskExit e = ex.Wait("killed");
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_EQ(Slurp(killed.status_path), "signal 9\n");
  EXPECT_EQ(ReadExitStatus(killed.status_path)->signal, SIGKILL);
  // Stop: SIGTERM is for the task (the shim ignores it); the task checkpoints and exits 0.
  std::string polite_ready = Fifo("polite");
  TaskSpecToRun polite = with_shim("polite", "trap 'exit 0' TERM; echo ready > " + polite_ready +
                                                 "; while :; do sleep 0.05; done");
  ASSERT_TRUE(ex.Start(polite).ok());
  EXPECT_EQ(ReadLine(polite_ready), "ready");
  absl::StatusOr<TaskExit> stopped = ex.Stop("polite", absl::Seconds(30));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->exit_code, 0);
  EXPECT_EQ(stopped->signal, 0);
  EXPECT_EQ(Slurp(polite.status_path), "exit 0\n");
  // A program that cannot run is still reported at start.
  TaskSpecToRun bad = with_shim("bad", "");
  bad.argv = {"/nonexistent/trainer"};
  EXPECT_EQ(ex.Start(bad).message(), "cannot run /nonexistent/trainer: No such file or directory");
  EXPECT_FALSE(ReadExitStatus((dir_ / "none").string()).has_value());
  std::ofstream(dir_ / "garbage") << "maybe\n";
  EXPECT_FALSE(ReadExitStatus((dir_ / "garbage").string()).has_value());
}

// The shim this suite starts tasks through: the one built beside it (GPUCLOUD_TEST_SHIM) unless
// the environment says otherwise (ctest's `.fork` run sets GPUCLOUD_SHIM=none).
class ShimEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { setenv("GPUCLOUD_SHIM", GPUCLOUD_TEST_SHIM, /*overwrite=*/0); }
};
const auto* const kShimEnvironment = ::testing::AddGlobalTestEnvironment(new ShimEnvironment);

std::string ExeOf(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink(Cat("/proc/", pid, "/exe"), ec).string();
}

TEST_F(ExecutorTest, ATasksFirstProcessIsTheShimOrAForkOfTheAgent) {
  Executor ex;
  std::string mode = std::getenv("GPUCLOUD_SHIM");
  EXPECT_EQ(ex.shim(), mode == "none" ? "" : mode);
  // With a status file the first process stays as the task's parent, so it can be looked at.
  std::string ready = Fifo("ready");
  TaskSpecToRun t = Shell("t", "echo go > " + ready + "; exec sleep 30");
  t.status_path = (dir_ / "t.exit").string();
  std::string warning;
  ASSERT_TRUE(ex.Start(t, &warning).ok());
  EXPECT_EQ(warning, "");
  EXPECT_EQ(ReadLine(ready), "go");
  std::string first = ExeOf(ex.Pid("t"));
  EXPECT_EQ(first, ex.shim().empty() ? ExeOf(getpid()) : ex.shim());
  ASSERT_TRUE(ex.Kill("t").ok());
  EXPECT_EQ(ex.Wait("t").signal, SIGKILL);
}

TEST(ChooseShim, NoneForksAMissingShimForksWithAReasonAndOneBesideTheProgramIsUsed) {
  EXPECT_EQ(ChooseShim("none", "/usr/bin/gpucloud").path, "");
  EXPECT_EQ(ChooseShim("none", "/usr/bin/gpucloud").warning, "");
  ShimChoice missing = ChooseShim("/nonexistent/gpucloud-shim", "/usr/bin/gpucloud");
  EXPECT_EQ(missing.path, "");
  EXPECT_EQ(missing.warning,
            "tasks start by fork, not through /nonexistent/gpucloud-shim (No such file or "
            "directory): slower, each start copies the agent's page tables");
  testing_util::TempDir dir("gpucloud-shim");
  std::string beside = (dir.path() / "gpucloud-shim").string();
  EXPECT_EQ(ChooseShim(nullptr, (dir.path() / "gpucloud").string()).path, "");
  std::ofstream(beside) << "#!/bin/sh\n";
  ASSERT_EQ(chmod(beside.c_str(), 0755), 0);
  EXPECT_EQ(ChooseShim(nullptr, (dir.path() / "gpucloud").string()).path, beside);
  EXPECT_EQ(ChooseShim("", (dir.path() / "gpucloud").string()).path, beside);
  EXPECT_EQ(ChooseShim(GPUCLOUD_TEST_SHIM, "/usr/bin/gpucloud").path, GPUCLOUD_TEST_SHIM);
}

TEST_F(ExecutorTest, AShimThatIsMissingFallsBackToForkWarningOnce) {
  std::string saved = std::getenv("GPUCLOUD_SHIM");
  setenv("GPUCLOUD_SHIM", (dir_ / "no-shim").c_str(), 1);
  Executor ex;
  setenv("GPUCLOUD_SHIM", saved.c_str(), 1);
  std::string first, second;
  ASSERT_TRUE(ex.Start(Shell("a", "exit 4"), &first).ok());
  ASSERT_TRUE(ex.Start(Shell("b", "exit 5"), &second).ok());
  EXPECT_NE(first.find("tasks start by fork, not through " + (dir_ / "no-shim").string()),
            std::string::npos)
      << first;
  EXPECT_EQ(second, "");
  EXPECT_EQ(ex.Wait("a").exit_code, 4);
  EXPECT_EQ(ex.Wait("b").exit_code, 5);
}

// Counts the watcher's calls; Await blocks until there has been one more (an event, not a sleep;
// the timeout only keeps a broken build from hanging).
class ExitNotice {
 public:
  void Fire() {
    {
      std::lock_guard lock(mu_);
      ++fired_;
    }
    cv_.notify_all();
  }
  bool Await(int count, absl::Duration timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return fired_ >= count; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int fired_ = 0;
};

TEST_F(ExecutorTest, ATasksExitIsAnnouncedAsItHappensNotOnATick) {
  ExitNotice notice;
  ExitWatcher watcher([&] { notice.Fire(); });
  if (!watcher.available()) GTEST_SKIP() << "no pidfd_open on this kernel: the agent polls";
  Executor ex(&watcher);
  for (bool shim : {false, true}) {
    const std::string id = shim ? "shimmed" : "plain";
    std::string go = Fifo(id + ".go");
    TaskSpecToRun t = Shell(id, "read x < " + go + "; exit 4");
    if (shim) t.status_path = (dir_ / (id + ".exit")).string();
    ASSERT_TRUE(ex.Start(t).ok());
    EXPECT_FALSE(ex.Poll(id).has_value());
    const int before = shim ? 1 : 0;
    absl::Time released;
    {
      std::ofstream f(go);
      released = absl::Now();
      f << "go\n";
    }
    ASSERT_TRUE(notice.Await(before + 1, absl::Seconds(10))) << id << ": no notification";
    const absl::Duration after = absl::Now() - released;
    // A shell's exit and its reaping take a few ms; the agent's old tick was 100 ms.
    EXPECT_LT(after, absl::Milliseconds(60)) << id;
    std::optional<TaskExit> e = ex.Poll(id);  // reaped at once: it has ended
    ASSERT_TRUE(e.has_value()) << id;
    EXPECT_EQ(e->exit_code, 4) << id;
  }
}

TEST_F(ExecutorTest, AProcessThatIsNotATaskCanBeWatchedToo) {
  // As the agent watches a task it re-adopted from an earlier agent: by pid, through a pidfd.
  ExitNotice notice;
  ExitWatcher watcher([&] { notice.Fire(); });
  if (!watcher.available()) GTEST_SKIP() << "no pidfd_open on this kernel: the agent polls";
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(go[1]);
    char byte;
    (void)!read(go[0], &byte, 1);
    _exit(0);
  }
  close(go[0]);
  int fd = OpenPidFd(pid);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(watcher.Add(fd));
  EXPECT_FALSE(notice.Await(1, absl::Milliseconds(20)));  // it runs: nothing yet
  close(go[1]);                                           // it ends
  EXPECT_TRUE(notice.Await(1, absl::Seconds(10)));
  waitpid(pid, nullptr, 0);
  close(fd);
  EXPECT_FALSE(watcher.Add(-1));
}

TEST_F(ExecutorTest, TasksDoNotInheritTheAgentsBlockedOrIgnoredSignals) {
  // The agent blocks SIGTERM (it sigwaits for it) and ignores SIGPIPE; its tasks must not.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  auto old_pipe = signal(SIGPIPE, SIG_IGN);
  Executor ex;
  std::string ckpt = (dir_ / "ckpt").string(), ready = Fifo("ready2");
  TaskSpecToRun t;
  t.id = "polite2";
  // Python changes no signal mask of its own (a shell would): it shows what it inherited.
  t.argv = {"python3", "-u", "-c",
            "import signal, sys, time\n"
            "sys.stdout.write(''.join(l for l in open('/proc/self/status') if "
            "l.startswith(('SigBlk', 'SigIgn'))))\n"
            "stop = []\n"
            "signal.signal(signal.SIGTERM, lambda *a: stop.append(1))\n"
            "with open('" +
                ready +
                "', 'w') as f: f.write('ready\\n')\n"
                "while not stop: time.sleep(0.05)\n"
                "with open('" +
                ckpt + "', 'w') as f: f.write('saved\\n')\n"};
  t.log_path = (dir_ / "polite2.log").string();
  absl::Status started = ex.Start(t);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  signal(SIGPIPE, old_pipe);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(ReadLine(ready), "ready");
  absl::StatusOr<TaskExit> e = ex.Stop("polite2", absl::Seconds(10));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->signal, 0) << e->Describe();  // it saw SIGTERM and exited on its own
  EXPECT_EQ(Slurp(ckpt), "saved\n");
  std::string log = Slurp((dir_ / "polite2.log").string());
  EXPECT_NE(log.find("SigBlk:\t0000000000000000"), std::string::npos) << log;
  EXPECT_EQ(log.find("SigIgn:\t0000000000001000"), std::string::npos) << log;  // SIGPIPE (13)
}

// What the agent has open without O_CLOEXEC (a listening socket like its metrics port, a file)
// reaches neither the task nor its shim: each has 0, 1 and 2 only.
TEST_F(ExecutorTest, TasksAndShimsInheritOnlyTheStandardDescriptors) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);  // no SOCK_CLOEXEC, as a careless library
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  int file = open((dir_ / "secret").c_str(), O_WRONLY | O_CREAT, 0600);  // no O_CLOEXEC
  ASSERT_GE(file, 0);
  Executor ex;
  // `; true` keeps the shell from exec'ing ls in its place: ls lists the shell's descriptors.
  TaskSpecToRun plain = Shell("plain", "ls /proc/$$/fd; true");
  ASSERT_TRUE(ex.Start(plain).ok());
  EXPECT_EQ(ex.Wait("plain").exit_code, 0);
  EXPECT_EQ(Slurp(plain.log_path), "0\n1\n2\n");
  // With a shim, the task's parent is the shim: it holds nothing of the agent's either.
  TaskSpecToRun shimmed = Shell("shimmed", "ls /proc/$$/fd; echo shim; ls /proc/$PPID/fd; true");
  shimmed.status_path = (dir_ / "shimmed.exit").string();
  ASSERT_TRUE(ex.Start(shimmed).ok());
  EXPECT_EQ(ex.Wait("shimmed").exit_code, 0);
  EXPECT_EQ(Slurp(shimmed.log_path), "0\n1\n2\nshim\n0\n1\n2\n");
  close(listener);
  close(file);
}

// A tenant's files at rest: the log and the exit status are the agent's user's alone, whatever
// the umask.
TEST_F(ExecutorTest, LogsAndStatusFilesAreCreatedPrivate) {
  mode_t old = umask(0);
  Executor ex;
  TaskSpecToRun t = Shell("private", "echo secret");
  t.status_path = (dir_ / "private.exit").string();
  absl::Status started = ex.Start(t);
  umask(old);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(ex.Wait("private").exit_code, 0);
  struct stat st;
  ASSERT_EQ(stat(t.log_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(t.status_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A fork bomb in a task with pids.max = 20 cannot start 100 processes. Needs a writable pids
// controller (root, cgroup v1 or v2); skipped, saying why, elsewhere.
TEST_F(ExecutorTest, APidLimitBoundsAForkBomb) {
  Executor ex;
  // dash ends at its first failed fork ("Cannot fork"); what it started is counted in the log.
  TaskSpecToRun t =
      Shell("bomb", "for i in $(seq 100); do sleep 30 & echo started; done; echo all");
  t.pids_max = 20;
  std::string warning;
  ASSERT_TRUE(ex.Start(t, &warning).ok());
  TaskExit e = ex.Wait("bomb");  // the leader ends; the group's sleeps are killed with it
  if (!warning.empty()) GTEST_SKIP() << warning;
  std::string log = Slurp(t.log_path);
  size_t started = 0;
  for (size_t at = log.find("started\n"); at != std::string::npos;
       at = log.find("started\n", at + 1)) {
    ++started;
  }
  EXPECT_LT(started, 20u) << log;
  EXPECT_GT(started, 0u) << log;
  EXPECT_EQ(log.find("all\n"), std::string::npos) << log;
  EXPECT_NE(e.exit_code, 0) << e.Describe();
}

// A task's groups are named by its id and the agent's pid, so two agents on one host (tests
// running side by side, nodes in network namespaces) never share or remove each other's group.
// The task reads its own /proc/self/cgroup. Skipped, saying why, without writable cgroups.
TEST_F(ExecutorTest, ATasksCgroupIsNamedByItsIdAndTheAgentsPid) {
  Executor ex;
  TaskSpecToRun t = Shell("named", "cat /proc/self/cgroup");
  t.pids_max = 20;
  std::string warning;
  ASSERT_TRUE(ex.Start(t, &warning).ok());
  TaskExit e = ex.Wait("named");
  if (!warning.empty()) GTEST_SKIP() << warning;
  ASSERT_EQ(e.exit_code, 0) << e.Describe();
  std::string log = Slurp(t.log_path);
  EXPECT_NE(log.find(Cat("/gpucloud/named.", getpid(), "\n")), std::string::npos) << log;
}

TEST_F(ExecutorTest, LogsAreRotated) {
  std::string path = (dir_ / "r.log").string();
  { std::ofstream(path) << std::string(2000, 'a'); }
  RotateLog(path, 1000, 2);
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
  EXPECT_EQ(std::filesystem::file_size(path + ".1"), 2000u);
  { std::ofstream(path) << std::string(1500, 'b'); }
  RotateLog(path, 1000, 2);
  EXPECT_EQ(std::filesystem::file_size(path + ".1"), 1500u);
  EXPECT_EQ(std::filesystem::file_size(path + ".2"), 2000u);
  RotateLog(path, 1000, 2);  // small: left alone
  EXPECT_EQ(std::filesystem::file_size(path + ".1"), 1500u);
}

TEST_F(ExecutorTest, MemoryLimitEndsInAReportedOomKill) {
  Executor ex;
  // tail keeps the last lines, here one newline-free 256 MiB line, in memory; the limit is 64 MiB.
  TaskSpecToRun t = Shell("hog", "head -c 268435456 /dev/zero | tail > /dev/null");
  t.memory = MiB(64);
  t.cpu = MilliCpu(1000);
  std::string warning;
  ASSERT_TRUE(ex.Start(t, &warning).ok());
  TaskExit e = ex.Wait("hog");
  if (!warning.empty()) GTEST_SKIP() << warning;  // no writable cgroups here
  EXPECT_TRUE(e.oom_killed) << e.Describe();
  EXPECT_EQ(e.Describe(), "killed by the OOM killer (memory limit)");
}

}  // namespace
}  // namespace gpucloud::agent

namespace gpucloud::agent {
namespace {

// The example trainer (examples/trainer/train.py) under the executor: two ranks, one fails and
// is restarted from its checkpoint; both final losses equal a failure-free run's.
class TrainerTest : public ExecutorTest {
 protected:
  TaskSpecToRun Trainer(const std::string& id, int rank, const std::string& ckpt,
                        std::vector<std::string> extra = {}, int restart = 0) {
    TaskEnvInput in;
    in.job = "demo";
    in.task = "worker";
    in.world_size = 2;
    in.rank = rank;
    in.local_rank = rank;
    in.local_world_size = 2;
    in.checkpoint_dir = ckpt;
    in.restart_count = restart;
    TaskSpecToRun t;
    t.id = id;
    t.argv = {"python3", std::string(GPUCLOUD_SOURCE_DIR) + "/examples/trainer/train.py", "--steps",
              "120"};
    t.argv.insert(t.argv.end(), extra.begin(), extra.end());
    t.env = BuildTaskEnv(in);
    t.env["PATH"] = std::getenv("PATH");
    t.log_path = (dir_ / (id + ".log")).string();
    return t;
  }
  std::string FinalLoss(const std::string& log) {
    std::string text = Slurp(log);
    size_t at = text.find("final loss ");
    return at == std::string::npos ? "none: " + text : text.substr(at + 11, 8);
  }
};

TEST_F(TrainerTest, RestartFromCheckpointGivesTheSameResult) {
  Executor ex;
  std::string clean = (dir_ / "clean").string(), faulty = (dir_ / "faulty").string();
  for (int r = 0; r < 2; ++r)
    ASSERT_TRUE(ex.Start(Trainer("clean" + std::to_string(r), r, clean)).ok());
  ASSERT_TRUE(ex.Start(Trainer("f0", 0, faulty)).ok());
  ASSERT_TRUE(ex.Start(Trainer("f1", 1, faulty, {"--fail-at-step", "50"})).ok());
  for (const char* id : {"clean0", "clean1", "f0"}) EXPECT_EQ(ex.Wait(id).exit_code, 0) << id;
  EXPECT_EQ(ex.Wait("f1").exit_code, 1);
  ASSERT_TRUE(ex.Start(Trainer("f1-again", 1, faulty, {}, /*restart=*/1)).ok());
  EXPECT_EQ(ex.Wait("f1-again").exit_code, 0);
  EXPECT_NE(Slurp((dir_ / "f1-again.log").string()).find("starting at step 40 (restart 1)"),
            std::string::npos)
      << Slurp((dir_ / "f1-again.log").string());
  EXPECT_EQ(FinalLoss((dir_ / "f0.log").string()), FinalLoss((dir_ / "clean0.log").string()));
  EXPECT_EQ(FinalLoss((dir_ / "f1-again.log").string()), FinalLoss((dir_ / "clean1.log").string()));
  EXPECT_NE(FinalLoss((dir_ / "clean0.log").string()), FinalLoss((dir_ / "clean1.log").string()));
}

TEST_F(TrainerTest, ASecondAttemptFindsTheLockTaken) {
  std::string ckpt = (dir_ / "ckpt").string();
  std::filesystem::create_directories(ckpt);
  int fd = open((ckpt + "/rank0.lock").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // what a running first attempt holds
  Executor ex;
  ASSERT_TRUE(ex.Start(Trainer("second", 0, ckpt)).ok());
  EXPECT_EQ(ex.Wait("second").exit_code, 75);
  close(fd);
}

}  // namespace
}  // namespace gpucloud::agent
