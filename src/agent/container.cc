#include "agent/container.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/private_file.h"
#include "core/text.h"

extern char** environ;

namespace gpucloud::agent {

void FitUlimitsToHost(ContainerRuntimeOptions& o) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_max != RLIM_INFINITY) {
    o.nofile = std::min<int64_t>(o.nofile, static_cast<int64_t>(r.rlim_max));
  }
  if (getrlimit(RLIMIT_NPROC, &r) == 0 && r.rlim_max != RLIM_INFINITY) {
    o.nproc = std::min<int64_t>(o.nproc, static_cast<int64_t>(r.rlim_max));
  }
  // Podman gives conmon, and so the container, no more processes than the kernel has pids.
  std::ifstream pid_max("/proc/sys/kernel/pid_max");
  int64_t n = 0;
  if (pid_max >> n && n > 0) o.nproc = std::min(o.nproc, n);
}

std::vector<std::string> PodmanGlobalArgv(const ContainerRuntimeOptions& o) {
  std::vector<std::string> argv = {o.podman};
  if (!o.storage_root.empty()) argv.insert(argv.end(), {"--root", o.storage_root});
  if (!o.run_root.empty()) argv.insert(argv.end(), {"--runroot", o.run_root});
  if (!o.tmp_dir.empty()) argv.insert(argv.end(), {"--tmpdir", o.tmp_dir});
  if (!o.oci_runtime.empty()) argv.insert(argv.end(), {"--runtime", o.oci_runtime});
  return argv;
}

namespace {

std::string CpuFlag(int64_t milli) {
  return Cat(milli / 1000, ".", fmt::format("{:03d}", milli % 1000));
}

void AddEnvAndMounts(const ContainerTask& t, std::vector<std::string>& argv) {
  for (const Mount& m : t.mounts) {
    argv.push_back("--mount");
    argv.push_back(Cat("type=bind,source=", m.host, ",destination=", m.container,
                       m.read_only ? ",ro=true" : ",rw=true"));
  }
  for (const std::string& d : t.cdi_devices) argv.insert(argv.end(), {"--device", d});
  for (const auto& [k, v] : t.env) argv.insert(argv.end(), {"--env", Cat(k, "=", v)});
  for (const std::string& k : t.env_from_podman) argv.insert(argv.end(), {"--env", k});
  for (const auto& [k, v] : t.labels) argv.insert(argv.end(), {"--label", Cat(k, "=", v)});
}

}  // namespace

std::vector<std::string> PodmanRunArgv(const ContainerRuntimeOptions& o, const ContainerTask& t) {
  std::vector<std::string> argv = PodmanGlobalArgv(o);
  argv.insert(argv.end(),
              {"run", "--rm", "--replace", "--name", t.name, "--pull", "never",
               // Its own output goes to the task's log through `podman run`: no second copy.
               "--log-driver", "none", "--network", "host", "--pid", "private", "--ipc", "private",
               "--uts", "private", "--security-opt", "no-new-privileges", "--user",
               Cat(t.uid, ":", t.gid), "--ulimit", Cat("nofile=", o.nofile, ":", o.nofile),
               "--ulimit", Cat("nproc=", o.nproc, ":", o.nproc)});
  if (t.stdin) argv.push_back("-i");
  if (t.cpu_milli) argv.insert(argv.end(), {"--cpus", CpuFlag(*t.cpu_milli)});
  if (t.memory_mib) {
    // No swap beyond the limit: the memory limit is the task's whole budget.
    argv.insert(argv.end(),
                {"--memory", Cat(*t.memory_mib, "m"), "--memory-swap", Cat(*t.memory_mib, "m")});
  }
  if (t.pids_max > 0) argv.insert(argv.end(), {"--pids-limit", Cat(t.pids_max)});
  if (!t.workdir.empty()) argv.insert(argv.end(), {"--workdir", t.workdir});
  AddEnvAndMounts(t, argv);
  if (!t.command.empty() && !t.args_only) {
    // The whole command as the entrypoint (JSON form: arguments stay as they are) and no
    // image command after it.
    argv.insert(argv.end(), {"--entrypoint", nlohmann::json(t.command).dump()});
  }
  argv.push_back(t.image);
  if (t.args_only) argv.insert(argv.end(), t.command.begin(), t.command.end());
  return argv;
}

std::vector<std::string> PodmanRemoveArgv(const ContainerRuntimeOptions& o,
                                          const std::string& name) {
  std::vector<std::string> argv = PodmanGlobalArgv(o);
  argv.insert(argv.end(), {"rm", "--force", "--ignore", "--time", "0", name});
  return argv;
}

