#include "server/rest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/text.h"
#include "server/log_store.h"
#include "server/node_table.h"
#include "server/rest_fixture.h"
#include "server/rest_util.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

const char* const kJob = kRestTestJob;

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

class RestTest : public RestFixture {};

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

// whatIf=true with dryRun=All: the would-be job with what the scheduler would do (the hook);
// alone, on an array, or without a scheduler: refused, and nothing is ever written.
TEST_F(RestTest, WhatIfAsksTheSchedulerOnADryRunOnly) {
  const int64_t revision = store_->Revision();
  EXPECT_EQ(Call("POST", kJobs, kJob, {{"whatIf", "true"}}).status, 400);
  EXPECT_EQ(Call("POST", kJobs, kJob, {{"dryRun", "All"}, {"whatIf", "true"}}).status, 503);
  std::string asked_ns, asked_name;
  api_->SetWhatIf([&](const std::string& ns, const Job& job) -> absl::StatusOr<nlohmann::json> {
    asked_ns = ns;
    asked_name = job.metadata.name;
    return nlohmann::json{{"outcome", "Wait"}, {"reason", "queue q is at its max"}};
  });
  Response r = Call("POST", kJobs, kJob, {{"dryRun", "All"}, {"whatIf", "true"}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Body(r)["status"]["whatIf"]["outcome"], "Wait");
  EXPECT_EQ(Body(r)["status"]["whatIf"]["reason"], "queue q is at its max");
  EXPECT_EQ(asked_ns, "team-a");
  EXPECT_EQ(asked_name, Body(r)["metadata"]["name"]);
  api_->SetWhatIf([](const std::string&, const Job&) -> absl::StatusOr<nlohmann::json> {
    return absl::UnavailableError("this server does not lead: ask the leader");
  });
  EXPECT_EQ(Call("POST", kJobs, kJob, {{"dryRun", "All"}, {"whatIf", "true"}}).status, 503);
  EXPECT_EQ(Call("POST", kJobs, kJob, {{"dryRun", "All"}, {"whatIf", "maybe"}}).status, 400);
  EXPECT_EQ(store_->Revision(), revision);
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
  EXPECT_EQ(Body(peek)["message"],
            "user bob may not jobs:Get on gpucloud:job/team-a/train: no policy attached to it "
            "allows it");
  EXPECT_EQ(Call("DELETE", std::string(kJobs) + "/train", "", {}, bob).status, 403);
  EXPECT_EQ(Call("GET", kJobs, "", {}, bob).status, 403);
  EXPECT_EQ(Call("GET", std::string(kJobs) + "/train", "", {}, alice).status, 200);
  // Queues: everyone reads, only admins write.
  const char* queue =
      "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {weight: 2}\n";
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/queues", queue, {}, alice).status, 403);
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/queues", queue).status, 201);
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/queues/q", "", {}, bob).status, 200);
}

TEST_F(RestTest, BadInputGetsAClearErrorAndChangesNothing) {
  int64_t rev = store_->Revision();
  Response bad = Call("POST", kJobs,
                      "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: x}\n"
                      "spec:\n  tasks:\n  - name: w\n    replicas: 0\n");
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(Body(bad)["message"], "body:7:15: spec.tasks[0].replicas: must be >= 1, got 0");
  EXPECT_EQ(Call("POST", kJobs, "{not json").status, 422);
  Response kind =
      Call("POST", kJobs, "apiVersion: gpucloud/v1\nkind: Queue\nmetadata: {name: q}\nspec: {}\n");
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
  EXPECT_EQ(Call("PATCH", std::string(kJobs) + "/train").status, 400);  // no merge patch
  EXPECT_EQ(Call("PATCH", kJobs, "{}").status, 405);                    // no object
  EXPECT_EQ(Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "abc"}}).status, 400);
  EXPECT_EQ(store_->Revision(), rev);  // nothing half-written
}

