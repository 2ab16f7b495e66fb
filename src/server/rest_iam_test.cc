// The identity API through RestApi and the IdentityBook (issue 14): users, groups, policies and
// tokens; a stored policy deciding a real create; revocation and expiry at once; POST authorize
// agreeing with what the API really does.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/credentials.h"
#include "server/identity_book.h"
#include "server/rest.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;
constexpr char kApi[] = "/apis/gpucloud/v1";

std::string JobOn(const std::string& name, const std::string& type) {
  return "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: " + name +
         "}\nspec:\n  tasks:\n  - name: w\n    resources: {gpu: {count: 8, types: [" + type +
         "]}}\n";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class RestIamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((tmp_.path() / "s.db").string()));
    api_ = std::make_unique<RestApi>(*store_, clock_, 3);
    book_ = std::make_unique<IdentityBook>(*store_, clock_, api_->authorizer());
    ASSERT_TRUE(book_->Load().ok());
    api_->AttachIdentities(book_.get());
  }
  Response Call(const std::string& method, const std::string& path, const std::string& body,
                const Identity& who) {
    return api_->Handle({method, kApi + path, {}, body, who});
  }
  Response Admin(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(method, path, body, admin_);
  }
  // A token for `user` (made by the admin) and who it authenticates.
  std::pair<std::string, Identity> TokenFor(const std::string& user, const std::string& ttl) {
    const std::string name =
        user + "-t" + (tokens_made_++ == 0 ? "" : std::to_string(tokens_made_));
    Response r =
        Admin("POST", "/tokens", Json{{"user", user}, {"ttl", ttl}, {"name", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    std::string secret = Json::parse(r.body)["status"]["token"];
    std::optional<Identity> who = book_->Authenticate(secret);
    EXPECT_TRUE(who.has_value());
    return {secret, who.value_or(Identity{})};
  }
  void MakeAlice(const std::string& groups) {
    if (Admin("GET", "/policies/h100-a100-ml-platform-only").status == 200) return PutAlice(groups);
    ASSERT_EQ(Admin("POST", "/policies",
                    ReadFile(std::string(GPUCLOUD_SOURCE_DIR) +
                             "/examples/policies/gpu-types-ml-platform.yaml"))
                  .status,
              201);
    PutAlice(groups);
  }
  void PutAlice(const std::string& groups) {
    Response u = Admin("PUT", "/users/alice",
                       R"({"apiVersion": "gpucloud/v1", "kind": "User",
                           "metadata": {"name": "alice"},
                           "spec": {"namespace": "team-a", "groups": )" +
                           groups + R"(, "policies": ["gpucloud:tenant",
                           "h100-a100-ml-platform-only"]}})");
    ASSERT_TRUE(u.status == 200 || u.status == 201) << u.body;
  }

  int tokens_made_ = 0;
  testing_util::TempDir tmp_{"gpucloud-rest-iam"};
  FakeClock clock_{1'800'000'000'000};
  Identity admin_{"root", "", true};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<IdentityBook> book_;
};

TEST_F(RestIamTest, AStoredPolicyDeniesH100ToAUserOutsideTheGroupNamingTheStatement) {
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "30d");
  EXPECT_EQ(alice.user, "alice");
  EXPECT_EQ(alice.namespace_, "team-a");
  EXPECT_EQ(alice.token_name, "alice-t");
  Response h100 = Call("POST", "/namespaces/team-a/jobs", JobOn("big", "H100-80GB"), alice);
  ASSERT_EQ(h100.status, 403) << h100.body;
  EXPECT_NE(h100.body.find("user alice may not jobs:Create on gpucloud:job/team-a/big: denied by "
                           "policy h100-a100-ml-platform-only, statement 0 (Sid "
                           "OnlyMlPlatformOnH100OrA100)"),
            std::string::npos)
      << h100.body;
  EXPECT_EQ(h100.authorization.decision, "deny");
  // Nothing was written; a job on another type is the tenant policy's to allow.
  EXPECT_EQ(Call("GET", "/namespaces/team-a/jobs/big", "", alice).status, 404);
  Response l4 = Call("POST", "/namespaces/team-a/jobs", JobOn("small", "T4"), alice);
  EXPECT_EQ(l4.status, 201) << l4.body;
  EXPECT_EQ(l4.authorization.reason, "policy gpucloud:tenant, statement 0 (Sid OwnNamespaceJobs)");
  // A job that names no type could land on an H100: it is decided for every type, and denied.
  Response any = Call("POST", "/namespaces/team-a/jobs",
                      "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: any}\nspec:\n"
                      "  tasks:\n  - {name: w, resources: {gpu: {count: 1}}}\n",
                      alice);
  EXPECT_EQ(any.status, 403) << any.body;
  // In the group, on the next request (the token is the same).
  MakeAlice(R"(["ml-platform"])");
  std::optional<Identity> again = book_->Authenticate(secret);
  ASSERT_TRUE(again);
  EXPECT_EQ(Call("POST", "/namespaces/team-a/jobs", JobOn("big", "H100-80GB"), *again).status, 201);
  // Her policies never reach another namespace.
  EXPECT_EQ(Call("GET", "/namespaces/team-b/jobs", "", *again).status, 403);
}

