// Job arrays through the REST API: one POST creates every element in one transaction (all or
// nothing), listed by label; a cancel or delete of the array's name takes every element at once.
#include <gtest/gtest.h>

#include "core/text.h"
#include "server/rest_fixture.h"

namespace gpucloud::server {
namespace {

std::string Sweep(const std::string& array, const std::string& name = "sweep") {
  return Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: ", name,
             "}\nspec:\n  tasks: [{name: main, command: [python, train.py]}]\n  array: ", array,
             "\n");
}

class RestArrayTest : public RestFixture {
 protected:
  RestArrayTest() : RestFixture(/*with_cluster=*/true) {}
  std::vector<std::string> JobNames() {
    std::vector<std::string> out;
    absl::StatusOr<store::ListResult> list = store_->List("/jobs/team-a/");
    for (const store::KeyValue& kv : list->items) {
      out.push_back(nlohmann::json::parse(kv.value)["metadata"]["name"]);
    }
    return out;
  }
};

TEST_F(RestArrayTest, OnePostCreatesEveryElementInOneTransaction) {
  const int64_t before = store_->Revision();
  Response r = Call("POST", kJobs, Sweep("{count: 5, parallelism: 2}"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(store_->Revision(), before + 1) << "one transaction";
  nlohmann::json b = Body(r);
  EXPECT_EQ(b["details"]["elements"], 5);
  EXPECT_EQ(b["details"]["resourceVersion"], std::to_string(before + 1));
  EXPECT_EQ(b["message"], "job array team-a/sweep: 5 jobs sweep-0 .. sweep-4 created");
  EXPECT_EQ(JobNames(),
            (std::vector<std::string>{"sweep-0", "sweep-1", "sweep-2", "sweep-3", "sweep-4"}));
  // Every element is a job of its own, labelled with its array and index.
  nlohmann::json e3 = Body(Call("GET", Cat(kJobs, "/sweep-3")));
  EXPECT_EQ(e3["metadata"]["labels"]["gpucloud.io/array"], "sweep");
  EXPECT_EQ(e3["metadata"]["labels"]["gpucloud.io/array-index"], "3");
  EXPECT_EQ(e3["spec"]["array"],
            nlohmann::json::parse(R"({"name":"sweep","index":3,"count":5,"parallelism":2})"));
  EXPECT_EQ(e3["status"]["phase"], "Pending");
  EXPECT_EQ(e3["status"]["reason"], "ArrayParallelism") << "beyond the parallelism: waits";
  EXPECT_FALSE(Body(Call("GET", Cat(kJobs, "/sweep-1")))["status"].contains("reason"));
  EXPECT_NE(e3["metadata"]["uid"], Body(Call("GET", Cat(kJobs, "/sweep-1")))["metadata"]["uid"]);
  // Listed together by label.
  nlohmann::json list =
      Body(Call("GET", kJobs, "", {{"labelSelector", "gpucloud.io/array=sweep"}}));
  EXPECT_EQ(list["items"].size(), 5u);
  // The array itself is no job.
  EXPECT_EQ(Call("GET", Cat(kJobs, "/sweep")).status, 404);
}

TEST_F(RestArrayTest, ANameCollisionIsConflictAndWritesNothing) {
  ASSERT_EQ(Call("POST", kJobs, Sweep("{count: 1}", "other")).status, 201);
  Response taken = Call("POST", kJobs,
                        "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: sweep-3}\n"
                        "spec:\n  tasks: [{name: main, command: [x]}]\n");
  ASSERT_EQ(taken.status, 201) << taken.body;
  const int64_t before = store_->Revision();
  Response r = Call("POST", kJobs, Sweep("{count: 5}"));
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("/jobs/team-a/sweep-3 already exists"), std::string::npos) << r.body;
  EXPECT_EQ(store_->Revision(), before) << "nothing written";
  EXPECT_EQ(JobNames(), (std::vector<std::string>{"other-0", "sweep-3"}));
  // An array named like an existing job is refused too (cancel NAME would be ambiguous).
  r = Call("POST", kJobs, Sweep("{count: 2}", "sweep-3"));
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(store_->Revision(), before);
}

TEST_F(RestArrayTest, TheQuotaCountsEveryElement) {
  api_->SetMaxJobsPerNamespace(4);
  const int64_t before = store_->Revision();
  Response r = Call("POST", kJobs, Sweep("{count: 5}"));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Body(r)["reason"], "QuotaExceeded");
  EXPECT_EQ(store_->Revision(), before);
  EXPECT_EQ(Call("POST", kJobs, Sweep("{count: 4}")).status, 201);
}

TEST_F(RestArrayTest, ApplyAndDryRun) {
  Response dry = Call("POST", kJobs, Sweep("{count: 3}"), {{"dryRun", "All"}});
  EXPECT_EQ(dry.status, 201) << dry.body;
  EXPECT_TRUE(JobNames().empty());
  // A PUT of the array's name creates it as a POST does; again, it is a conflict.
  Response put = Call("PUT", Cat(kJobs, "/sweep"), Sweep("{indices: \"2,4\"}"));
  EXPECT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(JobNames(), (std::vector<std::string>{"sweep-2", "sweep-4"}));
  // Again as it is: unchanged, nothing written; otherwise a name is taken: 409.
  const int64_t revision = store_->Revision();
  Response again = Call("PUT", Cat(kJobs, "/sweep"), Sweep("{indices: \"2,4\"}"));
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(Body(again)["reason"], "Unchanged");
  EXPECT_EQ(store_->Revision(), revision);
  EXPECT_EQ(Call("PUT", Cat(kJobs, "/sweep"), Sweep("{indices: \"2,4,6\"}")).status, 409);
  EXPECT_EQ(Call("PUT", Cat(kJobs, "/sweep"), Sweep("{indices: \"2,4\", parallelism: 1}")).status,
            409);
  EXPECT_EQ(Call("POST", kJobs, Sweep("{indices: \"2,4\"}")).status, 409) << "a create is one";
  EXPECT_EQ(store_->Revision(), revision);
  // A bad array is 422 naming the field.
  Response bad = Call("POST", kJobs, Sweep("{indices: \"3-1\"}", "b"));
  EXPECT_EQ(bad.status, 422);
  EXPECT_NE(bad.body.find("spec.array.indices: array \\\"3-1\\\": \\\"3-1\\\" runs backwards"),
            std::string::npos)
      << bad.body;
}

TEST_F(RestArrayTest, CancelOfTheArrayNameCancelsEveryElementAtOnce) {
  ASSERT_EQ(Call("POST", kJobs, Sweep("{count: 3}")).status, 201);
  // A job named like an element but of no array is left alone.
  ASSERT_EQ(Call("POST", kJobs,
                 "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: sweep-x}\n"
                 "spec:\n  tasks: [{name: main, command: [x]}]\n")
                .status,
            201);
  const int64_t before = store_->Revision();
  Response r = Call("POST", Cat(kJobs, "/sweep/cancel"));
  EXPECT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(Body(r)["message"], "job array team-a/sweep: 3 of 3 jobs being stopped");
  EXPECT_EQ(store_->Revision(), before + 1) << "one transaction";
  for (const char* e : {"sweep-0", "sweep-1", "sweep-2"}) {
    EXPECT_EQ(Body(Call("GET", Cat(kJobs, "/", e)))["status"]["cancelRequested"], true) << e;
  }
  EXPECT_FALSE(Body(Call("GET", Cat(kJobs, "/sweep-x")))["status"].contains("cancelRequested"));
  EXPECT_EQ(Call("POST", Cat(kJobs, "/nothing/cancel")).status, 404);
}

TEST_F(RestArrayTest, DeleteOfTheArrayNameDeletesEveryElementAtOnce) {
  ASSERT_EQ(Call("POST", kJobs, Sweep("{count: 3}")).status, 201);
  const int64_t before = store_->Revision();
  Response dry = Call("DELETE", Cat(kJobs, "/sweep"), "", {{"dryRun", "All"}});
  EXPECT_EQ(dry.status, 200) << dry.body;
  EXPECT_EQ(store_->Revision(), before);
  Response r = Call("DELETE", Cat(kJobs, "/sweep"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["message"], "job array team-a/sweep: 3 of 3 jobs deleted");
  EXPECT_EQ(store_->Revision(), before + 1) << "one transaction";
  EXPECT_TRUE(JobNames().empty());
  EXPECT_EQ(Call("DELETE", Cat(kJobs, "/sweep")).status, 404);
}

TEST_F(RestArrayTest, TheLargestArrayIsOneTransaction) {
  const int64_t before = store_->Revision();
  Response r = Call("POST", kJobs, Sweep("{count: 10000, parallelism: 50}"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(store_->Revision(), before + 1);
  EXPECT_EQ(*store_->Count("/jobs/team-a/"), 10000);
  Response c = Call("DELETE", Cat(kJobs, "/sweep"));
  EXPECT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(*store_->Count("/jobs/team-a/"), 0);
}

}  // namespace
}  // namespace gpucloud::server
