#include "agent/cdi.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The device nodes every container with a GPU needs, in the order they appear in the spec.
constexpr const char* kControlNodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                         "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};

// Where distributions put the driver's libraries (x86_64 and arm64 Debian/Ubuntu, RHEL, others).
constexpr const char* kLibraryDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib",
                                        "/usr/lib/aarch64-linux-gnu"};

// The compute and utility libraries that libnvidia-container and `nvidia-ctk cdi generate` mount
// for CUDA workloads (no graphics, video or display libraries).
constexpr const char* kLibraries[] = {"libcuda.so",
                                      "libcudadebugger.so",
                                      "libnvidia-ml.so",
                                      "libnvidia-cfg.so",
                                      "libnvidia-nscq.so",
                                      "libnvidia-opencl.so",
                                      "libnvidia-gpucomp.so",
                                      "libnvidia-ptxjitcompiler.so",
                                      "libnvidia-fatbinaryloader.so",
                                      "libnvidia-allocator.so",
                                      "libnvidia-compiler.so",
                                      "libnvidia-pkcs11.so",
                                      "libnvidia-pkcs11-openssl3.so",
                                      "libnvidia-nvvm.so"};

constexpr const char* kBinaryDirs[] = {"/usr/bin", "/usr/sbin"};
constexpr const char* kBinaries[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                     "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};

constexpr char kMigMinorsPath[] = "/proc/driver/nvidia-caps/mig-minors";

// root + an absolute path, without doubling the slash ("/" + "/dev" is "/dev").
std::string UnderRoot(const std::string& root, const std::string& path) {
  std::string r = root;
  while (!r.empty() && r.back() == '/') r.pop_back();
  return r + path;
}

// N when `name` is `prefix` followed by decimal digits only.
std::optional<int> NumberAfter(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return {};
  std::string digits = name.substr(prefix.size());
  auto is_digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), is_digit)) return {};
  return std::stoi(digits);
}

