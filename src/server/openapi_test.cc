// The OpenAPI documents (openapi.h): their structure as kubectl reads it (definitions and
// components named io.gpucloud.v1.KIND with x-kubernetes-group-version-kind, PATCH operations
// listing fieldValidation, every $ref resolving), the job status the server writes against
// the schema, and who may read them, in process and over HTTPS (401 without a token).
#include "server/openapi.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/credentials.h"
#include "server/https_server.h"
#include "server/job_status.h"
#include "server/rest_fixture.h"
#include "server/test_client.h"
#include "store/sqlite_store.h"

namespace gpucloud::server {
namespace {

using nlohmann::json;

json V2() { return json::parse(OpenApiV2(DiscoveredResources()).dump()); }
json V3() { return json::parse(OpenApiV3(DiscoveredResources()).dump()); }

json Gvk(const std::string& kind) {
  return json{{"group", "gpucloud"}, {"kind", kind}, {"version", "v1"}};
}

// Every "$ref" below `j`, with where it was.
void CollectRefs(const json& j, const std::string& at,
                 std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "$ref" && v.is_string()) out->emplace_back(at, v.get<std::string>());
      CollectRefs(v, at + "/" + k, out);
    }
  } else if (j.is_array()) {
    for (const json& v : j) CollectRefs(v, at + "[]", out);
  }
}

// The schema a "#/a/b/c" reference names in `doc`, or null.
json Resolve(const json& doc, const std::string& ref) {
  json::json_pointer p(ref.substr(1));
  return doc.contains(p) ? doc.at(p) : json();
}

TEST(OpenApi, V2DefinesEveryKindWithItsGroupVersionKind) {
  json doc = V2();
  EXPECT_EQ(doc["swagger"], "2.0");
  for (const char* kind : {"Job", "Queue", "NodePool", "RuntimeClass", "Node", "Secret",
                           "ServiceAccount", "User", "Group", "Policy", "Token"}) {
    const json& def = doc["definitions"]["io.gpucloud.v1." + std::string(kind)];
    ASSERT_TRUE(def.is_object()) << kind;
    EXPECT_EQ(def["x-kubernetes-group-version-kind"], json::array({Gvk(kind)})) << kind;
    EXPECT_EQ(def["properties"]["apiVersion"]["type"], "string") << kind;
    EXPECT_TRUE(doc["definitions"].contains("io.gpucloud.v1." + std::string(kind) + "List"));
  }
  const json& job = doc["definitions"]["io.gpucloud.v1.Job"];
  EXPECT_EQ(job["required"], json::array({"apiVersion", "kind", "metadata", "spec"}));
  const json& tasks = job["properties"]["spec"]["properties"]["tasks"];
  EXPECT_EQ(tasks["type"], "array");
  const json& task = tasks["items"];
  EXPECT_EQ(task["required"], json::array({"name"}));
  EXPECT_EQ(task["properties"]["replicas"]["type"], "integer");
  EXPECT_EQ(task["properties"]["imagePullPolicy"]["enum"],
            json::array({"Always", "IfNotPresent", "Never"}));
  EXPECT_EQ(task["properties"]["resources"]["properties"]["cpu"]["format"], "quantity");
  // gpu: 4 or gpu: {count: 4}: no type, so that both validate.
  const json& gpu = task["properties"]["resources"]["properties"]["gpu"];
  EXPECT_FALSE(gpu.contains("type"));
  EXPECT_TRUE(gpu["properties"].contains("mig"));
  EXPECT_FALSE(job["properties"]["spec"]["description"].get<std::string>().empty());
}

