#include "server/task_secrets.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "core/text.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

absl::Status ConfigError(const std::string& what) {
  return absl::FailedPreconditionError(Cat("CreateContainerConfigError: ", what));
}

// Looks up `name` once per resolution. nullopt with OK: absent (NotFound).
class Secrets {
 public:
  Secrets(const std::string& ns, const SecretLookup& lookup) : ns_(ns), lookup_(lookup) {}

  absl::StatusOr<const RevealedSecret*> Get(const std::string& name) {
    auto it = cache_.find(name);
    if (it == cache_.end()) {
      absl::StatusOr<RevealedSecret> s = lookup_(name);
      if (!s.ok() && !absl::IsNotFound(s.status())) {
        return absl::Status(s.status().code(),
                            Cat("secret \"", name, "\": ", s.status().message()));
      }
      it = cache_.emplace(name, s.ok() ? std::optional(*std::move(s)) : std::nullopt).first;
    }
    return it->second ? &*it->second : nullptr;
  }

  std::string NotFound(const std::string& name) const {
    return Cat("secret \"", name, "\" not found in namespace ", ns_);
  }

 private:
  const std::string& ns_;
  const SecretLookup& lookup_;
  std::map<std::string, std::optional<RevealedSecret>> cache_;
};

absl::Status SetEnv(const std::string& name, const std::string& value, const std::string& from,
                    std::map<std::string, std::string>& env) {
  if (name.size() + 1 + value.size() > kMaxEnvStringBytes) {
    return ConfigError(Cat(from, " is ", value.size(),
                           " bytes: too long for the environment "
                           "variable ",
                           name, " (NAME=value at most ", kMaxEnvStringBytes,
                           " bytes; mount it as a file instead)"));
  }
  env[name] = value;
  return absl::OkStatus();
}

absl::Status ResolveEnv(const api::Assignment& a, Secrets& secrets, api::TaskSecrets& out) {
  for (const SecretEnvFrom& e : a.env_from) {
    absl::StatusOr<const RevealedSecret*> s = secrets.Get(e.secret);
    if (!s.ok()) return s.status();
    if (*s == nullptr) {
      if (e.optional) continue;
      return ConfigError(secrets.NotFound(e.secret));
    }
    for (const auto& [key, value] : (*s)->values) {
      const std::string name = e.prefix + key;
      if (a.env.contains(name)) continue;  // the task's own env wins over envFrom
      if (absl::Status st =
              SetEnv(name, value, Cat("secret \"", e.secret, "\" key \"", key, "\""), out.env);
          !st.ok()) {
        return st;
      }
    }
  }
  for (const SecretEnvVar& e : a.secret_env) {
    absl::StatusOr<const RevealedSecret*> s = secrets.Get(e.ref.secret);
    if (!s.ok()) return s.status();
    if (*s == nullptr) {
      if (e.ref.optional) continue;
      return ConfigError(Cat(secrets.NotFound(e.ref.secret), " (env ", e.name, ")"));
    }
    auto it = (*s)->values.find(e.ref.key);
    if (it == (*s)->values.end()) {
      if (e.ref.optional) continue;
      return ConfigError(
          Cat("secret \"", e.ref.secret, "\" has no key \"", e.ref.key, "\" (env ", e.name, ")"));
    }
    const std::string from = Cat("secret \"", e.ref.secret, "\" key \"", e.ref.key, "\"");
    if (absl::Status st = SetEnv(e.name, it->second, from, out.env); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status ResolveVolumes(const api::Assignment& a, Secrets& secrets, api::TaskSecrets& out) {
  for (const SecretVolume& v : a.secret_volumes) {
    absl::StatusOr<const RevealedSecret*> s = secrets.Get(v.secret);
    if (!s.ok()) return s.status();
    if (*s == nullptr) {
      if (v.optional) continue;
      return ConfigError(Cat(secrets.NotFound(v.secret), " (volume ", v.name, ")"));
    }
    if (v.items.empty()) {
      for (const auto& [key, value] : (*s)->values) out.files.push_back({v.name, key, value});
      continue;
    }
    for (const SecretVolume::Item& item : v.items) {
      auto it = (*s)->values.find(item.key);
      if (it == (*s)->values.end()) {
        if (v.optional) continue;
        return ConfigError(
            Cat("secret \"", v.secret, "\" has no key \"", item.key, "\" (volume ", v.name, ")"));
      }
      out.files.push_back({v.name, item.path, it->second});
    }
  }
  return absl::OkStatus();
}

absl::Status ResolvePullAuth(const api::Assignment& a, Secrets& secrets, api::TaskSecrets& out) {
  if (a.image_pull_secrets.empty()) return absl::OkStatus();
  Json auths = Json::object();
  for (const std::string& name : a.image_pull_secrets) {
    absl::StatusOr<const RevealedSecret*> s = secrets.Get(name);
    if (!s.ok()) return s.status();
    if (*s == nullptr) return ConfigError(Cat(secrets.NotFound(name), " (imagePullSecrets)"));
    auto it = (*s)->values.find(kDockerConfigJsonKey);
    if ((*s)->type != kDockerConfigJsonType || it == (*s)->values.end()) {
      return ConfigError(Cat("imagePullSecrets: secret \"", name, "\" is of type ", (*s)->type,
                             ", not ", kDockerConfigJsonType));
    }
    Json doc = Json::parse(it->second, nullptr, false);
    if (!doc.is_object() || !doc.contains("auths") || !doc["auths"].is_object()) {
      return ConfigError(Cat("imagePullSecrets: secret \"", name, "\": ", kDockerConfigJsonKey,
                             " is not JSON with an auths object"));
    }
    for (const auto& [registry, cred] : doc["auths"].items()) {
      if (!auths.contains(registry)) auths[registry] = cred;
    }
  }
  out.pull_auth = Json{{"auths", auths}}.dump();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<api::TaskSecrets> ResolveTaskSecrets(const api::Assignment& a,
                                                    const SecretLookup& lookup) {
  Secrets secrets(a.namespace_, lookup);
  api::TaskSecrets out;
  if (absl::Status s = ResolveEnv(a, secrets, out); !s.ok()) return s;
  if (absl::Status s = ResolveVolumes(a, secrets, out); !s.ok()) return s;
  if (absl::Status s = ResolvePullAuth(a, secrets, out); !s.ok()) return s;
  return out;
}

}  // namespace gpucloud::server
