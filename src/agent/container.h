// Containers for tasks that name an image, run by Podman (docs/agent.md, "Containers"): the
// agent turns a task into a `podman run` command line (PodmanRunArgv, a pure function) that the
// executor runs in the foreground under its shim, like any task — so the exit-status record,
// the log file, SIGTERM (Podman proxies it to the container), the grace period, re-adoption after
// an agent restart and fencing are the executor's, unchanged. Podman gives the task its own PID,
// mount, IPC and UTS namespaces, the image's root file system and the mounts named here only;
// host networking (NCCL and RDMA need the host's interfaces).
//
// Images are pulled ahead of the run by ImagePuller, one background `podman pull` per image,
// with the node's registry credentials and CA directory; a failed pull is retried with back-off
// (Kubernetes' ImagePullBackOff) and never counts as a failed run. Podman's store is the node's
// image cache, shared between tasks; PlanImageEviction decides what of it goes.
#ifndef GPUCLOUD_AGENT_CONTAINER_H_
#define GPUCLOUD_AGENT_CONTAINER_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/job.h"

namespace gpucloud::agent {

// How this node runs Podman. Set once, from the agent's flags.
struct ContainerRuntimeOptions {
  std::string podman = "podman";
  std::string oci_runtime;  // --runtime (e.g. "runc"); "" = Podman's configured default
  // Podman's store (--root, --runroot, --tmpdir); "" = Podman's defaults. Tests give private
  // ones.
  std::string storage_root;
  std::string run_root;
  std::string tmp_dir;
  std::string auth_file;  // registry credentials of the node (containers-auth.json), or ""
  std::string cert_dir;   // registry CA certificates (DIR/*.crt, as podman pull --cert-dir), or ""
  // The file-descriptor and process limits every container gets (--ulimit): explicit, since
  // Podman's defaults are higher than some hosts allow.
  int64_t nofile = 65536;
  int64_t nproc = 65536;
  // A pull that takes longer (a registry that stalls) is stopped and counts as a failed one.
  absl::Duration pull_timeout = absl::Minutes(30);
  // A private directory (the agent's state) for the credentials files of pulls with a job's
  // pull secrets, written 0600 for the pull and removed after; and the file that remembers
  // which images only a job's credentials pulled (ImagePuller). "" = neither: such pulls are
  // refused, and what is remembered is lost with the agent.
  std::string private_dir;
  std::string image_scopes_file;
};

struct Mount {
  std::string host;
  std::string container;
  bool read_only = true;
};

// One task in a container.
struct ContainerTask {
  std::string name;   // the container's name (unique on the node): "gpucloud-" + the task's id
  std::string image;  // a reference Podman understands (validated by the manifest decoder)
  // The job's command then args: replaces the image's entrypoint and command, as a Kubernetes
  // container's command does. With `args_only`, the spec named only args: the image's
  // entrypoint runs with them (or with its own command when they are empty).
  std::vector<std::string> command;
  bool args_only = false;
  std::map<std::string, std::string> env;  // on top of the image's environment
  // More of its environment, by name only: Podman reads each value from its own environment
  // (the executor's TaskSpecToRun::env), so that secrets are never on a command line, which
  // every user of the host may read in /proc.
  std::set<std::string> env_from_podman;
  std::string workdir;  // inside the container; "" = the image's
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<Mount> mounts;
  std::vector<std::string> cdi_devices;  // "nvidia.com/gpu=GPU-..."; empty = no device
  std::optional<int64_t> cpu_milli;
  std::optional<int64_t> memory_mib;
  int64_t pids_max = 0;                       // 0: Podman's default
  std::map<std::string, std::string> labels;  // e.g. gpucloud.node, gpucloud.task
  bool stdin = false;                         // `podman run -i`: the container reads podman's stdin
};

// Lowers o.nofile and o.nproc to this process's hard limits and nproc to the kernel's pid_max
// (Podman cannot give a container more than its caller, or conmon, may have).
void FitUlimitsToHost(ContainerRuntimeOptions& o);

// Podman's global flags for these options (--root, --runroot, ...), first in every command.
std::vector<std::string> PodmanGlobalArgv(const ContainerRuntimeOptions& o);

// `podman run` in the foreground for `t`: --rm, its own PID/IPC/UTS namespaces, host network,
// no new privileges, the runtime's default capabilities only, as t.uid:t.gid, the mounts, the
// devices, the limits, the environment, the working directory, then the image and command.
std::vector<std::string> PodmanRunArgv(const ContainerRuntimeOptions& o, const ContainerTask& t);

// `podman rm --force --time 0 NAME`: kills a container whose `podman run` was killed (the
// container itself lives in conmon, outside the task's process group).
std::vector<std::string> PodmanRemoveArgv(const ContainerRuntimeOptions& o,
                                          const std::string& name);

// An image in the node's store, as `podman images --format json` lists it.
struct StoredImage {
  std::string id;
  std::vector<std::string> names;    // "registry.local/x:1", ...
  std::vector<std::string> digests;  // "registry.local/x@sha256:...", for matching only
  int64_t size = 0;                  // bytes
  int64_t created_s = 0;             // unix seconds (a reproducible build may say 1970)
  int containers = 0;                // containers that use it (running or not)
};

// The images of `podman images --format json`; InvalidArgument for output that is not such a
// list.
absl::StatusOr<std::vector<StoredImage>> ParseImageList(const std::string& json);

// The name Podman keeps an image reference under: Docker Hub's domain and "library/" made
// explicit, ":latest" when it names neither tag nor digest ("pytorch/pytorch" ->
// "docker.io/pytorch/pytorch:latest").
std::string CanonicalImageName(std::string_view ref);

// Garbage collection: which images to remove, in order. Only images no container uses and
// no name of which is in `keep` (the images of tasks waiting or running) may go; of those, every
// one last used before `unused_since_s`, then the least recently used until the store holds at
// most `max_bytes` (< 0: no limit). An image's last use is the agent's last pull or start with
// any of its names (`last_used_s`), else its creation time. `keep` and `last_used_s` hold
// references as tasks name them; they are compared in CanonicalImageName's form.
std::vector<StoredImage> PlanImageEviction(const std::vector<StoredImage>& images,
                                           int64_t max_bytes, int64_t unused_since_s,
                                           const std::map<std::string, int64_t>& last_used_s,
                                           const std::set<std::string>& keep);

// `podman images --format json`, and `podman rmi` of an image by all its names (by its id when
// it has none) — never --force, which would also remove a container that started meanwhile.
std::vector<std::string> PodmanImagesArgv(const ContainerRuntimeOptions& o);
std::vector<std::string> PodmanRemoveImageArgv(const ContainerRuntimeOptions& o,
                                               const StoredImage& image);

// The reason a pull failed, from Podman's error output: its last "Error: ..." line (or the last
// non-empty line), without Podman's prefix, at most 300 bytes.
std::string PullErrorReason(const std::string& podman_output);

// The next wait after `failures` failed pulls: 5 s doubling to at most 5 min.
absl::Duration PullBackoff(int failures);

// Runs a command to its end with stdin from /dev/null and stdout and stderr captured together
// (at most 64 KiB kept, the end). Returns the exit status (-1 when it could not start; -2 when
// it ran past `timeout` and was killed, the output then ending in an "Error: ..." line saying
// so).
int RunCaptured(const std::vector<std::string>& argv, std::string* output,
                absl::Duration timeout = absl::InfiniteDuration());

// The credentials a pull is made with: the node's own (`scope` ""), or a job's pull secrets
// (`auth_json`, a containers-auth.json document, used over the node's file) with a scope naming
// them ("team-a:regcred").
struct PullAuth {
  std::string scope;
  std::string auth_json;
};

// Pulls images in the background and remembers which are ready. Thread-safe: Ensure from the
// agent's loop, the pulls on their own threads (one per image and scope at a time).
//
// Images are shared between tasks, so an image that only a job's pull secret could fetch would
// otherwise be open to every other tenant's task that names it with IfNotPresent (Kubernetes'
// KubeletEnsureSecretPulledImages closes the same gap). An image pulled only with a scope's
// credentials is private to the scopes that pulled it (remembered in image_scopes_file); a task
// of another scope pulls it again with its own credentials (a manifest check when the layers
// are there) before it may use it. A pull with the node's credentials makes it public.
class ImagePuller {
 public:
  struct State {
    bool ready = false;
    bool pulling = false;
    std::string error;  // the last failure, "" when none
    int failures = 0;
    absl::Time retry_at = absl::InfinitePast();
    absl::Duration pull_time = absl::ZeroDuration();  // of the last successful pull
    int pulls = 0;                                    // successful pulls so far
  };