TEST(OpenApi, PathsCarryKindsAndThePatchOperationsListFieldValidation) {
  for (json doc : {V2(), V3()}) {
    json& item = doc["paths"]["/apis/gpucloud/v1/namespaces/{namespace}/jobs/{name}"];
    ASSERT_TRUE(item.is_object());
    for (const char* method : {"get", "put", "patch", "delete"}) {
      EXPECT_EQ(item[method]["x-kubernetes-group-version-kind"], Gvk("Job")) << method;
    }
    bool field_validation = false;
    for (const json& p : item["patch"]["parameters"]) {
      field_validation |= p["name"] == "fieldValidation" && p["in"] == "query";
    }
    EXPECT_TRUE(field_validation);
    EXPECT_EQ(
        doc["paths"]["/apis/gpucloud/v1/namespaces/{namespace}/jobs"]["get"]["x-kubernetes-action"],
        "list");
    EXPECT_TRUE(doc["paths"].contains("/apis/gpucloud/v1/queues/{name}"));
    EXPECT_TRUE(doc["paths"]["/apis/gpucloud/v1/nodepools/{name}"].contains("patch"));
    // Secrets serve no PATCH, so none is listed; nodes are not created by clients.
    EXPECT_FALSE(
        doc["paths"]["/apis/gpucloud/v1/namespaces/{namespace}/secrets/{name}"].contains("patch"));
    EXPECT_FALSE(doc["paths"]["/apis/gpucloud/v1/nodes"].contains("post"));
  }
}

TEST(OpenApi, V3ComponentsAndEveryReferenceResolves) {
  for (const json& doc : {V2(), V3()}) {
    std::vector<std::pair<std::string, std::string>> refs;
    CollectRefs(doc, "", &refs);
    EXPECT_GT(refs.size(), 20u);
    for (const auto& [at, ref] : refs) {
      EXPECT_TRUE(Resolve(doc, ref).is_object()) << at << ": " << ref;
    }
  }
  json v3 = V3();
  EXPECT_EQ(v3["openapi"], "3.0.0");
  const json& job = v3["components"]["schemas"]["io.gpucloud.v1.Job"];
  EXPECT_EQ(job["x-kubernetes-group-version-kind"], json::array({Gvk("Job")}));
  const json& cpu = job["properties"]["spec"]["properties"]["tasks"]["items"]["properties"]
                       ["resources"]["properties"]["cpu"];
  EXPECT_EQ(cpu["allOf"][0]["$ref"], "#/components/schemas/io.gpucloud.v1.Quantity");
  EXPECT_TRUE(job["properties"]["status"]["x-kubernetes-preserve-unknown-fields"]);
}

// Every key of `have` (stepping into lists and objects) is a property of `schema`.
void ExpectDescribed(const json& have, const json& schema, const std::string& at) {
  if (have.is_array()) {
    ASSERT_TRUE(schema.contains("items")) << at;
    for (const json& e : have) ExpectDescribed(e, schema.at("items"), at + "[]");
    return;
  }
  if (!have.is_object()) return;
  if (schema.contains("additionalProperties")) return;  // a map: any keys
  for (const auto& [k, v] : have.items()) {
    ASSERT_TRUE(schema.contains("properties") && schema.at("properties").contains(k))
        << at << "." << k;
    ExpectDescribed(v, schema.at("properties").at(k), at + "." + k);
  }
}

TEST(OpenApi, TheJobStatusTheServerWritesIsDescribed) {
  JobStatus s;
  s.next = api::JobPhase::kSucceeded;
  s.reason = s.message = s.checkpoint_dir = "x";
  s.submitted_ms = s.not_before_ms = s.scheduled_ms = s.started_ms = s.finished_ms = 1;
  s.stop_deadline_ms = s.interrupted_ms = s.last_recovery_ms = s.attempt_started_ms = 1;
  s.run_ended_ms = s.last_checkpoint_ms = s.last_replicated_ms = 1;
  s.recoveries = 1;
  s.cancel_requested = s.delete_requested = true;
  s.gpus = s.checkpoint_gpus = 1;
  s.checkpoint_nodes = {"n1"};
  s.gpu_seconds.allocated = 1;
  s.master_port = 29500;
  PlacedReplica p;
  p.name = "ns.j.0";
  for (GpuMode mode : {GpuMode::kWhole, GpuMode::kMig, GpuMode::kShared}) {
    sched::GpuAssignment a;
    a.mode = mode;
    p.placement.gpus.push_back(a);
  }
  s.placement = {p};
  s.tasks["ns.j.0"] = "Running";
  nlohmann::ordered_json doc;
  JobStatusToJson(s, doc);
  json v3 = V3();
  ExpectDescribed(json::parse(doc.dump()), v3["components"]["schemas"]["io.gpucloud.v1.Job"], "");
}

