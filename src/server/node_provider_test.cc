// The exec provider against real scripts: what they are told, and how their failures read.
#include "server/node_provider.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

class ExecProviderTest : public ::testing::Test {
 protected:
  // A script with `body` after a line that saves its stdin and arguments beside it.
  std::string Script(const std::string& body) {
    std::string path = (dir_.path() / "provider.sh").string();
    std::ofstream(path) << "#!/bin/sh\ncat > " << (dir_.path() / "stdin.json").string()
                        << "\necho \"$@\" > " << (dir_.path() / "args").string() << "\n"
                        << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string Saved(const char* name) {
    std::ifstream f(dir_.path() / name);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  NodePool Pool(const std::string& script) {
    NodePool p;
    p.metadata.name = "h100-spot";
    p.spec.gpu_type = "H100-80GB";
    p.spec.gpus_per_node = 8;
    p.spec.billing = BillingClass::kSpot;
    p.spec.provider = "exec:" + script;
    p.spec.labels["team"] = "a";
    return p;
  }
  JoinInfo join_{"https://cp:8443", "/etc/gpucloud/ca.crt", "/etc/gpucloud/bootstrap.token"};
  testing_util::TempDir dir_;
};

TEST_F(ExecProviderTest, CreateTellsTheScriptEverythingAMachineNeedsToJoin) {
  NodePool pool = Pool(Script("echo '{\"nodes\": [\"h100-spot-0\", \"h100-spot-1\"]}'"));
  absl::StatusOr<std::unique_ptr<NodeProvider>> p = MakeNodeProvider(pool, nullptr, join_);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->Create(pool, {"h100-spot-0", "h100-spot-1"}).ok());
  EXPECT_EQ(Saved("args"), "create\n");
  nlohmann::json in = nlohmann::json::parse(Saved("stdin.json"));
  EXPECT_EQ(in["pool"], "h100-spot");
  EXPECT_EQ(in["gpuType"], "H100-80GB");
  EXPECT_EQ(in["gpusPerNode"], 8);
  EXPECT_EQ(in["billing"], "spot");
  EXPECT_EQ(in["nodes"], nlohmann::json::array({"h100-spot-0", "h100-spot-1"}));
  EXPECT_EQ(in["labels"]["team"], "a");
  EXPECT_EQ(in["server"], "https://cp:8443");
  EXPECT_EQ(in["bootstrapTokenFile"], "/etc/gpucloud/bootstrap.token");
  ASSERT_TRUE((*p)->Delete(pool, {"h100-spot-0"}).ok());
  EXPECT_EQ(Saved("args"), "delete\n");
}

TEST_F(ExecProviderTest, FailuresNameTheScriptAndWhatWentWrong) {
  NodePool pool = Pool(Script("echo 'quota exceeded in us-east-1' >&2; exit 3"));
  auto p = MakeNodeProvider(pool, nullptr, join_);
  ASSERT_TRUE(p.ok());
  absl::Status s = (*p)->Create(pool, {"h100-spot-0"});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("provider.sh create exited 3: quota exceeded in us-east-1"),
            std::string::npos)
      << s;

  pool = Pool(Script("echo 'not json'"));
  p = MakeNodeProvider(pool, nullptr, join_);
  s = (*p)->Create(pool, {"h100-spot-0"});
  EXPECT_NE(s.message().find("its output is not {\"nodes\": [...]}"), std::string::npos) << s;

  pool = Pool(Script("echo '{\"nodes\": [\"h100-spot-0\"]}'"));
  p = MakeNodeProvider(pool, nullptr, join_);
  s = (*p)->Create(pool, {"h100-spot-0", "h100-spot-1"});
  EXPECT_NE(s.message().find("created 1 of 2 nodes"), std::string::npos) << s;
}

TEST_F(ExecProviderTest, AScriptThatHangsIsKilledAtItsTimeout) {
  std::string script = Script("sleep 30");
  ExecProvider p(script, join_, absl::Milliseconds(300));
  absl::Status s = p.Create(Pool(script), {"x"});
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
}

TEST(NodeProvider, BadProvidersAreRefusedNamingThePool) {
  NodePool pool;
  pool.metadata.name = "p";
  pool.spec.provider = "exec:/no/such/script";
  auto p = MakeNodeProvider(pool, nullptr, {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("pool p: spec.provider: \"/no/such/script\" is not an "
                                      "executable file"),
            std::string::npos)
      << p.status();
  pool.spec.provider = "local";
  p = MakeNodeProvider(pool, nullptr, {});
  EXPECT_NE(p.status().message().find("provider local is not enabled"), std::string::npos);
  pool.spec.provider = "gce";
  p = MakeNodeProvider(pool, nullptr, {});
  EXPECT_NE(p.status().message().find("is not static, local or exec:SCRIPT"), std::string::npos);
}

}  // namespace
}  // namespace gpucloud::server
