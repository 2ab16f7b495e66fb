// The stored job status: phases as api::JobPhase, the same JSON as before, and an unknown phase
// an error naming the field (never a silent Pending).
#include "server/job_status.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/controller_fixture.h"

namespace gpucloud::server {
namespace {

TEST(StoredJobStatus, EveryPhaseIsStoredByItsName) {
  for (api::JobPhase p : api::kAllJobPhases) {
    JobStatus s;
    s.phase = p;
    if (api::IsStopping(p)) s.next = api::JobPhase::kSucceeded;
    Json doc = Json::object();
    JobStatusToJson(s, doc);
    EXPECT_EQ(doc["status"]["phase"], std::string(api::PhaseName(p)));
    EXPECT_EQ(doc["status"].contains("next"), api::IsStopping(p));
    absl::StatusOr<JobStatus> back = JobStatusFromJson(doc);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s);
    EXPECT_EQ(JobPhaseOf(doc).value(), p);
  }
}

TEST(StoredJobStatus, TheDocumentIsByteIdentical) {
  // As the server stored it before phases were an enum: read and written back, unchanged.
  const std::string stored =
      R"({"status":{"phase":"Restarting","next":"Pending","attempt":2,"restarts":1,)"
      R"("interruptions":0,"reason":"TaskFailed","message":"exit code 3","submittedMs":5,)"
      R"("scheduledMs":7,"stopDeadlineMs":9,"masterPort":29501,"placement":[{"name":"ns.j.0",)"
      R"("node":"node-a","rank":0,"task":"worker","replica":0,"cpuMilli":1000,"memoryMiB":512,)"
      R"("gpus":[{"index":1,"mode":"whole"}]}],"tasks":{"ns.j.0":"Failed"}}})";
  Json doc = Json::parse(stored);
  absl::StatusOr<JobStatus> s = JobStatusFromJson(doc);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->phase, api::JobPhase::kRestarting);
  EXPECT_EQ(s->next, api::JobPhase::kPending);
  Json out = Json::object();
  JobStatusToJson(*s, out);
  EXPECT_EQ(out.dump(), stored);
  // What clients read of it (api::JobStatus) agrees with the server's view.
  absl::StatusOr<api::JobStatus> client = api::JobStatusOf(out);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(client->phase, s->phase);
  EXPECT_EQ(client->next, s->next);
  EXPECT_EQ(client->master_port, 29501);
  ASSERT_EQ(client->placement.size(), 1u);
  EXPECT_EQ(client->placement[0].node, "node-a");
  EXPECT_EQ(client->placement[0].gpus.at(0).index, 1);
}

TEST(StoredJobStatus, AnUnknownPhaseIsAnErrorNamingTheField) {
  struct Case {
    const char* doc;
    const char* error;
  };
  const Case kCases[] = {
      {R"({"status": {"phase": "Runing"}})", "status.phase: unknown phase \"Runing\""},
      {R"({"status": {"phase": ""}})", "status.phase: unknown phase \"\""},
      {R"({"status": {"phase": 1}})", "status.phase: must be a string"},
      {R"({"status": {"phase": "Stopping", "next": "Done"}})",
       "status.next: unknown phase \"Done\""},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<JobStatus> s = JobStatusFromJson(Json::parse(c.doc));
    ASSERT_FALSE(s.ok()) << c.doc;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(std::string(s.status().message()).starts_with(c.error))
        << c.doc << ": " << s.status().message();
  }
  EXPECT_FALSE(JobPhaseOf(Json::parse(R"({"status": {"phase": "Runing"}})")).ok());
  // Absent is a new job: Pending.
  for (const char* doc : {R"({})", R"({"status": {}})", R"({"status": {"phase": null}})"}) {
    EXPECT_EQ(JobPhaseOf(Json::parse(doc)).value(), api::JobPhase::kPending) << doc;
    EXPECT_EQ(JobStatusFromJson(Json::parse(doc))->phase, api::JobPhase::kPending) << doc;
  }
}

// A stored job whose phase is none (edited behind the API's back) is never taken for Pending:
// the controller leaves it alone (not scheduled, its document unchanged) and the API's cancel
// answers that the stored document is damaged, naming status.phase.
TEST_F(ControllerTest, AStoredJobWithAnUnknownPhaseIsLeftAloneAndNamed) {
  Register("node-a", 4);
  Heartbeat("node-a");
  Submit(GangJob("odd", 1, 1));
  absl::StatusOr<store::KeyValue> kv = store_->Get("/jobs/default/odd");
  ASSERT_TRUE(kv.ok());
  Json doc = Json::parse(kv->value);
  doc["status"]["phase"] = "Runing";
  ASSERT_TRUE(store_->Txn({{store::Op::Kind::kPut, kv->key, doc.dump(2), kv->mod_revision}}).ok());
  const std::string stored = store_->Get("/jobs/default/odd")->value;
  Pass();
  Pass();
  EXPECT_EQ(store_->Get("/jobs/default/odd")->value, stored);
  EXPECT_TRUE(store_->List("/assignments/node-a/")->items.empty());
  Response r = Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs/odd/cancel");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find(R"(status.phase: unknown phase \"Runing\")"), std::string::npos) << r.body;
  EXPECT_EQ(store_->Get("/jobs/default/odd")->value, stored);
}

}  // namespace
}  // namespace gpucloud::server