CdiDeviceNode MakeNode(const std::string& root, const std::string& path) {
  CdiDeviceNode node{path, UnderRoot(root, path), {}, {}};
  struct stat st;
  if (stat(node.host_path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
    node.major = major(st.st_rdev);
    node.minor = minor(st.st_rdev);
  }
  return node;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;  // follows links: a dangling one does not exist
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Names in `dir` (host path), sorted; none when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void ScanDeviceNodes(const std::string& root, NvidiaDriverFiles& files) {
  for (const std::string& name : ListDir(UnderRoot(root, "/dev"))) {
    if (std::optional<int> n = NumberAfter(name, "nvidia")) {
      files.gpu_nodes[*n] = MakeNode(root, "/dev/" + name);
    }
  }
  for (const char* path : kControlNodes) {
    if (Exists(UnderRoot(root, path))) files.control_nodes.push_back(MakeNode(root, path));
  }
  for (const std::string& name : ListDir(UnderRoot(root, "/dev/nvidia-caps"))) {
    if (std::optional<int> n = NumberAfter(name, "nvidia-cap")) {
      files.cap_nodes[*n] = MakeNode(root, "/dev/nvidia-caps/" + name);
    }
  }
}

// Lines "gpu0/gi1/access 21" (and "config 1", "monitor 2").
void ScanMigMinors(const std::string& root, NvidiaDriverFiles& files) {
  std::ifstream in(UnderRoot(root, kMigMinorsPath));
  std::string key;
  int minor = 0;
  while (in >> key >> minor) files.mig_minors[key] = minor;
}

// The driver version in a resolved library name: "libcuda.so.550.54.15" -> "550.54.15"; empty
// for "libcuda.so.1" or "libcuda.so".
std::string VersionOf(const std::string& resolved_name, const std::string& base) {
  if (resolved_name.compare(0, base.size() + 1, base + ".") != 0) return "";
  std::string suffix = resolved_name.substr(base.size() + 1);
  return suffix.find('.') == std::string::npos ? "" : suffix;
}

// "libcuda.so" when `name` is "libcuda.so" or "libcuda.so.<anything>"; empty otherwise.
std::string LibraryBaseOf(const std::string& name) {
  for (const char* base : kLibraries) {
    std::string b = base;
    if (name == b || name.compare(0, b.size() + 1, b + ".") == 0) return b;
  }
  return "";
}

void ScanLibraries(const std::string& root, NvidiaDriverFiles& files) {
  std::set<std::string> seen_dirs;  // /usr/lib64 may be a link to /usr/lib
  for (const char* dir : kLibraryDirs) {
    std::error_code ec;
    fs::path canonical_dir = fs::canonical(UnderRoot(root, dir), ec);
    if (ec || !seen_dirs.insert(canonical_dir.string()).second) continue;
    for (const std::string& name : ListDir(UnderRoot(root, dir))) {
      std::string base = LibraryBaseOf(name);
      if (base.empty()) continue;
      CdiMount mount{std::string(dir) + "/" + name, UnderRoot(root, std::string(dir) + "/" + name),
                     ""};
      if (!IsRegularFile(mount.host_path)) continue;
      fs::path resolved = fs::canonical(mount.host_path, ec);
      if (ec) continue;
      mount.version = VersionOf(resolved.filename().string(), base);
      files.libraries.push_back(std::move(mount));
    }
  }
}

void ScanBinaries(const std::string& root, NvidiaDriverFiles& files) {
  for (const char* dir : kBinaryDirs) {
    for (const char* name : kBinaries) {
      std::string path = std::string(dir) + "/" + name;
      if (IsRegularFile(UnderRoot(root, path))) {
        files.binaries.push_back(CdiMount{path, UnderRoot(root, path), ""});
      }
    }
  }
}

json NodeJson(const CdiDeviceNode& node) {
  json j = {{"path", node.path}};
  if (node.host_path != node.path) j["hostPath"] = node.host_path;
  if (node.major && node.minor) {
    j["type"] = "c";
    j["major"] = *node.major;
    j["minor"] = *node.minor;
  }
  return j;
}

json MountJson(const CdiMount& mount) {
  return {{"hostPath", mount.host_path},
          {"containerPath", mount.path},
          {"options", {"ro", "nosuid", "nodev", "bind"}}};
}

json DeviceJson(const std::string& name, json nodes) {
  return {{"name", name}, {"containerEdits", {{"deviceNodes", std::move(nodes)}}}};
}

// The capability devices of one MIG device, those the scan found.
json MigCapNodes(const NvidiaDriverFiles& files, int gpu_minor, const MigInstanceIds& ids) {
  json nodes = json::array();
  std::string gi = Cat("gpu", gpu_minor, "/gi", ids.gpu_instance);
  for (const std::string& key : {gi + "/access", Cat(gi, "/ci", ids.compute_instance, "/access")}) {
    auto minor = files.mig_minors.find(key);
    if (minor == files.mig_minors.end()) continue;
    auto node = files.cap_nodes.find(minor->second);
    if (node != files.cap_nodes.end()) nodes.push_back(NodeJson(node->second));
  }
  return nodes;
}

// The devices of one GPU: by index, by UUID, and its MIG devices by UUID.
void AddGpuDevices(const NvidiaDriverFiles& files, const GpuDevice& gpu, int minor,
                   const CdiGpuIds& ids, json& devices) {
  json node = NodeJson(files.gpu_nodes.at(minor));
  devices.push_back(DeviceJson(std::to_string(gpu.index), json::array({node})));
  if (!gpu.uuid.empty()) devices.push_back(DeviceJson(gpu.uuid, json::array({node})));
  for (const auto& [start, mig_uuid] : gpu.mig_uuid_by_start) {
    if (mig_uuid.empty()) continue;
    json nodes = json::array({node});
    auto mig_ids = ids.mig_ids_by_uuid.find(mig_uuid);
    if (mig_ids != ids.mig_ids_by_uuid.end()) {
      for (json& cap : MigCapNodes(files, minor, mig_ids->second)) nodes.push_back(cap);
    }
    devices.push_back(DeviceJson(mig_uuid, std::move(nodes)));
  }
}

json CommonEdits(const NvidiaDriverFiles& files, const std::string& driver_version) {
  json nodes = json::array();
  for (const CdiDeviceNode& node : files.control_nodes) nodes.push_back(NodeJson(node));
  json mounts = json::array();
  for (const CdiMount& lib : files.libraries) {
    bool other_driver =
        !driver_version.empty() && !lib.version.empty() && lib.version != driver_version;
    if (!other_driver) mounts.push_back(MountJson(lib));
  }
  for (const CdiMount& bin : files.binaries) mounts.push_back(MountJson(bin));
  json edits = json::object();
  if (!nodes.empty()) edits["deviceNodes"] = std::move(nodes);
  if (!mounts.empty()) edits["mounts"] = std::move(mounts);
  return edits;
}

std::string ErrnoText(const std::string& what, const std::string& path) {
  return Cat(what, " ", path, ": ", std::strerror(errno));
}

// Writes `content` to a new file beside `path` and renames it over `path`.
absl::Status WriteAtomically(const std::string& path, const std::string& content) {
  std::string tmp =
      fs::path(path).parent_path() / ("." + fs::path(path).filename().string() + ".XXXXXX");
  int fd = mkstemp(tmp.data());  // not *.json: CDI caches that watch the dir ignore it
  if (fd < 0) return absl::InternalError(ErrnoText("cannot create", tmp));
  std::string error;
  size_t done = 0;
  while (error.empty() && done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno != EINTR) error = ErrnoText("cannot write", tmp);
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (error.empty() && fchmod(fd, 0644) != 0) error = ErrnoText("cannot chmod", tmp);
  if (error.empty() && fsync(fd) != 0) error = ErrnoText("cannot sync", tmp);
  if (close(fd) != 0 && error.empty()) error = ErrnoText("cannot close", tmp);
  if (error.empty() && rename(tmp.c_str(), path.c_str()) != 0) {
    error = ErrnoText("cannot rename to " + path + ":", tmp);
  }
  if (!error.empty()) {
    unlink(tmp.c_str());
    return absl::InternalError(error);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NvidiaDriverFiles> ScanNvidiaDriver(const std::string& root) {
  std::error_code ec;
  if (root.empty() || !fs::is_directory(root, ec)) {
    return absl::NotFoundError(Cat("driver root ", root, " is not a directory"));
  }
  NvidiaDriverFiles files;
  files.root = root;
  ScanDeviceNodes(root, files);
  ScanMigMinors(root, files);
  ScanLibraries(root, files);
  ScanBinaries(root, files);
  auto by_path = [](const CdiMount& a, const CdiMount& b) { return a.path < b.path; };
  std::sort(files.libraries.begin(), files.libraries.end(), by_path);
  return files;
}

absl::StatusOr<std::string> BuildCdiSpec(const NvidiaDriverFiles& files, const NodeGpus& gpus,
                                         const CdiGpuIds& ids) {
  if (gpus.backend == "simulated") {
    return absl::NotFoundError("simulated GPUs have no device nodes to inject");
  }
  std::vector<const GpuDevice*> sorted;
  for (const GpuDevice& gpu : gpus.gpus) sorted.push_back(&gpu);
  std::sort(sorted.begin(), sorted.end(),
            [](const GpuDevice* a, const GpuDevice* b) { return a->index < b->index; });
  json devices = json::array();
  json all = json::array();
  for (const GpuDevice* gpu : sorted) {
    auto minor = ids.minor_by_index.find(gpu->index);
    int m = minor == ids.minor_by_index.end() ? gpu->index : minor->second;
    if (!files.gpu_nodes.contains(m)) continue;
    AddGpuDevices(files, *gpu, m, ids, devices);
    all.push_back(NodeJson(files.gpu_nodes.at(m)));
  }
  if (all.empty()) {
    return absl::NotFoundError(Cat("no device node for any of ", gpus.gpus.size(), " GPUs under ",
                                   UnderRoot(files.root, "/dev")));
  }
  devices.push_back(DeviceJson("all", std::move(all)));
  json spec = {{"cdiVersion", "0.5.0"},
               {"kind", kCdiKind},
               {"devices", std::move(devices)},
               {"containerEdits", CommonEdits(files, gpus.driver_version)}};
  return spec.dump(2) + "\n";
}

absl::StatusOr<bool> WriteCdiSpec(const std::string& dir, const std::string& spec) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(Cat("cannot create ", dir, ": ", ec.message()));
  std::string path = (fs::path(dir) / kCdiSpecFileName).string();
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream old;
      old << in.rdbuf();
      if (old.str() == spec) return false;
    }
  }
  absl::Status written = WriteAtomically(path, spec);
  if (!written.ok()) return written;
  return true;
}

absl::StatusOr<bool> RemoveCdiSpec(const std::string& dir) {
  std::string path = (fs::path(dir) / kCdiSpecFileName).string();
  if (unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return absl::InternalError(ErrnoText("cannot remove", path));
}

std::string CdiDeviceName(const std::string& name) { return Cat(kCdiKind, "=", name); }

std::string RefreshCdiSpec(const std::string& dir, const NodeGpus& gpus) {
  absl::StatusOr<NvidiaDriverFiles> files = ScanNvidiaDriver("/");
  absl::StatusOr<std::string> spec =
      files.ok() ? BuildCdiSpec(*files, gpus) : absl::StatusOr<std::string>(files.status());
  if (!spec.ok()) {
    absl::StatusOr<bool> removed = RemoveCdiSpec(dir);
    return removed.ok() && *removed
               ? Cat("removed the CDI spec in ", dir, ": ", spec.status().message())
               : "";
  }
  absl::StatusOr<bool> wrote = WriteCdiSpec(dir, *spec);
  if (!wrote.ok()) return Cat("cannot write the CDI spec: ", wrote.status().message());
  return *wrote ? Cat("wrote the CDI spec for ", gpus.gpus.size(), " GPUs to ", dir) : "";
}

}  // namespace gpucloud::agent
