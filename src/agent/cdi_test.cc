#include "agent/cdi.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kLibDir[] = "/usr/lib/x86_64-linux-gnu";

void Touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "fake\n";
}

void Link(const fs::path& link, const std::string& target) {
  fs::create_directories(link.parent_path());
  fs::create_symlink(target, link);
}

// A driver tree as the 550.54.15 driver leaves it, with two GPUs (the second with MIG devices),
// a library left over from an older driver, and files that are not the driver's.
void MakeDriverTree(const fs::path& root) {
  for (const char* dev : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                          "nvidia-modeset", "nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap2",
                          "nvidia-caps/nvidia-cap21", "nvidia-caps/nvidia-cap22",
                          "nvidia-caps/nvidia-cap30", "nvidia-caps/nvidia-cap31", "null"}) {
    Touch(root / "dev" / dev);
  }
  fs::create_directories(root / "proc/driver/nvidia-caps");
  std::ofstream(root / "proc/driver/nvidia-caps/mig-minors")
      << "config 1\nmonitor 2\ngpu1/gi1/access 21\ngpu1/gi1/ci0/access 22\n"
         "gpu1/gi2/access 30\ngpu1/gi2/ci0/access 31\n";
  fs::path lib = root / "usr/lib/x86_64-linux-gnu";
  for (const char* name :
       {"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libcudadebugger.so"}) {
    Touch(lib / (std::string(name) + ".550.54.15"));
    Link(lib / (std::string(name) + ".1"), std::string(name) + ".550.54.15");
  }
  Link(lib / "libcuda.so", "libcuda.so.1");
  Touch(lib / "libnvidia-nvvm.so.550.54.15");
  Link(lib / "libnvidia-nvvm.so.4", "libnvidia-nvvm.so.550.54.15");
  Touch(lib / "libcuda.so.535.104.05");               // an older driver's leftover
  Link(lib / "libnvidia-opencl.so.1", "missing.so");  // dangling: skipped
  Touch(lib / "libcudart.so.12");                     // CUDA runtime: the image's own
  Touch(lib / "libc.so.6");
  Link(root / "usr/lib64", "lib/x86_64-linux-gnu");  // the same directory twice
  for (const char* bin :
       {"usr/bin/nvidia-smi", "usr/bin/nvidia-debugdump", "usr/bin/nvidia-cuda-mps-control",
        "usr/sbin/nvidia-persistenced", "usr/bin/ls"}) {
    Touch(root / bin);
  }
}

NodeGpus TwoGpus(const std::string& driver_version = "550.54.15") {
  NodeGpus gpus;
  gpus.backend = "nvml";
  gpus.driver_version = driver_version;
  GpuDevice a;
  a.index = 0;
  a.uuid = "GPU-aaaa";
  GpuDevice b;
  b.index = 1;
  b.uuid = "GPU-bbbb";
  b.mig_enabled = true;
  b.mig_layout = {{"3g.71gb", 0}, {"3g.71gb", 4}};
  b.mig_uuid_by_start = {{0, "MIG-1111"}, {4, "MIG-2222"}};
  GpuDevice gone;  // discovered, but its device node is missing
  gone.index = 2;
  gone.uuid = "GPU-cccc";
  gpus.gpus = {b, gone, a};  // out of order: the spec sorts by index
  return gpus;
}

CdiGpuIds MigIds() {
  CdiGpuIds ids;
  ids.mig_ids_by_uuid["MIG-1111"] = {1, 0};
  ids.mig_ids_by_uuid["MIG-2222"] = {2, 0};
  return ids;
}

std::vector<std::string> Names(const json& spec) {
  std::vector<std::string> names;
  for (const json& d : spec["devices"]) names.push_back(d["name"]);
  return names;
}

std::vector<std::string> NodePaths(const json& nodes) {
  std::vector<std::string> paths;
  for (const json& n : nodes) paths.push_back(n["path"]);
  return paths;
}

