#include "server/paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace gpucloud::server {
namespace {

std::string Resolve(std::string_view dir, std::string_view root = "/srv/ckpt") {
  absl::StatusOr<std::string> r = ResolveCheckpointDir(root, "team-a", "train", dir);
  return r.ok() ? *r : "error: " + std::string(r.status().message());
}

TEST(CheckpointDir, DefaultIsTheJobsDirectoryInItsNamespace) {
  EXPECT_EQ(Resolve(""), "/srv/ckpt/team-a/train");
  EXPECT_EQ(Resolve("", "/srv/ckpt/"), "/srv/ckpt/team-a/train");
  EXPECT_EQ(Resolve("", ".gpucloud/checkpoints"), ".gpucloud/checkpoints/team-a/train");
}

TEST(CheckpointDir, RelativeResolvesInsideTheNamespacesTree) {
  EXPECT_EQ(Resolve("run1"), "/srv/ckpt/team-a/run1");
  EXPECT_EQ(Resolve("runs/../run2"), "/srv/ckpt/team-a/run2");
  EXPECT_EQ(Resolve("run_2.v-1/"), "/srv/ckpt/team-a/run_2.v-1");
  // One directory name: no tenant owns a directory above another's; nothing a mount option
  // could be read from.
  for (const char* bad : {"runs/1", "jobA/x", "x,U=true", "a:b", "a b", "x=1"}) {
    EXPECT_EQ(Resolve(bad).substr(0, 47), "error: spec.checkpoint.dir: must be one directo") << bad;
  }
  EXPECT_EQ(Resolve("/srv/ckpt/team-a/jobA/x").substr(0, 47),
            "error: spec.checkpoint.dir: must be one directo");
  EXPECT_EQ(Resolve("./run3"), "/srv/ckpt/team-a/run3");
}

TEST(CheckpointDir, RelativeMayNotLeaveTheTree) {
  EXPECT_EQ(Resolve("../team-b/train"),
            "error: spec.checkpoint.dir: must name a directory inside the namespace's checkpoint "
            "tree /srv/ckpt/team-a/, got \"../team-b/train\"");
  EXPECT_EQ(Resolve("runs/../../x").substr(0, 33), "error: spec.checkpoint.dir: must ");
  EXPECT_EQ(Resolve(".").substr(0, 33), "error: spec.checkpoint.dir: must ");
  EXPECT_EQ(Resolve("a/..").substr(0, 33), "error: spec.checkpoint.dir: must ");
}

TEST(CheckpointDir, AbsoluteOnlyInsideTheNamespacesTree) {
  EXPECT_EQ(Resolve("/srv/ckpt/team-a/run1"), "/srv/ckpt/team-a/run1");
  EXPECT_EQ(Resolve("/srv/ckpt/team-a/x/../run1/"), "/srv/ckpt/team-a/run1");
  EXPECT_EQ(Resolve("/srv/ckpt/team-b/train"),
            "error: spec.checkpoint.dir: must lie inside the namespace's checkpoint tree "
            "/srv/ckpt/team-a/ (or be relative to it), got \"/srv/ckpt/team-b/train\"");
  for (const char* bad : {"/etc", "/", "/srv/ckpt", "/srv/ckpt/team-a", "/srv/ckpt/team-a/",
                          "/srv/ckpt/team-a/../team-b", "/srv/ckpt/team-ab/x",
                          "/srv/ckpt/team-a/x/../../team-b/y", "//srv/ckpt/team-b/x"}) {
    EXPECT_EQ(Resolve(bad).substr(0, 44), "error: spec.checkpoint.dir: must lie inside ") << bad;
  }
}

TEST(CheckpointDir, ARelativeRootIsTakenFromTheWorkingDirectory) {
  std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(Resolve(cwd + "/ckpt/team-a/run1", "ckpt"), cwd + "/ckpt/team-a/run1");
  EXPECT_EQ(Resolve(cwd + "/ckpt/team-b/run1", "./ckpt").substr(0, 44),
            "error: spec.checkpoint.dir: must lie inside ");
}

}  // namespace
}  // namespace gpucloud::server
