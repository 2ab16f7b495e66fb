// Tests of the API's parity with Kubernetes (issue 16): discovery, merge patch, the status
// sub-resource, paging, dry runs, log options, RuntimeClasses and live GPU health on nodes.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "api/wire.h"
#include "core/policy.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/fenced_store.h"
#include "server/log_store.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "server/rest_fixture.h"
#include "server/rest_util.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

const char* const kJob = kRestTestJob;

class ParityTest : public RestFixture {
 protected:
  ParityTest() : RestFixture(/*with_cluster=*/true) {}
};

TEST_F(ParityTest, DiscoveryIsServedAsKubernetesServesIt) {
  for (const Identity& who : {Identity{"root", "", true}, Tenant(), Node()}) {
    Response groups = Call("GET", "/apis", "", {{"timeout", "32s"}}, who);
    ASSERT_EQ(groups.status, 200) << groups.body;
    Json g = Body(groups);
    EXPECT_EQ(g["kind"], "APIGroupList");
    ASSERT_EQ(g["groups"].size(), 1u);
    EXPECT_EQ(g["groups"][0]["name"], "gpucloud");
    EXPECT_EQ(g["groups"][0]["preferredVersion"]["groupVersion"], "gpucloud/v1");
    EXPECT_EQ(g["groups"][0]["versions"][0]["version"], "v1");
  }
  // The bootstrap token asks for node certificates only: not even discovery.
  Identity bootstrap{"system:bootstrap", "", false};
  bootstrap.bootstrap = true;
  for (const char* path : {"/apis", "/api", "/version", "/apis/gpucloud/v1"}) {
    EXPECT_EQ(Call("GET", path, "", {}, bootstrap).status, 403) << path;
  }
  Json versions = Body(Call("GET", "/api", "", {}, Tenant()));
  EXPECT_EQ(versions["kind"], "APIVersions");
  EXPECT_TRUE(versions["versions"].is_array());
  EXPECT_TRUE(versions["serverAddressByClientCIDRs"].is_array());
  Json group = Body(Call("GET", "/apis/gpucloud", "", {}, Tenant()));
  EXPECT_EQ(group["kind"], "APIGroup");
  EXPECT_EQ(group["name"], "gpucloud");
  Json version = Body(Call("GET", "/version", "", {}, Tenant()));
  EXPECT_EQ(version["gitVersion"], "v" GPUCLOUD_VERSION_FOR_TEST);
  for (const char* key : {"major", "minor", "gitCommit", "gitTreeState", "buildDate", "goVersion",
                          "compiler", "platform"}) {
    EXPECT_TRUE(version[key].is_string()) << key;
  }
  EXPECT_EQ(Call("POST", "/apis", "{}").status, 405);
  EXPECT_EQ(Call("GET", "/apis", "", {{"watch", "true"}}).status, 400);
}

TEST_F(ParityTest, DiscoveryListsWhatTheApiServes) {
  Response res = Call("GET", "/apis/gpucloud/v1/", "", {}, Tenant());
  ASSERT_EQ(res.status, 200) << res.body;
  Json list = Body(res);
  EXPECT_EQ(list["kind"], "APIResourceList");
  EXPECT_EQ(list["groupVersion"], "gpucloud/v1");
  std::map<std::string, Json> by_name;
  for (const Json& r : list["resources"]) {
    for (const char* key : {"name", "singularName", "kind"}) EXPECT_TRUE(r[key].is_string());
    EXPECT_TRUE(r["namespaced"].is_boolean());
    EXPECT_FALSE(r["verbs"].empty());
    by_name[r["name"]] = r;
  }
  ASSERT_TRUE(by_name.contains("jobs"));
  EXPECT_EQ(by_name["jobs"]["singularName"], "job");
  EXPECT_TRUE(by_name["jobs"]["namespaced"]);
  EXPECT_EQ(by_name["jobs"]["kind"], "Job");
  EXPECT_TRUE(by_name.contains("jobs/status"));
  EXPECT_TRUE(by_name.contains("jobs/logs"));
  EXPECT_EQ(by_name["nodes"]["shortNames"], Json::array({"no"}));
  // Every collection this server was given answers (identities and secrets are not attached).
  for (const char* name : {"jobs", "queues", "nodepools", "nodes", "namespaces"}) {
    ASSERT_TRUE(by_name.contains(name)) << name;
    std::string path = by_name[name]["namespaced"]
                           ? Cat("/apis/gpucloud/v1/namespaces/team-a/", name)
                           : Cat("/apis/gpucloud/v1/", name);
    EXPECT_EQ(Call("GET", path).status, 200) << path;
  }
}

