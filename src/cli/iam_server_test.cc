// gpuctl's identity and policy commands against a real server (CTest label `integration`):
// users, policies, attachments, tokens shown once and revoked, whoami, and `auth can-i`
// agreeing with `policy simulate` and with what the server really does with a create.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/gpuctl.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/identity_book.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::cli {
namespace {

std::string Src(const std::string& rel) { return std::string(GPUCLOUD_SOURCE_DIR) + "/" + rel; }

class IamServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    creds_ = *server::EnsureCredentials(dir_.string());
    ASSERT_TRUE(server::CommitAdminToken(dir_.string(), creds_.admin_token).ok());
    tokens_ = *server::TokenBook::Load(dir_.string());
    store_ = std::move(*store::OpenSqliteStore((dir_ / "store.db").string()));
    api_ = std::make_unique<server::RestApi>(*store_, clock_, 3);
    identities_ = std::make_unique<server::IdentityBook>(*store_, clock_, api_->authorizer());
    ASSERT_TRUE(identities_->Load().ok());
    api_->AttachIdentities(identities_.get());
    tokens_.SetFallback(
        [ids = identities_.get()](const std::string& token) { return ids->Authenticate(token); });
    server_ = std::make_unique<server::HttpsServer>(
        *api_, tokens_, *store_,
        server::HttpsServer::Options{.cert_path = creds_.cert_path, .key_path = creds_.key_path});
    ASSERT_TRUE(server_->Start().ok());
    admin_ = WriteConfig("admin.config", creds_.admin_token);
  }
  void TearDown() override { server_.reset(); }
  std::string WriteConfig(const std::string& name, const std::string& token) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << "server: https://127.0.0.1:" << server_->port()
                        << "\ncertificate-authority: " << creds_.ca_cert_path
                        << "\ntoken: " << token << "\n";
    return path;
  }
  struct Run {
    int code;
    std::string out, err;
  };
  Run Gpuctl(const std::string& config, std::vector<std::string> args) {
    std::vector<const char*> argv = {"gpuctl", "--config", config.c_str()};
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::istringstream in;
    std::ostringstream out, err;
    int code = RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
    return {code, out.str(), err.str()};
  }
  // A token for `user`, from the line after "created for" (shown once).
  std::string NewToken(const std::string& user, const std::string& name) {
    Run r = Gpuctl(admin_, {"create", "token", "--user", user, "--name", name, "--ttl", "1d"});
    EXPECT_EQ(r.code, 0) << r.err;
    size_t start = r.out.find('\n') + 1;
    return r.out.substr(start, r.out.find('\n', start) - start);
  }

  testing_util::TempDir tmp_{"gpuctl-iam"};
  const std::filesystem::path& dir_ = tmp_.path();
  server::Credentials creds_;
  server::TokenBook tokens_;
  FakeClock clock_{1'764'600'000'000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::RestApi> api_;
  std::unique_ptr<server::IdentityBook> identities_;
  std::unique_ptr<server::HttpsServer> server_;
  std::string admin_;
};

TEST_F(IamServerTest, UsersPoliciesTokensAndWhoami) {
  Run p = Gpuctl(admin_,
                 {"create", "policy", "-f", Src("examples/policies/gpu-types-ml-platform.yaml")});
  ASSERT_EQ(p.code, 0) << p.err;
  Run u = Gpuctl(admin_, {"create", "user", "alice", "--group", "ml-team", "--policy",
                          "gpucloud:tenant", "-n", "default"});
  ASSERT_EQ(u.code, 0) << u.err;
  EXPECT_EQ(u.out, "user alice created\n");
  Run dup = Gpuctl(admin_, {"create", "user", "alice"});
  EXPECT_EQ(dup.code, 1);
  EXPECT_TRUE(dup.err.starts_with("gpuctl: user alice: ")) << dup.err;
  Run attach =
      Gpuctl(admin_, {"attach", "policy", "h100-a100-ml-platform-only", "--user", "alice"});
  ASSERT_EQ(attach.code, 0) << attach.err;
  EXPECT_EQ(attach.out, "policy h100-a100-ml-platform-only attached to user alice\n");
  Run again = Gpuctl(admin_, {"attach", "policy", "h100-a100-ml-platform-only", "--user", "alice"});
  EXPECT_EQ(again.out, "policy h100-a100-ml-platform-only is already attached to user alice\n");
  Run users = Gpuctl(admin_, {"get", "users"});
  ASSERT_EQ(users.code, 0) << users.err;
  EXPECT_NE(users.out.find("gpucloud:tenant,h100-a100-ml-platform-only"), std::string::npos)
      << users.out;
  Run policies = Gpuctl(admin_, {"get", "policies"});
  EXPECT_NE(policies.out.find("h100-a100-ml-platform-only"), std::string::npos) << policies.out;

  const std::string secret = NewToken("alice", "laptop");
  ASSERT_FALSE(secret.empty());
  const std::string alice = WriteConfig("alice.config", secret);
  Run who = Gpuctl(alice, {"whoami"});
  ASSERT_EQ(who.code, 0) << who.err;
  EXPECT_NE(who.out.find("user: alice\n"), std::string::npos) << who.out;
  EXPECT_NE(who.out.find("groups: ml-team\n"), std::string::npos) << who.out;
  EXPECT_NE(who.out.find("token: laptop\n"), std::string::npos) << who.out;
  Run tokens = Gpuctl(admin_, {"get", "tokens"});
  ASSERT_EQ(tokens.code, 0) << tokens.err;
  EXPECT_NE(tokens.out.find("laptop "), std::string::npos) << tokens.out;
  EXPECT_EQ(tokens.out.find(secret), std::string::npos) << "a token's secret is shown once";
  Run revoke = Gpuctl(admin_, {"revoke", "token", "laptop"});
  ASSERT_EQ(revoke.code, 0) << revoke.err;
  EXPECT_EQ(revoke.out, "token laptop revoked\n");
  EXPECT_EQ(Gpuctl(alice, {"whoami"}).code, 1);  // at once
}

