// Secrets through RestApi (issue 14): a round trip that never answers a value, values sealed in
// the SQLite store, tenants kept to their namespace by the policies, strict validation that
// writes nothing, and the ring refusing to be replaced under stored secrets.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "api/wire.h"
#include "server/rest.h"
#include "server/secret_store.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;
constexpr char kApi[] = "/apis/gpucloud/v1";
constexpr char kPlain[] = "hf_SECRET_value_4471";

std::string SecretBody(const std::string& name, const Json& extra = Json::object()) {
  Json doc{{"apiVersion", "gpucloud/v1"},
           {"kind", "Secret"},
           {"metadata", {{"name", name}, {"labels", {{"team", "a"}}}}},
           {"stringData", {{"token", kPlain}}},
           {"data", {{"user", absl::Base64Escape("alice")}}}};
  doc.update(extra);
  return doc.dump();
}

class RestSecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore(tmp_ / "store.db"));
    api_ = std::make_unique<RestApi>(*store_, clock_, 5);
    SecretStoreOptions o;
    o.key_dir = tmp_ / "keys";
    absl::StatusOr<std::unique_ptr<SecretStore>> s = SecretStore::Open(*store_, clock_, o);
    ASSERT_TRUE(s.ok()) << s.status();
    secrets_ = *std::move(s);
    api_->AttachSecrets(secrets_.get());
  }
  Response Call(const std::string& method, const std::string& path, const std::string& body,
                const Identity& who) {
    return api_->Handle({method, kApi + path, {}, body, who});
  }
  Response Admin(const std::string& method, const std::string& path, const std::string& body = "") {
    return Call(method, path, body, admin_);
  }

  testing_util::TempDir tmp_{"rest-secrets"};
  FakeClock clock_{1'780'000'000'000};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<SecretStore> secrets_;
  Identity admin_{"admin", "", true};
  Identity alice_{"alice", "team-a"};
  Identity bob_{"bob", "team-b"};
};

TEST_F(RestSecretsTest, RoundTripNeverAnswersAValue) {
  Response created = Call("POST", "/namespaces/team-a/secrets", SecretBody("hf"), alice_);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.authorization.action, "secrets:Create");
  Response got = Call("GET", "/namespaces/team-a/secrets/hf", "", alice_);
  ASSERT_EQ(got.status, 200) << got.body;
  Response listed = Call("GET", "/namespaces/team-a/secrets", "", alice_);
  ASSERT_EQ(listed.status, 200) << listed.body;
  for (const Response* r : {&created, &got, &listed}) {
    EXPECT_EQ(r->body.find(kPlain), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find(absl::Base64Escape(kPlain)), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find(absl::Base64Escape("alice")), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find("\"ct\""), std::string::npos) << r->body;  // nor the sealed blob
  }
  Json doc = Json::parse(got.body);
  EXPECT_EQ(doc["kind"], "Secret");
  EXPECT_EQ(doc["type"], "Opaque");
  EXPECT_EQ(doc["metadata"]["namespace"], "team-a");
  EXPECT_EQ(doc["metadata"]["labels"]["team"], "a");
  EXPECT_FALSE(doc.contains("data"));
  EXPECT_EQ(doc["status"]["data"]["token"]["bytes"], std::string(kPlain).size());
  EXPECT_EQ(doc["status"]["data"]["user"]["bytes"], 5);
  Json list = Json::parse(listed.body);
  EXPECT_EQ(list["kind"], "SecretList");
  ASSERT_EQ(list["items"].size(), 1u);
  // Only the server reveals them.
  absl::StatusOr<std::map<std::string, std::string>> values = secrets_->Reveal("team-a", "hf");
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::map<std::string, std::string>{{"token", kPlain}, {"user", "alice"}}));
  // The stored bytes hold no value.
  const std::string stored = store_->Get("/secrets/team-a/hf")->value;
  EXPECT_EQ(stored.find(kPlain), std::string::npos) << stored;
  EXPECT_EQ(stored.find(absl::Base64Escape(kPlain)), std::string::npos) << stored;
  EXPECT_EQ(stored.find(absl::Base64Escape("alice")), std::string::npos) << stored;
}

TEST_F(RestSecretsTest, UpdateReplacesValuesAndDeleteRemoves) {
  ASSERT_EQ(Admin("POST", "/namespaces/team-a/secrets", SecretBody("hf")).status, 201);
  EXPECT_EQ(Admin("POST", "/namespaces/team-a/secrets", SecretBody("hf")).status, 409);
  Response put =
      Admin("PUT", "/namespaces/team-a/secrets/hf",
            SecretBody("hf", {{"stringData", {{"token", "v2"}}}, {"data", Json::object()}}));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(*secrets_->Reveal("team-a", "hf"),
            (std::map<std::string, std::string>{{"token", "v2"}}));
  // A stale resourceVersion is a conflict and changes nothing.
  Response stale =
      Admin("PUT", "/namespaces/team-a/secrets/hf",
            SecretBody("hf", {{"metadata", {{"name", "hf"}, {"resourceVersion", "1"}}}}));
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_EQ((*secrets_->Reveal("team-a", "hf"))["token"], "v2");
  Response deleted = Admin("DELETE", "/namespaces/team-a/secrets/hf");
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(Admin("GET", "/namespaces/team-a/secrets/hf").status, 404);
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/secrets/team-a/hf").status()));
  EXPECT_EQ(Admin("DELETE", "/namespaces/team-a/secrets/hf").status, 404);
}

