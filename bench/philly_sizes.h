// Job sizes for the benchmarks: GPUs per job drawn from the Philly trace's distribution
// (../shared/traces/pollux_philly.csv: 93.2% 1 GPU, 2.2% 2, 2.3% 4, 2.0% 8, 0.4% 12-128).
// Header-only; thread-compatible (the Rng is the caller's).
#ifndef GPUCLOUD_BENCH_PHILLY_SIZES_H_
#define GPUCLOUD_BENCH_PHILLY_SIZES_H_

#include "core/clock.h"

namespace gpucloud::bench {

inline int PhillyGpus(Rng& rng) {
  uint64_t x = rng.Uniform(10000);
  if (x < 9317) return 1;
  if (x < 9538) return 2;
  if (x < 9765) return 4;
  if (x < 9965) return 8;
  if (x < 9989) return 16;
  if (x < 9997) return 32;
  return 64;
}

}  // namespace gpucloud::bench

#endif  // GPUCLOUD_BENCH_PHILLY_SIZES_H_
