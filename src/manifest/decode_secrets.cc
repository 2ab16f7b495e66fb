// Secret references of a task (core/job.h): env[].valueFrom.secretKeyRef, envFrom[].secretRef,
// secret volumes with their mounts, and imagePullSecrets, in the gpucloud/v1 and Kubernetes
// shapes (docs/manifests.md, "Secrets"). Every name is checked here, so that the node that
// resolves them (server/task_secrets.h) meets only well-formed references.
#include <algorithm>
#include <set>

#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/decode_task.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest::internal {
namespace {

// Where a container keeps what the agent gives it, and what the kernel owns: no mount there.
constexpr std::string_view kReservedMountPaths[] = {"/gpucloud", "/proc", "/sys", "/dev",
                                                    "/etc/volcano"};
constexpr size_t kMaxMountPathBytes = 1024;
constexpr size_t kMaxSecretVolumes = 64;

bool ReadSecretName(Context& ctx, MapReader& m, std::string_view key, std::string* out) {
  std::optional<Field> f = m.Require(key);
  if (!f) return false;
  std::optional<std::string> name = ReadDnsLabel(ctx, *f);
  if (name) *out = *name;
  return name.has_value();
}

bool ReadSecretKey(Context& ctx, MapReader& m, std::string_view key, std::string* out) {
  std::optional<Field> f = m.Require(key);
  if (!f) return false;
  std::optional<std::string> s = ReadString(ctx.sink, *f);
  if (!s) return false;
  if (absl::Status st = ValidateSecretKey(*s); !st.ok()) {
    ctx.sink.Error(f->mark, f->path, std::string(st.message()));
    return false;
  }
  *out = *s;
  return true;
}

// valueFrom: {secretKeyRef: {name, key, optional}}; the other sources are not supported.
bool DecodeValueFrom(Context& ctx, const Field& f, SecretKeyRef* out) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  std::optional<Field> ref = m.Take("secretKeyRef");
  for (const char* k : {"configMapKeyRef", "fieldRef", "resourceFieldRef"}) {
    if (std::optional<Field> other = m.Take(k)) {
      ctx.sink.Error(other->mark, other->path,
                     "is not supported: give the value itself, or a secretKeyRef");
      return false;
    }
  }
  m.Finish();
  if (!ref) {
    ctx.sink.Error(f.mark, f.path, "must name a secretKeyRef");
    return false;
  }
  MapReader r(ctx.sink, *ref);
  if (!r.valid()) return false;
  bool ok = ReadSecretName(ctx, r, "name", &out->secret);
  ok = ReadSecretKey(ctx, r, "key", &out->key) && ok;
  ok = r.Bool("optional", &out->optional) && ok;
  r.Finish();
  return ok;
}

bool CheckEnvName(Context& ctx, const Field& item, const std::string& name) {
  if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
    ctx.sink.Error(item.mark, ChildPath(item.path, "name"),
                   Cat("must be a non-empty name without '=', got \"", name, "\""));
    return false;
  }
  return true;
}

}  // namespace

// An absolute path, clean (no empty, "." or ".." part, no trailing '/'), not "/" and not under
// a reserved directory; "" when it is fine, else why not.
std::string MountPathProblem(const std::string& p) {
  if (p.empty() || p[0] != '/') return "must be an absolute path";
  if (p.size() > kMaxMountPathBytes) return Cat("must be at most ", kMaxMountPathBytes, " bytes");
  if (p == "/") return "must not be / (the container's root)";
  if (p.find_first_of(std::string_view(":,\0", 3)) != std::string::npos) {
    return "must not hold ':', ',' or NUL";
  }
  for (const std::string& part : SplitAny(p.substr(1), "/")) {
    if (part.empty() || part == "." || part == "..") return "must be a clean path (no //, . or ..)";
  }
  if (p.back() == '/') return "must be a clean path (no trailing /)";
  for (std::string_view reserved : kReservedMountPaths) {
    if (p == reserved || p.starts_with(Cat(reserved, "/"))) {
      return Cat("must not be in ", reserved, " (the platform's or the kernel's)");
    }
  }
  return "";
}

namespace {

bool CheckFileName(Context& ctx, const Field& f, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 253 ||
      name.find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
    ctx.sink.Error(
        f.mark, f.path,
        Cat("must be a plain file name (no '/', not . or ..), got \"", Excerpt(name), "\""));
    return false;
  }
  return true;
}

