// A unified diff (diff -u) of two texts, line by line, with three lines of context: what
// `gpuctl diff` prints. Pure functions.
#ifndef GPUCLOUD_CLI_UNIFIED_DIFF_H_
#define GPUCLOUD_CLI_UNIFIED_DIFF_H_

#include <string>
#include <string_view>

namespace gpucloud::cli {

// "" when the texts are equal; else "--- from\n+++ to\n" and the hunks ("@@ -1,4 +1,4 @@").
// Quadratic in the number of lines: for objects, not for logs.
std::string UnifiedDiff(std::string_view from, std::string_view to, std::string_view from_name,
                        std::string_view to_name);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_UNIFIED_DIFF_H_