class OpenApiRestTest : public RestFixture {};

TEST_F(OpenApiRestTest, EveryIdentityReadsTheDocuments) {
  Identity bootstrap{"bootstrap", "", false};
  bootstrap.bootstrap = true;
  for (const Identity& who : {Identity{"root", "", true}, Tenant(), Node()}) {
    Response v2 = Call("GET", "/openapi/v2", "", {}, who);
    ASSERT_EQ(v2.status, 200) << who.user << " " << v2.body;
    EXPECT_EQ(Body(v2)["swagger"], "2.0");
    Response index = Call("GET", "/openapi/v3/", "", {{"timeout", "32s"}}, who);
    ASSERT_EQ(index.status, 200) << index.body;
    const std::string url =
        Body(index)["paths"]["apis/gpucloud/v1"]["serverRelativeURL"].get<std::string>();
    ASSERT_TRUE(url.starts_with("/openapi/v3/apis/gpucloud/v1?hash=")) << url;
    const std::string hash = url.substr(url.find('=') + 1);
    Response v3 = Call("GET", "/openapi/v3/apis/gpucloud/v1", "", {{"hash", hash}}, who);
    ASSERT_EQ(v3.status, 200) << v3.body;
    EXPECT_EQ(Sha256Hex(v3.body), hash);  // the hash is the document's
    EXPECT_EQ(Body(v3)["openapi"], "3.0.0");
  }
  EXPECT_EQ(Call("GET", "/openapi/v2", "", {}, bootstrap).status, 403);
  EXPECT_EQ(Call("POST", "/openapi/v2", "{}", {}, Tenant()).status, 405);
  EXPECT_EQ(Call("GET", "/openapi/v2", "", {{"hash", "x"}}, Tenant()).status, 400);
  EXPECT_EQ(Call("GET", "/openapi/v3/apis/batch/v1", "", {}, Tenant()).status, 404);
}

TEST(OpenApiHttps, TheDocumentsNeedAToken) {
  testing_util::TempDir tmp{"gpucloud-openapi"};
  const std::string dir = tmp.path().string();
  absl::StatusOr<Credentials> creds = EnsureCredentials(dir);
  ASSERT_TRUE(creds.ok()) << creds.status();
  ASSERT_TRUE(CommitAdminToken(dir, creds->admin_token).ok());
  TokenBook tokens = *TokenBook::Load(dir);
  FakeClock clock{1'700'000'000'000};
  std::unique_ptr<store::Store> store = std::move(*store::OpenSqliteStore(dir + "/store.db"));
  RestApi api(*store, clock, 1);
  HttpsServer::Options o;
  o.cert_path = creds->cert_path;
  o.key_path = creds->key_path;
  HttpsServer server(api, tokens, *store, std::move(o));
  ASSERT_TRUE(server.Start().ok());
  namespace http = boost::beast::http;
  for (const char* path : {"/openapi/v2", "/openapi/v3", "/openapi/v3/apis/gpucloud/v1"}) {
    EXPECT_EQ(testing_util::HttpsCall(server.port(), creds->ca_cert_path, http::verb::get, path, "")
                  .result_int(),
              401)
        << path;
    auto ok = testing_util::HttpsCall(server.port(), creds->ca_cert_path, http::verb::get, path,
                                      creds->admin_token);
    EXPECT_EQ(ok.result_int(), 200) << path;
    EXPECT_TRUE(json::parse(ok.body()).is_object()) << path;
  }
}

}  // namespace
}  // namespace gpucloud::server