TEST_F(RestIamTest, ARevokedOrExpiredTokenIsNobodyAtOnce) {
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "90m");
  Response list = Admin("GET", "/tokens");
  ASSERT_EQ(list.status, 200);
  Json items = Json::parse(list.body)["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["spec"]["user"], "alice");
  EXPECT_FALSE(items[0].contains("hash"));  // never shown, nor the secret
  EXPECT_EQ(list.body.find(secret), std::string::npos);
  clock_.Advance(89 * 60 * 1000);
  EXPECT_TRUE(book_->Authenticate(secret));
  clock_.Advance(60 * 1000);
  EXPECT_FALSE(book_->Authenticate(secret));  // expired
  EXPECT_EQ(Admin("POST", "/tokens", R"({"user": "bob-is-not-here"})").status, 422);
  auto [third, again] = TokenFor("alice", "1d");
  (void)again;
  ASSERT_TRUE(book_->Authenticate(third));
  EXPECT_EQ(Admin("DELETE", "/tokens/alice-t2").status, 200);
  EXPECT_FALSE(book_->Authenticate(third));
  // Deleting the user kills her tokens too.
  auto [fourth, _] = TokenFor("alice", "1d");
  ASSERT_EQ(Admin("DELETE", "/users/alice").status, 200);
  EXPECT_FALSE(book_->Authenticate(fourth));
}

// Issue 21: several servers on one store. What this server writes (a token, a revocation, a
// policy) reaches another server's IdentityBook through the store's changes (Follow, as the
// server's /iam/ follower feeds it); an older event never undoes a newer write.
TEST_F(RestIamTest, AnotherServersBookFollowsTokensAndRevocationsThroughTheStore) {
  Authorizer other_authorizer(clock_);
  IdentityBook other(*store_, clock_, other_authorizer);
  ASSERT_TRUE(other.Load().ok());
  int64_t after = other.loaded_revision();
  auto follow = [&] {
    absl::StatusOr<std::vector<store::Event>> events = store_->Changes("/iam/", after, 1000);
    ASSERT_TRUE(events.ok()) << events.status();
    other.Follow(*events);
    if (!events->empty()) after = events->back().revision;
  };
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "1d");
  EXPECT_FALSE(other.Authenticate(secret)) << "known before it was followed";
  follow();
  std::optional<Identity> there = other.Authenticate(secret);
  ASSERT_TRUE(there.has_value());
  EXPECT_EQ(there->user, "alice");
  EXPECT_EQ(there->policies, alice.policies);
  // The same events again change nothing; a revocation follows.
  after = other.loaded_revision();
  follow();
  EXPECT_TRUE(other.Authenticate(secret));
  ASSERT_EQ(Admin("DELETE", "/tokens/alice-t").status, 200);
  follow();
  EXPECT_FALSE(other.Authenticate(secret));
  // An older event does not undo what the book wrote itself later: alice deleted through
  // `other`, then the events of her making are followed again.
  absl::StatusOr<store::KeyValue> user = store_->Get("/iam/users/alice");
  ASSERT_TRUE(user.ok());
  absl::StatusOr<int64_t> deleted = other.Delete("/iam/users/alice", user->mod_revision);
  ASSERT_TRUE(deleted.ok());
  absl::StatusOr<std::vector<store::Event>> old =
      store_->Changes("/iam/", other.loaded_revision(), 1000);
  ASSERT_TRUE(old.ok());
  std::erase_if(*old, [&](const store::Event& e) { return e.revision >= *deleted; });
  ASSERT_FALSE(old->empty());
  other.Follow(*old);
  EXPECT_FALSE(other.IdentityOfUser("alice").has_value());
}

