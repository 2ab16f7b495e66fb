#include "agent/task_secrets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/task_launch.h"
#include "core/text.h"

namespace gpucloud::agent {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(Cat("cannot ", what, ": ", std::strerror(errno)));
}

// A directory `name` in `dirfd`, opened without following a link; -1 with errno on failure.
int MakeDir(int dirfd, const std::string& name) {
  if (mkdirat(dirfd, name.c_str(), 0700) != 0) return -1;
  return openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

absl::Status WriteFile(int dirfd, const std::string& name, const std::string& data,
                       const TaskIdentity& id) {
  int fd = openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
  if (fd < 0) return Errno(Cat("create the secret file ", name));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = done == data.size() && fchown(fd, id.uid, id.gid) == 0 && fchmod(fd, 0400) == 0;
  absl::Status s = ok ? absl::OkStatus() : Errno(Cat("write the secret file ", name));
  close(fd);
  return s;
}

absl::Status GiveDir(int fd, const TaskIdentity& id, const std::string& name) {
  if (fchown(fd, id.uid, id.gid) != 0 || fchmod(fd, 0500) != 0) {
    return Errno(Cat("give the secret directory ", name, " to the task"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<api::TaskSecrets> FetchTaskSecrets(const api::Client& client,
                                                  const std::string& node,
                                                  const api::Assignment& a) {
  absl::StatusOr<api::HttpResponse> r = client.Call("GET", api::TaskSecretsPath(node, a.name));
  if (!r.ok()) {
    return absl::UnavailableError(
        Cat("CreateContainerConfigError: cannot ask the server for the task's secrets: ",
            r.status().message()));
  }
  if (r->status == 200) return api::TaskSecretsFromJson(r->body);
  nlohmann::json body = nlohmann::json::parse(r->body, nullptr, false);
  std::string message = body.is_object() && body.contains("message") && body["message"].is_string()
                            ? body["message"].get<std::string>()
                            : Cat("the server answered ", r->status);
  if (!message.starts_with("CreateContainerConfigError: ")) {
    message = Cat("CreateContainerConfigError: ", message);
  }
  switch (r->status) {
    case 404:
      return absl::NotFoundError(message);
    case 401:
    case 403:
      return absl::PermissionDeniedError(message);
    case 409:
      return absl::FailedPreconditionError(message);
    default:
      return absl::UnavailableError(message);
  }
}

absl::Status WriteSecretFiles(int sandbox_fd, const api::Assignment& a,
                              const api::TaskSecrets& secrets, const TaskIdentity& id) {
  if (a.secret_volumes.empty()) return absl::OkStatus();
  int root = MakeDir(sandbox_fd, kSandboxSecretsDir);
  if (root < 0) return Errno("create the task's secrets directory");
  std::set<std::string> names;
  absl::Status s = absl::OkStatus();
  for (const SecretVolume& v : a.secret_volumes) names.insert(v.name);
  for (const api::TaskSecrets::File& f : secrets.files) {
    if (!names.contains(f.volume)) {
      s = absl::InternalError(Cat("the server sent a file of no volume: ", f.volume));
    }
  }
  for (const SecretVolume& v : a.secret_volumes) {
    if (!s.ok()) break;
    int dir = MakeDir(root, v.name);
    if (dir < 0) {
      s = Errno(Cat("create the secret volume ", v.name));
      break;
    }
    for (const api::TaskSecrets::File& f : secrets.files) {
      if (s.ok() && f.volume == v.name) s = WriteFile(dir, f.path, f.data, id);
    }
    if (s.ok()) s = GiveDir(dir, id, v.name);
    close(dir);
  }
  if (s.ok()) s = GiveDir(root, id, kSandboxSecretsDir);
  close(root);
  return s;
}

PullAuth PullAuthOf(const api::Assignment& a, const api::TaskSecrets& secrets) {
  if (a.image_pull_secrets.empty() || secrets.pull_auth.empty()) return {};
  return {Cat(a.namespace_, ":", Join(a.image_pull_secrets, ",")), secrets.pull_auth};
}

}  // namespace gpucloud::agent
