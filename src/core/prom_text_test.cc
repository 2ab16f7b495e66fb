#include "core/prom_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gpucloud {
namespace {

TEST(PromText, FamiliesAreContiguousWithHelpAndType) {
  PromText p;
  p.Family("a_total", "counter", "Things.").Sample({{"kind", "x"}}, 3).Sample({{"kind", "y"}}, 4);
  p.Family("b", "gauge", "B.").Sample(0.5);
  EXPECT_EQ(p.text(),
            "# HELP a_total Things.\n# TYPE a_total counter\n"
            "a_total{kind=\"x\"} 3\na_total{kind=\"y\"} 4\n"
            "# HELP b B.\n# TYPE b gauge\nb 0.5\n");
}

TEST(PromText, EscapesLabelValuesAndHelp) {
  PromText p;
  p.Family("r", "counter", "back\\slash\nnew line").Sample({{"rule", "say \"hi\"\\\n"}}, 1);
  EXPECT_EQ(p.text(),
            "# HELP r back\\\\slash\\nnew line\n# TYPE r counter\n"
            "r{rule=\"say \\\"hi\\\"\\\\\\n\"} 1\n");
}

TEST(PromText, ValuesExactAndSpecial) {
  EXPECT_EQ(PromValue(1234567.0), "1234567");
  EXPECT_EQ(PromValue(0.1), "0.1");
  EXPECT_EQ(PromValue(123456789012.5), "123456789012.5");
  EXPECT_EQ(PromValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PromValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(PromValue(std::nan("")), "NaN");
}

TEST(PromText, HistogramWithBucketsSumAndCount) {
  PromText p;
  p.Family("h_seconds", "histogram", "H.").Histogram({{"method", "GET"}}, {0.1, 1}, {2, 5}, 3.5, 6);
  EXPECT_EQ(p.text(),
            "# HELP h_seconds H.\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{method=\"GET\",le=\"0.1\"} 2\n"
            "h_seconds_bucket{method=\"GET\",le=\"1\"} 5\n"
            "h_seconds_bucket{method=\"GET\",le=\"+Inf\"} 6\n"
            "h_seconds_sum{method=\"GET\"} 3.5\n"
            "h_seconds_count{method=\"GET\"} 6\n");
}

}  // namespace
}  // namespace gpucloud
