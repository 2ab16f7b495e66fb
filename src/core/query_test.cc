#include "core/query.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

TEST(Query, PathAndParametersArePercentDecoded) {
  RequestTarget t = ParseRequestTarget("/a%20b/c?gp%75=%31&sel=team%3Dnlp+x&flag&k=1&k=2");
  EXPECT_EQ(t.path, "/a b/c");
  EXPECT_EQ(t.query.at("gpu"), "1");
  EXPECT_EQ(t.query.at("sel"), "team=nlp x");  // '+' is a space in a parameter
  EXPECT_EQ(t.query.at("flag"), "");
  EXPECT_EQ(t.query.at("k"), "2");  // the last of a name given twice
  EXPECT_EQ(t.query.size(), 4u);
  EXPECT_TRUE(ParseRequestTarget("/metrics").query.empty());
}

TEST(Query, APathKeepsPlusAndAnEncodedSlash) {
  EXPECT_EQ(ParseRequestTarget("/jobs/a%2Fevents+x").path, "/jobs/a%2Fevents+x");
  EXPECT_EQ(PercentDecode("a%2Fb"), "a/b");
  EXPECT_EQ(PercentDecode("100%"), "100%");  // not an escape: kept
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
}

TEST(Query, IntegersAreReadStrictly) {
  EXPECT_EQ(ParseQueryInt("0"), 0);
  EXPECT_EQ(ParseQueryInt("79"), 79);
  EXPECT_EQ(ParseQueryInt("999999999999999999"), 999'999'999'999'999'999);
  for (const char* bad : {"", "abc", "1a", "-1", "+1", " 1", "1e3", "0x10", "1000000000000000000"})
    EXPECT_EQ(ParseQueryInt(bad), std::nullopt) << bad;
  EXPECT_EQ(ParseQueryInt("4294967297", 2'147'483'647), std::nullopt);  // never wraps to 1
  EXPECT_EQ(ParseQueryInt("10", 10), 10);
  EXPECT_EQ(ParseQueryInt("11", 10), std::nullopt);
}

}  // namespace
}  // namespace gpucloud