// A book loaded again (its follower fell behind a compaction) drops what is gone from the
// store: a token revoked through another server meanwhile is nobody.
TEST_F(RestIamTest, ABookLoadedAgainForgetsWhatTheStoreNoLongerHas) {
  Authorizer other_authorizer(clock_);
  IdentityBook other(*store_, clock_, other_authorizer);
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "1d");
  (void)alice;
  ASSERT_TRUE(other.Load().ok());
  ASSERT_TRUE(other.Authenticate(secret));
  ASSERT_EQ(Admin("DELETE", "/tokens/alice-t").status, 200);
  ASSERT_TRUE(other.Load().ok());
  EXPECT_FALSE(other.Authenticate(secret));
  EXPECT_TRUE(other.IdentityOfUser("alice").has_value());
}

TEST_F(RestIamTest, ATenantManagesOnlyItsOwnTokens) {
  MakeAlice("[]");
  ASSERT_EQ(Admin("PUT", "/users/bob",
                  R"({"apiVersion": "gpucloud/v1", "kind": "User", "metadata": {"name": "bob"},
                      "spec": {"namespace": "team-b", "policies": ["gpucloud:tenant"]}})")
                .status,
            201);
  auto [s1, alice] = TokenFor("alice", "1d");
  auto [s2, bob] = TokenFor("bob", "1d");
  Response mine = Call("POST", "/tokens", R"({"user": "alice", "name": "laptop"})", alice);
  EXPECT_EQ(mine.status, 201) << mine.body;
  EXPECT_EQ(Call("POST", "/tokens", R"({"user": "bob"})", alice).status, 403);
  EXPECT_EQ(Call("DELETE", "/tokens/bob-t", "", alice).status, 403);
  Json listed = Json::parse(Call("GET", "/tokens", "", alice).body)["items"];
  std::vector<std::string> names;
  for (const Json& t : listed) names.push_back(t["metadata"]["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"alice-t", "laptop"}));
  EXPECT_EQ(Call("POST", "/users", R"({"apiVersion": "gpucloud/v1", "kind": "User",
                                       "metadata": {"name": "eve"}})",
                 alice)
                .status,
            403);
  Response me = Call("GET", "/whoami", "", alice);
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(Json::parse(me.body)["namespace"], "team-a");
  EXPECT_EQ(Json::parse(me.body)["token"], "alice-t");
}

