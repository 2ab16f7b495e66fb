// The REST API test fixture: a RestApi on a real SQLite store in a temporary directory with a
// fake clock, called in-process as the HTTPS front calls it. Test-only; used by rest_test.cc
// and rest_parity_test.cc.
#ifndef GPUCLOUD_SERVER_REST_FIXTURE_H_
#define GPUCLOUD_SERVER_REST_FIXTURE_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"
#include "server/log_store.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {

// A job of two one-GPU workers, labelled team=vision.
inline constexpr char kRestTestJob[] = R"(apiVersion: gpucloud/v1
kind: Job
metadata:
  name: train
  labels: {team: vision}
spec:
  tasks:
  - name: worker
    replicas: 2
    resources: {gpu: {count: 1}}
)";

class RestFixture : public ::testing::Test {
 protected:
  // `with_cluster`: nodes, heartbeats and logs are served too (RestApi::AttachCluster).
  explicit RestFixture(bool with_cluster = false) : with_cluster_(with_cluster) {}

  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((dir_ / "s.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 7);
    if (with_cluster_) {
      logs_ = std::make_unique<LogStore>((dir_ / "logs").string());
      api_->AttachCluster(&nodes_, logs_.get(), nullptr);
    }
  }
  Response Call(std::string method, std::string path, std::string body = "",
                std::map<std::string, std::string> query = {}, Identity who = {"root", "", true}) {
    return api_->Handle(
        {std::move(method), std::move(path), std::move(query), std::move(body), who});
  }
  static nlohmann::json Body(const Response& r) { return nlohmann::json::parse(r.body); }
  static constexpr char kJobs[] = "/apis/gpucloud/v1/namespaces/team-a/jobs";
  static Identity Tenant() { return {"alice", "team-a", false}; }
  static Identity Node() {
    Identity n;
    n.user = "node:n1";
    n.node = true;
    n.node_name = "n1";
    return n;
  }

  const bool with_cluster_;
  testing_util::TempDir tmp_{"gpucloud-rest"};
  const std::filesystem::path& dir_ = tmp_.path();
  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<store::Store> store_;
  NodeTable nodes_;
  std::unique_ptr<LogStore> logs_;  // with_cluster only (other tests make their own)
  std::unique_ptr<RestApi> api_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_REST_FIXTURE_H_
