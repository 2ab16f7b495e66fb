#include "server/task_secrets.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpucloud::server {
namespace {

class TaskSecretsTest : public ::testing::Test {
 protected:
  TaskSecretsTest() {
    a_.namespace_ = "team-a";
    secrets_["db"] = {"Opaque", {{"user", "alice"}, {"password", "s3cr3t"}}};
    secrets_["hf"] = {"Opaque", {{"token", "hf_abc"}}};
    secrets_["reg"] = {
        kDockerConfigJsonType,
        {{kDockerConfigJsonKey, R"({"auths":{"registry.local:5000":{"auth":"dTpw"}}})"}}};
    secrets_["reg2"] = {
        kDockerConfigJsonType,
        {{kDockerConfigJsonKey,
          R"({"auths":{"registry.local:5000":{"auth":"b3RoZXI="},"other:443":{"auth":"eDp5"}}})"}}};
  }

  absl::StatusOr<api::TaskSecrets> Resolve() {
    return ResolveTaskSecrets(a_,
                              [this](const std::string& name) -> absl::StatusOr<RevealedSecret> {
                                looked_up_.push_back(name);
                                auto it = secrets_.find(name);
                                if (it == secrets_.end())
                                  return absl::NotFoundError("no such secret");
                                return it->second;
                              });
  }

  api::Assignment a_;
  std::map<std::string, RevealedSecret> secrets_;
  std::vector<std::string> looked_up_;
};

TEST_F(TaskSecretsTest, NoReferencesNoValues) {
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, api::TaskSecrets{});
  EXPECT_TRUE(looked_up_.empty());
}

TEST_F(TaskSecretsTest, EnvFromThenPlainEnvWinsThenSecretEnv) {
  a_.env_from = {{"db", "DB_", false}};
  a_.env["DB_user"] = "plain-user";  // the task's own env wins over envFrom
  a_.secret_env = {{"HF_TOKEN", {"hf", "token", false}}};
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->env, (std::map<std::string, std::string>{{"DB_password", "s3cr3t"},
                                                        {"HF_TOKEN", "hf_abc"}}));
}

TEST_F(TaskSecretsTest, EachSecretIsLookedUpOnce) {
  a_.env_from = {{"db", "", false}};
  a_.secret_env = {{"P", {"db", "password", false}}};
  a_.secret_volumes = {{"creds", "db", "/etc/db", {}, false}};
  ASSERT_TRUE(Resolve().ok());
  EXPECT_EQ(looked_up_, std::vector<std::string>{"db"});
}

TEST_F(TaskSecretsTest, MissingSecretOrKeyWaitsNamingThem) {
  a_.secret_env = {{"TOKEN", {"nope", "token", false}}};
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(absl::IsFailedPrecondition(s.status()));
  EXPECT_EQ(s.status().message(),
            "CreateContainerConfigError: secret \"nope\" not found in namespace team-a (env "
            "TOKEN)");
  a_.secret_env = {{"TOKEN", {"hf", "missing", false}}};
  s = Resolve();
  EXPECT_EQ(s.status().message(),
            "CreateContainerConfigError: secret \"hf\" has no key \"missing\" (env TOKEN)");
  a_.secret_env.clear();
  a_.secret_volumes = {{"v", "hf", "/etc/hf", {{"nokey", "f"}}, false}};
  s = Resolve();
  EXPECT_EQ(s.status().message(),
            "CreateContainerConfigError: secret \"hf\" has no key \"nokey\" (volume v)");
}

TEST_F(TaskSecretsTest, OptionalReferencesAreLeftOut) {
  a_.secret_env = {{"A", {"nope", "k", true}}, {"B", {"hf", "nokey", true}}};
  a_.env_from = {{"nope", "", true}};
  a_.secret_volumes = {{"v", "nope", "/etc/v", {}, true},
                       {"w", "hf", "/etc/w", {{"token", "t"}, {"nokey", "n"}}, true}};
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->env.empty());
  ASSERT_EQ(s->files.size(), 1u);
  EXPECT_EQ(s->files[0], (api::TaskSecrets::File{"w", "t", "hf_abc"}));
}

