// gpuctl audit verify and audit query against a real server with its audit log (CTest label
// `integration`): the server records the requests gpuctl makes; gpuctl reads the log through
// the API and verifies it here, and finds a record changed in the server's store.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/audit_commands.h"
#include "cli/gpuctl.h"
#include "server/audit_log.h"
#include "server/audited_store.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::cli {
namespace {

class AuditServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    creds_ = *server::EnsureCredentials(dir_.string());
    ASSERT_TRUE(server::CommitAdminToken(dir_.string(), creds_.admin_token).ok());
    tokens_ = *server::TokenBook::Load(dir_.string());
    base_ = std::move(*store::OpenSqliteStore((dir_ / "store.db").string()));
    log_ = std::make_unique<server::AuditLog>(*base_, clock_, server::AuditKey::Generate());
    ASSERT_TRUE(log_->Open().ok());
    audited_ = std::make_unique<server::AuditedStore>(*base_, *log_);
    api_ = std::make_unique<server::RestApi>(*audited_, clock_, 3);
    api_->AttachAudit(log_.get());
    server_ = std::make_unique<server::HttpsServer>(
        *api_, tokens_, *base_,
        server::HttpsServer::Options{
            .cert_path = creds_.cert_path, .key_path = creds_.key_path, .audit = log_.get()});
    ASSERT_TRUE(server_->Start().ok());
    config_ = (dir_ / "config").string();
    std::ofstream(config_) << "server: https://127.0.0.1:" << server_->port()
                           << "\ncertificate-authority: " << creds_.ca_cert_path
                           << "\ntoken: " << creds_.admin_token << "\n";
  }
  void TearDown() override { server_.reset(); }
  struct Run {
    int code;
    std::string out, err;
  };
  Run Gpuctl(std::vector<std::string> args) {
    std::vector<const char*> argv = {"gpuctl", "--config", config_.c_str()};
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::istringstream in;
    std::ostringstream out, err;
    int code = RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
    return {code, out.str(), err.str()};
  }
  testing_util::TempDir tmp_{"gpuctl-audit"};
  const std::filesystem::path& dir_ = tmp_.path();
  server::Credentials creds_;
  server::TokenBook tokens_;
  FakeClock clock_{1'764'600'000'000};
  std::unique_ptr<store::Store> base_;
  std::unique_ptr<server::AuditLog> log_;
  std::unique_ptr<server::AuditedStore> audited_;
  std::unique_ptr<server::RestApi> api_;
  std::unique_ptr<server::HttpsServer> server_;
  std::string config_;
};

TEST_F(AuditServerTest, VerifyAndQueryTheServersLog) {
  ASSERT_EQ(Gpuctl({"run", "--name", "first", "--", "true"}).code, 0);
  ASSERT_EQ(Gpuctl({"get", "jobs"}).code, 0);
  ASSERT_TRUE(log_->SignDigest().ok());  // what the server does every 10 minutes
  const int64_t signed_seq = log_->head_seq();
  ASSERT_GE(signed_seq, 2);

  Run ok = Gpuctl({"audit", "verify"});
  ASSERT_EQ(ok.code, 0) << ok.err << ok.out;
  EXPECT_TRUE(ok.out.starts_with("OK: ")) << ok.out;
  EXPECT_NE(ok.out.find("signed through seq " + std::to_string(signed_seq)), std::string::npos)
      << ok.out;

  Run mine = Gpuctl({"audit", "query", "--user", "admin", "-n", "default", "-o", "json"});
  ASSERT_EQ(mine.code, 0) << mine.err;
  std::vector<std::string> lines = SplitJsonLines(mine.out);
  ASSERT_GE(lines.size(), 2u) << mine.out;  // the create and the list, at least
  nlohmann::json create = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(create["verb"], "create");
  EXPECT_EQ(create["objectRef"]["name"], "first");
  for (const std::string& line : lines) {
    EXPECT_EQ(nlohmann::json::parse(line)["user"]["username"], "admin") << line;
  }
  Run table = Gpuctl({"audit", "query", "--user", "admin", "--limit", "1"});
  ASSERT_EQ(table.code, 0) << table.err;
  ASSERT_TRUE(table.out.starts_with("TIME ")) << table.out;
  EXPECT_EQ(SplitJsonLines(table.out).size(), 2u) << table.out;  // the header and one row
  EXPECT_NE(table.out.find(" admin "), std::string::npos) << table.out;
  Run nobody = Gpuctl({"audit", "query", "--user", "nobody"});
  EXPECT_EQ(SplitJsonLines(nobody.out).size(), 1u) << nobody.out;
  EXPECT_EQ(Gpuctl({"audit", "query", "--since", "yesterday"}).code, 1);  // the server's 400

  // A byte of the first record changed in the server's store: verification names it.
  absl::StatusOr<store::ListResult> stored = base_->List("/audit/records/");
  ASSERT_TRUE(stored.ok() && !stored->items.empty());
  std::string value = stored->items[0].value;
  size_t at = value.find("\"requestURI\":\"/apis");
  ASSERT_NE(at, std::string::npos) << value;
  value[at + 15] = 'b';  // "/apis" -> "/bpis": still a record, no longer the one hashed
  ASSERT_TRUE(base_->Txn({store::Op{store::Op::Kind::kPut, stored->items[0].key, value}}).ok());
  Run bad = Gpuctl({"audit", "verify"});
  EXPECT_EQ(bad.code, 1) << bad.err;
  EXPECT_EQ(bad.out, "FAILED: record 1: record 1 was modified: its hash does not match\n");
}

}  // namespace
}  // namespace gpucloud::cli