// can-i's answers (for alice, asked by the admin) match policy simulate over the same
// documents, and the server's decision on a real create.
TEST_F(IamServerTest, CanIAgreesWithSimulateAndWithRealCreates) {
  ASSERT_EQ(Gpuctl(admin_,
                   {"create", "policy", "-f", Src("examples/policies/gpu-types-ml-platform.yaml")})
                .code,
            0);
  ASSERT_EQ(
      Gpuctl(admin_, {"create", "user", "alice", "--group", "ml-team", "--policy",
                      "gpucloud:tenant", "--policy", "h100-a100-ml-platform-only", "-n", "default"})
          .code,
      0);
  const std::string alice = WriteConfig("alice.config", NewToken("alice", "t1"));
  struct Case {
    std::string type, canonical;  // as written, and the catalog's name
    int gpus;
    bool allowed;
  };
  // (Each with a type: a job that accepts any type is decided once per type it may get, so
  // can-i without --gpu-type answers for a request that names none, not for such a job.)
  const std::vector<Case> cases = {{"h100", "H100-80GB", 8, false},
                                   {"a100-80gb", "A100-80GB", 1, false},
                                   {"t4", "T4", 2, true},
                                   {"L40S", "L40S", 1, true}};
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type + " x " + std::to_string(c.gpus));
    std::vector<std::string> can_i = {
        "auth", "can-i", "create",     "jobs", "--gpus", std::to_string(c.gpus),
        "--as", "alice", "--gpu-type", c.type};
    Run asked = Gpuctl(admin_, can_i);
    EXPECT_EQ(asked.code, c.allowed ? 0 : 1) << asked.out << asked.err;
    EXPECT_TRUE(asked.out.starts_with(c.allowed ? "yes\n" : "no\n")) << asked.out << asked.err;
    if (!c.allowed) {
      EXPECT_NE(asked.out.find("(Sid OnlyMlPlatformOnH100OrA100)"), std::string::npos) << asked.out;
    }
    std::vector<std::string> run = {"run", "--name", "j" + std::to_string(n++), "--gpus",
                                    std::to_string(c.gpus)};
    run.insert(run.end(), {"--type", c.type, "--", "true"});
    Run created = Gpuctl(alice, run);
    EXPECT_EQ(created.code, c.allowed ? 0 : 1) << created.out << created.err;
    Run simulated =
        Gpuctl(admin_, {"policy",     "simulate",
                        "--policy",   Src("examples/policies/builtin-tenant.yaml"),
                        "--policy",   Src("examples/policies/gpu-types-ml-platform.yaml"),
                        "--action",   "jobs:Create",
                        "--resource", "gpucloud:job/default/*",
                        "--user",     "alice",
                        "--group",    "ml-team",
                        "--context",  "gpucloud:PrincipalNamespace=default",
                        "--context",  "gpucloud:GpuType=" + c.canonical,
                        "--context",  "gpucloud:GpuCount=" + std::to_string(c.gpus)});
    EXPECT_EQ(simulated.code, asked.code) << simulated.out << simulated.err;
  }
}

}  // namespace
}  // namespace gpucloud::cli
