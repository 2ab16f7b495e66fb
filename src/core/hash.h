// A stable hash. Pure; thread-safe.
#ifndef GPUCLOUD_CORE_HASH_H_
#define GPUCLOUD_CORE_HASH_H_

#include <cstdint>
#include <string_view>

namespace gpucloud {

// FNV-1a, 64 bits: the same on every standard library and every run (std::hash is neither), for
// choices that must not move between builds (master ports, service ports, template hashes).
uint64_t Fnv1a64(std::string_view text);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_HASH_H_
