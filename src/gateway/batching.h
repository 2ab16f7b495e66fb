// Dynamic batching's JSON (Triton's model, in the TensorFlow Serving / KServe v1 request shape):
// callers POST {"instances": [...]}; the gateway sends one {"instances": [all of them]} to a
// replica and gives each caller its own slice of the answer's {"predictions": [...]}, in order.
// Pure functions; thread-compatible.
#ifndef GPUCLOUD_GATEWAY_BATCHING_H_
#define GPUCLOUD_GATEWAY_BATCHING_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::gateway {

// The instances of one caller's body, each as JSON text: InvalidArgument naming what is wrong
// when the body is not a JSON object with a non-empty "instances" array.
absl::StatusOr<std::vector<std::string>> InstancesOf(std::string_view body);

// One body of every caller's instances, in the order given.
std::string BatchBody(const std::vector<std::vector<std::string>>& callers);

// The answer split back: caller i gets {"predictions": [its counts[i] predictions]}. An answer
// that is no JSON object with a "predictions" array of exactly sum(counts) entries is an error
// (the replica broke the contract; every caller of the batch gets it).
absl::StatusOr<std::vector<std::string>> SplitPredictions(std::string_view answer,
                                                          const std::vector<size_t>& counts);

}  // namespace gpucloud::gateway

#endif  // GPUCLOUD_GATEWAY_BATCHING_H_