// Writing an identity does not let one attach policies: each added policy needs
// policies:Attach on it and each removed one policies:Detach. A tenant may manage its service
// accounts, but not make one an admin.
TEST_F(RestIamTest, AttachingAPolicyIsItsOwnPermission) {
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "1d");
  const std::string sa = R"({"apiVersion": "gpucloud/v1", "kind": "ServiceAccount",
      "metadata": {"name": "ci"}, "spec": {"policies": ["gpucloud:admin"]}})";
  Response r = Call("POST", "/namespaces/team-a/serviceaccounts", sa, alice);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("may not policies:Attach on gpucloud:policy/gpucloud:admin"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(r.authorization.action, "policies:Attach");
  EXPECT_EQ(Admin("GET", "/namespaces/team-a/serviceaccounts/ci").status, 404);  // not written
  // Without policies it may; and an admin may attach and detach.
  EXPECT_EQ(Call("POST", "/namespaces/team-a/serviceaccounts",
                 R"({"apiVersion": "gpucloud/v1", "kind": "ServiceAccount",
                     "metadata": {"name": "ci"}, "spec": {}})",
                 alice)
                .status,
            201);
  EXPECT_EQ(Admin("PUT", "/namespaces/team-a/serviceaccounts/ci", sa).status, 200);
  // Detaching is decided too: alice may not take gpucloud:admin off it either.
  Response detach = Call("PUT", "/namespaces/team-a/serviceaccounts/ci",
                         R"({"apiVersion": "gpucloud/v1", "kind": "ServiceAccount",
                             "metadata": {"name": "ci"}, "spec": {"policies": []}})",
                         alice);
  EXPECT_EQ(detach.status, 403) << detach.body;
  EXPECT_NE(detach.body.find("policies:Detach"), std::string::npos) << detach.body;
  // A policy that grants policies:Attach on one policy lets its holder attach that one only.
  ASSERT_EQ(Admin("POST", "/policies", R"({"apiVersion": "gpucloud/v1", "kind": "Policy",
      "metadata": {"name": "attach-tenant"},
      "spec": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Action": "policies:Attach", "Resource": "gpucloud:policy/gpucloud:tenant"}]}})")
                .status,
            201);
  Response u = Admin("PUT", "/users/alice",
                     R"({"apiVersion": "gpucloud/v1", "kind": "User", "metadata": {"name": "alice"},
                         "spec": {"namespace": "team-a",
                                  "policies": ["gpucloud:tenant", "attach-tenant"]}})");
  ASSERT_EQ(u.status, 200) << u.body;
  std::optional<Identity> again = book_->Authenticate(secret);
  ASSERT_TRUE(again);
  EXPECT_EQ(Call("POST", "/namespaces/team-a/serviceaccounts",
                 R"({"apiVersion": "gpucloud/v1", "kind": "ServiceAccount",
                     "metadata": {"name": "runner"}, "spec": {"policies": ["gpucloud:tenant"]}})",
                 *again)
                .status,
            201);
  EXPECT_EQ(Call("POST", "/namespaces/team-a/serviceaccounts",
                 R"({"apiVersion": "gpucloud/v1", "kind": "ServiceAccount",
                     "metadata": {"name": "boss"}, "spec": {"policies": ["gpucloud:admin"]}})",
                 *again)
                .status,
            403);
}

// A method that names no action (a POST on an item, a PATCH) is served by no handler: a tenant
// cannot slip a write past the policies through one.
TEST_F(RestIamTest, AMethodWithNoActionWritesNothing) {
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "1d");
  const std::string promote = R"({"apiVersion": "gpucloud/v1", "kind": "User",
      "metadata": {"name": "alice"},
      "spec": {"namespace": "team-a", "policies": ["gpucloud:admin"]}})";
  for (const char* method : {"POST", "PATCH"}) {
    Response r = Call(method, "/users/alice", promote, alice);
    EXPECT_EQ(r.status, 404) << method << " " << r.body;
    EXPECT_EQ(Call(method, "/groups/ml-platform", "{}", alice).status, 404) << method;
  }
  Response admin_post = Admin("POST", "/users/alice", promote);
  EXPECT_EQ(admin_post.status, 405) << admin_post.body;  // an admin is told why
  std::optional<Identity> after = book_->Authenticate(secret);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->policies,
            (std::vector<std::string>{"gpucloud:tenant", "h100-a100-ml-platform-only"}));
}

TEST_F(RestIamTest, BadObjectsAreRefusedNamingTheFieldAndNothingIsWritten) {
  Response unknown = Admin("POST", "/users",
                           R"({"apiVersion": "gpucloud/v1", "kind": "User",
                               "metadata": {"name": "x"}, "spec": {"role": "admin"}})");
  EXPECT_EQ(unknown.status, 422);
  EXPECT_NE(unknown.body.find("spec.role: unknown field"), std::string::npos) << unknown.body;
  Response policy = Admin("POST", "/policies",
                          "apiVersion: gpucloud/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n"
                          "  Version: \"2012-10-17\"\n  Statement:\n  - Effect: Allow\n"
                          "    Action: jobs:Launch\n    Resource: \"*\"\n");
  EXPECT_EQ(policy.status, 422);
  EXPECT_NE(policy.body.find("body:8:13: spec.Statement[0].Action: unknown action"),
            std::string::npos)
      << policy.body;
  EXPECT_NE(policy.body.find("jobs:Launch"), std::string::npos) << policy.body;
  Response ttl = Admin("POST", "/tokens", R"({"user": "nobody", "ttl": "3y"})");
  EXPECT_EQ(ttl.status, 422);
  EXPECT_EQ(Json::parse(Admin("GET", "/users").body)["items"].size(), 0u);
  EXPECT_EQ(Json::parse(Admin("GET", "/policies").body)["items"].size(), 0u);
  EXPECT_EQ(Json::parse(Admin("GET", "/tokens").body)["items"].size(), 0u);
}

