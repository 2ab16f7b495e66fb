// The API schema (schema.h) against what the decoders take and the encoder prints: every key
// path of every gpucloud/v1 example manifest, and of every object the encoder prints from
// every example manifest (any apiVersion), is a field of the schema.
#include "manifest/schema.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

// Appends to `unknown` every key path below `n` that `f` does not describe. Sequences are
// stepped into ("[]"); a map's values follow its element type.
void Walk(const FieldSchema& f, const YAML::Node& n, const std::string& path,
          std::vector<std::string>* unknown) {
  if (n.IsSequence()) {
    if (f.type != FieldType::kArray)
      unknown->push_back(path + " (a list; the schema says " + TypeLabel(f) + ")");
    for (const YAML::Node& e : n) Walk(f, e, path + "[]", unknown);
    return;
  }
  if (!n.IsMap()) return;
  if (f.type == FieldType::kMap) {
    if (f.item_type != FieldType::kObject) return;  // keys are the map's own
    FieldSchema element = f;
    element.type = FieldType::kObject;
    for (const auto& kv : n)
      Walk(element, kv.second, path + "." + kv.first.as<std::string>(), unknown);
    return;
  }
  if (!f.HasFields()) {
    unknown->push_back(path + " (an object; the schema says " + TypeLabel(f) + ")");
    return;
  }
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    const std::string at = path.empty() ? key : path + "." + key;
    if (const FieldSchema* c = f.Find(key)) {
      Walk(*c, kv.second, at, unknown);
    } else if (!f.open) {
      unknown->push_back(at);
    }
  }
}

// The key paths of one object that its kind's schema lacks ("no schema" when it has none).
std::vector<std::string> UnknownPaths(const YAML::Node& doc) {
  const std::string kind = doc["kind"] ? doc["kind"].as<std::string>() : "";
  const KindSchema* k = FindKindSchema(kind);
  if (k == nullptr || k->kind != kind) return {"no schema for kind \"" + kind + "\""};
  std::vector<std::string> unknown;
  Walk(k->object, doc, "", &unknown);
  return unknown;
}

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every manifest file of examples/ and testdata/manifests (the agent's configs and the Grafana
// dashboards are no manifests).
std::vector<std::filesystem::path> ManifestFiles() {
  std::vector<std::filesystem::path> out;
  for (const char* dir : {"/examples", "/testdata/manifests"}) {
    for (const auto& e :
         std::filesystem::recursive_directory_iterator(std::string(GPUCLOUD_SOURCE_DIR) + dir)) {
      const std::string ext = e.path().extension().string();
      const std::string parent = e.path().parent_path().filename().string();
      if (!e.is_regular_file() || (ext != ".yaml" && ext != ".yml" && ext != ".json")) continue;
      if (parent == "agent" || parent == "grafana") continue;
      out.push_back(e.path());
    }
  }
  return out;
}

TEST(ApiSchema, EveryKeyOfEveryGpucloudExampleIsInTheSchema) {
  int documents = 0;
  for (const std::filesystem::path& p : ManifestFiles()) {
    const std::string text = Read(p);
    if (!ParseManifests(text, p.string()).ok()) continue;  // invalid on purpose: not the API's
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      if (!doc.IsMap() || !doc["apiVersion"] ||
          doc["apiVersion"].as<std::string>() != "gpucloud/v1")
        continue;
      ++documents;
      for (const std::string& u : UnknownPaths(doc)) ADD_FAILURE() << p << ": " << u;
    }
  }
  EXPECT_GE(documents, 15);  // the examples hold about 20
}

TEST(ApiSchema, EveryKeyTheEncoderPrintsIsInTheSchema) {
  int objects = 0;
  for (const std::filesystem::path& p : ManifestFiles()) {
    ParseResult r = ParseManifests(Read(p), p.string());
    if (!r.ok()) continue;  // invalid on purpose (testdata) or needing other files
    for (const Manifest& m : r.manifests) {
      ++objects;
      for (const std::string& u : UnknownPaths(YAML::Load(ToJson(m.object)))) {
        ADD_FAILURE() << p << " printed as " << KindOf(m.object) << ": " << u;
      }
    }
  }
  EXPECT_GE(objects, 15);
}

