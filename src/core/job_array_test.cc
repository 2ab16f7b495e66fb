#include "core/job_array.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

TEST(ParseArrayIndices, RangeWithParallelism) {
  absl::StatusOr<JobArraySpec> a = ParseArrayIndices("0-999%50");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->indices, (std::vector<IndexRange>{{0, 999}}));
  EXPECT_EQ(a->parallelism, 50);
  EXPECT_EQ(a->count, 1000);
  EXPECT_FALSE(a->element());
}

TEST(ParseArrayIndices, ListsStepsAndMerges) {
  absl::StatusOr<JobArraySpec> a = ParseArrayIndices("1,3,5-7");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->indices, (std::vector<IndexRange>{{1, 1}, {3, 3}, {5, 7}}));
  EXPECT_EQ(a->parallelism, 0);
  EXPECT_EQ(a->count, 5);
  EXPECT_EQ(FormatArrayIndices(a->indices), "1,3,5-7");

  a = ParseArrayIndices("0-15:4");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(FormatArrayIndices(a->indices), "0,4,8,12");
  // Overlapping and adjacent entries are counted once.
  a = ParseArrayIndices("5-9,0-4,3,10");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->indices, (std::vector<IndexRange>{{0, 10}}));
  EXPECT_EQ(a->count, 11);
  EXPECT_EQ(ParseArrayIndices("7")->indices, (std::vector<IndexRange>{{7, 7}}));
}

TEST(ParseArrayIndices, ErrorsNameTheOffendingText) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "names no index"},
      {"%5", "names no index"},
      {"1,,3", "\"\" is an empty entry"},
      {"1,", "\"\" is an empty entry"},
      {"9-3", "\"9-3\" runs backwards"},
      {"a-3", "\"a-3\" is not an index"},
      {"-3", "\"-3\" is not an index"},
      {"0-1000000", "\"0-1000000\" is not an index"},
      {"0-9%0", "\"%0\" is not a parallelism from 1 to 10000"},
      {"0-9%x", "\"%x\" is not a parallelism"},
      {"0-9%", "\"%\" is not a parallelism"},
      {"3:2", "\"3:2\" has a step"},
      {"0-9:0", "\"0-9:0\" has a step"},
      {"0-10000", "names 10001 indices; an array has at most 10000"},
      {"0-999999:1", "names 1000000 indices"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JobArraySpec> a = ParseArrayIndices(c.text);
    ASSERT_FALSE(a.ok()) << c.text;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(a.status().message().find(c.says), std::string_view::npos)
        << c.text << ": " << a.status().message();
  }
}

TEST(ParseArrayIndices, TheLargestArrayIsAccepted) {
  absl::StatusOr<JobArraySpec> a = ParseArrayIndices("990000-999999");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->count, kMaxArrayElements);
  EXPECT_EQ(CountIndices(a->indices), kMaxArrayElements);
}

TEST(ArrayElementName, IsNameDashIndex) { EXPECT_EQ(ArrayElementName("sweep", 7), "sweep-7"); }

}  // namespace
}  // namespace gpucloud
