// The container runtime's pure parts: the Podman command lines, pull policies, pull errors and
// back-off; and, where Podman runs here, a real container of a locally built image.
#include "agent/container.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpucloud::agent {
namespace {

bool HasPair(const std::vector<std::string>& argv, const std::string& flag,
             const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag && argv[i + 1] == value) return true;
  }
  return false;
}

ContainerTask Task() {
  ContainerTask t;
  t.name = "gpucloud-team-a.train.0.1";
  t.image = "registry.local:5000/team-a/trainer:1";
  t.command = {"python3", "train.py", "--steps", "a b"};
  t.env = {{"RANK", "0"}, {"QUOTE", "x=\"y\""}};
  t.workdir = "/app";
  t.uid = 1234;
  t.gid = 5678;
  t.mounts = {{"/var/lib/gpucloud/ckpt/team-a/train", "/gpucloud/checkpoints", false},
              {"/opt/data", "/data", true}};
  t.cdi_devices = {"nvidia.com/gpu=GPU-1"};
  t.cpu_milli = 1500;
  t.memory_mib = 2048;
  t.pids_max = 4096;
  t.labels = {{"gpucloud.task", "team-a.train.0"}};
  return t;
}

TEST(PodmanRunArgv, IsolatesAndLimitsTheTask) {
  ContainerRuntimeOptions o;
  o.oci_runtime = "runc";
  o.storage_root = "/s";
  o.run_root = "/r";
  o.nofile = 1024;
  o.nproc = 2048;
  std::vector<std::string> argv = PodmanRunArgv(o, Task());
  std::vector<std::string> head(argv.begin(), argv.begin() + 8);
  EXPECT_EQ(head, (std::vector<std::string>{"podman", "--root", "/s", "--runroot", "/r",
                                            "--runtime", "runc", "run"}));
  EXPECT_TRUE(HasPair(argv, "--name", "gpucloud-team-a.train.0.1"));
  EXPECT_TRUE(HasPair(argv, "--pull", "never"));  // the agent pulled it; pulls are not run time
  EXPECT_TRUE(HasPair(argv, "--network", "host"));
  for (const char* ns : {"--pid", "--ipc", "--uts"}) EXPECT_TRUE(HasPair(argv, ns, "private"));
  EXPECT_TRUE(HasPair(argv, "--security-opt", "no-new-privileges"));
  EXPECT_TRUE(HasPair(argv, "--user", "1234:5678"));
  EXPECT_TRUE(HasPair(argv, "--ulimit", "nofile=1024:1024"));
  EXPECT_TRUE(HasPair(argv, "--ulimit", "nproc=2048:2048"));
  EXPECT_TRUE(HasPair(argv, "--cpus", "1.500"));
  EXPECT_TRUE(HasPair(argv, "--memory", "2048m"));
  EXPECT_TRUE(HasPair(argv, "--memory-swap", "2048m"));
  EXPECT_TRUE(HasPair(argv, "--pids-limit", "4096"));
  EXPECT_TRUE(HasPair(argv, "--workdir", "/app"));
  EXPECT_TRUE(HasPair(argv, "--mount",
                      "type=bind,source=/var/lib/gpucloud/ckpt/team-a/train,"
                      "destination=/gpucloud/checkpoints,rw=true"));
  EXPECT_TRUE(HasPair(argv, "--mount", "type=bind,source=/opt/data,destination=/data,ro=true"));
  EXPECT_TRUE(HasPair(argv, "--device", "nvidia.com/gpu=GPU-1"));
  EXPECT_TRUE(HasPair(argv, "--env", "QUOTE=x=\"y\""));
  EXPECT_TRUE(HasPair(argv, "--label", "gpucloud.task=team-a.train.0"));
  // The command replaces the image's entrypoint and command, arguments kept whole; the image
  // comes last.
  EXPECT_TRUE(HasPair(argv, "--entrypoint", R"(["python3","train.py","--steps","a b"])"));
  EXPECT_EQ(argv.back(), "registry.local:5000/team-a/trainer:1");
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--privileged"), 0);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--cap-add"), 0);
}

