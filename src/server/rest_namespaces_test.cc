// Namespaces as objects (issue 14) through RestApi on a real SQLite store: a write into a
// namespace that does not exist is 404 and writes nothing (kExplicit) or makes it (kAuto); the
// objects' create, read, list, replace and delete with their errors; a user's home namespace
// made with the user; and the start-up migration.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/text.h"
#include "server/identity_book.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;
constexpr char kApi[] = "/apis/gpucloud/v1";

std::string JobNamed(const std::string& name) {
  return Cat("apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: ", name,
             "}\nspec:\n  tasks:\n  - name: w\n    resources: {gpu: {count: 1}}\n");
}

std::string NamespaceBody(const std::string& name, const std::string& extra = "") {
  return Cat("apiVersion: gpucloud/v1\nkind: Namespace\nmetadata:\n  name: ", name, "\n", extra);
}

class RestNamespacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((tmp_.path() / "s.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 5);
    book_ = std::make_unique<IdentityBook>(*store_, clock_, api_->authorizer());
    ASSERT_TRUE(book_->Load().ok());
    api_->AttachIdentities(book_.get());
    api_->SetNamespaceProvisioning(NamespaceProvisioning::kExplicit);
  }
  Response Call(const std::string& method, const std::string& path, const std::string& body = "",
                const Identity& who = {"root", "", true},
                std::map<std::string, std::string> query = {}) {
    return api_->Handle({method, kApi + path, std::move(query), body, who});
  }
  int64_t Count(const std::string& prefix) { return *store_->Count(prefix); }

  testing_util::TempDir tmp_{"gpucloud-ns"};
  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<IdentityBook> book_;
};

TEST_F(RestNamespacesTest, AWriteIntoAMissingNamespaceIs404AndWritesNothing) {
  Response r = Call("POST", "/namespaces/team-x/jobs", JobNamed("train"));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("namespaces \\\"team-x\\\" not found"), std::string::npos) << r.body;
  EXPECT_EQ(Count("/jobs/"), 0);
  EXPECT_EQ(Count("/namespaces/"), 0);
  // The same for a secret and a PUT (an apply).
  EXPECT_EQ(Call("PUT", "/namespaces/team-x/jobs/train", JobNamed("train")).status, 404);
  // A list of a namespace that does not exist is empty, as Kubernetes answers it.
  EXPECT_EQ(Call("GET", "/namespaces/team-x/jobs").status, 200);

  ASSERT_EQ(Call("POST", "/namespaces", NamespaceBody("team-x")).status, 201);
  EXPECT_EQ(Call("POST", "/namespaces/team-x/jobs", JobNamed("train")).status, 201);
}

TEST_F(RestNamespacesTest, AutoProvisioningMakesTheNamespaceOwnedByTheCaller) {
  api_->SetNamespaceProvisioning(NamespaceProvisioning::kAuto);
  ASSERT_EQ(Call("POST", "/namespaces/team-y/jobs", JobNamed("train")).status, 201);
  Response ns = Call("GET", "/namespaces/team-y");
  ASSERT_EQ(ns.status, 200) << ns.body;
  Json doc = Json::parse(ns.body);
  EXPECT_EQ(doc["kind"], "Namespace");
  EXPECT_EQ(doc["spec"]["owner"], "root");
  EXPECT_EQ(doc["status"]["phase"], "Active");
  // A second write finds it there.
  EXPECT_EQ(Call("POST", "/namespaces/team-y/jobs", JobNamed("eval")).status, 201);
  EXPECT_EQ(Count("/namespaces/"), 1);
  // A refused write and a dry run make nothing.
  const int64_t before = store_->Revision();
  EXPECT_EQ(Call("POST", "/namespaces/team-q/jobs", "kind: Job\n").status, 422);
  EXPECT_EQ(Call("POST", "/namespaces/team-q/jobs", JobNamed("x"), {"root", "", true},
                 {{"dryRun", "All"}})
                .status,
            201);
  EXPECT_EQ(store_->Revision(), before);
  EXPECT_EQ(Call("GET", "/namespaces/team-q").status, 404);
}

TEST_F(RestNamespacesTest, UncheckedLooksAtNoNamespace) {
  api_->SetNamespaceProvisioning(NamespaceProvisioning::kUnchecked);
  EXPECT_EQ(Call("POST", "/namespaces/team-u/jobs", JobNamed("train")).status, 201);
  EXPECT_EQ(Count("/namespaces/"), 0);
}