absl::StatusOr<std::vector<StoredImage>> ParseImageList(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_array()) return absl::InvalidArgumentError("podman images: not a JSON list");
  std::vector<StoredImage> out;
  for (const nlohmann::json& i : j) {
    if (!i.is_object() || !i.contains("Id") || !i["Id"].is_string()) {
      return absl::InvalidArgumentError("podman images: an entry without an Id");
    }
    StoredImage s;
    s.id = i["Id"].get<std::string>();
    if (i.contains("Names") && i["Names"].is_array()) {
      for (const nlohmann::json& n : i["Names"]) {
        if (n.is_string()) s.names.push_back(n.get<std::string>());
      }
    }
    if (i.contains("RepoDigests") && i["RepoDigests"].is_array()) {
      for (const nlohmann::json& n : i["RepoDigests"]) {
        if (n.is_string()) s.digests.push_back(n.get<std::string>());
      }
    }
    if (i.contains("Size") && i["Size"].is_number_integer()) s.size = i["Size"].get<int64_t>();
    if (i.contains("Created") && i["Created"].is_number_integer()) {
      s.created_s = i["Created"].get<int64_t>();
    }
    if (i.contains("Containers") && i["Containers"].is_number_integer()) {
      s.containers = i["Containers"].get<int>();
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string CanonicalImageName(std::string_view ref) {
  std::string r(ref);
  size_t slash = r.find('/');
  std::string first = slash == std::string::npos ? "" : r.substr(0, slash);
  bool has_domain =
      !first.empty() && (first.find('.') != std::string::npos ||
                         first.find(':') != std::string::npos || first == "localhost");
  if (!has_domain) r = (slash == std::string::npos ? "docker.io/library/" : "docker.io/") + r;
  size_t last_slash = r.rfind('/');
  bool tagged = r.find(':', last_slash) != std::string::npos;
  if (!tagged && r.find('@') == std::string::npos) r += ":latest";
  return r;
}

std::vector<StoredImage> PlanImageEviction(const std::vector<StoredImage>& images,
                                           int64_t max_bytes, int64_t unused_since_s,
                                           const std::map<std::string, int64_t>& last_used_s,
                                           const std::set<std::string>& keep) {
  std::set<std::string> kept_names;
  for (const std::string& k : keep) kept_names.insert(CanonicalImageName(k));
  std::map<std::string, int64_t> used_by_name;
  for (const auto& [k, t] : last_used_s) {
    int64_t& u = used_by_name[CanonicalImageName(k)];
    u = std::max(u, t);
  }
  int64_t total = 0;
  std::vector<std::pair<int64_t, const StoredImage*>> candidates;  // (last use, image)
  for (const StoredImage& i : images) {
    total += i.size;
    bool kept = i.containers > 0;
    int64_t used = i.created_s;
    for (const std::vector<std::string>* refs : {&i.names, &i.digests}) {
      for (const std::string& n : *refs) {
        kept = kept || kept_names.contains(n);
        if (auto it = used_by_name.find(n); it != used_by_name.end()) {
          used = std::max(used, it->second);
        }
      }
    }
    if (!kept) candidates.push_back({used, &i});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<StoredImage> remove;
  for (const auto& [used, image] : candidates) {
    if (used >= unused_since_s && (max_bytes < 0 || total <= max_bytes)) break;
    remove.push_back(*image);
    total -= image->size;
  }
  return remove;
}

std::vector<std::string> PodmanImagesArgv(const ContainerRuntimeOptions& o) {
  std::vector<std::string> argv = PodmanGlobalArgv(o);
  argv.insert(argv.end(), {"images", "--format", "json"});
  return argv;
}

std::vector<std::string> PodmanRemoveImageArgv(const ContainerRuntimeOptions& o,
                                               const StoredImage& image) {
  std::vector<std::string> argv = PodmanGlobalArgv(o);
  argv.push_back("rmi");
  if (image.names.empty()) {
    argv.push_back(image.id);
  } else {
    argv.insert(argv.end(), image.names.begin(), image.names.end());
  }
  return argv;
}

std::string PullErrorReason(const std::string& out) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string_view line(out.data() + start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  if (lines.empty()) return "podman gave no reason";
  std::string_view pick = lines.back();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->starts_with("Error: ")) {
      pick = it->substr(7);
      break;
    }
  }
  std::string reason(pick.substr(0, 300));
  return reason;
}

absl::Duration PullBackoff(int failures) {
  absl::Duration d = absl::Seconds(5);
  for (int i = 1; i < failures && d < absl::Minutes(5); ++i) d *= 2;
  return std::min(d, absl::Minutes(5));
}

int RunCaptured(const std::vector<std::string>& argv, std::string* output, absl::Duration timeout) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  int fds[2];
  if (argv.empty() || pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  // The agent blocks its stop signals (it sigwaits for them): not so the command.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  std::string out;
  char buf[4096];
  bool timed_out = false;
  while (rc == 0) {
    int ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      ms =
          static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    }
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (64 << 10)) out.erase(0, out.size() - (64 << 10));
  }
  close(fds[0]);
  if (rc != 0) {
    if (output != nullptr) *output = Cat("cannot run ", argv[0], ": ", std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    if (output != nullptr) {
      *output = Cat(out, "\nError: ", argv[0], " took longer than ", absl::FormatDuration(timeout),
                    " and was stopped\n");
    }
    return -2;
  }
  if (output != nullptr) *output = std::move(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {

using Json = nlohmann::json;

std::string EntryKey(const std::string& image, const std::string& scope) {
  return Cat(image, "\n", scope);
}

// The node's credentials file with a job's `auths` over it (a job's login for a registry wins).
std::string MergedAuth(const std::string& node_file, const std::string& job_json) {
  Json merged = Json::parse(job_json, nullptr, false);
  if (!merged.is_object() || !merged.contains("auths") || !merged["auths"].is_object()) {
    merged = Json{{"auths", Json::object()}};
  }
  if (!node_file.empty()) {
    std::ifstream f(node_file);
    Json node = Json::parse(f, nullptr, false);
    if (node.is_object() && node.contains("auths") && node["auths"].is_object()) {
      for (const auto& [registry, cred] : node["auths"].items()) {
        if (!merged["auths"].contains(registry)) merged["auths"][registry] = cred;
      }
    }
  }
  return merged.dump();
}

}  // namespace

ImagePuller::ImagePuller(ContainerRuntimeOptions options) : options_(std::move(options)) {
  LoadScopes();
}

ImagePuller::~ImagePuller() {
  std::map<std::string, Entry> images;
  {
    std::lock_guard lock(mu_);
    images.swap(images_);
  }
  for (auto& [image, e] : images) {
    if (e.thread.joinable()) e.thread.join();
  }
}

void ImagePuller::LoadScopes() {
  if (options_.image_scopes_file.empty()) return;
  std::ifstream f(options_.image_scopes_file);
  if (!f) return;
  Json j = Json::parse(f, nullptr, false);
  if (!j.is_object()) return;
  for (const auto& [image, scopes] : j.items()) {
    if (!scopes.is_array()) continue;
    for (const Json& s : scopes) {
      if (s.is_string()) private_to_[image].insert(s.get<std::string>());
    }
  }
}

void ImagePuller::SaveScopesLocked() {
  if (options_.image_scopes_file.empty()) return;
  Json j = Json::object();
  for (const auto& [image, scopes] : private_to_) j[image] = scopes;
  (void)WritePrivateFile(options_.image_scopes_file, j.dump());
}

bool ImagePuller::UsableLocked(const std::string& image, const std::string& scope) const {
  auto it = private_to_.find(CanonicalImageName(image));
  return it == private_to_.end() || it->second.contains(scope);
}

void ImagePuller::RecordPullLocked(const std::string& image, const std::string& scope,
                                   bool was_present) {
  const std::string name = CanonicalImageName(image);
  auto it = private_to_.find(name);
  if (scope.empty()) {  // the node's credentials fetch it: any task of the node may
    if (it == private_to_.end()) return;
    private_to_.erase(it);
  } else if (!was_present) {
    private_to_[name] = {scope};  // only this scope's credentials are known to fetch it
  } else if (it != private_to_.end()) {
    if (!it->second.insert(scope).second) return;
  } else {
    return;  // it was public already
  }
  SaveScopesLocked();
}

std::set<std::string> ImagePuller::PrivateTo(const std::string& image) {
  std::lock_guard lock(mu_);
  auto it = private_to_.find(CanonicalImageName(image));
  return it == private_to_.end() ? std::set<std::string>{} : it->second;
}

void ImagePuller::WaitForPulls() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, e] : images_) {
      if (e.thread.joinable()) threads.push_back(std::move(e.thread));
    }
  }
  for (std::thread& t : threads) t.join();
}

