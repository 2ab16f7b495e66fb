// An interactive job's spec.interactive (InteractiveSpec): defaults, durations, round trip, and
// bad values named with their field and line.
#include <gtest/gtest.h>

#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string JobWith(const std::string& interactive) {
  return "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: nb}\nspec:\n  interactive: " +
         interactive + "\n  tasks:\n  - name: main\n    command: [jupyter, notebook]\n";
}

TEST(Interactive, DefaultsAndDurations) {
  ParseResult r = ParseManifests(JobWith("{}"), "nb.yaml");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const Job& job = std::get<Job>(r.manifests[0].object);
  ASSERT_TRUE(job.spec.interactive.has_value());
  EXPECT_EQ(job.spec.interactive->idle_timeout_seconds, 3600);
  EXPECT_EQ(job.spec.interactive->max_duration_seconds, 12 * 3600);
  r = ParseManifests(JobWith("{idleTimeout: 15m, maxDuration: 0}"), "nb.yaml");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const Job& custom = std::get<Job>(r.manifests[0].object);
  EXPECT_EQ(custom.spec.interactive->idle_timeout_seconds, 900);
  EXPECT_EQ(custom.spec.interactive->max_duration_seconds, 0);
  for (bool json : {false, true}) {
    std::string text = json ? ToJson(custom) : ToYaml(custom);
    ParseResult back = ParseManifests(text, "rt");
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_TRUE(std::get<Job>(back.manifests[0].object) == custom) << text;
  }
  r = ParseManifests(
      "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: b}\nspec:\n"
      "  tasks:\n  - name: main\n    command: [x]\n",
      "batch.yaml");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(std::get<Job>(r.manifests[0].object).spec.interactive.has_value());
}

TEST(Interactive, BadValuesNameTheirField) {
  struct Case {
    const char* interactive;
    const char* says;
  };
  for (const Case& c :
       {Case{"{idleTimeout: 0s}", "spec.interactive.idleTimeout"},
        Case{"{idleTimeout: soon}", "spec.interactive.idleTimeout"},
        Case{"{maxDuration: 400d}", "spec.interactive.maxDuration"},
        Case{"{idleTimeout: 1h, keepAlive: true}", "keepAlive"}, Case{"yes", "spec.interactive"}}) {
    ParseResult r = ParseManifests(JobWith(c.interactive), "nb.yaml");
    ASSERT_FALSE(r.ok()) << c.interactive;
    EXPECT_NE(r.errors[0].ToString().find(c.says), std::string::npos)
        << c.interactive << ": " << r.errors[0].ToString();
    EXPECT_NE(r.errors[0].ToString().find("nb.yaml:5"), std::string::npos)
        << r.errors[0].ToString();
  }
}

}  // namespace
}  // namespace gpucloud::manifest
