#include "server/merge_patch.h"

#include <gtest/gtest.h>

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

// RFC 7396's appendix A, every case, and a stored object's patch.
TEST(MergePatchTest, TheRfcsExamples) {
  const char* cases[][3] = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", "null", "null"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
      {R"({"spec":{"priority":1,"tasks":[{"name":"w"}]},"metadata":{"labels":{"a":"1"}}})",
       R"({"spec":{"priority":5},"metadata":{"labels":{"a":null,"b":"2"}}})",
       R"({"spec":{"priority":5,"tasks":[{"name":"w"}]},"metadata":{"labels":{"b":"2"}}})"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(MergePatch(Json::parse(c[0]), Json::parse(c[1])), Json::parse(c[2]))
        << c[0] << " + " << c[1];
  }
}

TEST(MergePatchTest, KeepsTheTargetsOrderAndLeavesItUnchanged) {
  const Json target = Json::parse(R"({"z":1,"a":{"y":2,"b":3}})");
  Json out = MergePatch(target, Json::parse(R"({"a":{"b":4},"c":5})"));
  EXPECT_EQ(out.dump(), R"({"z":1,"a":{"y":2,"b":4},"c":5})");
  EXPECT_EQ(target.dump(), R"({"z":1,"a":{"y":2,"b":3}})");
}

}  // namespace
}  // namespace gpucloud::server
