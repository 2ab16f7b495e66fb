#include "server/rest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

const char* kJob = R"(apiVersion: gpucloud/v1
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

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

class RestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((dir_ / "s.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 7);
  }
  Response Call(std::string method, std::string path, std::string body = "",
                std::map<std::string, std::string> query = {}, Identity who = {"root", "", true}) {
    return api_->Handle({std::move(method), std::move(path), std::move(query), std::move(body), who});
  }
  static Json Body(const Response& r) { return Json::parse(r.body); }
  static constexpr char kJobs[] = "/apis/gpucloud/v1/namespaces/team-a/jobs";

  testing_util::TempDir tmp_{"gpucloud-rest"};
  const std::filesystem::path& dir_ = tmp_.path();
  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RestApi> api_;
};

TEST_F(RestTest, CreateGetListDelete) {
  Response c = Call("POST", kJobs, kJob);
  ASSERT_EQ(c.status, 201) << c.body;
  Json created = Body(c);
  EXPECT_EQ(created["metadata"]["namespace"], "team-a");
  EXPECT_EQ(created["metadata"]["resourceVersion"], "1");
  EXPECT_EQ(created["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(created["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_EQ(Call("POST", kJobs, kJob).status, 409);
  Response g = Call("GET", std::string(kJobs) + "/train");
  ASSERT_EQ(g.status, 200);
  EXPECT_EQ(Body(g)["spec"], created["spec"]);
  EXPECT_EQ(Body(g)["metadata"]["resourceVersion"], "1");
  Response l = Call("GET", kJobs, "", {{"labelSelector", "team=vision"}});
  EXPECT_EQ(Body(l)["items"].size(), 1u);
  EXPECT_EQ(Body(l)["kind"], "JobList");
  EXPECT_EQ(Body(Call("GET", kJobs, "", {{"labelSelector", "team!=vision"}}))["items"].size(), 0u);
  EXPECT_EQ(Body(Call("GET", kJobs, "", {{"labelSelector", "!team"}}))["items"].size(), 0u);
  EXPECT_EQ(Call("DELETE", std::string(kJobs) + "/train").status, 200);
  Response gone = Call("GET", std::string(kJobs) + "/train");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(Body(gone)["message"], "Job team-a/train not found");
  EXPECT_EQ(Body(gone)["kind"], "Status");
}

TEST_F(RestTest, ApplyIsIdempotentAndStaleVersionsConflict) {
  std::string path = std::string(kJobs) + "/train";
  ASSERT_EQ(Call("PUT", path, kJob).status, 201);  // apply creates
  int64_t rev = store_->Revision();
  Response again = Call("PUT", path, kJob);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(store_->Revision(), rev);  // nothing changed: nothing written
  std::string changed = std::string(kJob) + "  priority: 5\n";
  Response upd = Call("PUT", path, changed);
  ASSERT_EQ(upd.status, 200) << upd.body;
  EXPECT_EQ(Body(upd)["spec"]["priority"], 5);
  EXPECT_EQ(Body(upd)["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");  // kept
  // A body carrying an old resourceVersion is a compare-and-swap that fails: 409.
  std::string stale = kJob;
  stale.replace(stale.find("  name: train"), 13, "  name: train\n  resourceVersion: \"1\"");
  Response conflict = Call("PUT", path, stale);
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(Body(conflict)["reason"], "Conflict");
}

TEST_F(RestTest, TwoConcurrentAppliesOneWinsTheOtherConflicts) {
  std::string path = std::string(kJobs) + "/train";
  ASSERT_EQ(Call("PUT", path, kJob).status, 201);
  std::string rv = Body(Call("GET", path))["metadata"]["resourceVersion"];
  auto with = [&](int priority) {
    std::string b = kJob;
    b.replace(b.find("  name: train"), 13, "  name: train\n  resourceVersion: \"" + rv + "\"");
    return b + "  priority: " + std::to_string(priority) + "\n";
  };
  int codes[2];
  std::thread a([&] { codes[0] = Call("PUT", path, with(1)).status; });
  std::thread b([&] { codes[1] = Call("PUT", path, with(2)).status; });
  a.join();
  b.join();
  EXPECT_EQ(std::min(codes[0], codes[1]), 200);
  EXPECT_EQ(std::max(codes[0], codes[1]), 409);
}

TEST_F(RestTest, ATenantSeesOnlyItsNamespace) {
  Identity alice{"alice", "team-a", false}, bob{"bob", "team-b", false};
  ASSERT_EQ(Call("POST", kJobs, kJob, {}, alice).status, 201);
  Response peek = Call("GET", std::string(kJobs) + "/train", "", {}, bob);
  EXPECT_EQ(peek.status, 403);
  EXPECT_EQ(Body(peek)["message"], "user bob may not access namespace team-a");
  EXPECT_EQ(Call("DELETE", std::string(kJobs) + "/train", "", {}, bob).status, 403);
  EXPECT_EQ(Call("GET", kJobs, "", {}, bob).status, 403);
  EXPECT_EQ(Call("GET", std::string(kJobs) + "/train", "", {}, alice).status, 200);
  // Queues: everyone reads, only admins write.
  const char* queue = "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 2}\n";
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/queues", queue, {}, alice).status, 403);
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/queues", queue).status, 201);
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/queues/q", "", {}, bob).status, 200);
}

TEST_F(RestTest, BadInputGetsAClearErrorAndChangesNothing) {
  int64_t rev = store_->Revision();
  Response bad = Call("POST", kJobs, "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: x}\n"
                                     "spec:\n  tasks:\n  - name: w\n    replicas: 0\n");
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(Body(bad)["message"], "body:7:15: spec.tasks[0].replicas: must be >= 1, got 0");
  EXPECT_EQ(Call("POST", kJobs, "{not json").status, 422);
  Response kind = Call("POST", kJobs, "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n");
  EXPECT_EQ(kind.status, 422);
  EXPECT_EQ(Body(kind)["message"], "kind: is Queue, but this path holds Jobs");
  std::string other_ns = kJob;
  other_ns.replace(other_ns.find("  name: train"), 13, "  name: train\n  namespace: team-b");
  Response ns = Call("POST", kJobs, other_ns);
  EXPECT_EQ(ns.status, 400);
  EXPECT_EQ(Body(ns)["message"], "metadata.namespace: is team-b, but the path says team-a");
  EXPECT_EQ(Call("PUT", std::string(kJobs) + "/other", kJob).status, 400);  // name mismatch
  EXPECT_EQ(Call("POST", kJobs, std::string(kMaxBodyBytes + 1, 'x')).status, 413);
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/namespaces/Team_A/jobs").status, 400);
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/widgets").status, 404);
  EXPECT_EQ(Call("PATCH", std::string(kJobs) + "/train").status, 405);
  EXPECT_EQ(Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "abc"}}).status, 400);
  EXPECT_EQ(store_->Revision(), rev);  // nothing half-written
}

TEST_F(RestTest, WatchResumesFromARevision) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  std::string path = std::string(kJobs) + "/train";
  ASSERT_EQ(Call("PUT", path, std::string(kJob) + "  priority: 1\n").status, 200);
  ASSERT_EQ(Call("DELETE", path).status, 200);
  Response w = Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "0"}});
  ASSERT_EQ(w.status, 200);
  EXPECT_EQ(w.content_type, "application/x-ndjson");
  std::vector<std::string> types;
  std::vector<std::string> revs;
  for (const std::string& line : SplitLines(w.body)) {
    Json e = Json::parse(line);
    types.push_back(e["type"]);
    revs.push_back(e["object"]["metadata"]["resourceVersion"]);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"}));
  EXPECT_EQ(revs, (std::vector<std::string>{"1", "2", "3"}));
  Response from2 = Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "2"}});
  EXPECT_EQ(SplitLines(from2.body).size(), 1u);
  ASSERT_TRUE(store_->Compact(2).ok());
  EXPECT_EQ(Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "1"}}).status, 410);
}

}  // namespace
}  // namespace gpucloud::server
