#include "api/usage.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpucloud::api {
namespace {

TEST(Usage, RoundTripsThroughJson) {
  AttemptUsage u{.ns = "team-a",
                 .job = "train",
                 .uid = "abc",
                 .queue = "research",
                 .attempt = 3,
                 .start_ms = 1000,
                 .end_ms = 7'201'000,
                 .spot_tolerant = true,
                 .gpus = 2.5,
                 .gpus_by_type = {{"a100", 2.5}},
                 .usd_per_hour = {{"spot", 1.25}},
                 .usd_per_hour_by_pool = {{"a100-spot", 1.25}},
                 .energy_j = 3.6e6,
                 .co2e_g_per_kwh = 420};
  absl::StatusOr<AttemptUsage> back = UsageFromJson(UsageToJson(u));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, u);
  EXPECT_EQ(UsageKey(u), "/usage/team-a/abc.3.1000");
  EXPECT_DOUBLE_EQ(u.hours(), 2.0);
  EXPECT_DOUBLE_EQ(u.HoursIn(3'601'000, 100'000'000), 1.0);
  EXPECT_DOUBLE_EQ(u.HoursIn(8'000'000, 9'000'000), 0.0);
  EXPECT_DOUBLE_EQ(u.co2e_g(), 420.0);
}

TEST(Usage, BadFieldsAreNamed) {
  nlohmann::json j = UsageToJson(AttemptUsage{.ns = "a", .end_ms = 5});
  j["startMs"] = "soon";
  EXPECT_EQ(UsageFromJson(j).status().message(), "usage.startMs: must be an integer");
  j["startMs"] = 10;
  EXPECT_EQ(UsageFromJson(j).status().message(), "usage.endMs: is before usage.startMs");
  j["startMs"] = 0;
  j["usdPerHour"] = {{"spot", "cheap"}};
  EXPECT_EQ(UsageFromJson(j).status().message(), "usage.usdPerHour.spot: must be a number");
}

}  // namespace
}  // namespace gpucloud::api