const json& Device(const json& spec, const std::string& name) {
  for (const json& d : spec["devices"]) {
    if (d["name"] == name) return d;
  }
  ADD_FAILURE() << "no device " << name;
  static const json none = json::object();
  return none;
}

std::vector<std::string> MountPaths(const json& spec) {
  std::vector<std::string> paths;
  for (const json& m : spec["containerEdits"]["mounts"]) paths.push_back(m["containerPath"]);
  return paths;
}

json BuildSpec(const fs::path& root, const NodeGpus& gpus, const CdiGpuIds& ids = MigIds()) {
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(root.string());
  EXPECT_TRUE(files.ok()) << files.status();
  absl::StatusOr<std::string> spec = BuildCdiSpec(*files, gpus, ids);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? json::parse(*spec) : json::object();
}

TEST(CdiTest, ScanFindsTheDriversFilesOnly) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(dir.path().string());
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->gpu_nodes.size(), 2u);
  EXPECT_EQ(files->gpu_nodes.at(1).path, "/dev/nvidia1");
  EXPECT_EQ(files->gpu_nodes.at(1).host_path, dir / "dev/nvidia1");
  EXPECT_FALSE(files->gpu_nodes.at(1).major.has_value());  // a plain file, not a device
  std::vector<std::string> controls;
  for (const CdiDeviceNode& n : files->control_nodes) controls.push_back(n.path);
  EXPECT_EQ(controls, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm",
                                                "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}));
  std::vector<int> caps;
  for (const auto& [n, node] : files->cap_nodes) caps.push_back(n);
  EXPECT_EQ(caps, (std::vector<int>{1, 2, 21, 22, 30, 31}));
  EXPECT_EQ(files->mig_minors.at("gpu1/gi2/ci0/access"), 31);
  std::vector<std::string> libs;
  for (const CdiMount& m : files->libraries) libs.push_back(m.path + " " + m.version);
  std::string d = kLibDir;
  EXPECT_EQ(
      libs,
      (std::vector<std::string>{
          d + "/libcuda.so 550.54.15", d + "/libcuda.so.1 550.54.15",
          d + "/libcuda.so.535.104.05 535.104.05", d + "/libcuda.so.550.54.15 550.54.15",
          d + "/libcudadebugger.so.1 550.54.15", d + "/libcudadebugger.so.550.54.15 550.54.15",
          d + "/libnvidia-ml.so.1 550.54.15", d + "/libnvidia-ml.so.550.54.15 550.54.15",
          d + "/libnvidia-nvvm.so.4 550.54.15", d + "/libnvidia-nvvm.so.550.54.15 550.54.15",
          d + "/libnvidia-ptxjitcompiler.so.1 550.54.15",
          d + "/libnvidia-ptxjitcompiler.so.550.54.15 550.54.15"}));
  std::vector<std::string> bins;
  for (const CdiMount& m : files->binaries) bins.push_back(m.path);
  EXPECT_EQ(bins, (std::vector<std::string>{"/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump",
                                            "/usr/bin/nvidia-cuda-mps-control",
                                            "/usr/sbin/nvidia-persistenced"}));
}

TEST(CdiTest, SpecNamesEachGpuByIndexAndUuidAndEachMigDeviceByUuid) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  json spec = BuildSpec(dir.path(), TwoGpus());
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "nvidia.com/gpu");
  EXPECT_EQ(Names(spec), (std::vector<std::string>{"0", "GPU-aaaa", "1", "GPU-bbbb", "MIG-1111",
                                                   "MIG-2222", "all"}));
  using Paths = std::vector<std::string>;
  auto nodes = [&](const std::string& name) {
    return NodePaths(Device(spec, name)["containerEdits"]["deviceNodes"]);
  };
  EXPECT_EQ(nodes("0"), Paths{"/dev/nvidia0"});
  EXPECT_EQ(nodes("GPU-aaaa"), Paths{"/dev/nvidia0"});
  EXPECT_EQ(nodes("1"), Paths{"/dev/nvidia1"});
  EXPECT_EQ(nodes("GPU-bbbb"), Paths{"/dev/nvidia1"});
  EXPECT_EQ(nodes("MIG-1111"), (Paths{"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap21",
                                      "/dev/nvidia-caps/nvidia-cap22"}));
  EXPECT_EQ(nodes("MIG-2222"), (Paths{"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap30",
                                      "/dev/nvidia-caps/nvidia-cap31"}));
  EXPECT_EQ(nodes("all"), (Paths{"/dev/nvidia0", "/dev/nvidia1"}));
  // The host side of a node is under the scanned root; no type or numbers for plain files.
  EXPECT_EQ(Device(spec, "MIG-2222")["containerEdits"]["deviceNodes"][2],
            (json{{"path", "/dev/nvidia-caps/nvidia-cap31"},
                  {"hostPath", dir / "dev/nvidia-caps/nvidia-cap31"}}));
  EXPECT_EQ(
      NodePaths(spec["containerEdits"]["deviceNodes"]),
      (Paths{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}));
}