  explicit ImagePuller(ContainerRuntimeOptions options);
  ~ImagePuller();  // waits for the pulls in flight
  ImagePuller(const ImagePuller&) = delete;
  ImagePuller& operator=(const ImagePuller&) = delete;

  // Where `image` stands for a task with `policy` (resolved: never kDefault), starting a pull
  // when one is due: Always pulls
  // once per `generation` (a new task attempt asks again), IfNotPresent when the store lacks it,
  // Never never (its error says so). Returns at once.
  // With `auth`'s credentials; an image private to other scopes counts as absent.
  State Ensure(const std::string& image, PullPolicy policy, const std::string& generation,
               const PullAuth& auth = {});
  // Starts a pull now whatever the policy (pre-pull on demand), with the node's credentials.
  void Prefetch(const std::string& image);
  // Forgets what is known of every image (after a prune).
  void Invalidate();
  // The scopes `image` is private to; empty when it is public (tests, diagnostics).
  std::set<std::string> PrivateTo(const std::string& image);
  // Returns once the pulls in flight have ended.
  void WaitForPulls();

 private:
  struct Entry {
    State state;
    std::string generation;  // the generation that the last Always pull was for
    std::thread thread;
  };
  void StartPullLocked(const std::string& image, const PullAuth& auth, Entry& e);
  void Pull(const std::string& image, const PullAuth& auth);
  bool Present(const std::string& image);
  bool UsableLocked(const std::string& image, const std::string& scope) const;
  void RecordPullLocked(const std::string& image, const std::string& scope, bool was_present);
  void LoadScopes();
  void SaveScopesLocked();

  const ContainerRuntimeOptions options_;
  std::mutex mu_;
  std::map<std::string, Entry> images_;  // guarded by mu_; by image + "\n" + scope
  // guarded by mu_: canonical image name -> the scopes whose credentials pulled it, for images
  // only scopes' credentials pulled (absent: public).
  std::map<std::string, std::set<std::string>> private_to_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_CONTAINER_H_
