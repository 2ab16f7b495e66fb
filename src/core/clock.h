// Time and randomness as injected interfaces (after LevelDB's Env): production code reads the
// wall clock and a seeded generator only through these, so tests and the simulator control both.
// SystemClock is thread-safe; FakeClock and Rng are not (use one per thread).
#ifndef GPUCLOUD_CORE_CLOCK_H_
#define GPUCLOUD_CORE_CLOCK_H_

#include <cstdint>

namespace gpucloud {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowMillis() const = 0;
};

// The real wall clock.
class SystemClock final : public Clock {
 public:
  int64_t NowMillis() const override;
};

// A clock that moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_millis = 0) : now_(start_millis) {}
  int64_t NowMillis() const override { return now_; }
  void Advance(int64_t millis) { now_ += millis; }
  void Set(int64_t millis) { now_ = millis; }

 private:
  int64_t now_;
};

// A small, fast, seeded generator (SplitMix64): identical seeds give identical sequences on
// every platform, unlike std::uniform_int_distribution.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, n); n > 0.
  uint64_t Uniform(uint64_t n);
  // Uniform in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi);
  bool OneIn(uint64_t n) { return Uniform(n) == 0; }

 private:
  uint64_t state_;
};

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_CLOCK_H_