TEST(PodmanRunArgv, WithoutACommandTheImageDecides) {
  ContainerTask t = Task();
  t.command.clear();
  t.cpu_milli.reset();
  t.memory_mib.reset();
  t.workdir.clear();
  std::vector<std::string> argv = PodmanRunArgv({}, t);
  EXPECT_EQ(argv[0], "podman");
  EXPECT_EQ(argv[1], "run");
  for (const char* f : {"--entrypoint", "--cpus", "--memory", "--workdir"}) {
    EXPECT_EQ(std::count(argv.begin(), argv.end(), f), 0) << f;
  }
  EXPECT_EQ(argv.back(), t.image);
  // Args alone go to the image's entrypoint.
  t.command = {"--steps", "5"};
  t.args_only = true;
  argv = PodmanRunArgv({}, t);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--entrypoint"), 0);
  std::vector<std::string> tail(argv.end() - 3, argv.end());
  EXPECT_EQ(tail, (std::vector<std::string>{t.image, "--steps", "5"}));
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "-i"), 0);
  t.stdin = true;  // an interactive task: the container reads podman's stdin (its FIFO)
  argv = PodmanRunArgv({}, t);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "-i"), 1);
}

TEST(PodmanArgv, RemoveAndImages) {
  ContainerRuntimeOptions o;
  o.storage_root = "/s";
  EXPECT_EQ(PodmanRemoveArgv(o, "c1"),
            (std::vector<std::string>{"podman", "--root", "/s", "rm", "--force", "--ignore",
                                      "--time", "0", "c1"}));
  EXPECT_EQ(PodmanImagesArgv({}),
            (std::vector<std::string>{"podman", "images", "--format", "json"}));
  EXPECT_EQ(PodmanRemoveImageArgv({}, {"abc", {}, {}, 1, 0, 0}),
            (std::vector<std::string>{"podman", "rmi", "abc"}));
  EXPECT_EQ(PodmanRemoveImageArgv({}, {"abc", {"r/x:1", "s/x:1"}, {}, 1, 0, 0}),
            (std::vector<std::string>{"podman", "rmi", "r/x:1", "s/x:1"}));
}

TEST(PullErrorReason, TakesPodmansErrorLine) {
  EXPECT_EQ(PullErrorReason("Trying to pull registry.local/x:1...\n"
                            "Error: initializing source docker://registry.local/x:1: reading "
                            "manifest 1 in registry.local/x: manifest unknown\n"),
            "initializing source docker://registry.local/x:1: reading manifest 1 in "
            "registry.local/x: manifest unknown");
  EXPECT_EQ(PullErrorReason("something broke\n\n"), "something broke");
  EXPECT_EQ(PullErrorReason(""), "podman gave no reason");
  EXPECT_EQ(PullErrorReason("Error: " + std::string(1000, 'x')).size(), 300u);
}

TEST(PullBackoff, DoublesToFiveMinutes) {
  EXPECT_EQ(PullBackoff(1), absl::Seconds(5));
  EXPECT_EQ(PullBackoff(2), absl::Seconds(10));
  EXPECT_EQ(PullBackoff(4), absl::Seconds(40));
  EXPECT_EQ(PullBackoff(50), absl::Minutes(5));
}

TEST(RunCaptured, GivesStatusAndOutput) {
  std::string out;
  EXPECT_EQ(RunCaptured({"/bin/sh", "-c", "echo a; echo b >&2; exit 4"}, &out), 4);
  EXPECT_EQ(out, "a\nb\n");
  EXPECT_EQ(RunCaptured({"/nonexistent/podman"}, &out), -1);
  EXPECT_NE(out.find("No such file"), std::string::npos) << out;
  // Past its time it is killed, and says so where PullErrorReason looks.
  absl::Time start = absl::Now();
  EXPECT_EQ(
      RunCaptured({"/bin/sh", "-c", "echo started; exec sleep 30"}, &out, absl::Milliseconds(200)),
      -2);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(PullErrorReason(out), "/bin/sh took longer than 200ms and was stopped");
  EXPECT_NE(out.find("started"), std::string::npos);
}

