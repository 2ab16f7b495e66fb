// Secret references in manifests: the gpucloud/v1 and Kubernetes shapes decode to the same
// model, every bad reference is an error naming its field, and the encoder writes them back.
#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string AllErrors(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.errors) out += d.ToString() + "\n";
  return out;
}

constexpr char kGpucloudJob[] = R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train, namespace: team-a}
spec:
  tasks:
  - name: worker
    image: registry.local:5000/team-a/trainer:1
    imagePullSecrets: [{name: regcred}]
    command: [python3, train.py]
    env:
    - {name: PLAIN, value: "1"}
    - name: HF_TOKEN
      valueFrom: {secretKeyRef: {name: hf, key: token}}
    - name: OPTIONAL
      valueFrom: {secretKeyRef: {name: maybe, key: k, optional: true}}
    envFrom:
    - secretRef: {name: db}
      prefix: DB_
    volumes:
    - name: creds
      mountPath: /etc/creds
      secret:
        secretName: db
        items: [{key: password, path: pw}]
    - name: all
      mountPath: /var/run/hf
      secret: {secretName: hf, optional: true}
)";

TEST(SecretRefs, GpucloudJobDecodes) {
  ParseResult r = ParseManifests(kGpucloudJob, "job.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TaskSpec& t = std::get<Job>(r.manifests[0].object).spec.tasks[0];
  EXPECT_EQ(t.env, (std::vector<EnvVar>{{"PLAIN", "1"}}));
  EXPECT_EQ(t.secret_env, (std::vector<SecretEnvVar>{{"HF_TOKEN", {"hf", "token", false}},
                                                     {"OPTIONAL", {"maybe", "k", true}}}));
  EXPECT_EQ(t.env_from, (std::vector<SecretEnvFrom>{{"db", "DB_", false}}));
  EXPECT_EQ(t.secret_volumes,
            (std::vector<SecretVolume>{{"creds", "db", "/etc/creds", {{"password", "pw"}}, false},
                                       {"all", "hf", "/var/run/hf", {}, true}}));
  EXPECT_EQ(t.image_pull_secrets, std::vector<std::string>{"regcred"});
  EXPECT_TRUE(t.UsesSecrets());
}

TEST(SecretRefs, EncodedJobReadsBackTheSame) {
  ParseResult r = ParseManifests(kGpucloudJob, "job.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const Object& job = r.manifests[0].object;
  for (const std::string& text : {ToYaml(job), ToJson(job)}) {
    ParseResult back = ParseManifests(text, "encoded");
    ASSERT_TRUE(back.ok()) << AllErrors(back) << text;
    EXPECT_EQ(std::get<Job>(back.manifests[0].object).spec.tasks[0],
              std::get<Job>(job).spec.tasks[0])
        << text;
  }
}

TEST(SecretRefs, KubernetesPodDecodesToTheSameModel) {
  ParseResult r = ParseManifests(R"(apiVersion: v1
kind: Pod
metadata: {name: train, namespace: team-a}
spec:
  imagePullSecrets: [{name: regcred}]
  volumes:
  - name: creds
    secret: {secretName: db, items: [{key: password, path: pw}]}
  - name: scratch
    emptyDir: {}
  containers:
  - name: worker
    image: registry.local:5000/team-a/trainer:1
    env:
    - name: HF_TOKEN
      valueFrom: {secretKeyRef: {name: hf, key: token}}
    envFrom: [{secretRef: {name: db}, prefix: DB_}]
    volumeMounts:
    - {name: creds, mountPath: /etc/creds, readOnly: true}
    - {name: scratch, mountPath: /scratch}
)",
                                 "pod.yaml");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TaskSpec& t = std::get<Job>(r.manifests[0].object).spec.tasks[0];
  EXPECT_EQ(t.secret_env, (std::vector<SecretEnvVar>{{"HF_TOKEN", {"hf", "token", false}}}));
  EXPECT_EQ(t.env_from, (std::vector<SecretEnvFrom>{{"db", "DB_", false}}));
  EXPECT_EQ(
      t.secret_volumes,
      (std::vector<SecretVolume>{{"creds", "db", "/etc/creds", {{"password", "pw"}}, false}}));
  EXPECT_EQ(t.image_pull_secrets, std::vector<std::string>{"regcred"});
  // The emptyDir is not given to the task, and the user is told so.
  bool warned = false;
  for (const Diagnostic& d : r.warnings) {
    warned = warned || d.ToString().find("scratch") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

struct BadCase {
  const char* name;
  const char* task_yaml;  // under spec.tasks[0], after name and image
  const char* error;      // a part of the one error
};

class SecretRefErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(SecretRefErrors, NameTheField) {
  const BadCase& c = GetParam();
  std::string doc = std::string(R"(apiVersion: gpucloud/v1
kind: Job
metadata: {name: train, namespace: team-a}
spec:
  tasks:
  - name: worker
    command: [x]
)") + c.task_yaml;
  ParseResult r = ParseManifests(doc, "job.yaml");
  ASSERT_FALSE(r.ok()) << c.name;
  EXPECT_NE(AllErrors(r).find(c.error), std::string::npos) << c.name << ":\n" << AllErrors(r);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SecretRefErrors,
    ::testing::Values(
        BadCase{"config_map",
                "    env: [{name: A, valueFrom: {configMapKeyRef: {name: c, key: k}}}]\n",
                "spec.tasks[0].env[0].valueFrom.configMapKeyRef: is not supported"},
        BadCase{"both",
                "    env: [{name: A, value: x, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n",
                "give either value or valueFrom, not both"},
        BadCase{"bad_key",
                "    env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: 'a/b'}}}]\n",
                "spec.tasks[0].env[0].valueFrom.secretKeyRef.key: a key must be"},
        BadCase{"bad_name",
                "    env: [{name: A, valueFrom: {secretKeyRef: {name: S_X, key: k}}}]\n",
                "spec.tasks[0].env[0].valueFrom.secretKeyRef.name"},
        BadCase{"twice",
                "    env:\n    - {name: A, value: x}\n"
                "    - {name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}\n",
                "\"A\" is given twice (once from a secret)"},
        BadCase{"relative_mount",
                "    volumes: [{name: v, mountPath: etc/x, secret: {secretName: s}}]\n",
                "spec.tasks[0].volumes[0].mountPath: must be an absolute path"},
        BadCase{"reserved_mount",
                "    volumes: [{name: v, mountPath: /gpucloud/x, secret: {secretName: s}}]\n",
                "must not be in /gpucloud"},
        BadCase{"comma_mount",
                "    volumes: [{name: v, mountPath: '/etc/a,b', secret: {secretName: s}}]\n",
                "must not hold ':', ','"},
        BadCase{"dotdot_mount",
                "    volumes: [{name: v, mountPath: /etc/../x, secret: {secretName: s}}]\n",
                "must be a clean path"},
        BadCase{"nested_mounts",
                "    volumes:\n    - {name: v, mountPath: /etc/a, secret: {secretName: s}}\n"
                "    - {name: w, mountPath: /etc/a/b, secret: {secretName: s}}\n",
                "in or on volume"},
        BadCase{"item_path",
                "    volumes: [{name: v, mountPath: /etc/a, secret: {secretName: s, items: "
                "[{key: k, path: a/b}]}}]\n",
                "items[0].path: must be a plain file name"},
        BadCase{"no_secret", "    volumes: [{name: v, mountPath: /etc/a}]\n",
                "spec.tasks[0].volumes[0].secret: is required"},
        BadCase{"pull_without_image", "    imagePullSecrets: [{name: reg}]\n",
                "the task names no image to pull"},
        BadCase{"env_from_config_map", "    envFrom: [{configMapRef: {name: c}}]\n",
                "gpucloud has Secrets, not ConfigMaps"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(SecretRefs, PodMountOfNoVolumeOrWithSubPathIsAnError) {
  for (const char* mount :
       {"{name: nope, mountPath: /etc/x}", "{name: creds, mountPath: /etc/x, subPath: pw}"}) {
    ParseResult r = ParseManifests(std::string(R"(apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team-a}
spec:
  volumes: [{name: creds, secret: {secretName: db}}]
  containers:
  - name: c
    image: busybox
    volumeMounts: [)") + mount + "]\n",
                                   "pod.yaml");
    EXPECT_FALSE(r.ok()) << mount;
  }
}

}  // namespace
}  // namespace gpucloud::manifest
