#include "server/rate_limit.h"

#include <algorithm>

namespace gpucloud::server {

absl::Duration TokenBuckets::Take(const std::string& key, absl::Time now) {
  if (per_second_ <= 0) return absl::ZeroDuration();
  std::lock_guard lock(mu_);
  const absl::Duration refill = absl::Seconds(burst_ / per_second_);
  if (now - last_sweep_ > refill) {  // forget buckets that are full again
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      it = now - it->second.at >= refill ? buckets_.erase(it) : std::next(it);
    }
    last_sweep_ = now;
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh && now > b.at) {
    b.tokens = std::min(burst_, b.tokens + absl::ToDoubleSeconds(now - b.at) * per_second_);
  }
  b.at = std::max(b.at, now);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return absl::ZeroDuration();
  }
  return absl::Seconds((1 - b.tokens) / per_second_);
}

}  // namespace gpucloud::server
