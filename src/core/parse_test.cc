#include "core/parse.h"

#include <gtest/gtest.h>

#include "core/text.h"

namespace gpucloud {
namespace {

TEST(ParseMilli, WholeFractionAndMilliSuffix) {
  EXPECT_EQ(*ParseMilli("2"), 2000);
  EXPECT_EQ(*ParseMilli("0.25"), 250);
  EXPECT_EQ(*ParseMilli("1.5"), 1500);
  EXPECT_EQ(*ParseMilli("500m"), 500);
  EXPECT_EQ(*ParseMilli("0.1000"), 100);  // trailing zeros beyond 3 decimals are exact
}

TEST(ParseMilli, RejectsInexactNegativeAndGarbage) {
  EXPECT_FALSE(ParseMilli("0.0001").ok());
  EXPECT_FALSE(ParseMilli("-1").ok());
  EXPECT_FALSE(ParseMilli("abc").ok());
  EXPECT_FALSE(ParseMilli("").ok());
  EXPECT_FALSE(ParseMilli(".").ok());
  EXPECT_FALSE(ParseMilli("1.5m").ok());
  EXPECT_FALSE(ParseMilli("99999999999999999999").ok());
}

TEST(ParseMilli, SumsExactlyWithoutDrift) {
  int64_t total = 0;
  for (int i = 0; i < 1000; ++i) total += *ParseMilli("0.001");
  EXPECT_EQ(total, 1000);
}

TEST(ParseMemory, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(ParseMemory("16Gi")->raw(), 16384);
  EXPECT_EQ(ParseMemory("512Mi")->raw(), 512);
  EXPECT_EQ(ParseMemory("1.5Gi")->raw(), 1536);
  EXPECT_EQ(ParseMemory("1Ti")->raw(), 1024 * 1024);
  EXPECT_EQ(ParseMemory("80G")->raw(), 76294);  // 80e9 bytes, rounded up to MiB
  EXPECT_EQ(ParseMemory("1")->raw(), 1);        // one byte rounds up to one MiB
  EXPECT_EQ(ParseMemory("0")->raw(), 0);
}

TEST(ParseMemory, RejectsBadSuffixAndNegative) {
  EXPECT_FALSE(ParseMemory("16GB").ok());
  EXPECT_FALSE(ParseMemory("-1Gi").ok());
  EXPECT_FALSE(ParseMemory("Gi").ok());
  EXPECT_EQ(ParseMemory("16x").status().message(),
            "not a valid memory quantity: \"16x\" (use e.g. 512Mi, 16Gi or 80G)");
}

TEST(ParseDuration, Forms) {
  EXPECT_EQ(*ParseDurationSeconds("90"), 90);
  EXPECT_EQ(*ParseDurationSeconds("1h30m"), 5400);
  EXPECT_EQ(*ParseDurationSeconds("2d"), 172800);
  EXPECT_EQ(*ParseDurationSeconds("45s"), 45);
  EXPECT_FALSE(ParseDurationSeconds("10x").ok());
  EXPECT_FALSE(ParseDurationSeconds("h").ok());
  EXPECT_FALSE(ParseDurationSeconds("1.5h").ok());
  EXPECT_FALSE(ParseDurationSeconds("").ok());
}

TEST(ParseCudaVersion, Forms) {
  EXPECT_EQ(*ParseCudaVersion("12.4"), 12040);
  EXPECT_EQ(*ParseCudaVersion("11.8"), 11080);
  EXPECT_FALSE(ParseCudaVersion("12").ok());
  EXPECT_FALSE(ParseCudaVersion("12.x").ok());
  EXPECT_FALSE(ParseCudaVersion(".4").ok());
}

TEST(ParseHostPort, Forms) {
  absl::StatusOr<HostPort> a = ParseHostPort("--listen", "127.0.0.1:8443");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8443);
  EXPECT_EQ(ParseHostPort("--listen", "0.0.0.0:0")->port, 0);
  EXPECT_EQ(ParseHostPort("--listen", ":9400")->host, "");
  for (const char* bad : {"8443", "host:", "host:70000", "host:12ab", "host:-1", "host:1234567"}) {
    absl::StatusOr<HostPort> b = ParseHostPort("--listen", bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().message(), Cat("--listen: \"", bad, "\" is not HOST:PORT"));
  }
}

TEST(Format, RoundTripsThroughParsers) {
  for (int64_t milli : {0, 1, 250, 1000, 1500, 123456}) {
    EXPECT_EQ(*ParseMilli(FormatMilli(milli)), milli) << milli;
  }
  for (int64_t mib : {0, 1, 1536, 16384, 1048576, 1048577}) {
    EXPECT_EQ(ParseMemory(FormatMemory(MiB(mib)))->raw(), mib) << mib;
  }
  for (int64_t s : {0, 1, 59, 60, 3661, 86400, 90061}) {
    EXPECT_EQ(*ParseDurationSeconds(FormatDuration(s)), s) << s;
  }
  for (int64_t p : {0, 1, 2'500'000, 6'980'000, 123}) {
    EXPECT_EQ(ParsePrice(FormatPrice(MicroUsd(p)))->raw(), p) << p;
  }
  EXPECT_EQ(FormatPrice(MicroUsd(2'500'000)), "2.50");
  EXPECT_EQ(FormatDuration(5400), "1h30m");
  EXPECT_EQ(FormatMemory(MiB(16384)), "16Gi");
  EXPECT_EQ(FormatCudaVersion(12040), "12.4");
}

}  // namespace
}  // namespace gpucloud
