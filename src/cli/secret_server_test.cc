// gpuctl's Secret commands against a real server with a SecretStore (CTest label
// `integration`): create generic and docker-registry secrets, get shows TYPE and DATA and never
// a value, describe shows keys and sizes, the server's 422 is shown, delete removes them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "cli/gpuctl.h"
#include "cli/gpuctl_fixture.h"
#include "cli/secret_commands.h"
#include "server/secret_store.h"

namespace gpucloud::cli {
namespace {

constexpr char kToken[] = "hf_VALUE_9931_never_shown";
constexpr char kPassword[] = "P_registry_5518";

class SecretServerTest : public GpuctlServerFixture {
 protected:
  // Three days ago: gpuctl's AGE is against its own (real) clock, and reads "3d" for an hour.
  SecretServerTest()
      : GpuctlServerFixture("gpuctl-secrets", absl::ToUnixMillis(absl::Now() - absl::Hours(72))) {}
  void Attach(server::RestApi& api) override {
    server::SecretStoreOptions o;
    o.key_dir = dir_ / "keys";
    absl::StatusOr<std::unique_ptr<server::SecretStore>> s =
        server::SecretStore::Open(*store_, clock_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    secrets_ = *std::move(s);
    api.AttachSecrets(secrets_.get());
  }
  using Run = Ran;
  // Neither the value nor its base64 anywhere in what gpuctl printed.
  static void ExpectNoValue(const Run& r) {
    for (const std::string& v :
         {std::string(kToken), std::string(kPassword), absl::Base64Escape(kToken)}) {
      EXPECT_EQ(r.out.find(v), std::string::npos) << r.out;
      EXPECT_EQ(r.err.find(v), std::string::npos) << r.err;
    }
  }

  std::unique_ptr<server::SecretStore> secrets_;
};

TEST_F(SecretServerTest, CreateGetDescribeDelete) {
  std::filesystem::create_directory(dir_ / "upload");  // dir_ holds the server's own ca.crt
  const std::string ca = (dir_ / "upload" / "ca.crt").string();
  std::ofstream(ca, std::ios::binary) << std::string("CERT\0\xff", 6);
  Run generic = Gpuctl({"create", "secret", "generic", "hf", "-n", "team-a",
                        std::string("--from-literal=token=") + kToken, "--from-file=" + ca});
  ASSERT_EQ(generic.code, 0) << generic.err;
  EXPECT_EQ(generic.out, "secret/hf created\n");
  Run docker = Gpuctl({"create", "secret", "docker-registry", "regcred", "-n", "team-a",
                       "--docker-server=127.0.0.1:5000", "--docker-username=U",
                       std::string("--docker-password=") + kPassword});
  ASSERT_EQ(docker.code, 0) << docker.err;
  EXPECT_EQ(docker.out, "secret/regcred created\n");
  // What the server stored is what was sent: the values themselves (the server's own view).
  absl::StatusOr<std::map<std::string, std::string>> hf = secrets_->Reveal("team-a", "hf", nullptr);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ(*hf, (std::map<std::string, std::string>{{"ca.crt", std::string("CERT\0\xff", 6)},
                                                     {"token", kToken}}));
  std::string type;
  absl::StatusOr<std::map<std::string, std::string>> reg =
      secrets_->Reveal("team-a", "regcred", &type);
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(type, "kubernetes.io/dockerconfigjson");
  EXPECT_EQ(reg->at(".dockerconfigjson"), DockerConfigJson("127.0.0.1:5000", "U", kPassword, ""));

  Run list = Gpuctl({"get", "secrets", "-n", "team-a"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(list.out,
            "NAME      TYPE                             DATA   AGE\n"
            "hf        Opaque                           2      3d\n"
            "regcred   kubernetes.io/dockerconfigjson   1      3d\n");
  ExpectNoValue(list);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"get", "secret", "hf", "-n", "team-a", "-o", "json"},
        {"get", "secrets", "-n", "team-a", "-o", "yaml"},
        {"get", "secrets", "-n", "team-a", "-o", "wide"}}) {
    Run r = Gpuctl(args);
    EXPECT_EQ(r.code, 0) << r.err;
    ExpectNoValue(r);
  }
  EXPECT_EQ(Gpuctl({"get", "secrets", "-n", "team-a", "-o", "name"}).out,
            "secret/hf\nsecret/regcred\n");
  Run described = Gpuctl({"describe", "secret", "hf", "-n", "team-a"});
  ASSERT_EQ(described.code, 0) << described.err;
  EXPECT_EQ(described.out,
            "Name:         hf\nNamespace:    team-a\nLabels:       <none>\n\nType:  Opaque\n\n"
            "Data\n====\nca.crt:  6 bytes\ntoken:  " +
                std::to_string(sizeof(kToken) - 1) + " bytes\n");
  ExpectNoValue(described);

  // The server's strict validation, shown: a type it does not take is its 422's message.
  Run bad = Gpuctl(
      {"create", "secret", "generic", "odd", "-n", "team-a", "--type=Odd", "--from-literal=a=1"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err,
            "gpuctl: secret/odd: type: \"Odd\" is not Opaque or kubernetes.io/dockerconfigjson\n");
  Run again = Gpuctl({"create", "secret", "generic", "hf", "-n", "team-a", "--from-literal=a=1"});
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(again.err.starts_with("gpuctl: secret/hf: ")) << again.err;  // 409: it exists
  EXPECT_EQ(Gpuctl({"get", "secrets", "-A"}).code, kExitUsage);
  EXPECT_EQ(Gpuctl({"get", "secrets", "-l", "team=a", "-n", "team-a"}).code, kExitUsage);

  EXPECT_EQ(Gpuctl({"delete", "secret", "hf", "-n", "team-a"}).out, "secret.gpucloud/hf deleted\n");
  EXPECT_EQ(Gpuctl({"delete", "secrets/regcred", "-n", "team-a"}).out,
            "secret.gpucloud/regcred deleted\n");
  Run gone = Gpuctl({"get", "secrets", "-n", "team-a"});
  EXPECT_EQ(gone.code, 0) << gone.err;
  EXPECT_EQ(gone.out, "NAME   TYPE   DATA   AGE\n");
  EXPECT_EQ(Gpuctl({"describe", "secret", "hf", "-n", "team-a"}).code, 1);
}

}  // namespace
}  // namespace gpucloud::cli