TEST_F(RestNamespacesTest, CreateReadListReplaceAndTheirErrors) {
  Response made = Call("POST", "/namespaces",
                       NamespaceBody("vision", "  labels: {team: vision}\nspec: {owner: alice}\n"));
  ASSERT_EQ(made.status, 201) << made.body;
  Json doc = Json::parse(made.body);
  EXPECT_FALSE(doc["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(doc["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_EQ(Call("POST", "/namespaces", NamespaceBody("vision")).status, 409);
  ASSERT_EQ(Call("POST", "/namespaces", NamespaceBody("speech")).status, 201);

  Response listed =
      Call("GET", "/namespaces", "", {"root", "", true}, {{"labelSelector", "team=vision"}});
  ASSERT_EQ(listed.status, 200) << listed.body;
  Json items = Json::parse(listed.body)["items"];
  ASSERT_EQ(items.size(), 1u) << listed.body;
  EXPECT_EQ(items[0]["metadata"]["name"], "vision");

  // A replace keeps uid and creation time; the server's status is the server's.
  Response put = Call("PUT", "/namespaces/vision",
                      NamespaceBody("vision", "  labels: {team: cv}\nstatus: {phase: Gone}\n"));
  ASSERT_EQ(put.status, 200) << put.body;
  Json after = Json::parse(put.body);
  EXPECT_EQ(after["metadata"]["uid"], doc["metadata"]["uid"]);
  EXPECT_EQ(after["metadata"]["labels"]["team"], "cv");
  EXPECT_EQ(after["status"]["phase"], "Active");
  // A merge patch is served as the PUT of its result.
  Response patched =
      Call("PATCH", "/namespaces/vision", R"({"metadata":{"labels":{"tier":"gold"}}})");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(Json::parse(patched.body)["metadata"]["labels"],
            Json({{"team", "cv"}, {"tier", "gold"}}));

  struct Bad {
    std::string path, body, field;
  };
  for (const Bad& b : std::vector<Bad>{
           {"/namespaces", NamespaceBody("audio", "spec: {color: red}\n"), "spec.color"},
           {"/namespaces", NamespaceBody("Audio"), "metadata.name"},
           {"/namespaces", NamespaceBody("audio", "  labels: {team: \"a b\"}\n"),
            "metadata.labels.team"},
           {"/namespaces", NamespaceBody("audio", "spec: {owner: \"Al Ice\"}\n"), "spec.owner"},
           {"/namespaces", "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: audio}\n", "kind"},
           {"/namespaces/audio", NamespaceBody("other"), "metadata.name"},
       }) {
    Response r = Call(b.path == "/namespaces" ? "POST" : "PUT", b.path, b.body);
    EXPECT_EQ(r.status, 422) << b.body;
    EXPECT_NE(r.body.find(b.field), std::string::npos) << b.field << ": " << r.body;
  }
  EXPECT_EQ(Count("/namespaces/"), 2);  // the bad ones wrote nothing
}

TEST_F(RestNamespacesTest, ADeleteNeedsAnEmptyNamespaceAndDefaultStays) {
  ASSERT_EQ(Call("POST", "/namespaces", NamespaceBody("team-a")).status, 201);
  ASSERT_EQ(Call("POST", "/namespaces/team-a/jobs", JobNamed("train")).status, 201);
  Response held = Call("DELETE", "/namespaces/team-a");
  EXPECT_EQ(held.status, 409) << held.body;
  EXPECT_NE(held.body.find("1 jobs"), std::string::npos) << held.body;
  ASSERT_EQ(Call("DELETE", "/namespaces/team-a/jobs/train").status, 200);
  EXPECT_EQ(Call("DELETE", "/namespaces/team-a").status, 200);
  EXPECT_EQ(Call("GET", "/namespaces/team-a").status, 404);
  EXPECT_EQ(Call("POST", "/namespaces/team-a/jobs", JobNamed("train")).status, 404);

  ASSERT_EQ(Call("POST", "/namespaces", NamespaceBody("default")).status, 201);
  EXPECT_EQ(Call("DELETE", "/namespaces/default").status, 403);
}

TEST_F(RestNamespacesTest, AUsersHomeIsMadeWithItAndTenantsSeeOnlyTheirOwn) {
  Response u = Call("POST", "/users",
                    R"({"apiVersion":"gpucloud/v1","kind":"User","metadata":{"name":"alice"},)"
                    R"("spec":{"namespace":"team-a"}})");
  ASSERT_EQ(u.status, 201) << u.body;
  Response home = Call("GET", "/namespaces/team-a");
  ASSERT_EQ(home.status, 200) << home.body;
  EXPECT_EQ(Json::parse(home.body)["spec"]["owner"], "alice");

  const Identity alice{"alice", "team-a", false};
  EXPECT_EQ(Call("POST", "/namespaces/team-a/jobs", JobNamed("train"), alice).status, 201);
  EXPECT_EQ(Call("GET", "/namespaces/team-a", "", alice).status, 200);
  EXPECT_EQ(Call("GET", "/namespaces", "", alice).status, 403);
  EXPECT_EQ(Call("POST", "/namespaces", NamespaceBody("mine"), alice).status, 403);
  EXPECT_EQ(Call("DELETE", "/namespaces/team-a", "", alice).status, 403);
  // Another namespace, existing or not, is 403 for her: she learns nothing of it.
  ASSERT_EQ(Call("POST", "/namespaces", NamespaceBody("team-b")).status, 201);
  EXPECT_EQ(Call("POST", "/namespaces/team-b/jobs", JobNamed("x"), alice).status, 403);
  EXPECT_EQ(Call("POST", "/namespaces/team-z/jobs", JobNamed("x"), alice).status, 403);
}

TEST_F(RestNamespacesTest, TheMigrationGivesEveryNamespaceInUseItsObjectOnce) {
  ASSERT_TRUE(store_
                  ->Txn({store::Op{.key = "/jobs/team-c/train", .value = "{}"},
                         store::Op{.key = "/secrets/team-d/db", .value = "{}"},
                         store::Op{.key = "/iam/users/bob",
                                   .value = R"({"metadata":{"name":"bob"},)"
                                            R"("spec":{"namespace":"team-e"}})"}})
                  .ok());
  absl::StatusOr<int> made = api_->EnsureNamespaces();
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(*made, 4);  // default, team-c, team-d, team-e
  for (const char* ns : {"default", "team-c", "team-d", "team-e"}) {
    EXPECT_EQ(Call("GET", Cat("/namespaces/", ns)).status, 200) << ns;
  }
  EXPECT_EQ(Json::parse(Call("GET", "/namespaces/team-e").body)["spec"]["owner"], "bob");
  made = api_->EnsureNamespaces();
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(*made, 0);
}

}  // namespace
}  // namespace gpucloud::server