TEST_F(ParityTest, AMergePatchIsAppliedToTheStoredObjectAndValidatedLikeAPut) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string path = std::string(kJobs) + "/train";
  auto patch = [&](std::string body, std::string type = "application/merge-patch+json",
                   Identity who = {"root", "", true}) {
    Request r{"PATCH", path, {}, std::move(body), who};
    r.content_type = std::move(type);
    return api_->Handle(r);
  };
  Response p = patch(R"({"spec":{"priority":7},"metadata":{"labels":{"team":null,"x":"y"}}})");
  ASSERT_EQ(p.status, 200) << p.body;
  Json got = Body(Call("GET", path));
  EXPECT_EQ(got["spec"]["priority"], 7);
  EXPECT_EQ(got["spec"]["tasks"][0]["replicas"], 2);  // untouched
  EXPECT_EQ(got["metadata"]["labels"], Json({{"x", "y"}}));
  EXPECT_EQ(got["status"]["phase"], "Pending");  // the server's, kept
  EXPECT_EQ(p.authorization.action, "jobs:Update");
  // Validated like a PUT: a bad value is 422 naming the field, and nothing changes.
  const std::string before = Call("GET", path).body;
  Response bad = patch(R"({"spec":{"tasks":[{"name":"w","replicas":-1}]}})");
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("replicas"), std::string::npos) << bad.body;
  EXPECT_EQ(patch(R"({"metadata":{"name":"other"}})").status, 400);
  EXPECT_EQ(Call("GET", path).body, before);
  // A resourceVersion in the patch is a precondition.
  const std::string rv = got["metadata"]["resourceVersion"];
  EXPECT_EQ(patch(R"({"metadata":{"resourceVersion":"1"},"spec":{"priority":8}})").status, 409);
  EXPECT_EQ(
      patch(Cat(R"({"metadata":{"resourceVersion":")", rv, R"("},"spec":{"priority":8}})")).status,
      200);
  // Other patch types are refused naming the one served; a body that is no object is 400.
  for (const char* type : {"application/json-patch+json", "application/strategic-merge-patch+json",
                           "application/apply-patch+yaml"}) {
    Response r = patch(R"([{"op":"replace","path":"/spec/priority","value":1}])", type);
    EXPECT_EQ(r.status, 415) << type;
    EXPECT_NE(r.body.find("application/merge-patch+json"), std::string::npos) << r.body;
  }
  EXPECT_EQ(patch("[1]").status, 400);
  // A patch that makes metadata a scalar or a list is refused, not a 500.
  for (const char* body : {R"({"metadata":"x"})", R"({"metadata":[1]})", R"({"metadata":5})"}) {
    Response r = patch(body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_NE(r.body.find("metadata: must be an object"), std::string::npos) << r.body;
  }
  // Another tenant's job is neither patched nor revealed; a missing one is 404.
  EXPECT_EQ(
      patch(R"({"spec":{"priority":1}})", "application/merge-patch+json", {"bob", "team-b", false})
          .status,
      403);
  Request missing{"PATCH", std::string(kJobs) + "/nope", {}, "{}", Tenant()};
  EXPECT_EQ(api_->Handle(missing).status, 404);
  Request other{"PATCH", "/apis/gpucloud/v1/namespaces/team-b/jobs/nope", {}, "{}", Tenant()};
  EXPECT_EQ(api_->Handle(other).status, 403);
}