TEST(CdiTest, MigDeviceWithoutInstanceIdsGetsItsParentOnly) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  json spec = BuildSpec(dir.path(), TwoGpus(), CdiGpuIds{});
  EXPECT_EQ(NodePaths(Device(spec, "MIG-1111")["containerEdits"]["deviceNodes"]),
            std::vector<std::string>{"/dev/nvidia1"});
}

TEST(CdiTest, MinorNumbersOverrideIndexes) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  CdiGpuIds ids = MigIds();
  ids.minor_by_index = {{0, 1}, {1, 0}};  // NVML's order differs from the minor numbers
  json spec = BuildSpec(dir.path(), TwoGpus(), ids);
  EXPECT_EQ(NodePaths(Device(spec, "GPU-aaaa")["containerEdits"]["deviceNodes"]),
            std::vector<std::string>{"/dev/nvidia1"});
  // The MIG capabilities are looked up under the parent's minor number (gpu0/...: none here).
  EXPECT_EQ(NodePaths(Device(spec, "MIG-1111")["containerEdits"]["deviceNodes"]),
            std::vector<std::string>{"/dev/nvidia0"});
}

TEST(CdiTest, MountsTheCurrentDriversLibrariesAndBinariesReadOnly) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  json spec = BuildSpec(dir.path(), TwoGpus());
  std::string d = kLibDir;
  EXPECT_EQ(MountPaths(spec),
            (std::vector<std::string>{
                d + "/libcuda.so", d + "/libcuda.so.1", d + "/libcuda.so.550.54.15",
                d + "/libcudadebugger.so.1", d + "/libcudadebugger.so.550.54.15",
                d + "/libnvidia-ml.so.1", d + "/libnvidia-ml.so.550.54.15",
                d + "/libnvidia-nvvm.so.4", d + "/libnvidia-nvvm.so.550.54.15",
                d + "/libnvidia-ptxjitcompiler.so.1", d + "/libnvidia-ptxjitcompiler.so.550.54.15",
                "/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump",
                "/usr/bin/nvidia-cuda-mps-control", "/usr/sbin/nvidia-persistenced"}));
  EXPECT_EQ(spec["containerEdits"]["mounts"][1],
            (json{{"hostPath", dir / (d.substr(1) + "/libcuda.so.1")},
                  {"containerPath", d + "/libcuda.so.1"},
                  {"options", {"ro", "nosuid", "nodev", "bind"}}}));
}

TEST(CdiTest, UnknownDriverVersionMountsEveryVersion) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  std::vector<std::string> mounts = MountPaths(BuildSpec(dir.path(), TwoGpus("")));
  EXPECT_NE(
      std::find(mounts.begin(), mounts.end(), std::string(kLibDir) + "/libcuda.so.535.104.05"),
      mounts.end());
  EXPECT_EQ(mounts.size(), 16u);
}

