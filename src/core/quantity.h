// Fixed-point resource quantities. Resource accounting never uses floating point: a GPU is
// 1000 milli-GPUs, memory is counted in MiB, CPU in millicores and money in micro-USD, so that
// 0.25 GPU + 0.75 GPU is exactly one GPU however often it is added and taken away.
// Value types; thread-compatible.
#ifndef GPUCLOUD_CORE_QUANTITY_H_
#define GPUCLOUD_CORE_QUANTITY_H_

#include <compare>
#include <cstdint>

namespace gpucloud {

// A strongly typed integer quantity; Tag keeps milli-GPUs and MiB from being mixed up.
template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t raw) : raw_(raw) {}

  constexpr int64_t raw() const { return raw_; }
  constexpr bool is_zero() const { return raw_ == 0; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(raw_ + o.raw_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(raw_ - o.raw_); }
  constexpr Quantity operator*(int64_t k) const { return Quantity(raw_ * k); }
  constexpr Quantity& operator+=(Quantity o) {
    raw_ += o.raw_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    raw_ -= o.raw_;
    return *this;
  }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  int64_t raw_ = 0;
};

struct MilliGpuTag {};
struct MiBTag {};
struct MilliCpuTag {};
struct MicroUsdTag {};

using MilliGpu = Quantity<MilliGpuTag>;  // 1000 = one whole GPU
using MiB = Quantity<MiBTag>;            // mebibytes of memory
using MilliCpu = Quantity<MilliCpuTag>;  // 1000 = one CPU core
using MicroUsd = Quantity<MicroUsdTag>;  // 1'000'000 = one US dollar

constexpr int64_t kMilliPerUnit = 1000;

constexpr MilliGpu WholeGpus(int64_t n) { return MilliGpu(n * kMilliPerUnit); }
constexpr MiB GiB(int64_t n) { return MiB(n * 1024); }
constexpr MilliCpu Cores(int64_t n) { return MilliCpu(n * kMilliPerUnit); }
constexpr MicroUsd Cents(int64_t n) { return MicroUsd(n * 10'000); }

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_QUANTITY_H_