TEST_F(RestSecretsTest, ATenantCannotTouchAnotherNamespacesSecrets) {
  ASSERT_EQ(Call("POST", "/namespaces/team-a/secrets", SecretBody("hf"), alice_).status, 201);
  const std::string before = store_->Get("/secrets/team-a/hf")->value;
  struct Case {
    std::string method, path, body, action;
  };
  const Case cases[] = {
      {"GET", "/namespaces/team-a/secrets/hf", "", "secrets:Get"},
      {"GET", "/namespaces/team-a/secrets", "", "secrets:List"},
      {"POST", "/namespaces/team-a/secrets", SecretBody("other"), "secrets:Create"},
      {"PUT", "/namespaces/team-a/secrets/hf", SecretBody("hf"), "secrets:Update"},
      {"DELETE", "/namespaces/team-a/secrets/hf", "", "secrets:Delete"},
  };
  for (const Case& c : cases) {
    Response r = Call(c.method, c.path, c.body, bob_);
    EXPECT_EQ(r.status, 403) << c.method << " " << c.path << ": " << r.body;
    EXPECT_NE(r.body.find(c.action), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("gpucloud:secret/team-a/"), std::string::npos) << r.body;
  }
  EXPECT_EQ(store_->Get("/secrets/team-a/hf")->value, before);
  EXPECT_TRUE(absl::IsNotFound(store_->Get("/secrets/team-a/other").status()));
  // bob's own namespace is his.
  EXPECT_EQ(Call("POST", "/namespaces/team-b/secrets", SecretBody("hf"), bob_).status, 201);
}

TEST_F(RestSecretsTest, BadInputIs422NamingTheFieldAndWritesNothing) {
  struct Case {
    std::string body, field;
  };
  const Case cases[] = {
      {"[1]", "body:"},
      {SecretBody("hf", {{"apiVersion", "v1"}}), "apiVersion:"},
      {SecretBody("hf", {{"kind", "ConfigMap"}}), "kind:"},
      {SecretBody("hf", {{"spec", Json::object()}}), "spec: unknown field"},
      {SecretBody("hf", {{"status", Json::object()}}), "status:"},
      {SecretBody("hf", {{"metadata", {{"name", "hf"}, {"namespace", "team-b"}}}}),
       "metadata.namespace:"},
      {SecretBody("hf", {{"metadata", {{"name", "hf"}, {"owner", "x"}}}}), "metadata.owner:"},
      {SecretBody("hf", {{"metadata", {{"name", "hf"}, {"labels", {{"k", 3}}}}}}),
       "metadata.labels.k:"},
      {SecretBody("Bad_Name"), "metadata.name:"},
      {SecretBody("hf", {{"data", {{"token", "not base64!"}}}}), "data[token]:"},
      {SecretBody("hf", {{"data", {{"token", "YWJj"}, {"x", "YQ"}}}}), "data[x]:"},
      {SecretBody("hf", {{"data", {{"bad/key", "YWJj"}}}}), "data[bad/key]:"},
      {SecretBody("hf", {{"stringData", {{"..", "v"}}}}), "stringData[..]:"},
      {SecretBody("hf", {{"stringData", {{"n", 5}}}}), "stringData[n]:"},
      {SecretBody("hf", {{"type", "kubernetes.io/tls"}}), "type:"},
      {SecretBody("hf", {{"type", "kubernetes.io/dockerconfigjson"}}), "data[.dockerconfigjson]:"},
      {SecretBody("hf", {{"type", "kubernetes.io/dockerconfigjson"},
                         {"stringData", {{".dockerconfigjson", "{\"registries\": {}}"}}}}),
       "data[.dockerconfigjson]: must be JSON"},
  };
  for (const Case& c : cases) {
    Response r = Admin("POST", "/namespaces/team-a/secrets", c.body);
    EXPECT_EQ(r.status, 422) << c.field << ": " << r.body;
    EXPECT_NE(r.body.find(c.field), std::string::npos) << c.field << ": " << r.body;
  }
  EXPECT_TRUE(store_->List("/secrets/")->items.empty());
  // A PUT whose name differs from the path's.
  Response r = Admin("PUT", "/namespaces/team-a/secrets/other", SecretBody("hf"));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("metadata.name:"), std::string::npos) << r.body;
  // Verbs and queries the path does not take.
  EXPECT_EQ(Admin("POST", "/namespaces/team-a/secrets/hf", SecretBody("hf")).status, 405);
  EXPECT_EQ(Admin("DELETE", "/namespaces/team-a/secrets").status, 405);
  EXPECT_EQ(api_->Handle({"GET",
                          std::string(kApi) + "/namespaces/team-a/secrets",
                          {{"watch", "true"}},
                          "",
                          admin_})
                .status,
            400);
  EXPECT_EQ(Admin("GET", "/namespaces/team-a/secrets/hf/value").status, 404);
  EXPECT_TRUE(store_->List("/secrets/")->items.empty());
}