TEST_F(RestTest, WatchResumesFromARevision) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  std::string path = std::string(kJobs) + "/train";
  ASSERT_EQ(Call("PUT", path, std::string(kJob) + "  priority: 1\n").status, 200);
  ASSERT_EQ(Call("DELETE", path).status, 200);
  Response w = Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "1"}});
  ASSERT_EQ(w.status, 200);
  EXPECT_EQ(w.content_type, "application/x-ndjson");
  std::vector<std::string> types;
  std::vector<std::string> revs;
  for (const std::string& line : SplitLines(w.body)) {
    Json e = Json::parse(line);
    types.push_back(e["type"]);
    revs.push_back(e["object"]["metadata"]["resourceVersion"]);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"MODIFIED", "DELETED"}));
  EXPECT_EQ(revs, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(w.revision, 3);
  Response from2 = Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "2"}});
  EXPECT_EQ(SplitLines(from2.body).size(), 1u);
  ASSERT_TRUE(store_->Compact(2).ok());
  EXPECT_EQ(Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "1"}}).status, 410);
}

TEST_F(RestTest, AWatchFromNothingStartsFromTheCurrentState) {
  // History the watcher need not replay: ten updates of one job, another created and deleted.
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  std::string path = std::string(kJobs) + "/train";
  for (int i = 1; i <= 10; ++i) {
    ASSERT_EQ(Call("PUT", path, Cat(kJob, "  priority: ", i, "\n")).status, 200);
  }
  std::string other = kJob;
  other.replace(other.find("name: train"), 11, "name: other");
  ASSERT_EQ(Call("POST", kJobs, other).status, 201);
  ASSERT_EQ(Call("DELETE", std::string(kJobs) + "/other").status, 200);
  for (const char* rv : {"", "0"}) {
    std::map<std::string, std::string> q = {{"watch", "true"}};
    if (*rv != '\0') q["resourceVersion"] = rv;
    Response w = Call("GET", kJobs, "", q);
    ASSERT_EQ(w.status, 200);
    std::vector<std::string> lines = SplitLines(w.body);
    ASSERT_EQ(lines.size(), 1u) << w.body;
    Json e = Json::parse(lines[0]);
    EXPECT_EQ(e["type"], "ADDED");
    EXPECT_EQ(e["object"]["spec"]["priority"], 10);
    EXPECT_EQ(w.revision, store_->Revision());
  }
}

TEST_F(RestTest, AWatchBatchIsBoundedAndCutAtAWholeRevision) {
  // 350 transactions of 3 jobs each: 1,050 events, more than one batch holds.
  for (int t = 0; t < 350; ++t) {
    std::vector<store::Op> ops;
    for (int k = 0; k < 3; ++k) {
      ops.push_back(
          {store::Op::Kind::kPut, Cat("/jobs/team-a/j", t, "-", k), "{\"metadata\":{}}", 0});
    }
    ASSERT_TRUE(store_->Txn(ops).ok());
  }
  // Page through the history after revision 1 (whose three events are counted here), as a
  // watcher that fell behind would.
  std::set<int64_t> seen_revs;
  size_t events = 3;
  int64_t rv = 1;
  for (int batches = 0; batches < 5 && rv < store_->Revision(); ++batches) {
    Response w =
        Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", std::to_string(rv)}});
    ASSERT_EQ(w.status, 200);
    std::vector<std::string> lines = SplitLines(w.body);
    EXPECT_LE(lines.size(), static_cast<size_t>(kMaxWatchBatch));
    EXPECT_EQ(lines.size() % 3, 0u) << "a transaction was split across batches";
    for (const std::string& line : lines) {
      int64_t r =
          std::stoll(Json::parse(line)["object"]["metadata"]["resourceVersion"].get<std::string>());
      EXPECT_GT(r, rv);
      EXPECT_LE(r, w.revision);
      seen_revs.insert(r);
    }
    events += lines.size();
    ASSERT_GT(w.revision, rv);
    rv = w.revision;
  }
  EXPECT_EQ(events, 1050u);
  EXPECT_EQ(seen_revs.size(), 349u);
  EXPECT_EQ(rv, store_->Revision());
}

TEST_F(RestTest, AWatchFromTheFutureIsRefusedAfterAShortWait) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  Response w = Call("GET", kJobs, "", {{"watch", "true"}, {"resourceVersion", "99999"}});
  EXPECT_EQ(w.status, 504) << w.body;
  EXPECT_NE(Body(w)["message"].get<std::string>().find("too large resource version"),
            std::string::npos);
}

