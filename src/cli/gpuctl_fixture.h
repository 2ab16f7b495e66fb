// A test fixture for gpuctl against a real in-process HTTPS server: credentials and an admin
// token in a temporary data directory, a SQLite store, RestApi, HttpsServer on a loopback port,
// a config file for gpuctl, and Gpuctl(args) that runs the command in-process. A test that needs
// more of the server (a SecretStore, identities) overrides Attach, called before the server
// starts. Not thread-safe; one per test.
#ifndef GPUCLOUD_CLI_GPUCTL_FIXTURE_H_
#define GPUCLOUD_CLI_GPUCTL_FIXTURE_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/gpuctl.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::cli {

class GpuctlServerFixture : public ::testing::Test {
 protected:
  struct Ran {
    int code;
    std::string out, err;
  };

  // `temp_prefix` names the data directory; `now_ms` is the server's fake clock.
  GpuctlServerFixture(const std::string& temp_prefix, int64_t now_ms)
      : tmp_(temp_prefix), clock_(now_ms) {}

  void SetUp() override {
    creds_ = *server::EnsureCredentials(dir_.string());
    ASSERT_TRUE(server::CommitAdminToken(dir_.string(), creds_.admin_token).ok());
    tokens_ = *server::TokenBook::Load(dir_.string());
    store_ = std::move(*store::OpenSqliteStore((dir_ / "store.db").string()));
    api_ = std::make_unique<server::RestApi>(*store_, clock_, 3);
    Attach(*api_);
    if (HasFatalFailure()) return;
    server_ = std::make_unique<server::HttpsServer>(
        *api_, tokens_, *store_,
        server::HttpsServer::Options{.cert_path = creds_.cert_path, .key_path = creds_.key_path});
    ASSERT_TRUE(server_->Start().ok());
    config_ = (dir_ / "config").string();
    std::ofstream(config_) << "server: https://127.0.0.1:" << server_->port()
                           << "\ncertificate-authority: " << creds_.ca_cert_path
                           << "\ntoken: " << creds_.admin_token << "\n";
  }
  void TearDown() override { server_.reset(); }

  // More of the server, before it serves (nothing by default).
  virtual void Attach(server::RestApi& api) { (void)api; }

  Ran Gpuctl(const std::vector<std::string>& args) {
    std::vector<const char*> argv = {"gpuctl", "--config", config_.c_str()};
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::istringstream in;
    std::ostringstream out, err;
    int code = RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
    return {code, out.str(), err.str()};
  }

  gpucloud::testing_util::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
  server::Credentials creds_;
  server::TokenBook tokens_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<server::RestApi> api_;
  std::unique_ptr<server::HttpsServer> server_;
  std::string config_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_GPUCTL_FIXTURE_H_
