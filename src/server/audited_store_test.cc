#include "server/audited_store.h"

#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_format.h"
#include "core/clock.h"
#include "core/gpu_catalog.h"
#include "server/audit_log.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using store::Op;

constexpr int64_t kStart = 1'764'600'000'000;  // 2025-12-01T14:40:00Z

const char* kJob = R"(apiVersion: gpucloud/v1
kind: Job
metadata:
  name: train
  labels: {team: topsecret-label-4711}
spec:
  tasks:
  - name: worker
    replicas: 1
    resources: {gpu: {count: 1}}
)";

Identity Alice() {
  Identity who;
  who.user = "alice";
  who.namespace_ = "team-a";
  who.token_name = "alice-laptop";
  who.groups = {"ml-team"};
  return who;
}

class AuditedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::move(*store::OpenSqliteStore(dir_ / "store.db"));
    log_ = std::make_unique<AuditLog>(*base_, clock_, AuditKey::Generate());
    ASSERT_TRUE(log_->Open().ok());
    store_ = std::make_unique<AuditedStore>(*base_, *log_);
    api_ = std::make_unique<RestApi>(*store_, clock_, 7);
  }
  // Serves `r` as the HTTPS front does: a scope around Handle, then FinishAuditRequest.
  Response Serve(Request r) {
    AuditRequest audit;
    audit.record = AuditRecordFor(r, "10.0.0.7", "gpuctl/test", NewAuditId(), kStart);
    Response resp;
    {
      AuditScope scope(&audit);
      resp = api_->Handle(r);
    }
    EXPECT_TRUE(FinishAuditRequest(*log_, audit, resp).ok());
    return resp;
  }
  std::vector<AuditRecord> All() {
    absl::StatusOr<std::vector<AuditRecord>> all = log_->Query({});
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? *all : std::vector<AuditRecord>{};
  }
  std::string Export() {
    std::ostringstream out;
    EXPECT_TRUE(log_->ExportJsonLines(out, {}).ok());
    return out.str();
  }

  testing_util::TempDir dir_{"audited-store"};
  FakeClock clock_{kStart};
  std::unique_ptr<store::Store> base_;
  std::unique_ptr<AuditLog> log_;
  std::unique_ptr<AuditedStore> store_;
  std::unique_ptr<RestApi> api_;
};

TEST_F(AuditedStoreTest, ATxnInARequestCommitsItsRecordInTheSameTransaction) {
  AuditRequest audit;
  audit.record.username = "alice";
  audit.record.audit_id = "req-1";
  absl::StatusOr<int64_t> rev;
  {
    AuditScope scope(&audit);
    rev = store_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/x", "{}", 0}});
  }
  ASSERT_TRUE(rev.ok()) << rev.status();
  EXPECT_EQ(audit.committed, 1);
  // Durable already: nothing was buffered, the record is in the store at the Txn's revision.
  absl::StatusOr<store::KeyValue> kv = base_->Get("/audit/records/00000000000000000001");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->mod_revision, *rev);
  EXPECT_EQ(base_->Get("/jobs/team-a/x")->mod_revision, *rev);
  std::vector<AuditRecord> all = All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].username, "alice");
  EXPECT_EQ(all[0].audit_id, "req-1");
  EXPECT_EQ(all[0].stage, kAuditCommittedStage);
  EXPECT_EQ(all[0].response_code, 0);
  // A request that committed needs no other record.
  ASSERT_TRUE(FinishAuditRequest(*log_, audit, Response{201}).ok());
  ASSERT_TRUE(log_->Flush().ok());
  EXPECT_EQ(All().size(), 1u);
}

