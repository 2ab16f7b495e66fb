// Exact parsing and printing of the textual forms users write for quantities: Kubernetes-style
// resource quantities ("500m", "16Gi"), decimal fractions ("0.25"), durations ("1h30m"), prices
// ("2.50") and CUDA versions ("12.4"). No floating point is involved at any step: a value that
// cannot be represented exactly in the target unit is an error, never rounded silently, except
// memory, which is rounded up to whole MiB. Stateless functions; thread-safe.
#ifndef GPUCLOUD_CORE_PARSE_H_
#define GPUCLOUD_CORE_PARSE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/quantity.h"

namespace gpucloud {

// "2" -> 2000, "0.25" -> 250, "500m" -> 500. At most three decimals. Negative values are errors.
absl::StatusOr<int64_t> ParseMilli(std::string_view text);

// CPU quantity: "2", "0.5", "500m".
absl::StatusOr<MilliCpu> ParseCpu(std::string_view text);

// Memory quantity in Kubernetes form: plain bytes, or a suffix Ki Mi Gi Ti Pi (binary) or
// k M G T P (decimal); decimals allowed ("1.5Gi"). Rounded up to whole MiB.
absl::StatusOr<MiB> ParseMemory(std::string_view text);

// Duration: integer seconds ("90") or a sequence of <integer><unit> with units d h m s
// ("1h30m", "45s", "2d"). Returns seconds.
absl::StatusOr<int64_t> ParseDurationSeconds(std::string_view text);

// Price in US dollars with at most six decimals: "2.50" -> 2'500'000 micro-USD.
absl::StatusOr<MicroUsd> ParsePrice(std::string_view text);

// CUDA version "12.4" -> 12040 (NVML's encoding: major * 1000 + minor * 10).
absl::StatusOr<int> ParseCudaVersion(std::string_view text);

// Inverse forms, used by printers. Each round-trips through the parser above.
// A listen address "HOST:PORT" (port 0 to 65535; the host may be empty, an IPv4 address or a
// name). InvalidArgument naming `flag`.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
absl::StatusOr<HostPort> ParseHostPort(std::string_view flag, std::string_view text);

std::string FormatMilli(int64_t milli);       // 2000 -> "2", 250 -> "0.25"
std::string FormatMemory(MiB mib);            // 16384 -> "16Gi", 1536 -> "1536Mi"
std::string FormatDuration(int64_t seconds);  // 5400 -> "1h30m", 0 -> "0s"
std::string FormatPrice(MicroUsd price);      // 2'500'000 -> "2.50"
std::string FormatCudaVersion(int version);   // 12040 -> "12.4"

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_PARSE_H_