// secret: {secretName, items: [{key, path}], optional, defaultMode (ignored: files are 0400)}.
bool DecodeSecretSource(Context& ctx, const Field& f, SecretVolume* v) {
  MapReader m(ctx.sink, f);
  if (!m.valid()) return false;
  bool ok = ReadSecretName(ctx, m, "secretName", &v->secret);
  ok = m.Bool("optional", &v->optional) && ok;
  m.IgnoreWithWarning("defaultMode", "secret files are always 0400, the task user's");
  if (std::optional<Field> items = m.Take("items")) {
    std::set<std::string> paths;
    ok = ReadListOfMaps(
             ctx.sink, *items,
             [&](MapReader& im, const Field& at) {
               SecretVolume::Item item;
               bool iok = ReadSecretKey(ctx, im, "key", &item.key);
               std::optional<Field> path = im.Require("path");
               std::optional<std::string> s = path ? ReadString(ctx.sink, *path) : std::nullopt;
               iok = s && CheckFileName(ctx, *path, *s) && iok;
               if (iok && !paths.insert(*s).second) {
                 ctx.sink.Error(at.mark, ChildPath(at.path, "path"),
                                Cat("\"", *s, "\" is given twice"));
                 iok = false;
               }
               im.IgnoreWithWarning("mode", "secret files are always 0400, the task user's");
               if (iok) {
                 item.path = *s;
                 v->items.push_back(std::move(item));
               }
               return iok;
             }) &&
         ok;
  }
  m.Finish();
  return ok;
}

bool CheckMountPath(Context& ctx, const Field& f, const std::string& path) {
  if (std::string problem = MountPathProblem(path); !problem.empty()) {
    ctx.sink.Error(f.mark, f.path, Cat(problem, ", got \"", Excerpt(path), "\""));
    return false;
  }
  return true;
}

}  // namespace

bool DecodeEnv(Context& ctx, const Field& f, std::vector<EnvVar>* out,
               std::vector<SecretEnvVar>* secret_out) {
  if (f.value.IsSequence() && f.value.size() > kMaxEnvVars) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must have at most ", kMaxEnvVars, " entries, got ", f.value.size()));
    return false;
  }
  std::set<std::string> plain, secret;
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    std::string name, value;
    bool ok = m.RequiredString("name", &name) && CheckEnvName(ctx, item, name);
    std::optional<Field> vf = m.Take("valueFrom");
    std::optional<Field> vv = m.Take("value");
    if (vf && vv) {
      ctx.sink.Error(vf->mark, vf->path, "give either value or valueFrom, not both");
      return false;
    }
    if (vf) {
      SecretEnvVar e{name, {}};
      ok = DecodeValueFrom(ctx, *vf, &e.ref) && ok;
      if (ok && (plain.contains(name) || !secret.insert(name).second)) {
        ctx.sink.Error(item.mark, ChildPath(item.path, "name"),
                       Cat("\"", name, "\" is given twice (once from a secret)"));
        ok = false;
      }
      if (ok) secret_out->push_back(std::move(e));
      return ok;
    }
    if (vv) {
      std::optional<std::string> s = ReadString(ctx.sink, *vv);
      ok = s.has_value() && ok;
      if (s) value = *s;
    }
    if (ok && name.size() + 1 + value.size() > kMaxExecStringBytes) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "value"),
                     Cat("NAME=value must be at most ", kMaxExecStringBytes, " bytes, got ",
                         name.size() + 1 + value.size()));
      ok = false;
    }
    if (ok && secret.contains(name)) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "name"),
                     Cat("\"", name, "\" is given twice (once from a secret)"));
      ok = false;
    }
    plain.insert(name);
    out->push_back({std::move(name), std::move(value)});
    return ok;
  });
}

bool DecodeEnvFrom(Context& ctx, const Field& f, std::vector<SecretEnvFrom>* out) {
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    SecretEnvFrom e;
    bool ok = m.String("prefix", &e.prefix);
    if (ok && e.prefix.find('=') != std::string::npos) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "prefix"), "must not hold '='");
      ok = false;
    }
    if (std::optional<Field> cm = m.Take("configMapRef")) {
      ctx.sink.Error(cm->mark, cm->path, "is not supported: gpucloud has Secrets, not ConfigMaps");
      return false;
    }
    std::optional<Field> ref = m.Require("secretRef");
    if (!ref) return false;
    MapReader r(ctx.sink, *ref);
    if (!r.valid()) return false;
    ok = ReadSecretName(ctx, r, "name", &e.secret) && ok;
    ok = r.Bool("optional", &e.optional) && ok;
    r.Finish();
    if (ok) out->push_back(std::move(e));
    return ok;
  });
}

bool DecodeImagePullSecrets(Context& ctx, const Field& f, std::vector<std::string>* out) {
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    std::string name;
    if (!ReadSecretName(ctx, m, "name", &name)) return false;
    if (std::find(out->begin(), out->end(), name) != out->end()) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "name"), Cat("\"", name, "\" is given twice"));
      return false;
    }
    out->push_back(std::move(name));
    return true;
  });
}