TEST_F(ParityTest, AJobsStatusIsReadableAndWrittenOnlyByTheController) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string path = std::string(kJobs) + "/train/status";
  Response g = Call("GET", path, "", {}, Tenant());
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(Body(g)["status"]["phase"], "Pending");
  EXPECT_EQ(Body(g)["kind"], "Job");
  for (const char* method : {"PUT", "PATCH"}) {
    Response w = Call(method, path, R"({"status":{"phase":"Succeeded"}})", {}, Tenant());
    EXPECT_EQ(w.status, 405) << method << " " << w.body;
    EXPECT_NE(w.body.find("controller"), std::string::npos) << w.body;
  }
  EXPECT_EQ(Body(Call("GET", path))["status"]["phase"], "Pending");
  EXPECT_EQ(
      Call("GET", "/apis/gpucloud/v1/namespaces/team-b/jobs/train/status", "", {}, Tenant()).status,
      403);
}

TEST_F(ParityTest, ADryRunIsDecidedAndValidatedLikeTheRequestAndWritesNothing) {
  const int64_t start = store_->Revision();
  const std::map<std::string, std::string> dry = {{"dryRun", "All"}};
  Response c = Call("POST", kJobs, kJob, dry, Tenant());
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(Body(c)["metadata"]["name"], "train");
  EXPECT_EQ(Body(c)["status"]["phase"], "Pending");
  EXPECT_EQ(store_->Revision(), start);
  EXPECT_EQ(Call("GET", std::string(kJobs) + "/train").status, 404);
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/namespaces/team-b/jobs", kJob, dry, Tenant()).status,
            403);
  EXPECT_EQ(Call("POST", kJobs, "kind: Job\n", dry).status, 422);
  EXPECT_EQ(Call("POST", kJobs, kJob, {{"dryRun", "Yes"}}).status, 400);
  // What kubectl sends with a create: a field manager (no managedFields are kept) and a field
  // validation (unknown fields are errors whatever it says).
  Response k =
      Call("POST", kJobs, kJob,
           {{"dryRun", "All"}, {"fieldManager", "kubectl-create"}, {"fieldValidation", "Ignore"}});
  EXPECT_EQ(k.status, 201) << k.body;
  EXPECT_EQ(
      Call("POST", kJobs, Cat(kJob, "  colour: blue\n"), {{"fieldValidation", "Ignore"}}).status,
      422);
  EXPECT_EQ(Call("POST", kJobs, kJob, {{"fieldValidation", "Lax"}}).status, 400);
  // On a stored object: PUT, PATCH and DELETE answer what would be, and change nothing.
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const int64_t stored = store_->Revision();
  const std::string path = std::string(kJobs) + "/train";
  Response put = Call("PUT", path, Cat(kJob, "  priority: 3\n"), dry);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Body(put)["spec"]["priority"], 3);
  Request patch{"PATCH", path, dry, R"({"spec":{"priority":4}})", Identity{"root", "", true}};
  Response patched = api_->Handle(patch);
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(Body(patched)["spec"]["priority"], 4);
  Response del = Call("DELETE", path, "", dry);
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(Call("DELETE", std::string(kJobs) + "/nope", "", dry).status, 404);
  EXPECT_EQ(Call("DELETE", "/apis/gpucloud/v1/queues/nope", "", dry).status, 404);
  EXPECT_EQ(store_->Revision(), stored);
  EXPECT_EQ(Body(Call("GET", path))["spec"].value("priority", 0), 0);
}