TEST_F(TaskSecretsTest, VolumesGiveEveryKeyOrTheItems) {
  a_.secret_volumes = {{"all", "db", "/etc/db", {}, false},
                       {"one", "hf", "/etc/hf", {{"token", "hf-token"}}, false}};
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->files, (std::vector<api::TaskSecrets::File>{{"all", "password", "s3cr3t"},
                                                           {"all", "user", "alice"},
                                                           {"one", "hf-token", "hf_abc"}}));
}

TEST_F(TaskSecretsTest, PullSecretsMergeFirstWins) {
  a_.image_pull_secrets = {"reg", "reg2"};
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  nlohmann::json auth = nlohmann::json::parse(s->pull_auth);
  EXPECT_EQ(auth["auths"]["registry.local:5000"]["auth"], "dTpw");
  EXPECT_EQ(auth["auths"]["other:443"]["auth"], "eDp5");
}

TEST_F(TaskSecretsTest, PullSecretOfAnotherTypeOrMissingIsRefused) {
  a_.image_pull_secrets = {"hf"};
  EXPECT_EQ(Resolve().status().message(),
            "CreateContainerConfigError: imagePullSecrets: secret \"hf\" is of type Opaque, not "
            "kubernetes.io/dockerconfigjson");
  a_.image_pull_secrets = {"gone"};
  EXPECT_EQ(Resolve().status().message(),
            "CreateContainerConfigError: secret \"gone\" not found in namespace team-a "
            "(imagePullSecrets)");
}

TEST_F(TaskSecretsTest, ValueTooLongForAnEnvironmentVariable) {
  secrets_["big"] = {"Opaque", {{"blob", std::string(kMaxEnvStringBytes, 'x')}}};
  a_.secret_env = {{"BLOB", {"big", "blob", false}}};
  absl::StatusOr<api::TaskSecrets> s = Resolve();
  ASSERT_TRUE(absl::IsFailedPrecondition(s.status()));
  EXPECT_NE(s.status().message().find("too long for the environment variable BLOB"),
            std::string::npos)
      << s.status();
}

TEST_F(TaskSecretsTest, LookupErrorsArePassedOnNamingTheSecret) {
  absl::StatusOr<api::TaskSecrets> s = ResolveTaskSecrets(
      api::Assignment{.namespace_ = "team-a", .secret_env = {{"X", {"db", "k"}}}},
      [](const std::string&) -> absl::StatusOr<RevealedSecret> {
        return absl::DataLossError("does not open");
      });
  ASSERT_TRUE(absl::IsDataLoss(s.status()));
  EXPECT_EQ(s.status().message(), "secret \"db\": does not open");
}

TEST(TaskSecretsWire, RoundTrip) {
  api::TaskSecrets s;
  s.env = {{"A", "1"}, {"B", "two\nlines"}};
  s.files = {{"v", "f", std::string("\0bin\xff", 5)}};
  s.pull_auth = R"({"auths":{"r:5000":{"auth":"dTpw"}}})";
  absl::StatusOr<api::TaskSecrets> back = api::TaskSecretsFromJson(api::TaskSecretsToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(
      api::TaskSecretsFromJson(R"({"files":[{"volume":"v","path":"f","data":"!!"}]})").ok());
}

TEST(TaskSecretsWire, AssignmentCarriesReferencesOnly) {
  api::Assignment a{.name = "team-a.j.0", .namespace_ = "team-a", .job = "j", .job_uid = "u"};
  a.secret_env = {{"TOKEN", {"hf", "token", true}}};
  a.env_from = {{"db", "DB_", false}};
  a.secret_volumes = {{"creds", "db", "/etc/db", {{"password", "pw"}}, true}};
  a.image_pull_secrets = {"reg"};
  absl::StatusOr<api::Assignment> back = api::AssignmentFromJson(api::AssignmentToJson(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->secret_env, a.secret_env);
  EXPECT_EQ(back->env_from, a.env_from);
  EXPECT_EQ(back->secret_volumes, a.secret_volumes);
  EXPECT_EQ(back->image_pull_secrets, a.image_pull_secrets);
  EXPECT_TRUE(back->UsesSecrets());
}

}  // namespace
}  // namespace gpucloud::server
