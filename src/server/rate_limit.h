// TokenBuckets: a request-rate limit per key (a tenant's user name): each key's bucket holds
// up to `burst` tokens and refills at `per_second`; a request takes one or is refused, and the
// answer says when the next token comes (for Retry-After). Time is passed in, so it is a pure
// function of its calls (tests drive it with any clock). Idle full buckets are forgotten, so
// memory is bounded by the keys active within the last burst/per_second seconds.
// Thread-safe.
#ifndef GPUCLOUD_SERVER_RATE_LIMIT_H_
#define GPUCLOUD_SERVER_RATE_LIMIT_H_

#include <map>
#include <mutex>
#include <string>

#include "absl/time/time.h"

namespace gpucloud::server {

class TokenBuckets {
 public:
  // `per_second` <= 0: no limit.
  TokenBuckets(double per_second, double burst) : per_second_(per_second), burst_(burst) {}
  // Zero when `key` may go on now (a token was taken); otherwise how long until it may.
  absl::Duration Take(const std::string& key, absl::Time now);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time at;
  };
  const double per_second_, burst_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // guarded by mu_
  absl::Time last_sweep_;                  // guarded by mu_
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_RATE_LIMIT_H_