TEST_F(ParityTest, ListsArePagedWithAnOpaqueTokenStableUnderConcurrentCreates) {
  for (const char* name : {"b", "d", "f", "h", "j"}) {
    std::string job = kJob;
    job.replace(job.find("name: train"), 11, Cat("name: ", name));
    ASSERT_EQ(Call("POST", kJobs, job).status, 201);
  }
  const std::string first_revision = std::to_string(store_->Revision());
  Response p1 = Call("GET", kJobs, "", {{"limit", "2"}}, Tenant());
  ASSERT_EQ(p1.status, 200) << p1.body;
  Json l1 = Body(p1);
  ASSERT_EQ(l1["items"].size(), 2u);
  EXPECT_EQ(l1["items"][1]["metadata"]["name"], "d");
  EXPECT_EQ(l1["metadata"]["remainingItemCount"], 3);
  EXPECT_EQ(l1["metadata"]["resourceVersion"], first_revision);
  const std::string token = l1["metadata"]["continue"];
  // Creates meanwhile, before and after the page's end: nothing listed twice, nothing skipped.
  for (const char* name : {"a", "e", "z"}) {
    std::string job = kJob;
    job.replace(job.find("name: train"), 11, Cat("name: ", name));
    ASSERT_EQ(Call("POST", kJobs, job).status, 201);
  }
  std::vector<std::string> names;
  std::string next = token;
  while (!next.empty()) {
    Response p = Call("GET", kJobs, "", {{"limit", "2"}, {"continue", next}}, Tenant());
    ASSERT_EQ(p.status, 200) << p.body;
    Json l = Body(p);
    EXPECT_EQ(l["metadata"]["resourceVersion"], first_revision);
    for (const Json& item : l["items"]) names.push_back(item["metadata"]["name"]);
    next = l["metadata"].value("continue", "");
    if (!next.empty()) {
      EXPECT_GT(l["metadata"]["remainingItemCount"], 0);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"e", "f", "h", "j", "z"}));
  // Without a limit: every item, no token.
  Json all = Body(Call("GET", kJobs));
  EXPECT_EQ(all["items"].size(), 8u);
  EXPECT_FALSE(all["metadata"].contains("continue"));
  // A selector filters before the limit counts.
  Json sel = Body(Call("GET", kJobs, "", {{"limit", "100"}, {"labelSelector", "team=vision"}}));
  EXPECT_EQ(sel["items"].size(), 8u);
  // A token of another list, or none at all, is 400; one whose revision was compacted is 410.
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/queues", "", {{"continue", token}}).status, 400);
  EXPECT_EQ(Call("GET", kJobs, "", {{"continue", "not-a-token"}}).status, 400);
  EXPECT_EQ(Call("GET", kJobs, "", {{"limit", "-1"}}).status, 400);
  ASSERT_TRUE(store_->Compact(store_->Revision()).ok());
  Response expired = Call("GET", kJobs, "", {{"limit", "2"}, {"continue", token}});
  EXPECT_EQ(expired.status, 410) << expired.body;
  EXPECT_EQ(Body(expired)["reason"], "Expired");
  // Every namespace's list pages too.
  Json every = Body(Call("GET", "/apis/gpucloud/v1/jobs", "", {{"limit", "3"}}));
  EXPECT_EQ(every["items"].size(), 3u);
  EXPECT_EQ(every["metadata"]["remainingItemCount"], 5);
}