bool ImagePuller::Present(const std::string& image) {
  std::vector<std::string> argv = PodmanGlobalArgv(options_);
  argv.insert(argv.end(), {"image", "exists", image});
  return RunCaptured(argv, nullptr) == 0;
}

ImagePuller::State ImagePuller::Ensure(const std::string& image, PullPolicy policy,
                                       const std::string& generation, const PullAuth& auth) {
  const std::string key = EntryKey(image, auth.scope);
  std::unique_lock lock(mu_);
  Entry& e = images_[key];
  if (e.state.pulling) return e.state;
  if (e.state.ready && (policy != PullPolicy::kAlways || e.generation == generation)) {
    return e.state;
  }
  if (absl::Now() < e.state.retry_at) return e.state;
  if (policy == PullPolicy::kAlways) {
    e.generation = generation;
    StartPullLocked(image, auth, e);
    return e.state;
  }
  lock.unlock();
  bool present = Present(image);  // podman image exists: tens of ms, once per image and scope
  lock.lock();
  Entry& again = images_[key];
  const bool usable = UsableLocked(image, auth.scope);
  if (present && usable) {
    again.state.ready = true;
    again.state.error.clear();
    return again.state;
  }
  if (policy == PullPolicy::kNever) {
    again.state.error =
        present ? Cat("ErrImageNeverPull: image ", image,
                      " was pulled with another job's credentials, and under imagePullPolicy "
                      "Never this task's are not checked (looked for again every 10s)")
                : Cat("ErrImageNeverPull: image ", image,
                      " is not on this node and its imagePullPolicy is Never (looked for "
                      "again every 10s)");
    again.state.retry_at = absl::Now() + absl::Seconds(10);  // an operator may load it
    return again.state;
  }
  if (!again.state.pulling) StartPullLocked(image, auth, again);
  return again.state;
}

