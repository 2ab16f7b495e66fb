// The Secret kind in manifests: kubectl's v1 shape and gpucloud/v1 decode to the same
// SecretObject, stringData wins over data, and every bad field is an error naming it and its
// line, never quoting a value.
#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string AllErrors(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.errors) out += d.ToString() + "\n";
  return out;
}

TEST(SecretManifest, KubectlsShapeDecodes) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Secret
metadata:
  name: hf
  namespace: team-a
  labels: {team: a}
  creationTimestamp: null
type: Opaque
data:
  token: aGZfb2xk
  user: YWxpY2U=
stringData:
  token: hf_new
immutable: false
)",
                                 "s.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ASSERT_TRUE(r.manifests.empty());
  ASSERT_EQ(r.secrets.size(), 1u);
  const SecretObject& s = r.secrets[0].secret;
  EXPECT_EQ(s.metadata.name, "hf");
  EXPECT_EQ(s.metadata.namespace_, "team-a");
  EXPECT_EQ(s.metadata.labels, (std::map<std::string, std::string>{{"team", "a"}}));
  EXPECT_EQ(s.type, "Opaque");
  EXPECT_EQ(s.values, (std::map<std::string, std::string>{{"token", "hf_new"}, {"user", "alice"}}));
}

TEST(SecretManifest, GpuctlsOwnOutputReadsBack) {
  // What `gpuctl get secret -o yaml` prints (status: the server's sizes) plus a value.
  ParseResult r = ParseManifests(R"(apiVersion: gpucloud/v1
kind: Secret
metadata: {name: regcred, uid: x, resourceVersion: "7"}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {"r.local": {"auth": "dTpw"}}}'
status: {data: {.dockerconfigjson: {bytes: 40, keyId: kek-1}}}
)",
                                 "s.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  ASSERT_EQ(r.secrets.size(), 1u);
  EXPECT_EQ(r.secrets[0].secret.metadata.namespace_, "default");
  EXPECT_EQ(r.secrets[0].secret.metadata.resource_version, 7);
  EXPECT_EQ(r.secrets[0].secret.type, "kubernetes.io/dockerconfigjson");
}

TEST(SecretManifest, ErrorsNameTheFieldAndLineNeverTheValue) {
  struct Case {
    std::string body, error;
  };
  const std::string head = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
  for (const Case& c : std::vector<Case>{
           {"data:\n  token: not_base64!\n",
            "s.yaml:5:10: data[token]: is not standard base64 (with padding)"},
           {"data:\n  ok: YQ==\n  token: YQ\n",
            "s.yaml:6:10: data[token]: is not standard base64 (with padding)"},
           {"stringData:\n  pin: 123456\n",
            "s.yaml:5:8: stringData[pin]: must be a string (quote it)"},
           {"data:\n  a/b: YQ==\n",
            "s.yaml:5:8: data[a/b]: a key must be 1 to 253 of [-._a-zA-Z0-9], not . or .."},
           {"type: kubernetes.io/basic-auth\n",
            "s.yaml:4:7: type: must be Opaque or kubernetes.io/dockerconfigjson, got "
            "\"kubernetes.io/basic-auth\""},
           {"immutable: true\n",
            "s.yaml:4:12: immutable: gpucloud's Secrets are not immutable: leave it out or false"},
           {"type: kubernetes.io/dockerconfigjson\nstringData: {.dockerconfigjson: '[]'}\n",
            "s.yaml:5:13: data[.dockerconfigjson]: must be JSON with an \"auths\" object"},
           {"type: kubernetes.io/dockerconfigjson\n",
            "s.yaml:1:1: data: needs a .dockerconfigjson value for type "
            "kubernetes.io/dockerconfigjson"},
           {"value: x\n", "s.yaml:4:1: value: unknown field"},
       }) {
    ParseResult r = ParseManifests(head + c.body, "s.yaml");
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_TRUE(r.secrets.empty());
    EXPECT_EQ(AllErrors(r), c.error + "\n") << c.body;
    EXPECT_EQ(AllErrors(r).find("123456"), std::string::npos);
    EXPECT_EQ(AllErrors(r).find("not_base64"), std::string::npos);
  }
  ParseResult annotated = ParseManifests(
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  annotations: {a: b}\n", "s.yaml");
  EXPECT_EQ(AllErrors(annotated),
            "s.yaml:5:16: metadata.annotations: gpucloud's Secrets keep no annotations (labels "
            "only)\n");
}

TEST(SecretManifest, TwoDifferentSecretsOfOneNameAreAnError) {
  const std::string doc = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: ";
  ParseResult same = ParseManifests(doc + "x}\n---\n" + doc + "x}\n", "s.yaml");
  ASSERT_TRUE(same.ok()) << AllErrors(same);
  EXPECT_EQ(same.secrets.size(), 1u);
  ParseResult differ = ParseManifests(doc + "x}\n---\n" + doc + "y}\n", "s.yaml");
  EXPECT_EQ(AllErrors(differ),
            "s.yaml:6:1: [doc 2] metadata.name: duplicate Secret default/s with different content "
            "(also document 1)\n");
}

}  // namespace
}  // namespace gpucloud::manifest
