// A job's ssh keys (JobSpec::ssh, docs/manifests.md "SSH keys"): gpucloud/v1's `spec.ssh`,
// Volcano's `spec.plugins` (whose `ssh` plugin asks for them; env and svc are what the agent
// always provides) and the checks that the keys' volume fits every task of the job.
#include <algorithm>

#include "core/text.h"
#include "manifest/decode.h"
#include "manifest/decode_task.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest::internal {
namespace {

constexpr std::string_view kKeyPathFlag = "--ssh-key-file-path";

// A mount path for the keys: MountPathProblem's rules, as a secret volume's.
std::optional<std::string> ReadSshMountPath(Context& ctx, const Field& f, std::string value) {
  if (std::string problem = MountPathProblem(value); !problem.empty()) {
    ctx.sink.Error(f.mark, f.path, Cat(problem, ", got \"", Excerpt(value), "\""));
    return std::nullopt;
  }
  return value;
}

// Volcano's ssh plugin arguments: --ssh-key-file-path=PATH (or as two entries) moves the keys;
// --ssh-private-key and --ssh-public-key (keys of the user's own) are refused: gpucloud makes a
// fresh pair per job; --no-root (older Volcano) is accepted with a warning.
bool DecodeSshPluginArgs(Context& ctx, const Field& f, SshKeysSpec* out) {
  std::optional<std::vector<Field>> items = ReadList(ctx.sink, f);
  if (!items) return false;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const Field& item = (*items)[i];
    std::optional<std::string> arg = ReadString(ctx.sink, item);
    if (!arg) {
      ok = false;
      continue;
    }
    if (*arg == kKeyPathFlag || arg->starts_with(Cat(kKeyPathFlag, "="))) {
      std::optional<std::string> value;
      if (*arg == kKeyPathFlag && i + 1 < items->size()) {
        value = ReadString(ctx.sink, (*items)[++i]);
      } else if (*arg != kKeyPathFlag) {
        value = arg->substr(kKeyPathFlag.size() + 1);
      } else {
        ctx.sink.Error(item.mark, item.path, Cat(kKeyPathFlag, " needs a path"));
      }
      std::optional<std::string> path =
          value ? ReadSshMountPath(ctx, item, *value) : std::optional<std::string>();
      ok = path.has_value() && ok;
      if (path) out->mount_path = *path;
    } else if (arg->starts_with("--ssh-private-key") || arg->starts_with("--ssh-public-key")) {
      ctx.sink.Error(item.mark, item.path,
                     Cat("\"", Excerpt(*arg),
                         "\" is not supported: gpucloud makes every job a fresh key pair "
                         "(give your own keys as a secret volume instead)"));
      ok = false;
    } else if (*arg == "--no-root") {
      ctx.sink.Warn(item.mark, item.path,
                    "ignored: the keys are mounted where --ssh-key-file-path says (default "
                    "/root/.ssh)");
    } else {
      ctx.sink.Error(item.mark, item.path,
                     Cat("unknown ssh plugin argument \"", Excerpt(*arg),
                         "\" (known: ", kKeyPathFlag, "=PATH)"));
      ok = false;
    }
  }
  return ok;
}

}  // namespace

bool DecodeSshKeys(Context& ctx, const Field& f, std::optional<SshKeysSpec>* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  SshKeysSpec ssh;
  bool ok = true;
  if (std::optional<Field> p = m.Take("mountPath")) {
    std::optional<std::string> text = ReadString(ctx.sink, *p);
    std::optional<std::string> path =
        text ? ReadSshMountPath(ctx, *p, *text) : std::optional<std::string>();
    ok = path.has_value();
    if (path) ssh.mount_path = *path;
  }
  m.Finish();
  if (ok) *out = std::move(ssh);
  return ok;
}

bool DecodeInteractive(Context& ctx, const Field& f, std::optional<InteractiveSpec>* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  InteractiveSpec spec;
  bool ok = true;
  auto duration = [&](const char* key, int64_t min, int64_t* value) {
    std::optional<Field> d = m.Take(key);
    if (!d) return;
    std::optional<int64_t> secs = DecodeDuration(ctx, *d);
    if (secs && (*secs < min || *secs > kMaxInteractiveSeconds)) {
      ctx.sink.Error(d->mark, d->path,
                     Cat(key, " must be from ", min, " s to ", kMaxInteractiveSeconds / 86400,
                         " days, got ", *secs, " s"));
      secs.reset();
    }
    ok = secs.has_value() && ok;
    if (secs) *value = *secs;
  };
  duration("idleTimeout", 1, &spec.idle_timeout_seconds);
  duration("maxDuration", 0, &spec.max_duration_seconds);
  m.Finish();
  if (ok) *out = spec;
  return ok;
}

bool DecodeVolcanoPlugins(Context& ctx, const Field& f, JobSpec* spec) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = true;
  // `ssh: []` and `ssh:` (no arguments) both ask for the keys, as in Volcano.
  if (m.Has("ssh")) {
    SshKeysSpec keys;
    if (std::optional<Field> args = m.Take("ssh")) ok = DecodeSshPluginArgs(ctx, *args, &keys);
    if (ok) spec->ssh = std::move(keys);
  }
  // What the agent gives every task: the env plugin's VK_TASK_INDEX and VC_TASK_INDEX, the svc
  // plugin's VC_<TASK>_HOSTS, VC_<TASK>_NUM and /etc/volcano/<task>.host. Their arguments
  // (svc's --publish-not-ready-addresses, --disable-network-policy) change nothing here.
  m.Ignore("env");
  m.Ignore("svc");
  for (const std::string& k : m.Keys()) {
    if (k == "ssh" || k == "env" || k == "svc") continue;
    m.IgnoreWithWarning(k, "gpucloud sets the distributed-training environment itself");
  }
  m.Finish();
  return ok;
}

bool CheckSshKeys(Context& ctx, const Field& at, const Job& job) {
  if (!job.spec.ssh) return true;
  const SshKeysSpec& ssh = *job.spec.ssh;
  if (job.metadata.name.size() > kMaxSshJobNameBytes) {
    ctx.sink.Error(at.mark, at.path,
                   Cat("a job with ssh keys has a name of at most ", kMaxSshJobNameBytes,
                       " characters (its Secret \"<name>-ssh\" is a DNS label), got ",
                       job.metadata.name.size()));
    return false;
  }
  if (job.spec.array) {
    ctx.sink.Error(at.mark, at.path, "ssh keys are not supported for a job array");
    return false;
  }
  for (const TaskSpec& t : job.spec.tasks) {
    for (const SecretVolume& v : t.secret_volumes) {
      if (v.name == kSshKeysVolume) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("task ", t.name, " has a volume named \"", kSshKeysVolume,
                           "\", the name of the job's ssh keys' volume"));
        return false;
      }
      const std::string& p = v.mount_path;
      if (p == ssh.mount_path || p.starts_with(ssh.mount_path + "/") ||
          ssh.mount_path.starts_with(p + "/")) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("the job's ssh keys are mounted at ", ssh.mount_path, ", in or on ",
                           "volume \"", v.name, "\" of task ", t.name, " at ", p));
        return false;
      }
    }
  }
  return true;
}

}  // namespace gpucloud::manifest::internal