TEST_F(RestTest, EveryNamespaceWatchIsAWatch) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  Response w =
      Call("GET", "/apis/gpucloud/v1/jobs", "", {{"watch", "true"}, {"resourceVersion", "1"}});
  ASSERT_EQ(w.status, 200);
  EXPECT_EQ(w.content_type, "application/x-ndjson");
  EXPECT_EQ(w.body, "");  // nothing after revision 1
  Identity tenant{"alice", "team-a", false};
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/jobs", "", {{"watch", "true"}}, tenant).status, 403);
}

TEST_F(RestTest, ANamespaceOverItsJobQuotaIsRefusedAndOthersAreNot) {
  api_->SetMaxJobsPerNamespace(2);
  for (const char* name : {"a", "b"}) {
    std::string job = kJob;
    job.replace(job.find("name: train"), 11, Cat("name: ", name));
    ASSERT_EQ(Call("POST", kJobs, job).status, 201);
  }
  int64_t rev = store_->Revision();
  Response over = Call("POST", kJobs, kJob);
  EXPECT_EQ(over.status, 403);
  EXPECT_EQ(Body(over)["reason"], "QuotaExceeded");
  EXPECT_NE(Body(over)["message"].get<std::string>().find("quota is 2"), std::string::npos);
  EXPECT_EQ(store_->Revision(), rev);  // nothing written
  // Another namespace has its own quota; a deleted job frees a place.
  EXPECT_EQ(Call("POST", "/apis/gpucloud/v1/namespaces/team-b/jobs", kJob).status, 201);
  ASSERT_EQ(Call("DELETE", std::string(kJobs) + "/a").status, 200);
  EXPECT_EQ(Call("POST", kJobs, kJob).status, 201);
}

TEST_F(RestTest, ACheckpointDirOutsideTheNamespacesTreeIsRefused) {
  api_->SetCheckpointRoot("/srv/ckpt");
  auto with_dir = [](const std::string& name, const std::string& dir) {
    std::string job = kJob;
    job.replace(job.find("name: train"), 11, Cat("name: ", name));
    return job + "  checkpoint: {dir: \"" + dir + "\"}\n";
  };
  int64_t rev = store_->Revision();
  for (const char* bad : {"/srv/ckpt/team-b/train", "/etc", "../team-b/train", "/srv/ckpt"}) {
    Response r = Call("POST", kJobs, with_dir("bad", bad));
    EXPECT_EQ(r.status, 422) << bad;
    EXPECT_EQ(Body(r)["reason"], "Invalid");
    EXPECT_EQ(Body(r)["message"].get<std::string>().rfind("spec.checkpoint.dir: must ", 0), 0u)
        << r.body;
    // Applying it is refused the same way.
    EXPECT_EQ(Call("PUT", std::string(kJobs) + "/bad", with_dir("bad", bad)).status, 422);
  }
  EXPECT_EQ(store_->Revision(), rev);  // nothing written
  EXPECT_EQ(Body(Call("POST", kJobs, with_dir("bad", "/etc")))["message"],
            "spec.checkpoint.dir: must lie inside the namespace's checkpoint tree "
            "/srv/ckpt/team-a/ (or be relative to it), got \"/etc\"");
  EXPECT_EQ(Call("POST", kJobs, with_dir("rel", "runs-1")).status, 201);
  EXPECT_EQ(Call("POST", kJobs, with_dir("abs", "/srv/ckpt/team-a/runs-2")).status, 201);
  // Nested: another job's directory could be the tenant's own.
  EXPECT_EQ(Call("POST", kJobs, with_dir("nested", "rel/x")).status, 422);
  // An existing job cannot be moved out of its tree either.
  EXPECT_EQ(Call("PUT", std::string(kJobs) + "/rel", with_dir("rel", "/srv/ckpt/team-b")).status,
            422);
}

TEST_F(RestTest, PathsThatAreNotUtf8GetAnErrorNotAnException) {
  // Found by the REST fuzzer: the Status message quoted the path, and JSON output threw.
  Response r = Call("POST", "/apis/gpucloud/v1/\x93\xce/pools/spot/reclaim");
  EXPECT_EQ(r.status, 400);  // a segment that is not a DNS label
  EXPECT_TRUE(Json::accept(r.body)) << r.body;
}

