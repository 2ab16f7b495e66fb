#include "manifest/json_yaml.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpucloud::manifest {
namespace {

TEST(JsonToYaml, ReadsBackAsTheSameJson) {
  const std::string json = R"({"apiVersion":"gpucloud/v1","kind":"Job",
    "metadata":{"name":"train","namespace":"default","uid":"u-1","resourceVersion":"42",
                "creationTimestamp":"2026-12-01T12:00:00Z","labels":{"team":"a","1":"x"}},
    "spec":{"tasks":[{"name":"main","replicas":2,"command":["python","train.py","--lr","0.1"],
            "env":{"EMPTY":"","YES":"yes","NUL":"null","BOOL":"true","HEX":"0x10","N":"7"}}]},
    "status":{"phase":"Running","restarts":0,"ratio":0.25,"done":false,"node":null,
              "message":"line one\nline two: with a colon"}})";
  absl::StatusOr<std::string> yaml = JsonToYaml(json);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  absl::StatusOr<std::string> back = YamlToJson(*yaml);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << *yaml;
  EXPECT_EQ(nlohmann::json::parse(*back), nlohmann::json::parse(json)) << *yaml;
  // Status and the server's metadata are kept (gpuctl get -o yaml dropped them).
  EXPECT_NE(yaml->find("status:"), std::string::npos) << *yaml;
  EXPECT_NE(yaml->find("uid: u-1"), std::string::npos) << *yaml;
  EXPECT_NE(yaml->find("\"0.1\""), std::string::npos) << *yaml;  // a string, not a number
}

TEST(JsonToYaml, RefusesWhatIsNotJson) { EXPECT_FALSE(JsonToYaml("{not json").ok()); }

}  // namespace
}  // namespace gpucloud::manifest