bool DecodeTaskVolumes(Context& ctx, const Field& f, std::vector<SecretVolume>* out) {
  if (f.value.IsSequence() && f.value.size() > kMaxSecretVolumes) {
    ctx.sink.Error(f.mark, f.path,
                   Cat("must have at most ", kMaxSecretVolumes, " entries, got ", f.value.size()));
    return false;
  }
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field&) {
    SecretVolume v;
    bool ok = ReadSecretName(ctx, m, "name", &v.name);
    std::optional<Field> mp = m.Require("mountPath");
    std::optional<std::string> path = mp ? ReadString(ctx.sink, *mp) : std::nullopt;
    ok = path && CheckMountPath(ctx, *mp, *path) && ok;
    if (path) v.mount_path = *path;
    std::optional<Field> secret = m.Require("secret");
    ok = secret && DecodeSecretSource(ctx, *secret, &v) && ok;
    if (ok) out->push_back(std::move(v));
    return ok;
  });
}

bool DecodePodVolumes(Context& ctx, const Field& f, std::map<std::string, PodVolume>* out) {
  return ReadListOfMaps(ctx.sink, f, [&](MapReader& m, const Field& item) {
    PodVolume pv{SecretVolume{}, false, item};
    bool ok = ReadSecretName(ctx, m, "name", &pv.volume.name);
    if (std::optional<Field> secret = m.Take("secret")) {
      pv.secret = true;
      ok = DecodeSecretSource(ctx, *secret, &pv.volume) && ok;
    }
    if (!pv.secret) {
      // emptyDir, hostPath, persistentVolumeClaim, ...: not given to the task, as before.
      ctx.sink.Warn(item.mark, item.path, "ignored: only secret volumes are supported by gpucloud");
      for (const std::string& k : m.Keys()) m.Ignore(k);
    }
    if (ok && out->contains(pv.volume.name)) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "name"),
                     Cat("\"", pv.volume.name, "\" is given twice"));
      ok = false;
    }
    if (ok) {
      std::string name = pv.volume.name;
      out->emplace(std::move(name), std::move(pv));
    }
    return ok;
  });
}

bool JoinVolumeMounts(Context& ctx, const Field& mounts, std::map<std::string, PodVolume> volumes,
                      std::vector<SecretVolume>* out) {
  return ReadListOfMaps(ctx.sink, mounts, [&](MapReader& m, const Field& item) {
    std::string name;
    bool ok = m.RequiredString("name", &name);
    std::optional<Field> mp = m.Require("mountPath");
    std::optional<std::string> path = mp ? ReadString(ctx.sink, *mp) : std::nullopt;
    if (std::optional<Field> ro = m.Take("readOnly")) {
      std::optional<bool> v = ReadBool(ctx.sink, *ro);
      ok = v.has_value() && ok;
    }
    for (const char* k : {"subPath", "subPathExpr", "mountPropagation", "recursiveReadOnly"}) {
      if (std::optional<Field> sub = m.Take(k)) {
        ctx.sink.Error(sub->mark, sub->path, "is not supported by gpucloud");
        ok = false;
      }
    }
    if (!ok || !path) return false;
    auto it = volumes.find(name);
    if (it == volumes.end()) {
      ctx.sink.Error(item.mark, ChildPath(item.path, "name"),
                     Cat("names no volume of the pod: \"", name, "\""));
      return false;
    }
    if (!it->second.secret) {
      ctx.sink.Warn(item.mark, item.path,
                    Cat("ignored: volume \"", name, "\" is not a secret volume"));
      return true;
    }
    if (!CheckMountPath(ctx, *mp, *path)) return false;
    SecretVolume v = it->second.volume;
    v.mount_path = *path;
    out->push_back(std::move(v));
    return true;
  });
}

bool CheckSecretVolumes(Context& ctx, const Field& at, const TaskSpec& t) {
  std::set<std::string> names;
  for (const SecretVolume& v : t.secret_volumes) {
    if (!names.insert(v.name).second) {
      ctx.sink.Error(at.mark, at.path, Cat("volume \"", v.name, "\" is given twice"));
      return false;
    }
    for (const SecretVolume& w : t.secret_volumes) {
      if (&v == &w) continue;
      if (v.mount_path == w.mount_path || v.mount_path.starts_with(w.mount_path + "/")) {
        ctx.sink.Error(at.mark, at.path,
                       Cat("volume \"", v.name, "\" is mounted at ", v.mount_path, ", in or on ",
                           "volume \"", w.name, "\" at ", w.mount_path));
        return false;
      }
    }
  }
  return true;
}

}  // namespace gpucloud::manifest::internal