TEST_F(AuditedStoreTest, ASecondTxnOfARequestIsNumbered) {
  AuditRequest audit;
  audit.record.username = "alice";
  AuditScope scope(&audit);
  ASSERT_TRUE(store_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/x", "{}", 0}}).ok());
  ASSERT_TRUE(store_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/y", "{}", 0}}).ok());
  std::vector<AuditRecord> all = All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(all[0].annotations.contains("gpucloud.io/txn"));
  EXPECT_EQ(all[1].annotations.at("gpucloud.io/txn"), "2");
}

TEST_F(AuditedStoreTest, AFailedTxnWritesNeitherAndTheAnswerIsRecordedWithItsCode) {
  ASSERT_TRUE(base_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/x", "{}", 0}}).ok());
  const int64_t before = base_->Revision();
  AuditRequest audit;
  audit.record.username = "alice";
  {
    AuditScope scope(&audit);
    absl::StatusOr<int64_t> rev = store_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/x", "{}", 0}});
    EXPECT_TRUE(absl::IsAlreadyExists(rev.status())) << rev.status();
  }
  EXPECT_EQ(audit.committed, 0);
  EXPECT_EQ(base_->Revision(), before);
  EXPECT_TRUE(All().empty());
  ASSERT_TRUE(FinishAuditRequest(*log_, audit, Response{409}).ok());
  std::vector<AuditRecord> all = All();  // Query flushes
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].response_code, 409);
  EXPECT_EQ(all[0].stage, "ResponseComplete");
}

TEST_F(AuditedStoreTest, OutsideARequestATxnPassesThroughUnaudited) {
  ASSERT_EQ(AuditScope::Current(), nullptr);
  ASSERT_TRUE(store_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/x", "{}", 0}}).ok());
  ASSERT_TRUE(log_->Flush().ok());
  EXPECT_TRUE(All().empty());
  EXPECT_EQ(log_->head_seq(), 0);
}

TEST_F(AuditedStoreTest, RequestsThroughTheApiAreRecordedWithWhoWhatAndCode) {
  const std::string jobs = "/apis/gpucloud/v1/namespaces/team-a/jobs";
  Response created = Serve({"POST", jobs, {}, kJob, Alice()});
  ASSERT_EQ(created.status, 201) << created.body;
  Response got = Serve({"GET", jobs + "/train", {}, "", Alice()});
  ASSERT_EQ(got.status, 200) << got.body;
  Response missing = Serve({"GET", jobs + "/nope", {}, "", Alice()});
  ASSERT_EQ(missing.status, 404);
  Response listed = Serve({"GET", jobs, {{"labelSelector", "team"}}, "", Alice()});
  ASSERT_EQ(listed.status, 200);
  Response other = Serve({"GET", "/apis/gpucloud/v1/namespaces/team-b/jobs", {}, "", Alice()});
  ASSERT_EQ(other.status, 403);

  std::vector<AuditRecord> all = All();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].verb, "create");
  EXPECT_EQ(all[0].stage, kAuditCommittedStage);
  EXPECT_EQ(all[0].object_name, "train");  // from the key it wrote, not the body
  // What authorization decided is in the record committed with the write, too.
  EXPECT_EQ(all[0].action, "jobs:Create");
  EXPECT_EQ(all[0].resource, "gpucloud:job/team-a/train");
  EXPECT_EQ(all[0].decision, "allow");
  EXPECT_EQ(all[0].reason, "policy gpucloud:tenant, statement 0 (Sid OwnNamespaceJobs)");
  // For the anomaly rules: the dearest hourly cost the job could run up (one GPU of any type:
  // the catalog's dearest), and no single GPU type (it takes any).
  const GpuType* dearest = &GpuCatalog::Default().types()[0];
  for (const GpuType& t : GpuCatalog::Default().types()) {
    if (t.on_demand_price_per_hour.raw() > dearest->on_demand_price_per_hour.raw()) dearest = &t;
  }
  EXPECT_EQ(all[0].annotations["gpucloud.io/estimated-hourly-cost"],
            absl::StrFormat("%.2f", dearest->on_demand_price_per_hour.raw() / 1e6));
  EXPECT_FALSE(all[0].annotations.contains("gpucloud.io/gpu-type"));
  EXPECT_EQ(all[4].action, "jobs:List");
  EXPECT_EQ(all[4].decision, "deny");
  EXPECT_EQ(all[1].verb, "get");
  EXPECT_EQ(all[1].response_code, 200);
  EXPECT_EQ(all[1].object_name, "train");
  EXPECT_EQ(all[2].response_code, 404);
  EXPECT_EQ(all[2].object_name, "nope");
  EXPECT_EQ(all[3].verb, "list");
  EXPECT_EQ(all[3].request_uri, jobs + "?labelSelector=team");
  EXPECT_EQ(all[4].response_code, 403);
  EXPECT_EQ(all[4].object_namespace, "team-b");
  for (const AuditRecord& r : all) {
    EXPECT_EQ(r.username, "alice");
    EXPECT_EQ(r.groups, std::vector<std::string>{"ml-team"});
    EXPECT_EQ(r.token_name, "alice-laptop");
    EXPECT_EQ(r.source_ips, std::vector<std::string>{"10.0.0.7"});
    EXPECT_EQ(r.user_agent, "gpuctl/test");
    EXPECT_EQ(r.object_resource, "jobs");
    EXPECT_EQ(r.request_received_ms, kStart);
  }
  absl::StatusOr<VerifyReport> report = log_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->what;
}

