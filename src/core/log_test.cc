#include "core/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

namespace gpucloud::log {
namespace {

using ::testing::HasSubstr;

// 2026-12-02T01:02:03.456Z
absl::Time At() { return absl::FromUnixMillis(1796173323456); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The process's log into a string for one test, and back to its default after.
class LogTest : public ::testing::Test {
 protected:
  void Use(Level level, Format format) {
    Configure({.level = level, .format = format, .out = &out_});
  }
  void TearDown() override { Configure({}); }
  std::string Text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

TEST(FormatRecord, TextHasTimeLevelComponentMessageAndFields) {
  EXPECT_EQ(
      FormatRecord(Format::kText, At(), Level::kInfo, "server", "node is Ready", {{"node", "n1"}}),
      "2026-12-02T01:02:03.456Z INFO  server: node is Ready node=n1");
  EXPECT_EQ(FormatRecord(Format::kText, At(), Level::kError, "agent", "x", {}),
            "2026-12-02T01:02:03.456Z ERROR agent: x");
}

TEST(FormatRecord, TextQuotesValuesThatNeedIt) {
  std::string line = FormatRecord(Format::kText, At(), Level::kWarn, "agent", "task failed",
                                  {{"task", "default.a.0"},
                                   {"error", std::string("no such file: \"x\"\nnext")},
                                   {"empty", ""},
                                   {"eq", "a=b"},
                                   {"gpu", 3},
                                   {"ok", true}});
  EXPECT_EQ(line,
            "2026-12-02T01:02:03.456Z WARN  agent: task failed task=default.a.0 "
            "error=\"no such file: \\\"x\\\"\\nnext\" empty=\"\" eq=\"a=b\" gpu=3 ok=true");
}

TEST(FormatRecord, TextKeepsARecordOnOneLine) {
  std::string line =
      FormatRecord(Format::kText, At(), Level::kInfo, "server", "two\nlines\tand\x01", {});
  EXPECT_EQ(line, "2026-12-02T01:02:03.456Z INFO  server: two\\nlines\\tand\\x01");
}

TEST(FormatRecord, JsonParsesWithEscapedQuotesAndNewlines) {
  std::string line =
      FormatRecord(Format::kJson, At(), Level::kWarn, "agent", "said \"hi\"\nthen left",
                   {{"node", "n1"}, {"gpu", 2}, {"healthy", false}, {"msg", "shadowed"}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["ts"], "2026-12-02T01:02:03.456Z");
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["component"], "agent");
  EXPECT_EQ(j["msg"], "said \"hi\"\nthen left");
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["gpu"], 2);
  EXPECT_EQ(j["healthy"], false);
  EXPECT_EQ(j["field.msg"], "shadowed");
  // The keys in the documented order.
  EXPECT_EQ(line.rfind("{\"ts\":\"2026-12-02T01:02:03.456Z\",\"level\":\"warn\",", 0), 0u);
}

TEST(FormatRecord, JsonReplacesInvalidUtf8) {
  std::string line = FormatRecord(Format::kJson, At(), Level::kInfo, "agent", "bad \xff byte",
                                  {{"v", std::string("\xc3")}});
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], "bad \xef\xbf\xbd byte");
  EXPECT_EQ(j["v"], "\xef\xbf\xbd");
}

TEST_F(LogTest, LevelsBelowTheConfiguredOneAreDropped) {
  Use(Level::kWarn, Format::kText);
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kWarn));
  Trace("server", "t");
  Debug("server", "d");
  Info("server", "i");
  Warn("server", "w", {{"node", "n1"}});
  Error("server", "e");
  std::vector<std::string> lines = Lines(Text());
  ASSERT_EQ(lines.size(), 2u) << Text();
  EXPECT_THAT(lines[0], HasSubstr(" WARN  server: w node=n1"));
  EXPECT_THAT(lines[1], HasSubstr(" ERROR server: e"));
}

TEST_F(LogTest, TraceLogsEverything) {
  Use(Level::kTrace, Format::kText);
  Trace("agent", "t");
  Debug("agent", "d");
  EXPECT_EQ(Lines(Text()).size(), 2u) << Text();
}

TEST_F(LogTest, JsonWritesOneObjectPerLine) {
  Use(Level::kInfo, Format::kJson);
  Info("server", "node is Ready", {{"node", "n1"}});
  Error("server", "write failed", {{"job", "default/a"}, {"error", "line1\nline2"}});
  std::vector<std::string> lines = Lines(Text());
  ASSERT_EQ(lines.size(), 2u) << Text();
  nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["msg"], "node is Ready");
  EXPECT_EQ(first["node"], "n1");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["error"], "line1\nline2");
}

TEST_F(LogTest, ThreadsNeverInterleaveWithinALine) {
  Use(Level::kInfo, Format::kJson);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) Info("agent", "tick", {{"thread", t}, {"i", i}});
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> lines = Lines(Text());
  ASSERT_EQ(lines.size(), 800u);
  for (const std::string& line : lines) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
}

TEST(LogFlags, LevelsAndFormatsParse) {
  EXPECT_EQ(*ParseLevel("trace"), Level::kTrace);
  EXPECT_EQ(*ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(*ParseLevel("info"), Level::kInfo);
  EXPECT_EQ(*ParseLevel("warn"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("error"), Level::kError);
  EXPECT_EQ(*ParseFormat("text"), Format::kText);
  EXPECT_EQ(*ParseFormat("json"), Format::kJson);
  absl::StatusOr<Options> o = OptionsFromFlags("debug", "json");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->level, Level::kDebug);
  EXPECT_EQ(o->format, Format::kJson);
}

TEST(LogFlags, ABadValueNamesTheFlagAndTheChoices) {
  absl::StatusOr<Options> o = OptionsFromFlags("verbose", "text");
  ASSERT_FALSE(o.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(o.status()));
  EXPECT_EQ(o.status().message(),
            "--log-level: \"verbose\" is not one of trace, debug, info, warn, error");
  o = OptionsFromFlags("info", "xml");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(), "--log-format: \"xml\" is not one of text, json");
  EXPECT_FALSE(ParseLevel("INFO").ok());
  EXPECT_FALSE(ParseLevel("").ok());
}

}  // namespace
}  // namespace gpucloud::log