TEST(ImageGc, ParsesPodmansListing) {
  absl::StatusOr<std::vector<StoredImage>> list = ParseImageList(R"([
    {"Id": "aaa", "Names": ["r/x:1", "r/x:latest"], "Size": 1000, "Created": 50,
     "Containers": 1},
    {"Id": "bbb", "Names": null, "Size": 20, "Created": 0, "Containers": 0}])");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, "aaa");
  EXPECT_EQ((*list)[0].names, (std::vector<std::string>{"r/x:1", "r/x:latest"}));
  EXPECT_EQ((*list)[0].size, 1000);
  EXPECT_EQ((*list)[0].containers, 1);
  EXPECT_TRUE((*list)[1].names.empty());
  EXPECT_TRUE(absl::IsInvalidArgument(ParseImageList("{}").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseImageList("[{\"Size\": 1}]").status()));
}

TEST(ImageGc, CanonicalNamesAreHowPodmanListsImages) {
  EXPECT_EQ(CanonicalImageName("busybox"), "docker.io/library/busybox:latest");
  EXPECT_EQ(CanonicalImageName("pytorch/pytorch:2.0"), "docker.io/pytorch/pytorch:2.0");
  EXPECT_EQ(CanonicalImageName("registry.local:5000/x"), "registry.local:5000/x:latest");
  EXPECT_EQ(CanonicalImageName("localhost/gpucloud/trainer:1"), "localhost/gpucloud/trainer:1");
  EXPECT_EQ(CanonicalImageName("127.0.0.1:5000/a/b@sha256:ab"), "127.0.0.1:5000/a/b@sha256:ab");
  // A job's short name and a digest keep the image Podman lists under the long ones.
  std::vector<StoredImage> images = {{"hub", {"docker.io/pytorch/pytorch:2.0"}, {}, 100, 0, 0},
                                     {"pinned", {}, {"r.local/x@sha256:ab"}, 100, 0, 0}};
  EXPECT_TRUE(
      PlanImageEviction(images, 0, 0, {}, {"pytorch/pytorch:2.0", "r.local/x@sha256:ab"}).empty());
}

TEST(ImageGc, EvictsTheLeastRecentlyUsedUnusedImagesUntilTheStoreFits) {
  auto ids = [](const std::vector<StoredImage>& v) {
    std::vector<std::string> out;
    for (const StoredImage& i : v) out.push_back(i.id);
    return out;
  };
  std::vector<StoredImage> images = {
      {"in-use", {"r.io/a:1"}, {}, 400, 10, 1},     // a container uses it
      {"waiting", {"r.io/b:1"}, {}, 400, 20, 0},    // a task waits for it
      {"old-built", {"r.io/c:1"}, {}, 300, 0, 0},   // built in 1970, used a minute ago
      {"new-unused", {"r.io/d:1"}, {}, 300, 90, 0}  // created recently, never used here
  };
  std::map<std::string, int64_t> last_used = {{"r.io/c:1", 100}};
  std::set<std::string> keep = {"r.io/b:1"};
  // 1400 bytes against 2000: nothing goes.
  EXPECT_TRUE(PlanImageEviction(images, 2000, 0, last_used, keep).empty());
  EXPECT_TRUE(PlanImageEviction(images, -1, 0, last_used, keep).empty());
  // Against 1000: the least recently used that may go (d, at 90) first, then c (100).
  EXPECT_EQ(ids(PlanImageEviction(images, 1000, 0, last_used, keep)),
            (std::vector<std::string>{"new-unused", "old-built"}));
  EXPECT_EQ(ids(PlanImageEviction(images, 1100, 0, last_used, keep)),
            (std::vector<std::string>{"new-unused"}));
  // What is in use or wanted stays even when the store does not fit.
  EXPECT_EQ(PlanImageEviction(images, 0, 0, last_used, keep).size(), 2u);
  // By age: unused since 95 means d (90) goes, c (used at 100, built in 1970) stays.
  EXPECT_EQ(ids(PlanImageEviction(images, -1, 95, last_used, keep)),
            (std::vector<std::string>{"new-unused"}));
}

}  // namespace
}  // namespace gpucloud::agent