TEST(ApiSchema, TheWalkFindsWhatTheSchemaLacks) {
  YAML::Node doc = YAML::Load(
      "{apiVersion: gpucloud/v1, kind: Job, metadata: {name: a}, spec: {tasks: [{name: t, "
      "resources: {gpu: {count: 1, colour: red}}}], sauce: 1}}");
  EXPECT_EQ(UnknownPaths(doc),
            (std::vector<std::string>{"spec.tasks[].resources.gpu.colour", "spec.sauce"}));
  EXPECT_EQ(UnknownPaths(YAML::Load("{kind: Widget}")),
            std::vector<std::string>{"no schema for kind \"Widget\""});
}

TEST(ApiSchema, FindsKindsByEveryName) {
  for (const char* name : {"Job", "job", "jobs", "JOBS", "jobs.gpucloud"}) {
    ASSERT_NE(FindKindSchema(name), nullptr) << name;
    EXPECT_EQ(FindKindSchema(name)->kind, "Job");
  }
  EXPECT_EQ(FindKindSchema("np")->kind, "NodePool");
  EXPECT_EQ(FindKindSchema("sa")->kind, "ServiceAccount");
  EXPECT_EQ(FindKindSchema("policies")->kind, "Policy");
  EXPECT_EQ(FindKindSchema("pods"), nullptr);
}

TEST(ApiSchema, FindsFieldsThroughListsAndNamesTheUnknownOne) {
  const KindSchema& job = *FindKindSchema("job");
  std::vector<std::string> path = {"spec", "tasks", "resources", "gpu", "sharing"};
  absl::StatusOr<const FieldSchema*> f = FindFieldSchema(job, path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->enum_values, (std::vector<std::string>{"time-slicing", "mps"}));
  std::vector<std::string> bad = {"spec", "tasks", "colour"};
  EXPECT_EQ(FindFieldSchema(job, bad).status().message(),
            "field \"colour\" does not exist in Job.spec.tasks");
  std::vector<std::string> none;
  EXPECT_EQ(*FindFieldSchema(job, none), &job.object);
}

TEST(ApiSchema, TypesAndRequiredFields) {
  const KindSchema& job = *FindKindSchema("job");
  EXPECT_TRUE(job.object.Find("spec")->required);
  EXPECT_TRUE(job.object.Find("metadata")->Find("name")->required);
  EXPECT_FALSE(job.object.Find("metadata")->Find("namespace")->required);
  EXPECT_TRUE(job.object.Find("status")->read_only);
  const FieldSchema* tasks = job.object.Find("spec")->Find("tasks");
  EXPECT_EQ(TypeLabel(*tasks), "[]Object");
  EXPECT_TRUE(tasks->required);
  EXPECT_EQ(TypeLabel(*tasks->Find("command")), "[]string");
  EXPECT_EQ(TypeLabel(*job.object.Find("spec")->Find("nodeSelector")), "map[string]string");
  EXPECT_EQ(TypeLabel(*tasks->Find("resources")->Find("cpu")), "Quantity");
  EXPECT_EQ(TypeLabel(*tasks->Find("replicas")), "integer");
  EXPECT_EQ(tasks->Find("imagePullPolicy")->enum_values,
            (std::vector<std::string>{"Always", "IfNotPresent", "Never"}));
  // Every field has its one-line description.
  std::vector<const FieldSchema*> todo;
  for (const KindSchema& k : ApiSchema()) todo.push_back(&k.object);
  while (!todo.empty()) {
    const FieldSchema* f = todo.back();
    todo.pop_back();
    EXPECT_FALSE(f->description.empty()) << f->name;
    EXPECT_EQ(f->description.find('\n'), std::string::npos) << f->name;
    for (const FieldSchema& c : f->fields) todo.push_back(&c);
  }
}

}  // namespace
}  // namespace gpucloud::manifest
