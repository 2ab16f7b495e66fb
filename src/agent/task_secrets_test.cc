// A task's secrets on the node: how they reach a container (by name, never on Podman's command
// line) or a host process, the files in the sandbox, and the image cache keeping an image that
// only a job's pull secret could fetch from other tenants' tasks.
#include "agent/task_secrets.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "agent/task_launch.h"
#include "core/text.h"
#include "testing/temp_dir.h"

namespace gpucloud::agent {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::vector<std::string>& argv, std::string_view needle) {
  return std::any_of(argv.begin(), argv.end(),
                     [&](const std::string& a) { return a.find(needle) != std::string::npos; });
}

LaunchInput Input(const std::string& image) {
  LaunchInput in;
  in.a.name = "team-a.train.0";
  in.a.namespace_ = "team-a";
  in.a.job = "train";
  in.a.image = image;
  in.a.command = {"python3", "train.py"};
  in.a.env = {{"PLAIN", "1"}};
  in.a.secret_env = {{"HF_TOKEN", {"hf", "token", false}}};
  in.a.secret_volumes = {{"creds", "db", "/etc/db", {}, false}};
  in.exec_id = "team-a.train.0.1";
  in.sandbox = "/var/lib/gpucloud/sandbox/team-a.train.0.1";
  in.secret_env = {{"HF_TOKEN", "hf_VALUE_123"}, {"CUDA_VISIBLE_DEVICES", "hijack"}};
  in.secrets_dir = in.sandbox + "/secrets";
  in.env.gpu_uuids = {"GPU-1"};
  return in;
}

LaunchPolicy Policy() {
  LaunchPolicy p;
  p.allow_host_processes = true;
  p.switch_users = false;
  return p;
}

TEST(SecretsInTasks, AContainerGetsValuesByNameNeverOnTheCommandLine) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Input("registry.local/t:1"), Policy());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::string>& argv = plan->spec.argv;
  EXPECT_FALSE(Contains(argv, "hf_VALUE_123"));
  EXPECT_NE(std::find(argv.begin(), argv.end(), "HF_TOKEN"), argv.end());  // --env HF_TOKEN
  EXPECT_EQ(plan->spec.env.at("HF_TOKEN"), "hf_VALUE_123");  // Podman's own environment
  EXPECT_TRUE(Contains(argv, "PLAIN=1"));
  // The platform's variables win over a secret of the same name.
  EXPECT_TRUE(Contains(argv, "CUDA_VISIBLE_DEVICES=GPU-1"));
  EXPECT_FALSE(plan->spec.env.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(Contains(argv,
                       "type=bind,source=/var/lib/gpucloud/sandbox/team-a.train.0.1/"
                       "secrets/creds,destination=/etc/db,ro=true"));
}

TEST(SecretsInTasks, AHostProcessGetsValuesAndTheSecretsDirectory) {
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(Input(""), Policy());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->spec.env.at("HF_TOKEN"), "hf_VALUE_123");
  EXPECT_EQ(plan->spec.env.at("GPUCLOUD_SECRETS"),
            "/var/lib/gpucloud/sandbox/team-a.train.0.1/secrets");
  EXPECT_EQ(plan->spec.env.at("CUDA_VISIBLE_DEVICES"), "GPU-1");
  EXPECT_FALSE(Contains(plan->spec.argv, "hf_VALUE_123"));
}

TEST(SecretsInTasks, PodmanTakesNamedVariablesFromItsEnvironment) {
  ContainerTask t;
  t.name = "c";
  t.image = "i";
  t.env_from_podman = {"DB_PASSWORD"};
  std::vector<std::string> argv = PodmanRunArgv({}, t);
  auto it = std::find(argv.begin(), argv.end(), "DB_PASSWORD");
  ASSERT_NE(it, argv.end());
  EXPECT_EQ(*(it - 1), "--env");
}