// The audit policy's level None: a node's successful heartbeat is not recorded; a refused one
// is.
TEST_F(AuditedStoreTest, ANodesSuccessfulHeartbeatIsNotRecordedButARefusedOneIs) {
  Identity node;
  node.user = "node:n1";
  node.node = true;
  node.node_name = "n1";
  Response ok{200};
  ok.authorization = {"nodes:Heartbeat", "gpucloud:node/n1", "allow", "policy gpucloud:node"};
  Response refused{403};
  refused.authorization = {"nodes:Heartbeat", "gpucloud:node/n2", "deny", "no statement"};
  Request beat{"POST", "/apis/gpucloud/v1/nodes/n1/heartbeat", {}, "{}", node};
  for (const Response* resp : {&ok, &refused}) {
    AuditRequest audit;
    audit.record = AuditRecordFor(beat, "10.0.0.9", "agent", NewAuditId(), kStart);
    ASSERT_TRUE(FinishAuditRequest(*log_, audit, *resp).ok());
  }
  std::vector<AuditRecord> all = All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].response_code, 403);
  EXPECT_EQ(all[0].node_name, "n1");
}

TEST_F(AuditedStoreTest, NoRecordHoldsTheRequestBody) {
  ASSERT_EQ(Serve({"POST", "/apis/gpucloud/v1/namespaces/team-a/jobs", {}, kJob, Alice()}).status,
            201);
  ASSERT_EQ(
      Serve({"PUT", "/apis/gpucloud/v1/namespaces/team-a/jobs/train", {}, kJob, Alice()}).status,
      200);
  ASSERT_EQ(
      Serve({"POST", "/apis/gpucloud/v1/namespaces/team-a/jobs", {}, "not: [yaml", Alice()}).status,
      422);
  const std::string text = Export();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_EQ(text.find("topsecret-label-4711"), std::string::npos) << text;
  EXPECT_EQ(text.find("not: [yaml"), std::string::npos) << text;
}