TEST(CdiTest, CharacterDevicesCarryTypeAndNumbers) {
  testing_util::TempDir dir("cdi");
  Link(dir.path() / "dev/nvidia0", "/dev/null");  // a real character device: 1:3
  NodeGpus gpus = TwoGpus();
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(dir.path().string());
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<std::string> text = BuildCdiSpec(*files, gpus);
  ASSERT_TRUE(text.ok()) << text.status();
  json spec = json::parse(*text);
  EXPECT_EQ(Names(spec), (std::vector<std::string>{"0", "GPU-aaaa", "all"}));
  EXPECT_EQ(Device(spec, "0")["containerEdits"]["deviceNodes"][0],
            (json{{"path", "/dev/nvidia0"},
                  {"hostPath", dir / "dev/nvidia0"},
                  {"type", "c"},
                  {"major", 1},
                  {"minor", 3}}));
  EXPECT_FALSE(spec["containerEdits"].contains("mounts"));  // no libraries in this tree
}

TEST(CdiTest, RootSlashGivesHostPathsEqualToContainerPaths) {
  NvidiaDriverFiles files;
  files.root = "/";
  files.gpu_nodes[0] = {"/dev/nvidia0", "/dev/nvidia0", {}, {}};
  absl::StatusOr<std::string> text = BuildCdiSpec(files, TwoGpus());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(json::parse(*text)["devices"][0]["containerEdits"]["deviceNodes"][0],
            (json{{"path", "/dev/nvidia0"}}));
}

TEST(CdiTest, NoNvidiaFilesIsNotFound) {
  testing_util::TempDir dir("cdi");
  Touch(dir.path() / "dev/null");
  Touch(dir.path() / "usr/lib/x86_64-linux-gnu/libc.so.6");
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(dir.path().string());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_FALSE(files->HasGpus());
  EXPECT_TRUE(files->libraries.empty());
  absl::StatusOr<std::string> spec = BuildCdiSpec(*files, TwoGpus());
  EXPECT_TRUE(absl::IsNotFound(spec.status())) << spec.status();
  EXPECT_TRUE(absl::IsNotFound(BuildCdiSpec(*files, NodeGpus{}).status()));
  EXPECT_TRUE(absl::IsNotFound(ScanNvidiaDriver((dir / "missing")).status()));
}

TEST(CdiTest, SimulatedGpusInjectNothingEvenWhereTheDriverIs) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir.path());
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(dir.path().string());
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_TRUE(files->HasGpus());
  NodeGpus simulated = TwoGpus();
  simulated.backend = "simulated";
  EXPECT_TRUE(absl::IsNotFound(BuildCdiSpec(*files, simulated).status()));
}

std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(CdiTest, WritesOnlyWhenTheSpecChanges) {
  testing_util::TempDir dir("cdi");
  MakeDriverTree(dir / "root");
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(dir / "root");
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<std::string> spec = BuildCdiSpec(*files, TwoGpus(), MigIds());
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string cdi_dir = dir / "etc/cdi";  // created by the write
  std::string path = cdi_dir + "/gpucloud-nvidia.json";

  absl::StatusOr<bool> wrote = WriteCdiSpec(cdi_dir, *spec);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), *spec);
  EXPECT_EQ(fs::status(path).permissions(), fs::perms(0644));
  ino_t first = InodeOf(path);

  // The agent restarts: the same spec again is not rewritten.
  absl::StatusOr<std::string> again =
      BuildCdiSpec(*ScanNvidiaDriver(dir / "root"), TwoGpus(), MigIds());
  ASSERT_EQ(*again, *spec);
  wrote = WriteCdiSpec(cdi_dir, *again);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_FALSE(*wrote);
  EXPECT_EQ(InodeOf(path), first);

  // The driver changed (here: back to the older libcuda): a new file replaces the old one.
  absl::StatusOr<std::string> changed = BuildCdiSpec(*files, TwoGpus("535.104.05"), MigIds());
  ASSERT_NE(*changed, *spec);
  wrote = WriteCdiSpec(cdi_dir, *changed);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_TRUE(*wrote);
  EXPECT_NE(InodeOf(path), first);  // renamed over, not rewritten in place
  EXPECT_EQ(ListFiles(cdi_dir), std::vector<std::string>{"gpucloud-nvidia.json"});  // no temp
  std::vector<std::string> mounts = MountPaths(json::parse(std::ifstream(path)));
  EXPECT_EQ(mounts[0], std::string(kLibDir) + "/libcuda.so.535.104.05");

  EXPECT_TRUE(*RemoveCdiSpec(cdi_dir));
  EXPECT_FALSE(*RemoveCdiSpec(cdi_dir));
  EXPECT_FALSE(fs::exists(path));
}