// Tenants once added by hand to the tokens file move into the API: listed, revocable, and
// working as before; admin and bootstrap lines stay.
TEST_F(RestIamTest, HandWrittenTenantTokensMoveIntoTheApiOnce) {
  const std::string secret(64, 'a');
  const std::string file = (tmp_.path() / "tokens").string();
  {
    std::ofstream f(file);
    f << std::string(64, 'b') << " admin - admin\n"
      << Sha256Hex(secret) << " carol team-c tenant\n"
      << std::string(64, 'c') << " system:node - node\n";
  }
  absl::StatusOr<int> moved = book_->MigrateTokenFile(tmp_.path().string());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(ReadFile(file), std::string(64, 'b') + " admin - admin\n" + std::string(64, 'c') +
                                " system:node - node\n");
  std::optional<Identity> carol = book_->Authenticate(secret);
  ASSERT_TRUE(carol);
  EXPECT_EQ(carol->namespace_, "team-c");
  EXPECT_EQ(Call("POST", "/namespaces/team-c/jobs", JobOn("x", "T4"), *carol).status, 201);
  EXPECT_EQ(Call("GET", "/namespaces/team-a/jobs", "", *carol).status, 403);
  EXPECT_EQ(*book_->MigrateTokenFile(tmp_.path().string()), 0);
  EXPECT_EQ(Admin("DELETE", "/tokens/carol-tokens-file").status, 200);
  EXPECT_FALSE(book_->Authenticate(secret));
}

// POST authorize (what `gpuctl auth can-i` asks) agrees with what the API does, over a table.
TEST_F(RestIamTest, AuthorizeAgreesWithTheRealDecisions) {
  MakeAlice("[]");
  auto [secret, alice] = TokenFor("alice", "1d");
  struct Case {
    std::string ns, type;
  };
  int n = 0;
  for (const Case& c : {Case{"team-a", "H100-80GB"}, Case{"team-a", "A100-80GB"},
                        Case{"team-a", "T4"}, Case{"team-b", "T4"}, Case{"team-b", "H100-80GB"}}) {
    const std::string name = "j" + std::to_string(n++);
    Json ask{{"action", "jobs:Create"},
             {"resource", "gpucloud:job/" + c.ns + "/" + name},
             {"context", {{"gpucloud:GpuType", c.type}, {"gpucloud:GpuCount", "8"}}}};
    Response said = Call("POST", "/authorize", ask.dump(), alice);
    ASSERT_EQ(said.status, 200) << said.body;
    Response did = Call("POST", "/namespaces/" + c.ns + "/jobs", JobOn(name, c.type), alice);
    EXPECT_EQ(Json::parse(said.body)["allowed"].get<bool>(), did.status == 201)
        << c.ns << " " << c.type << ": " << said.body << " vs " << did.status;
    // The admin asking on her behalf gets the same answer.
    ask["user"] = "alice";
    EXPECT_EQ(Json::parse(Admin("POST", "/authorize", ask.dump()).body)["allowed"],
              Json::parse(said.body)["allowed"]);
  }
  // She may not ask on someone else's behalf.
  EXPECT_EQ(Call("POST", "/authorize",
                 R"({"user": "root", "action": "jobs:Get", "resource": "gpucloud:job/a/b"})", alice)
                .status,
            403);
  EXPECT_EQ(Call("POST", "/authorize", R"({"action": "jobs:Fly", "resource": "*"})", alice).status,
            422);
}

}  // namespace
}  // namespace gpucloud::server