TEST_F(RestSecretsTest, ADockerConfigJsonSecret) {
  const std::string config = R"({"auths": {"registry.example": {"auth": "dXNlcjpwYXNz"}}})";
  Response r = Admin("POST", "/namespaces/team-a/secrets",
                     SecretBody("pull", {{"type", "kubernetes.io/dockerconfigjson"},
                                         {"stringData", {{".dockerconfigjson", config}}}}));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Json::parse(r.body)["type"], "kubernetes.io/dockerconfigjson");
  EXPECT_EQ((*secrets_->Reveal("team-a", "pull"))[".dockerconfigjson"], config);
  EXPECT_EQ(r.body.find("dXNlcjpwYXNz"), std::string::npos);
}

TEST_F(RestSecretsTest, YamlBodiesAreRead) {
  Response r = Admin("POST", "/namespaces/team-a/secrets",
                     "apiVersion: gpucloud/v1\nkind: Secret\nmetadata: {name: db}\n"
                     "stringData: {password: s3cr3t-yaml}\n");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ((*secrets_->Reveal("team-a", "db"))["password"], "s3cr3t-yaml");
}

TEST_F(RestSecretsTest, WithoutASecretStoreThePathsAre404) {
  RestApi bare(*store_, clock_, 1);
  EXPECT_EQ(
      bare.Handle({"GET", std::string(kApi) + "/namespaces/team-a/secrets", {}, "", admin_}).status,
      404);
}

// A task's secret values go to the node it is assigned to, and to nobody else: not another node,
// not an admin, not the tenant; a missing one is a 409 naming it.
TEST_F(RestSecretsTest, TaskSecretsGoToTheTasksNodeOnly) {
  ASSERT_EQ(Call("POST", "/namespaces/team-a/secrets", SecretBody("hf"), alice_).status, 201);
  api::Assignment a{
      .name = "team-a.train.0", .namespace_ = "team-a", .job = "train", .job_uid = "u1"};
  a.secret_env = {{"HF_TOKEN", {"hf", "token", false}}};
  a.secret_volumes = {{"creds", "hf", "/etc/creds", {{"user", "user.txt"}}, false}};
  ASSERT_TRUE(store_
                  ->Txn({{store::Op::Kind::kPut, "/assignments/n1/team-a.train.0",
                          api::AssignmentToJson(a), std::nullopt}})
                  .ok());
  Identity n1{"node:n1"};
  n1.node = true;
  n1.node_name = "n1";
  Identity n2 = n1;
  n2.user = "node:n2";
  n2.node_name = "n2";
  const std::string path = "/nodes/n1/assignments/team-a.train.0/secrets";
  Response got = Call("GET", path, "", n1);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.authorization.action, "nodes:GetTaskSecrets");
  EXPECT_EQ(got.headers["Cache-Control"], "no-store");
  absl::StatusOr<api::TaskSecrets> s = api::TaskSecretsFromJson(got.body);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->env.at("HF_TOKEN"), kPlain);
  ASSERT_EQ(s->files.size(), 1u);
  EXPECT_EQ(s->files[0], (api::TaskSecrets::File{"creds", "user.txt", "alice"}));
  for (const Identity* who : {&n2, &admin_, &alice_}) {
    Response r = Call("GET", path, "", *who);
    EXPECT_EQ(r.status, 403) << who->user << ": " << r.body;
    EXPECT_EQ(r.body.find(kPlain), std::string::npos);
  }
  EXPECT_EQ(Call("GET", "/nodes/n1/assignments/team-a.gone.0/secrets", "", n1).status, 404);
  // The secret goes away: the node is told which, and waits.
  ASSERT_EQ(Admin("DELETE", "/namespaces/team-a/secrets/hf").status, 200);
  Response missing = Call("GET", path, "", n1);
  EXPECT_EQ(missing.status, 409) << missing.body;
  EXPECT_NE(missing.body.find("CreateContainerConfigError: secret \\\"hf\\\" not found in "
                              "namespace team-a (env HF_TOKEN)"),
            std::string::npos)
      << missing.body;
}

}  // namespace
}  // namespace gpucloud::server