void ImagePuller::Prefetch(const std::string& image) {
  std::lock_guard lock(mu_);
  Entry& e = images_[EntryKey(image, "")];
  if (!e.state.pulling) StartPullLocked(image, PullAuth{}, e);
}

void ImagePuller::Invalidate() {
  std::lock_guard lock(mu_);
  for (auto& [image, e] : images_) e.state.ready = false;
}

void ImagePuller::StartPullLocked(const std::string& image, const PullAuth& auth, Entry& e) {
  if (e.thread.joinable()) e.thread.join();  // the previous pull has ended (pulling is false)
  e.state.pulling = true;
  e.thread = std::thread([this, image, auth] { Pull(image, auth); });
}

void ImagePuller::Pull(const std::string& image, const PullAuth& auth) {
  std::string auth_file = options_.auth_file;
  std::string temp_auth;
  std::string out;
  int rc = -1;
  absl::Time start = absl::Now();
  if (!auth.auth_json.empty()) {
    static std::atomic<uint64_t> serial{0};
    temp_auth = Cat(options_.private_dir, "/pull-auth-", getpid(), "-", ++serial, ".json");
    absl::Status s =
        options_.private_dir.empty()
            ? absl::FailedPreconditionError("the agent has no private directory")
            : WritePrivateFile(temp_auth, MergedAuth(options_.auth_file, auth.auth_json));
    if (!s.ok()) out = Cat("Error: cannot write the job's registry credentials: ", s.message());
    auth_file = s.ok() ? temp_auth : "";
    if (!s.ok()) temp_auth.clear();
  }
  // Only a job's pull needs to know (to tell a private image from a public one re-pulled).
  const bool was_present = !auth.scope.empty() && Present(image);
  if (auth.auth_json.empty() || !auth_file.empty()) {
    std::vector<std::string> argv = PodmanGlobalArgv(options_);
    argv.insert(argv.end(), {"pull", "--quiet"});
    if (!auth_file.empty()) argv.insert(argv.end(), {"--authfile", auth_file});
    if (!options_.cert_dir.empty()) argv.insert(argv.end(), {"--cert-dir", options_.cert_dir});
    argv.push_back(image);
    rc = RunCaptured(argv, &out, options_.pull_timeout);
  }
  if (!temp_auth.empty()) unlink(temp_auth.c_str());
  std::lock_guard lock(mu_);
  auto it = images_.find(EntryKey(image, auth.scope));
  if (it == images_.end()) return;  // shutting down
  State& s = it->second.state;
  s.pulling = false;
  if (rc == 0) {
    s.ready = true;
    s.error.clear();
    s.failures = 0;
    s.pull_time = absl::Now() - start;
    ++s.pulls;
    RecordPullLocked(image, auth.scope, was_present);
    return;
  }
  s.ready = false;
  ++s.failures;
  s.error = Cat("ImagePullBackOff: image ", image, ": ", PullErrorReason(out));
  s.retry_at = absl::Now() + PullBackoff(s.failures);
}

}  // namespace gpucloud::agent
