// Who a task runs as and where it may work (pure), and the directories made for it.
#include "agent/sandbox.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "testing/proc.h"
#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

TEST(NamespaceUid, StableDistinctAndUnprivileged) {
  EXPECT_EQ(NamespaceUid("team-a"), NamespaceUid("team-a"));
  EXPECT_NE(NamespaceUid("team-a"), NamespaceUid("team-b"));
  for (const char* ns : {"", "default", "team-a", "evil"}) {
    EXPECT_GE(NamespaceUid(ns), 1'000'000'000u) << ns;
    EXPECT_LT(NamespaceUid(ns), 1'100'000'000u) << ns;
  }
}

TEST(ResolveTaskIdentity, NamespaceUserUnlessTheImageSaysOtherwise) {
  const uid_t own = NamespaceUid("team-a");
  auto id = ResolveTaskIdentity("team-a", false, std::nullopt, std::nullopt, false);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->uid, own);
  EXPECT_EQ(id->gid, own);
  id = ResolveTaskIdentity("team-a", true, 1000, 2000, false);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->uid, 1000u);
  EXPECT_EQ(id->gid, 2000u);
  id = ResolveTaskIdentity("team-a", true, 1000, std::nullopt, false);
  EXPECT_EQ(id->gid, 1000u);
  // A host process as another namespace's user could read that namespace's files.
  id = ResolveTaskIdentity("team-a", false, NamespaceUid("team-b"), std::nullopt, false);
  EXPECT_TRUE(absl::IsInvalidArgument(id.status()));
  EXPECT_NE(id.status().message().find("securityContext.runAsUser"), std::string::npos);
  EXPECT_TRUE(ResolveTaskIdentity("team-a", false, own, std::nullopt, false).ok());
  id = ResolveTaskIdentity("team-a", false, std::nullopt, 6, false);  // the disk group
  EXPECT_NE(id.status().message().find("securityContext.runAsGroup: 6 applies only"),
            std::string::npos)
      << id.status();
  // Root only where the operator allows it.
  id = ResolveTaskIdentity("team-a", true, 0, std::nullopt, false);
  EXPECT_EQ(id.status().message(),
            "securityContext.runAsUser: 0 (root) is not allowed on this node (gpucloud agent run "
            "--allow-root-tasks)");
  id = ResolveTaskIdentity("team-a", true, 1000, 0, false);
  EXPECT_NE(id.status().message().find("securityContext.runAsGroup: 0"), std::string::npos);
  EXPECT_TRUE(ResolveTaskIdentity("team-a", true, 0, std::nullopt, true).ok());
}

TEST(ResolveHostWorkdir, OnlyTheTasksOwnDirectories) {
  const std::string sb = "/s/sandbox/t.0", ck = "/s/checkpoints/ns/job", op = "/srv/repo";
  EXPECT_EQ(*ResolveHostWorkdir("", sb, ck, op), op);
  EXPECT_EQ(*ResolveHostWorkdir("", sb, ck, ""), sb);
  EXPECT_EQ(*ResolveHostWorkdir("work/a", sb, ck, op), sb + "/work/a");
  EXPECT_EQ(*ResolveHostWorkdir(ck + "/x/", sb, ck, op), ck + "/x/");
  EXPECT_EQ(*ResolveHostWorkdir("/srv/repo/examples", sb, ck, op), "/srv/repo/examples");
  for (const std::string& bad : {std::string("/etc"), std::string("../../.."), sb + "/../t.1",
                                 std::string("/srv/repo2"), std::string("/")}) {
    auto r = ResolveHostWorkdir(bad, sb, ck, op);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
    EXPECT_NE(r.status().message().find("spec.tasks[].workingDir: " + bad), std::string::npos);
  }
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveHostWorkdir("/srv", sb, ck, "").status()));
}

