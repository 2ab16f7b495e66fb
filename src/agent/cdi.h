// A Container Device Interface (CDI) spec for the node's NVIDIA GPUs, as `nvidia-ctk cdi
// generate` writes one, built from the agent's own discovery (NodeGpus) and the driver files
// found on the host. Three steps, each its own function:
//   1. ScanNvidiaDriver(root): what the driver put on the machine — device nodes, MIG capability
//      devices, the driver's user-space libraries and binaries. File system reads only.
//   2. BuildCdiSpec(files, gpus, ids): a pure function from what was found and what the agent
//      discovered to the spec's JSON text (deterministic: same inputs, same bytes).
//   3. WriteCdiSpec(dir, spec): writes DIR/gpucloud-nvidia.json atomically, only when its content
//      changed. The node agent regenerates it at each start (RefreshCdiSpec): a driver changed
//      under a running agent is picked up at its next start (a stale spec is a known failure
//      of the NVIDIA toolkit).
//
// The spec (cdiVersion "0.5.0", kind "nvidia.com/gpu") names these devices:
//   "<index>" and "GPU-<uuid>"  a whole GPU: /dev/nvidia<minor> (minor = index unless told);
//   "MIG-<uuid>"                a MIG device: its parent's /dev/nvidia<minor> and, when the GI and
//                               CI ids are known, the capability devices that grant access to
//                               its GPU instance and compute instance (/dev/nvidia-caps/...);
//                               without them CUDA inside the container sees no MIG device;
//   "all"                       every whole GPU.
// Edits common to every device: /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools,
// /dev/nvidia-modeset (those present), and read-only bind mounts ("ro", "nosuid", "nodev",
// "bind") of the libraries and binaries, at the same paths in the container as on the host.
// No hooks: the libraries' soname links (libcuda.so.1) are mounted too, and the library
// directories scanned are on the dynamic loader's default path (Debian's multiarch dirs
// included), so no ldconfig run is needed inside the container.
//
// Podman 4.3 reads CDI specs from /etc/cdi and /var/run/cdi; a task gets a device with
// `podman run --device nvidia.com/gpu=NAME` (e.g. nvidia.com/gpu=GPU-..., nvidia.com/gpu=0).
//
// All functions are thread-safe (no shared state); two concurrent WriteCdiSpec calls for the
// same directory each leave a complete file, the content of one of them.
#ifndef GPUCLOUD_AGENT_CDI_H_
#define GPUCLOUD_AGENT_CDI_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/gpu_backend.h"

namespace gpucloud::agent {

inline constexpr char kCdiKind[] = "nvidia.com/gpu";
inline constexpr char kCdiSpecFileName[] = "gpucloud-nvidia.json";

struct CdiDeviceNode {
  std::string path;       // in the container, and on the host relative to the root: "/dev/nvidia0"
  std::string host_path;  // on the host: root + path
  // Set only when host_path is a character device (tests use plain files, which have neither);
  // a runtime fills missing numbers in by stat'ing host_path when it creates the container.
  std::optional<uint32_t> major, minor;
};

struct CdiMount {
  std::string path;       // in the container, and on the host relative to the root
  std::string host_path;  // on the host: root + path
  // The driver version the file belongs to, from the name of the file it resolves to
  // ("libcuda.so.1" -> "libcuda.so.550.54.15": "550.54.15"); empty when the name has none
  // (binaries, unversioned libraries).
  std::string version;
};

// What ScanNvidiaDriver found: GPU and capability nodes by number, libraries by path, control
// nodes and binaries in the orders named below.
struct NvidiaDriverFiles {
  std::string root;                          // as given, e.g. "/"
  std::map<int, CdiDeviceNode> gpu_nodes;    // /dev/nvidia<N>, by N (the GPU's minor number)
  std::vector<CdiDeviceNode> control_nodes;  // nvidiactl, nvidia-uvm, -uvm-tools, -modeset
  std::map<int, CdiDeviceNode> cap_nodes;    // /dev/nvidia-caps/nvidia-cap<N>, by N
  // /proc/driver/nvidia-caps/mig-minors: "gpu0/gi1/access" -> 21, "gpu0/gi1/ci0/access" -> 22.
  std::map<std::string, int> mig_minors;
  std::vector<CdiMount> libraries;  // each match of the driver's library names, links included
  std::vector<CdiMount> binaries;   // nvidia-smi & co. in /usr/bin, then /usr/sbin

  bool HasGpus() const { return !gpu_nodes.empty(); }
};

// The driver tree under `root` ("/" on a real node; a temporary directory in tests). Files that
// are missing are simply absent from the answer; a library link that resolves to nothing is
// skipped. Errors: NotFound when `root` is not a directory.
absl::StatusOr<NvidiaDriverFiles> ScanNvidiaDriver(const std::string& root = "/");

// The MIG device's GPU instance and compute instance ids (nvmlDeviceGetGpuInstanceId and
// nvmlDeviceGetComputeInstanceId on the MIG device's handle), which name its capability devices
// in /proc/driver/nvidia-caps/mig-minors.
struct MigInstanceIds {
  int gpu_instance = 0;
  int compute_instance = 0;
};

// What the agent may know beyond NodeGpus; everything optional.
struct CdiGpuIds {
  // nvmlDeviceGetMinorNumber of each GPU, by index; a GPU not listed is /dev/nvidia<index>.
  std::map<int, int> minor_by_index;
  // By MIG device UUID ("MIG-..."); a MIG device not listed gets its parent GPU's node only.
  std::map<std::string, MigInstanceIds> mig_ids_by_uuid;
};

// The spec's JSON text (pretty-printed, ending in a newline). A GPU whose device node was not
// found is left out, with its MIG devices; libraries whose version differs from
// gpus.driver_version (leftovers of an older driver) are not mounted. Errors: NotFound when
// gpus.backend is "simulated" or no GPU of `gpus` has a device node (a machine without NVIDIA
// GPUs): then there is nothing to inject and the caller should remove any spec it wrote before
// (RemoveCdiSpec).
absl::StatusOr<std::string> BuildCdiSpec(const NvidiaDriverFiles& files, const NodeGpus& gpus,
                                         const CdiGpuIds& ids = {});

// Writes `spec` to DIR/gpucloud-nvidia.json (creating DIR) through a temporary file in DIR and a
// rename, unless the file already holds exactly `spec`. Returns whether it wrote. Errors:
// Internal (with the path and errno text) when DIR cannot be created or the file written.
absl::StatusOr<bool> WriteCdiSpec(const std::string& dir, const std::string& spec);

// Removes DIR/gpucloud-nvidia.json if it exists. Returns whether it removed one.
absl::StatusOr<bool> RemoveCdiSpec(const std::string& dir);

// Scans this machine's driver ("/"), builds the spec for `gpus` and writes it to `dir` when it
// changed, or removes the one there when there is nothing to inject. Returns what to log ("" when
// nothing changed). For the node agent's start.
std::string RefreshCdiSpec(const std::string& dir, const NodeGpus& gpus);

// The fully qualified name a runtime takes for a device of this spec: "nvidia.com/gpu=" + name,
// where name is "<index>", "GPU-...", "MIG-..." or "all".
std::string CdiDeviceName(const std::string& name);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_CDI_H_