TEST(SecretsInTasks, FilesAreTheTasksReadOnlyAndNoLinkIsFollowed) {
  testing_util::TempDir tmp("task-secrets");
  const fs::path sandbox = tmp / "sandbox";
  fs::create_directories(sandbox);
  api::Assignment a;
  a.secret_volumes = {{"creds", "db", "/etc/db", {}, false}, {"empty", "gone", "/etc/e", {}, true}};
  api::TaskSecrets s;
  s.files = {{"creds", "password", "s3cr3t"}, {"creds", "user", "alice"}};
  int fd = open(sandbox.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  TaskIdentity id{getuid(), getgid()};
  ASSERT_TRUE(WriteSecretFiles(fd, a, s, id).ok());
  struct stat st {};
  ASSERT_EQ(stat((sandbox / "secrets/creds/password").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  ASSERT_EQ(stat((sandbox / "secrets/creds").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0500u);
  ASSERT_EQ(stat((sandbox / "secrets").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0500u);
  EXPECT_TRUE(fs::is_directory(sandbox / "secrets/empty"));
  EXPECT_TRUE(fs::is_empty(sandbox / "secrets/empty"));
  std::ifstream f(sandbox / "secrets/creds/password");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "s3cr3t");
  // A second write (a planted secrets/ link or directory) is refused, not followed.
  fs::permissions(sandbox / "secrets", fs::perms::owner_all);
  fs::rename(sandbox / "secrets", tmp / "moved");
  fs::create_directory_symlink(tmp / "elsewhere", sandbox / "secrets");
  EXPECT_FALSE(WriteSecretFiles(fd, a, s, id).ok());
  EXPECT_FALSE(fs::exists(tmp / "elsewhere"));
  // A file of a volume the task does not have is refused.
  fs::remove(sandbox / "secrets");
  s.files.push_back({"other", "x", "y"});
  EXPECT_FALSE(WriteSecretFiles(fd, a, s, id).ok());
  close(fd);
  for (auto& e : fs::recursive_directory_iterator(tmp.path())) {
    std::error_code ec;
    fs::permissions(e.path(), fs::perms::owner_all, ec);
  }
}

TEST(SecretsInTasks, PullAuthNamesTheNamespaceAndSecrets) {
  api::Assignment a;
  a.namespace_ = "team-a";
  api::TaskSecrets s;
  EXPECT_EQ(PullAuthOf(a, s).scope, "");
  a.image_pull_secrets = {"reg", "reg2"};
  s.pull_auth = R"({"auths":{}})";
  PullAuth p = PullAuthOf(a, s);
  EXPECT_EQ(p.scope, "team-a:reg,reg2");
  EXPECT_EQ(p.auth_json, s.pull_auth);
}

// A stand-in for podman: `image exists` and `pull`, against a directory of "present" images;
// a pull of an image named "private" succeeds only with an authfile holding "good", and each
// pull's authfile is copied to pulls.log.
class FakePodman {
 public:
  explicit FakePodman(const fs::path& dir) : dir_(dir) {
    fs::create_directories(dir_ / "present");
    std::ofstream s(dir_ / "podman");
    s << "#!/bin/sh\n"
         "D='"
      << dir_.string()
      << "'\n"
         "key() { echo \"$1\" | tr '/:' '__'; }\n"
         "if [ \"$1\" = image ] && [ \"$2\" = exists ]; then\n"
         "  [ -e \"$D/present/$(key \"$3\")\" ]; exit $?\n"
         "fi\n"
         "if [ \"$1\" = pull ]; then\n"
         "  shift; auth=''\n"
         "  while [ $# -gt 1 ]; do\n"
         "    case \"$1\" in --authfile) auth=\"$2\"; shift 2;; *) shift;; esac\n"
         "  done\n"
         "  img=\"$1\"; echo \"pull $img auth=$( [ -n \"$auth\" ] && cat \"$auth\")\" >> "
         "\"$D/pulls.log\"\n"
         "  case \"$img\" in *private*) grep -q good \"$auth\" 2>/dev/null || "
         "{ echo 'Error: unauthorized: authentication required' >&2; exit 125; };; esac\n"
         "  touch \"$D/present/$(key \"$img\")\"; exit 0\n"
         "fi\n"
         "exit 1\n";
    s.close();
    fs::permissions(dir_ / "podman", fs::perms::owner_all);
  }
  ContainerRuntimeOptions Options() const {
    ContainerRuntimeOptions o;
    o.podman = (dir_ / "podman").string();
    o.private_dir = (dir_ / "private").string();
    fs::create_directories(o.private_dir);
    o.image_scopes_file = (dir_ / "private/scopes.json").string();
    return o;
  }
  int Pulls() const {
    std::ifstream f(dir_ / "pulls.log");
    int n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n;
  }
  std::string Log() const {
    std::ifstream f(dir_ / "pulls.log");
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

 private:
  fs::path dir_;
};

ImagePuller::State EnsureDone(ImagePuller& p, const std::string& image, const PullAuth& auth) {
  ImagePuller::State st = p.Ensure(image, PullPolicy::kIfNotPresent, "g1", auth);
  p.WaitForPulls();
  return st.ready ? st : p.Ensure(image, PullPolicy::kIfNotPresent, "g1", auth);
}

TEST(SecretPulledImages, StayPrivateToTheCredentialsThatPulledThem) {
  testing_util::TempDir tmp("private-images");
  FakePodman podman(tmp.path());
  const std::string image = "registry.local:5000/team-a/private:1";
  const PullAuth a{"team-a:reg", R"({"auths":{"registry.local:5000":{"auth":"good"}}})"};
  {
    ImagePuller p(podman.Options());
    ImagePuller::State st = EnsureDone(p, image, a);
    ASSERT_TRUE(st.ready) << st.error;
    EXPECT_EQ(p.PrivateTo(image), std::set<std::string>{"team-a:reg"});
    EXPECT_NE(podman.Log().find("good"), std::string::npos);  // the job's credentials were used
    for (const auto& e : fs::directory_iterator(tmp / "private")) {
      EXPECT_FALSE(e.path().filename().string().starts_with("pull-auth-"))
          << e.path() << ": the job's credentials file outlived its pull";
    }
    // Another tenant's task, without the credentials: it must fetch it itself, and cannot.
    st = EnsureDone(p, image, PullAuth{});
    EXPECT_FALSE(st.ready);
    EXPECT_NE(st.error.find("ImagePullBackOff"), std::string::npos) << st.error;
    EXPECT_NE(st.error.find("authentication required"), std::string::npos) << st.error;
    // The same credentials again: a cache hit, no pull.
    int pulls = podman.Pulls();
    st = p.Ensure(image, PullPolicy::kIfNotPresent, "g2", a);
    EXPECT_TRUE(st.ready);
    EXPECT_EQ(podman.Pulls(), pulls);
    // Under Never, another tenant's task is told why it may not use it.
    st = p.Ensure(image, PullPolicy::kNever, "g1", PullAuth{"team-b:other", "{}"});
    EXPECT_FALSE(st.ready);
    EXPECT_NE(st.error.find("pulled with another job's credentials"), std::string::npos)
        << st.error;
  }
  // Remembered across an agent restart.
  ImagePuller again(podman.Options());
  EXPECT_EQ(again.PrivateTo(image), std::set<std::string>{"team-a:reg"});
  ImagePuller::State st = again.Ensure(image, PullPolicy::kIfNotPresent, "g1", PullAuth{});
  EXPECT_FALSE(st.ready);
  again.WaitForPulls();
}

TEST(SecretPulledImages, ANodePullMakesAnImagePublic) {
  testing_util::TempDir tmp("public-images");
  FakePodman podman(tmp.path());
  const std::string image = "registry.local:5000/team-a/open:1";
  ImagePuller p(podman.Options());
  ASSERT_TRUE(EnsureDone(p, image, PullAuth{"team-a:reg", R"({"auths":{}})"}).ready);
  EXPECT_EQ(p.PrivateTo(image), std::set<std::string>{"team-a:reg"});
  p.Prefetch(image);  // the operator's pre-pull, with the node's credentials
  p.WaitForPulls();
  EXPECT_TRUE(p.PrivateTo(image).empty());
  EXPECT_TRUE(p.Ensure(image, PullPolicy::kIfNotPresent, "g1", PullAuth{}).ready);
  // A public image a job pulls again with its credentials stays public.
  ASSERT_TRUE(EnsureDone(p, image, PullAuth{"team-b:x", R"({"auths":{}})"}).ready);
  EXPECT_TRUE(p.PrivateTo(image).empty());
}

}  // namespace
}  // namespace gpucloud::agent