TEST_F(ParityTest, LogsTakeTailLinesAndPrevious) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string logs = std::string(kJobs) + "/train/logs";
  ASSERT_TRUE(logs_->Append({"team-a", "train", 0, 0}, 0, "one\ntwo\nthree\n").ok());
  ASSERT_TRUE(logs_->Append({"team-a", "train", 1, 0}, 0, "again\nand\nfour").ok());
  Response tail = Call("GET", logs, "", {{"tailLines", "2"}, {"attempt", "0"}}, Tenant());
  ASSERT_EQ(tail.status, 200) << tail.body;
  EXPECT_EQ(tail.body, "two\nthree\n");
  EXPECT_EQ(tail.headers["X-Gpucloud-Offset"], "14");  // where a follow goes on from
  EXPECT_EQ(Call("GET", logs, "", {{"tailLines", "0"}, {"attempt", "0"}}).body, "");
  EXPECT_EQ(Call("GET", logs, "", {{"tailLines", "9"}, {"attempt", "0"}}).body,
            "one\ntwo\nthree\n");
  EXPECT_EQ(Call("GET", logs, "", {{"tailLines", "1"}, {"attempt", "1"}}).body, "four");
  // previous: the attempt before the current one (the controller's status.attempt).
  EXPECT_EQ(Call("GET", logs, "", {{"previous", "true"}}).status, 400);  // attempt 0 has none
  std::string job = Call("GET", std::string(kJobs) + "/train").body;
  Json doc = Json::parse(job);
  doc["status"]["attempt"] = 1;
  ASSERT_TRUE(
      store_->Txn({{store::Op::Kind::kPut, "/jobs/team-a/train", doc.dump(), std::nullopt}}).ok());
  Response prev = Call("GET", logs, "", {{"previous", "True"}, {"tailLines", "1"}}, Tenant());
  ASSERT_EQ(prev.status, 200) << prev.body;
  EXPECT_EQ(prev.body, "three\n");
  EXPECT_EQ(prev.headers["X-Gpucloud-Attempt"], "0");
  EXPECT_FALSE(prev.more);
  EXPECT_EQ(Call("GET", logs, "", {{"previous", "true"}, {"attempt", "0"}}).status, 200);
  EXPECT_EQ(Call("GET", logs, "", {{"previous", "true"}, {"attempt", "1"}}).status, 400);
  EXPECT_EQ(Call("GET", logs, "", {{"previous", "maybe"}}).status, 400);
  EXPECT_EQ(Call("GET", logs, "", {{"timestamps", "false"}}).status, 200);
}