TEST_F(RestTest, LogReadsAreBoundedWhateverTheClientAsks) {
  NodeTable nodes;
  LogStore logs((dir_ / "logs").string());
  api_->AttachCluster(&nodes, &logs, nullptr);
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  ASSERT_TRUE(logs.Append({"team-a", "train", 0, 0}, 0, "hello\n").ok());
  std::string path = std::string(kJobs) + "/train/logs";
  Response huge = Call("GET", path, "", {{"limitBytes", "999999999999999999"}});
  ASSERT_EQ(huge.status, 200);
  EXPECT_EQ(huge.body, "hello\n");
  // Far past the end, or a number that would wrap: no allocation, and no other attempt's log.
  EXPECT_EQ(Call("GET", path, "", {{"offset", "999999999999"}}).body, "");
  Response wrapped = Call("GET", path, "", {{"attempt", "4294967296"}});
  EXPECT_EQ(wrapped.status, 400);
  EXPECT_NE(Body(wrapped)["message"].get<std::string>().find("attempt"), std::string::npos);
  EXPECT_EQ(Call("GET", path, "", {{"rank", "99999999999"}}).status, 400);
  // A log larger than one read comes in pieces of at most kMaxReadBytes.
  std::string big(LogStore::kMaxReadBytes + 100, 'x');
  ASSERT_TRUE(logs.Append({"team-a", "train", 0, 1}, 0, big).ok());
  Response piece = Call("GET", path, "", {{"rank", "1"}, {"limitBytes", "999999999"}});
  EXPECT_EQ(piece.body.size(), static_cast<size_t>(LogStore::kMaxReadBytes));
}