TEST(PathInside, Lexical) {
  EXPECT_TRUE(PathInside("/a/b", "/a"));
  EXPECT_TRUE(PathInside("/a", "/a/"));
  EXPECT_FALSE(PathInside("/ab", "/a"));
  EXPECT_FALSE(PathInside("/a/../b", "/a"));
  EXPECT_FALSE(PathInside("a/b", "a"));
  EXPECT_FALSE(PathInside("/a", ""));
}

TEST(PrepareTaskDir, TheTasksAloneAndTraversableAbove) {
  testing_util::TempDir tmp("gpucloud-sandbox");
  std::string dir = tmp.path().string() + "/checkpoints/ns/job";
  TaskIdentity id{geteuid(), getegid()};
  if (geteuid() == 0) id = {4242, 4343};
  ASSERT_TRUE(PrepareTaskDir(dir, id).ok());
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, id.uid);
  EXPECT_EQ(st.st_gid, id.gid);
  ASSERT_EQ(stat((tmp.path().string() + "/checkpoints/ns").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);       // others pass through, and cannot list
  EXPECT_TRUE(PrepareTaskDir(dir, id).ok());  // again: no change, no error
}

// A task that owns a directory on the way (its checkpoint directory, holding another job's)
// cannot send the agent elsewhere with a link; an operator's (root's) link is followed.
TEST(PrepareTaskDir, FollowsNoLinkButRoots) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own links as another user";
  testing_util::TempDir tmp("gpucloud-links");
  const std::string root = tmp.path().string();
  ASSERT_TRUE(std::filesystem::create_directories(root + "/elsewhere"));
  ASSERT_TRUE(std::filesystem::create_directories(root + "/ckpt/ns/a"));
  ASSERT_EQ(symlink((root + "/elsewhere").c_str(), (root + "/ckpt/ns/a/x").c_str()), 0);
  ASSERT_EQ(lchown((root + "/ckpt/ns/a/x").c_str(), 4242, 4242), 0);  // the tenant's link
  absl::Status s = PrepareTaskDir(root + "/ckpt/ns/a/x", {4242, 4242});
  EXPECT_NE(s.message().find("a symbolic link that is not root's"), std::string::npos) << s;
  s = PrepareTaskDir(root + "/ckpt/ns/a/x/y", {4242, 4242});
  EXPECT_FALSE(s.ok());
  struct stat st {};
  ASSERT_EQ(stat((root + "/elsewhere").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // not given away
  EXPECT_FALSE(std::filesystem::exists(root + "/elsewhere/y"));
  // The operator's link (root's) is followed.
  ASSERT_EQ(lchown((root + "/ckpt/ns/a/x").c_str(), 0, 0), 0);
  EXPECT_TRUE(PrepareTaskDir(root + "/ckpt/ns/a/x/y", {4242, 4242}).ok());
  EXPECT_TRUE(std::filesystem::exists(root + "/elsewhere/y"));
}

// A task's directory goes as its owner: what that user may not remove (a root-only directory in
// it) stays, whatever the caller knows of the task (a re-adopted task's record has no identity).
// Both ways the agent has: through gpucloud-shim --remove-contents, and by a fork of itself.
class RemoveTaskDirTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RemoveTaskDirTest, RemovesAsTheDirectorysOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own directories as another user";
  const std::string shim = GetParam();
  testing_util::TempDir tmp("gpucloud-remove");
  const std::string dir = tmp.path().string() + "/sandbox";
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/work/deep"));
  std::ofstream(dir + "/work/deep/f") << "x";
  for (const char* p : {"", "/work", "/work/deep", "/work/deep/f"}) {
    ASSERT_EQ(lchown((dir + p).c_str(), 4242, 4242), 0) << p;
  }
  ASSERT_EQ(symlink("/etc/hostname", (dir + "/link").c_str()), 0);
  // A link to a directory of root's with a file the owner could not remove anyway, and one to
  // a directory of the owner's outside: neither is followed.
  ASSERT_TRUE(std::filesystem::create_directories(tmp.path() / "outside"));
  std::ofstream(tmp.path() / "outside" / "keep") << "x";
  ASSERT_EQ(lchown((tmp.path() / "outside").c_str(), 4242, 4242), 0);
  ASSERT_EQ(lchown((tmp.path() / "outside" / "keep").c_str(), 4242, 4242), 0);
  ASSERT_EQ(symlink((tmp.path() / "outside").c_str(), (dir + "/work/out").c_str()), 0);
  RemoveTaskDir(dir, shim);
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(std::filesystem::exists("/etc/hostname"));
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "outside" / "keep"));
  // A root-only directory inside: the owner cannot remove it, so it stays.
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/root-only"));
  std::ofstream(dir + "/root-only/f") << "x";
  std::ofstream(dir + "/mine") << "x";
  ASSERT_EQ(lchown((dir + "/mine").c_str(), 4242, 4242), 0);
  ASSERT_EQ(chmod((dir + "/root-only").c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), 4242, 4242), 0);
  RemoveTaskDir(dir, shim);
  EXPECT_TRUE(std::filesystem::exists(dir + "/root-only/f"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/mine"));
}

INSTANTIATE_TEST_SUITE_P(ShimAndFork, RemoveTaskDirTest,
                         ::testing::Values(std::string(GPUCLOUD_TEST_SHIM), std::string()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param.empty() ? std::string("Fork") : std::string("Shim");
                         });

// A removal that does not end (here a "shim" that sleeps) is killed at its bound and the
// directory left as it is, for the next try: the caller is never held for ever, no child stays.
TEST(RemoveTaskDirBound, AHungRemovalIsKilledAndTheDirectoryLeft) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to own directories as another user";
  testing_util::TempDir tmp("gpucloud-remove-hung");
  const std::string dir = tmp.path().string() + "/sandbox";
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/work"));
  std::ofstream(dir + "/work/f") << "x";
  for (const char* p : {"", "/work", "/work/f"}) {
    ASSERT_EQ(lchown((dir + p).c_str(), 4242, 4242), 0) << p;
  }
  const std::string hung = tmp.path().string() + "/hung-shim";
  const std::string mark = "3599." + std::to_string(getpid());  // names this test's sleep
  std::ofstream(hung) << "#!/bin/sh\nexec /bin/sleep " << mark << "\n";
  ASSERT_EQ(chmod(hung.c_str(), 0755), 0);
  EXPECT_FALSE(RemoveTaskDir(dir, hung, /*timeout_ms=*/100));
  EXPECT_TRUE(std::filesystem::exists(dir + "/work/f"));  // not by fork behind the bound either
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    EXPECT_EQ(testing_util::ReadProcFile(e.path() / "cmdline").find(mark), std::string::npos)
        << "the hung child is still there: " << e.path();
  }
  // Without a bound the real shim removes it.
  EXPECT_TRUE(RemoveTaskDir(dir, GPUCLOUD_TEST_SHIM, /*timeout_ms=*/-1));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(PrepareStateDir, PassableByTasksPrivateInsideAndRefusedUnderAClosedParent) {
  testing_util::TempDir tmp("gpucloud-state");
  std::string state = tmp.path().string() + "/open/state";
  ASSERT_TRUE(std::filesystem::create_directories(tmp.path() / "open"));
  ASSERT_TRUE(PrepareStateDir(state, true).ok());
  auto mode = [](const std::string& p) {
    struct stat st {};
    EXPECT_EQ(stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(state), 0711u);
  for (const char* sub : {"/tasks", "/logs", "/run"}) EXPECT_EQ(mode(state + sub), 0700u) << sub;
  // A parent that other users cannot pass: tasks could not reach their directories.
  std::string closed = tmp.path().string() + "/closed";
  ASSERT_TRUE(std::filesystem::create_directories(closed));
  ASSERT_EQ(chmod(closed.c_str(), 0700), 0);
  absl::Status s = PrepareStateDir(closed + "/state", true);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find(closed + " (mode 700) does not let other users pass"),
            std::string::npos)
      << s;
  EXPECT_TRUE(PrepareStateDir(closed + "/state", false).ok());  // tasks run as the agent
}

}  // namespace
}  // namespace gpucloud::agent