// Issue 16: sinceSeconds and timestamps=true as Kubernetes' pod log API answers them, by the time
// each chunk was read on its node (the chunk's `time`; the server's clock when it has none).
TEST_F(ParityTest, LogsTakeSinceSecondsAndTimestampsByTheTimeOfEachChunk) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string logs = std::string(kJobs) + "/train/logs";
  const int64_t t0 = clock_.NowMillis();  // 2023-11-14T22:13:20Z
  auto ship = [&](int64_t offset, const std::string& data, std::optional<int64_t> time) {
    std::map<std::string, std::string> q = {
        {"rank", "0"}, {"attempt", "0"}, {"offset", std::to_string(offset)}};
    if (time) q["time"] = std::to_string(*time);
    return Call("POST", logs, data, q);
  };
  auto get = [&](std::map<std::string, std::string> q) {
    return Call("GET", logs, "", q, Tenant());
  };
  // Read 10 minutes ago; 2 minutes ago, with a line the next chunk ends; now (no time: the
  // server's clock).
  ASSERT_EQ(ship(0, "old\n", t0 - 600'000).status, 200);
  ASSERT_EQ(ship(4, "recent li", t0 - 120'000 + 250).status, 200);
  ASSERT_EQ(ship(13, "ne\nnow\n", std::nullopt).status, 200);
  const std::string p_old = "2023-11-14T22:03:20.000000000Z ";
  const std::string p_recent = "2023-11-14T22:11:20.250000000Z ";
  const std::string p_now = "2023-11-14T22:13:20.000000000Z ";
  // sinceSeconds: from the first line whose time is since then ("recent line" began before the
  // last minute: it is not, though it ends in it).
  EXPECT_EQ(get({{"sinceSeconds", "60"}}).body, "now\n");
  EXPECT_EQ(get({{"sinceSeconds", "300"}}).body, "recent line\nnow\n");
  EXPECT_EQ(get({{"sinceSeconds", "3600"}}).body, "old\nrecent line\nnow\n");
  Response none = get({{"sinceSeconds", "1"}, {"timestamps", "true"}});
  EXPECT_EQ(none.body, p_now + "now\n");
  // timestamps=true: each line after its chunk's time, as Kubernetes writes it.
  Response stamped = get({{"timestamps", "true"}});
  ASSERT_EQ(stamped.status, 200) << stamped.body;
  EXPECT_EQ(stamped.body, p_old + "old\n" + p_recent + "recent line\n" + p_now + "now\n");
  EXPECT_EQ(stamped.headers["X-Gpucloud-Offset"], "20");  // of the log, not of the answer
  // With tailLines: the tail of what is since.
  EXPECT_EQ(get({{"sinceSeconds", "300"}, {"tailLines", "1"}, {"timestamps", "1"}}).body,
            p_now + "now\n");
  EXPECT_EQ(get({{"sinceSeconds", "300"}, {"tailLines", "5"}}).body, "recent line\nnow\n");
  // limitBytes counts the prefixes; a page ends before a line of which nothing fits, and the
  // next one (from X-Gpucloud-Offset) prefixes it once.
  Response page = get({{"timestamps", "true"}, {"limitBytes", "40"}});
  EXPECT_EQ(page.body, p_old + "old\n");
  ASSERT_EQ(page.headers["X-Gpucloud-Offset"], "4");
  page = get({{"timestamps", "true"}, {"limitBytes", "40"}, {"offset", "4"}});
  EXPECT_EQ(page.body, p_recent + "recent li");
  ASSERT_EQ(page.headers["X-Gpucloud-Offset"], "13");
  page = get({{"timestamps", "true"}, {"offset", "13"}});  // the rest of a line: no prefix
  EXPECT_EQ(page.body, "ne\n" + p_now + "now\n");
  // An agent's clock ahead of the server's is the server's; times never go back.
  ASSERT_EQ(ship(20, "ahead\n", t0 + 3'600'000).status, 200);
  clock_.Advance(5'000);
  ASSERT_EQ(ship(26, "behind\n", t0 - 60'000).status, 200);
  ASSERT_EQ(ship(33, "later\n", std::nullopt).status, 200);
  EXPECT_EQ(get({{"timestamps", "true"}, {"tailLines", "3"}}).body,
            p_now + "ahead\n" + p_now + "behind\n" + "2023-11-14T22:13:25.000000000Z later\n");
  // Bad values are 400, naming the field.
  for (auto [key, value] : {std::pair{"sinceSeconds", "0"},
                            {"sinceSeconds", "-5"},
                            {"sinceSeconds", "5m"},
                            {"sinceSeconds", ""},
                            {"timestamps", "maybe"}}) {
    Response r = get({{key, value}});
    EXPECT_EQ(r.status, 400) << key << "=" << value;
    EXPECT_NE(r.body.find(key), std::string::npos) << r.body;
  }
  Response bad_time = Call("POST", logs, "x\n",
                           {{"rank", "0"}, {"attempt", "0"}, {"offset", "39"}, {"time", "soon"}});
  EXPECT_EQ(bad_time.status, 400);
  EXPECT_NE(bad_time.body.find("time"), std::string::npos) << bad_time.body;
  EXPECT_EQ(logs_->Size({"team-a", "train", 0, 0}), 39);
}

// Defect 11: the RuntimeClass of examples/ is accepted as a cluster-wide object, and a job that
// names it gets its node selector.
TEST_F(ParityTest, ARuntimeClassIsStoredListedUsedAndDeleted) {
  if (!FindPolicyAction("runtimeclasses:Create")) {
    GTEST_SKIP() << "needs the runtimeclasses:* actions in core/policy.cc's PolicyActions";
  }
  const std::string rcs = "/apis/gpucloud/v1/runtimeclasses";
  const char* rc = R"(apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gpu-runtime
handler: nvidia
scheduling:
  nodeSelector:
    accelerator: nvidia-a100
)";
  EXPECT_EQ(Call("POST", rcs, rc, {}, Tenant()).status, 403);  // cluster-wide: the admins'
  Response c = Call("POST", rcs, rc);
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(Call("PUT", rcs + "/gpu-runtime", rc).status, 200);  // applied again: unchanged
  Json listed = Body(Call("GET", rcs));
  ASSERT_EQ(listed["items"].size(), 1u);
  EXPECT_EQ(listed["kind"], "RuntimeClassList");
  EXPECT_EQ(listed["items"][0]["metadata"]["name"], "gpu-runtime");
  std::string job = Cat(kJob, "  runtimeClass: gpu-runtime\n");
  Response j = Call("POST", kJobs, job, {}, Tenant());
  ASSERT_EQ(j.status, 201) << j.body;
  EXPECT_EQ(Body(j)["spec"]["nodeSelector"]["accelerator"], "nvidia-a100");
  EXPECT_EQ(Call("PUT", std::string(kJobs) + "/train", job, {}, Tenant()).status, 200);
  EXPECT_EQ(Call("DELETE", rcs + "/gpu-runtime").status, 200);
  EXPECT_EQ(Call("GET", rcs + "/gpu-runtime").status, 404);
}

// What a stored RuntimeClass does to the jobs that name it (the store written directly: the
// runtimeclasses:* actions are the policies' to add).
TEST_F(ParityTest, AJobNamingAStoredRuntimeClassGetsItsNodeSelector) {
  manifest::ParseResult rc = manifest::ParseManifests(R"(apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gpu-runtime}
handler: nvidia
scheduling:
  nodeSelector: {accelerator: nvidia-a100}
)",
                                                      "rc.yaml");
  ASSERT_TRUE(rc.ok());
  ASSERT_TRUE(store_
                  ->Txn({{store::Op::Kind::kPut, "/runtimeclasses/gpu-runtime",
                          manifest::ToJson(rc.manifests[0].object), 0}})
                  .ok());
  const std::string job = Cat(kJob, "  runtimeClass: gpu-runtime\n");
  Response j = Call("POST", kJobs, job, {}, Tenant());
  ASSERT_EQ(j.status, 201) << j.body;
  EXPECT_EQ(Body(j)["spec"]["nodeSelector"]["accelerator"], "nvidia-a100");
  EXPECT_FALSE(j.headers.contains("Warning"));
  // Applying the same manifest again changes nothing (the stored job has the selector too).
  const int64_t rev = store_->Revision();
  EXPECT_EQ(Call("PUT", std::string(kJobs) + "/train", job, {}, Tenant()).status, 200);
  EXPECT_EQ(store_->Revision(), rev);
  // A selector of its own that contradicts the RuntimeClass's is 422 naming the field.
  std::string other = kJob;
  other.replace(other.find("name: train"), 11, "name: other");
  Response bad =
      Call("POST", kJobs,
           Cat(other, "  runtimeClass: gpu-runtime\n  nodeSelector: {accelerator: h100}\n"));
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("spec.nodeSelector.accelerator"), std::string::npos) << bad.body;
  // One the server lacks: taken, with a warning that nothing applied it.
  Response w = Call("POST", kJobs, Cat(other, "  runtimeClass: missing\n"));
  ASSERT_EQ(w.status, 201) << w.body;
  EXPECT_NE(w.headers["Warning"].find("RuntimeClass missing does not exist"), std::string::npos);
}

// Issue 21: only the leader's controller reads heartbeats, so a standby answers them 503
// NotLeader with the leader's URL (from the election key), and the agent moves on to the next
// server; it writes nothing and records nothing. Registration is any server's.
TEST_F(ParityTest, AStandbyAnswersAHeartbeat503NamingTheLeader) {
  api::NodeInfo n;
  n.name = "n1";
  n.cpu_milli = 1'000;
  n.memory_mib = 1'024;
  bool leads = false;
  api_->SetLeadership([&leads] { return leads; });
  ASSERT_EQ(Call("PUT", api::NodePath("n1"), api::NodeToJson(n, false)).status, 201);
  const std::string heartbeat = api::NodeVerbPath("n1", "heartbeat");
  api::Heartbeat hb;
  hb.gpus.push_back({.index = 0, .healthy = false, .reason = "Xid 79"});
  const int64_t before = nodes_.Get("n1")->last_heartbeat_ms;
  clock_.Advance(1000);
  Response r = Call("POST", heartbeat, api::HeartbeatToJson(hb), {}, Node());
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Body(r)["reason"], "NotLeader");
  EXPECT_EQ(Body(r)["message"],
            "this server is a standby: heartbeats go to the leader once one is elected (no server "
            "leads now)");
  EXPECT_EQ(r.headers["Retry-After"], "1");
  EXPECT_EQ(nodes_.Get("n1")->last_heartbeat_ms, before);
  ASSERT_TRUE(store_
                  ->Txn({{store::Op::Kind::kPut, std::string(kLeaderKey),
                          R"({"pid":7,"url":"https://10.0.0.2:8443"})"}})
                  .ok());
  r = Call("POST", heartbeat, api::HeartbeatToJson(hb), {}, Node());
  EXPECT_EQ(Body(r)["message"],
            "this server is a standby: heartbeats go to the leader, https://10.0.0.2:8443");
  leads = true;
  EXPECT_EQ(Call("POST", heartbeat, api::HeartbeatToJson(hb), {}, Node()).status, 200);
  EXPECT_EQ(nodes_.Get("n1")->last_heartbeat_ms, clock_.NowMillis());
}

// Defect 10: after an Xid 79 the server stops scheduling on the GPU; what the API answers for
// the node (describe node, top) says so too.
TEST_F(ParityTest, ANodesGpuHealthIsWhatItsLatestHeartbeatSays) {
  api::NodeInfo n;
  n.name = "n1";
  n.cpu_milli = 64'000;
  n.memory_mib = 512 << 10;
  for (int i = 0; i < 2; ++i) {
    Gpu g;
    g.index = i;
    g.uuid = Cat("GPU-n1-", i);
    g.type = "H100-80GB";
    g.memory = MiB(80 << 10);
    n.gpus.push_back(g);
  }
  ASSERT_EQ(Call("PUT", api::NodePath("n1"), api::NodeToJson(n, false)).status, 201);
  const std::string node = api::NodePath("n1");
  EXPECT_TRUE(Body(Call("GET", node))["status"]["gpus"][1]["healthy"]);
  api::Heartbeat hb;
  hb.gpus.push_back({.index = 1, .healthy = false, .reason = "Xid 79 (fallen off the bus)"});
  hb.gpus.push_back({.index = 0, .healthy = true, .at_risk = true, .risk = "ECC rising"});
  ASSERT_EQ(Call("POST", node + "/heartbeat", api::HeartbeatToJson(hb), {}, Node()).status, 200);
  Json got = Body(Call("GET", node, "", {}, Tenant()));
  EXPECT_FALSE(got["status"]["gpus"][1]["healthy"]);
  EXPECT_EQ(got["status"]["gpus"][1]["reason"], "Xid 79 (fallen off the bus)");
  EXPECT_TRUE(got["status"]["gpus"][0]["healthy"]);
  EXPECT_TRUE(got["status"]["gpus"][0]["atRisk"]);
  EXPECT_EQ(got["status"]["lastHeartbeatMs"], clock_.NowMillis());
  Json listed = Body(Call("GET", "/apis/gpucloud/v1/nodes"));
  ASSERT_EQ(listed["items"].size(), 1u);
  EXPECT_FALSE(listed["items"][0]["status"]["gpus"][1]["healthy"]);
  // The GPU recovered (the operator reset it): the next heartbeat says so, and so does the API.
  hb.gpus = {{.index = 1, .healthy = true}};
  ASSERT_EQ(Call("POST", node + "/heartbeat", api::HeartbeatToJson(hb), {}, Node()).status, 200);
  got = Body(Call("GET", node));
  EXPECT_TRUE(got["status"]["gpus"][1]["healthy"]);
  EXPECT_FALSE(got["status"]["gpus"][1].contains("reason"));
}

}  // namespace
}  // namespace gpucloud::server
