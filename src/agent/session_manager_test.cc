#include "agent/session_manager.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

TEST(ExecArgv, AHostProcessRunsItsCommandFoundOnTheTasksPath) {
  testing_util::TempDir dir;
  const std::string bin = (dir.path() / "bin").string();
  mkdir(bin.c_str(), 0755);
  std::ofstream(bin + "/tool") << "#!/bin/sh\n";
  chmod((bin + "/tool").c_str(), 0755);
  std::ofstream(bin + "/notexec") << "data\n";
  SessionTarget host;
  host.env = {{"PATH", "/nonexistent:" + bin}};
  api::SessionRequest r;
  r.kind = "exec";
  r.command = {"tool", "--flag"};
  absl::StatusOr<std::vector<std::string>> argv = ExecArgv(host, r, "/bin");
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(*argv, (std::vector<std::string>{bin + "/tool", "--flag"}));
  r.command = {"notexec"};
  EXPECT_EQ(ExecArgv(host, r, "/bin").status().message(), "command not found: notexec");
  r.command = {"/bin/sh", "-c", "true"};  // a path is taken as it is
  EXPECT_EQ(ExecArgv(host, r, "/bin")->at(0), "/bin/sh");
}

TEST(ExecArgv, AContainerIsEnteredThroughPodmanExec) {
  SessionTarget c;
  c.container = "gpucloud-team-a.nb.0.1";
  testing_util::TempDir dir;
  const std::string bin = (dir.path() / "bin").string();
  mkdir(bin.c_str(), 0755);
  std::ofstream(bin + "/podman") << "#!/bin/sh\n";
  chmod((bin + "/podman").c_str(), 0755);
  c.podman = {"podman", "--root", "/r", "--runtime", "runc"};
  api::SessionRequest r;
  r.kind = "exec";
  r.command = {"bash"};
  r.tty = true;
  EXPECT_EQ(*ExecArgv(c, r, "/nonexistent:" + bin),
            (std::vector<std::string>{bin + "/podman", "--root", "/r", "--runtime", "runc", "exec",
                                      "-i", "-t", "gpucloud-team-a.nb.0.1", "bash"}));
  r.tty = false;
  EXPECT_EQ(ExecArgv(c, r, bin)->size(), 9u);  // no -t
  EXPECT_EQ(ExecArgv(c, r, "/nonexistent").status().message(), "command not found: podman");
}

TEST(FindOnPath, EmptyEntriesMeanTheCurrentDirectory) {
  EXPECT_EQ(FindOnPath("sh", "/nonexistent::/bin").value_or(""), "/bin/sh");
  EXPECT_FALSE(FindOnPath("no-such-tool-anywhere", "/bin:/usr/bin").has_value());
}

}  // namespace
}  // namespace gpucloud::agent