TEST_F(AuditedStoreTest, TheApiNeverSeesOrWritesAuditKeys) {
  AuditRequest audit;
  {
    AuditScope scope(&audit);
    ASSERT_TRUE(store_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/x", "{}", 0}}).ok());
    EXPECT_TRUE(absl::IsInvalidArgument(
        store_->Txn({Op{Op::Kind::kPut, "/audit/records/x", "{}", std::nullopt}}).status()));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      store_->Txn({Op{Op::Kind::kDelete, "/audit/records/00000000000000000001", ""}}).status()));
  ASSERT_TRUE(base_->Get("/audit/records/00000000000000000001").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/audit/records/00000000000000000001").status()));
  absl::StatusOr<store::ListResult> list = store_->List("/");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0].key, "/jobs/team-a/x");
  EXPECT_TRUE(store_->List("/audit/")->items.empty());
  int64_t remaining = -1;
  list = store_->ListPage("/", "", 10, &remaining);  // a page over the records hides them too
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0].key, "/jobs/team-a/x");
  EXPECT_EQ(remaining, 0);
  EXPECT_TRUE(store_->ListPage("/audit/", "", 10, &remaining)->items.empty());
  EXPECT_EQ(*store_->Count("/"), 1);
  EXPECT_EQ(*store_->Count("/audit/"), 0);
  absl::StatusOr<std::vector<store::Event>> changes = store_->Changes("", 0, 10);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].kv.key, "/jobs/team-a/x");
}

// Pages of the change log that the filter made short still read on: "fewer than limit" means
// there is no more, as the store promises.
TEST_F(AuditedStoreTest, AShortenedPageOfChangesReadsOn) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(log_->Record(AuditRecord{.username = "x"}).ok());
    ASSERT_TRUE(log_->Flush().ok());  // a revision of audit keys only
  }
  ASSERT_TRUE(base_->Txn({Op{Op::Kind::kPut, "/jobs/team-a/late", "{}", 0}}).ok());
  absl::StatusOr<std::vector<store::Event>> changes = store_->Changes("", 0, 2);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].kv.key, "/jobs/team-a/late");
}

TEST(AuditRecordForTest, ParsesVerbAndObjectFromThePath) {
  auto rec = [](std::string method, std::string path,
                std::map<std::string, std::string> query = {}) {
    Request r{std::move(method), std::move(path), std::move(query), "secret body", Alice()};
    return AuditRecordFor(r, "::1", "ua", "id", 5);
  };
  AuditRecord a = rec("POST", "/apis/gpucloud/v1/namespaces/team-a/jobs/train/cancel");
  EXPECT_EQ(a.verb, "create");
  EXPECT_EQ(a.object_resource, "jobs");
  EXPECT_EQ(a.object_namespace, "team-a");
  EXPECT_EQ(a.object_name, "train");
  EXPECT_EQ(a.annotations.at("gpucloud.io/subresource"), "cancel");
  AuditRecord w = rec("GET", "/apis/gpucloud/v1/nodes", {{"watch", "true"}});
  EXPECT_EQ(w.verb, "watch");
  EXPECT_EQ(w.object_resource, "nodes");
  EXPECT_EQ(w.object_namespace, "");
  EXPECT_EQ(w.request_uri, "/apis/gpucloud/v1/nodes?watch=true");
  EXPECT_EQ(rec("DELETE", "/apis/gpucloud/v1/queues/q1").verb, "delete");
  EXPECT_EQ(rec("PUT", "/apis/gpucloud/v1/queues/q1").verb, "update");
  EXPECT_EQ(rec("GET", "/apis/gpucloud/v1/queues").verb, "list");
  EXPECT_EQ(rec("GET", "/metrics").object_resource, "metrics");
  AuditRecord n = rec("GET", "/apis/gpucloud/v1/namespaces/team-a");
  EXPECT_EQ(n.object_resource, "namespaces");
  EXPECT_EQ(n.object_name, "team-a");
  EXPECT_EQ(a.source_ips, std::vector<std::string>{"::1"});
  EXPECT_EQ(EncodeRecord(a).find("secret body"), std::string::npos);
  const std::string id = NewAuditId();
  EXPECT_EQ(id.size(), 36u);
  EXPECT_EQ(id[14], '4');
  EXPECT_NE(id, NewAuditId());
  // A version 4 UUID, lower-case hex; unique across the pool refills (256 ids a refill).
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string next = NewAuditId();
    ASSERT_TRUE(std::regex_match(
        next, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
        << next;
    ids.insert(next);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

}  // namespace
}  // namespace gpucloud::server
