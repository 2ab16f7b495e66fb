// InferenceServices through the REST API: the resource, and a service write decided as
// jobs:Create of a replica too (its conditions on GPU types cannot be bypassed).
#include <gtest/gtest.h>

#include "manifest/manifest.h"
#include "server/authorizer.h"
#include "server/rest_fixture.h"

namespace gpucloud::server {
namespace {

std::string Service(const std::string& name, const std::string& gpu_type) {
  return "apiVersion: gpucloud/v1\nkind: InferenceService\nmetadata: {name: " + name +
         "}\nspec:\n  template:\n    name: server\n    command: [serve]\n" +
         "    resources: {gpu: {count: 1, type: " + gpu_type + "}}\n" +
         "  replicas: {min: 0, max: 4}\n";
}

class RestServicesTest : public RestFixture {
 protected:
  static constexpr char kServices[] = "/apis/gpucloud/v1/namespaces/team-a/inferenceservices";
};

TEST_F(RestServicesTest, CreateReadListDeleteAndBadBodies) {
  Response r = Call("POST", kServices, Service("resnet", "t4"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Body(r)["kind"], "InferenceService");
  EXPECT_EQ(Body(r)["metadata"]["namespace"], "team-a");
  r = Call("GET", std::string(kServices) + "/resnet");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["spec"]["replicas"]["max"], 4);
  r = Call("GET", kServices);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["items"].size(), 1u);
  r = Call("POST", kServices, Service("resnet", "t4"));
  EXPECT_EQ(r.status, 409) << r.body;
  std::string bad = Service("other", "t4");
  bad.replace(bad.find("min: 0"), 6, "min: 9");
  r = Call("POST", kServices, bad);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("spec.replicas.min"), std::string::npos) << r.body;
  r = Call("DELETE", std::string(kServices) + "/resnet");
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(RestServicesTest, AServiceIsDecidedAsTheJobsItMakes) {
  manifest::PolicyDocumentResult no_h100 = manifest::ParsePolicyDocument(
      R"({"Version": "2012-10-17", "Statement": [
          {"Sid": "NoH100", "Effect": "Deny", "Action": "jobs:Create", "Resource": "*",
           "Condition": {"StringEquals": {"gpucloud:GpuType": "H100-80GB"}}}]})",
      "no-h100.json");
  ASSERT_TRUE(no_h100.ok());
  api_->authorizer().SetPolicies({{"no-h100", no_h100.document}});
  Identity alice = Tenant();
  alice.policies = {"gpucloud:tenant", "no-h100"};
  Response r = Call("POST", kServices, Service("big", "h100"), {}, alice);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("jobs:Create"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("NoH100"), std::string::npos) << r.body;
  r = Call("POST", kServices, Service("small", "t4"), {}, alice);
  EXPECT_EQ(r.status, 201) << r.body;
  // Another tenant's namespace: services:Create is refused.
  Identity bob{"bob", "team-b", false};
  r = Call("POST", kServices, Service("mine", "t4"), {}, bob);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("services:Create"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace gpucloud::server