TEST_F(RestTest, AChunkOverTheNamespacesLogQuotaIs429AndKeepsWhatFits) {
  NodeTable nodes;
  LogStore logs((dir_ / "logs").string(), /*max_bytes_per_namespace=*/20);
  api_->AttachCluster(&nodes, &logs, nullptr);
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string path = std::string(kJobs) + "/train/logs";
  const Identity agent{"root", "", true};  // NodeRestriction is tested on its own
  auto ship = [&](const std::string& offset, const std::string& data) {
    return Call("POST", path, data, {{"rank", "0"}, {"attempt", "0"}, {"offset", offset}}, agent);
  };
  Response ok = ship("0", "0123456789\n");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Body(ok)["size"], 11);
  // 9 bytes of room: they are kept, the rest refused, and the answer says how far the log goes,
  // which quota, and when to try again.
  Response full = ship("11", "abcd\nefghijkl\n");
  ASSERT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(Body(full)["reason"], "QuotaExceeded");
  EXPECT_EQ(Body(full)["details"]["size"], 20);
  EXPECT_EQ(Body(full)["details"]["retryAfterSeconds"], 30);
  EXPECT_EQ(full.headers["Retry-After"], "30");
  std::string message = Body(full)["message"];
  EXPECT_NE(message.find("namespace team-a holds 20 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("quota is 20 (--max-log-bytes-per-namespace)"), std::string::npos);
  EXPECT_NE(message.find("5 bytes of this chunk were refused"), std::string::npos);
  // The same chunk again (a retry): the same answer, nothing written twice.
  Response again = ship("11", "abcd\nefghijkl\n");
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(Body(again)["details"]["size"], 20);
  EXPECT_EQ(Call("GET", path).body, "0123456789\nabcd\nefgh");
  EXPECT_EQ(ship("20", "").status, 200);  // nothing new: nothing over
  // Another job of the namespace gets no room either, until a job is deleted.
  std::string other = kJob;
  other.replace(other.find("name: train"), 11, "name: other");
  ASSERT_EQ(Call("POST", kJobs, other).status, 201);
  auto ship_other = [&] {
    return Call("POST", std::string(kJobs) + "/other/logs", "xyz\n",
                {{"rank", "0"}, {"attempt", "0"}, {"offset", "0"}}, agent);
  };
  EXPECT_EQ(ship_other().status, 429);
  ASSERT_EQ(Call("DELETE", std::string(kJobs) + "/train").status, 200);
  Response room = ship_other();
  EXPECT_EQ(room.status, 200) << room.body;
  EXPECT_EQ(Body(room)["size"], 4);
}

TEST_F(RestTest, AFullNamespaceGetsBackTheLogsOfJobsDeletedBehindTheLogStore) {
  NodeTable nodes;
  LogStore logs((dir_ / "logs").string(), 10);
  api_->AttachCluster(&nodes, &logs, nullptr);
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string path = std::string(kJobs) + "/train/logs";
  auto ship = [&](const std::string& offset, const std::string& data) {
    return Call("POST", path, data, {{"rank", "0"}, {"attempt", "0"}, {"offset", offset}},
                {"root", "", true});
  };
  // Jobs the controller deleted once their tasks stopped: their logs are still on disk.
  ASSERT_TRUE(logs.Append({"team-a", "gone", 0, 0}, 0, "0123456789").ok());
  // The first refusal looks for such logs and tries again...
  Response r = ship("0", "hello\n");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(logs.Jobs("team-a"), std::vector<std::string>{"train"});
  // ...at most every 30 s per namespace.
  ASSERT_TRUE(logs.Append({"team-a", "gone2", 0, 0}, 0, "0123").ok());
  EXPECT_EQ(ship("6", "abc\n").status, 429);
  clock_.Advance(30'000);
  r = ship("6", "abc\n");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["size"], 10);
}

// Issue 16: the Kubernetes Python client sends watch=True; booleans read as Kubernetes reads them.
TEST_F(RestTest, BooleanQueryParametersReadAsKubernetesReadsThem) {
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  for (const char* yes : {"true", "True", "TRUE", "1"}) {
    Response w = Call("GET", kJobs, "", {{"watch", yes}});
    EXPECT_EQ(w.status, 200) << yes;
    EXPECT_EQ(w.content_type, "application/x-ndjson") << yes;  // a watch, not a list
    EXPECT_NE(w.body.find("\"type\":\"ADDED\""), std::string::npos) << yes;
  }
  for (const char* no : {"false", "False", "0"}) {
    Response l = Call("GET", kJobs, "", {{"watch", no}});
    EXPECT_EQ(l.status, 200) << no;
    EXPECT_EQ(Body(l)["kind"], "JobList") << no;
  }
  Response bad = Call("GET", kJobs, "", {{"watch", "yes"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(Body(bad)["message"].get<std::string>().find("watch"), std::string::npos);
  EXPECT_EQ(Call("GET", kJobs, "", {{"watch", "1"}, {"allowWatchBookmarks", "maybe"}}).status, 400);
  EXPECT_EQ(Call("GET", "/apis/gpucloud/v1/nodes", "", {{"watch", "True"}}).content_type,
            "application/x-ndjson");
  Request r;
  ParseTarget("/x?watch=True&follow=1&allowWatchBookmarks=no", &r);
  EXPECT_TRUE(QueryTrue(r, "watch"));
  EXPECT_TRUE(QueryTrue(r, "follow"));
  EXPECT_FALSE(QueryTrue(r, "allowWatchBookmarks"));
  EXPECT_FALSE(QueryBool(r, "allowWatchBookmarks").has_value());
}

// A parameter a path does not implement is refused, naming it: a delete by a field selector
// that ignored its selector would delete the wrong thing.
TEST_F(RestTest, UnsupportedQueryParametersAreRefusedNamingThem) {
  NodeTable nodes;
  LogStore logs((dir_ / "logs").string());
  api_->AttachCluster(&nodes, &logs, nullptr);
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  const std::string job = std::string(kJobs) + "/train";
  struct Case {
    const char* method;
    std::string path;
    std::map<std::string, std::string> query;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"GET", kJobs, {{"fieldSelector", "metadata.name=x"}}, "fieldSelector"},
      {"GET", kJobs, {{"limit", "ten"}}, "limit"},
      {"GET", "/apis/gpucloud/v1/jobs", {{"continue", "abc"}}, "continue"},
      {"DELETE", job, {{"fieldSelector", "metadata.name=other"}}, "fieldSelector"},
      {"GET", job, {{"watch", "true"}}, "watch"},
      {"PUT", job, {{"dryRun", "all"}}, "dryRun"},
      {"POST", kJobs, {{"dryRun", ""}}, "dryRun"},
      {"GET", job, {{"dryRun", "All"}}, "dryRun"},
      {"GET", job + "/events", {{"limit", "1"}}, "limit"},
      {"GET", job + "/logs", {{"sinceTime", "2026-01-01T00:00:00Z"}}, "sinceTime"},
      {"POST", job + "/cancel", {{"gracePeriodSeconds", "0"}}, "gracePeriodSeconds"},
      {"GET",
       "/apis/gpucloud/v1/nodes",
       {{"fieldSelector", "spec.unschedulable=true"}},
       "fieldSelector"},
      {"POST", "/apis/gpucloud/v1/nodes/n1/cordon", {{"seconds", "5"}}, "seconds"},
      {"GET", "/apis/gpucloud/v1/nodes/n1/assignments", {{"labelSelector", "a"}}, "labelSelector"},
      {"GET", kJobs, {{"watch", "true"}, {"timeoutSeconds", "soon"}}, "timeoutSeconds"},
      {"GET", kJobs, {{"resourceVersion", "abc"}}, "resourceVersion"},
  };
  for (const Case& c : cases) {
    Response r = Call(c.method, c.path, "", c.query);
    EXPECT_EQ(r.status, 400) << c.method << " " << c.path << " " << c.named << ": " << r.body;
    EXPECT_NE(r.body.find(c.named), std::string::npos) << r.body;
  }
  EXPECT_EQ(Call("GET", job).status, 200);  // the delete with a selector deleted nothing
  // What each path implements still works.
  EXPECT_EQ(
      Call("GET", kJobs, "",
           {{"labelSelector", "team=vision"}, {"resourceVersion", "0"}, {"timeoutSeconds", "5"}})
          .status,
      200);
  EXPECT_EQ(Call("GET", job + "/logs", "", {{"rank", "0"}, {"follow", "false"}}).status, 200);
}

// Issue 16: a name is one DNS label; what would make a path name another object is refused.
TEST_F(RestTest, NamesThatWouldChangeThePathAreRefused) {
  NodeTable nodes;
  LogStore logs((dir_ / "logs").string());
  api_->AttachCluster(&nodes, &logs, nullptr);
  ASSERT_EQ(Call("POST", kJobs, kJob).status, 201);
  auto call = [&](std::string method, std::string target) {
    Request r;
    r.method = std::move(method);
    r.who = {"root", "", true};
    ParseTarget(target, &r);
    return api_->Handle(r);
  };
  const std::string jobs = kJobs;
  for (const std::string& target :
       {jobs + "/train%2Fevents", jobs + "/train%2fevents", jobs + "/..", jobs + "/.",
        jobs + "/train/../train", jobs + "/x/..%2Ftrain", jobs + "/train%00",
        jobs + "/tr%00ain/events", jobs + "/train%3Fwatch=true", jobs + "//events",
        jobs + "/train?events", std::string("/apis/gpucloud/v1/namespaces/team-a%2Fjobs/jobs"),
        std::string("/apis/gpucloud/v1/nodes/n1%2Fheartbeat"),
        std::string("/apis/gpucloud/v1/nodes/../jobs"), std::string("/apis/gpucloud/v1/nodes/a%00"),
        std::string("/apis/gpucloud/v1/pools/a%2Fb/reclaim?seconds=5")}) {
    Response r = call("GET", target);
    if (target.ends_with("reclaim?seconds=5")) r = call("POST", target);
    EXPECT_EQ(r.status, 400) << target << ": " << r.body;
    EXPECT_TRUE(Json::accept(r.body)) << r.body;
  }
  EXPECT_EQ(call("GET", jobs + "/train/events").status, 200);
  EXPECT_EQ(call("GET", jobs + "/train/").status, 200);  // a trailing '/' is still the job
  EXPECT_EQ(call("DELETE", jobs + "/train%2F..").status, 400);
  EXPECT_EQ(call("GET", jobs + "/train").status, 200);
}
}  // namespace
}  // namespace gpucloud::server
