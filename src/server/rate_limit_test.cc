#include "server/rate_limit.h"

#include <gtest/gtest.h>

namespace gpucloud::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(TokenBuckets, ABurstThenTheSustainedRate) {
  TokenBuckets b(/*per_second=*/10, /*burst=*/5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.Take("alice", kT0), absl::ZeroDuration()) << i;
  absl::Duration wait = b.Take("alice", kT0);
  EXPECT_EQ(wait, absl::Milliseconds(100));
  // Another key is not affected.
  EXPECT_EQ(b.Take("bob", kT0), absl::ZeroDuration());
  // 100 ms later one more token; 1 s later the burst is back (not more).
  EXPECT_EQ(b.Take("alice", kT0 + absl::Milliseconds(100)), absl::ZeroDuration());
  EXPECT_GT(b.Take("alice", kT0 + absl::Milliseconds(100)), absl::ZeroDuration());
  int allowed = 0;
  for (int i = 0; i < 20; ++i)
    allowed += b.Take("alice", kT0 + absl::Seconds(10)) == absl::ZeroDuration();
  EXPECT_EQ(allowed, 5);
}

TEST(TokenBuckets, NoLimitWhenTheRateIsZero) {
  TokenBuckets b(0, 0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(b.Take("alice", kT0), absl::ZeroDuration());
}

TEST(TokenBuckets, TimeGoingBackwardsGivesNothingAway) {
  TokenBuckets b(1, 1);
  EXPECT_EQ(b.Take("a", kT0), absl::ZeroDuration());
  EXPECT_GT(b.Take("a", kT0 - absl::Seconds(5)), absl::ZeroDuration());
}

}  // namespace
}  // namespace gpucloud::server