TEST(CdiTest, WriteIntoAnUnwritablePlaceIsAnError) {
  testing_util::TempDir dir("cdi");
  Touch(dir.path() / "file");
  absl::StatusOr<bool> wrote = WriteCdiSpec(dir / "file/cdi", "{}\n");
  EXPECT_EQ(wrote.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(wrote.status().message().find("file/cdi"), std::string::npos);
}

// stdout and stderr of `sh -c command`, and its exit status.
std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  return {pclose(pipe), out};
}

// Podman 4.3 reads specs only from /etc/cdi and /var/run/cdi: the test gives podman a private
// mount namespace whose /run is a fresh tmpfs with the test's spec directory at /run/cdi (and
// podman's run root, which must be a short path), and a busybox root file system. The device
// nodes are real (mknod) ones, of /dev/null's kind, that stand for GPUs.
TEST(CdiTest, PodmanInjectsTheGeneratedSpec) {
  if (geteuid() != 0 ||
      Shell("command -v podman && command -v unshare && command -v busybox").first != 0) {
    GTEST_SKIP() << "needs root, podman, unshare and busybox";
  }
  testing_util::TempDir dir("cdi-podman");
  fs::path root = dir.path() / "root";
  MakeDriverTree(root);
  fs::remove_all(root / "dev");
  fs::create_directories(root / "dev");
  for (auto [name, minor] : {std::pair{"nvidia0", 3}, {"nvidia1", 5}, {"nvidiactl", 7}}) {
    ASSERT_EQ(mknod((root / "dev" / name).c_str(), S_IFCHR | 0666, makedev(1, minor)), 0);
  }
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver(root.string());
  ASSERT_TRUE(files.ok()) << files.status();
  absl::StatusOr<std::string> spec = BuildCdiSpec(*files, TwoGpus());
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(WriteCdiSpec(dir / "cdi", *spec).ok());
  fs::create_directories(dir.path() / "rootfs/bin");
  std::string busybox = Shell("command -v busybox").second;
  fs::copy_file(busybox.substr(0, busybox.find('\n')), dir.path() / "rootfs/bin/busybox");
  std::string podman = "podman --root " + (dir / "storage") + " --runroot /run/r --tmpdir /run/t" +
                       " --cgroup-manager cgroupfs --events-backend none run --rm --runtime runc" +
                       " --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --network none" +
                       " --device nvidia.com/gpu=GPU-bbbb --rootfs " + (dir / "rootfs") +
                       " /bin/busybox sh -c 'ls /dev | grep nvidia; stat -c %t:%T /dev/nvidia1;"
                       " cat /usr/lib/x86_64-linux-gnu/libcuda.so.1;"
                       " (echo x >> /usr/bin/nvidia-smi) 2>/dev/null || echo read-only'";
  auto [status, out] = Shell("timeout 120 unshare --mount --propagation private sh -c \"" +
                             std::string("mount -t tmpfs tmpfs /run && mkdir /run/cdi && ") +
                             "mount --bind " + (dir / "cdi") + " /run/cdi && " + podman + "\"");
  ASSERT_EQ(status, 0) << out;
  // Only the GPU asked for, with the control device; the numbers of the host's node.
  EXPECT_EQ(out, "nvidia1\nnvidiactl\n1:5\nfake\nread-only\n") << out;
}

TEST(CdiTest, DeviceNamesAreQualifiedByKind) {
  EXPECT_EQ(CdiDeviceName("GPU-aaaa"), "nvidia.com/gpu=GPU-aaaa");
}

}  // namespace
}  // namespace gpucloud::agent
