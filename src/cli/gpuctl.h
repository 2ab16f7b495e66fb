// gpuctl, the user's command-line tool. This build has the offline commands:
//   gpuctl validate -f FILE...   check manifests; print what each object asks for
//   gpuctl convert  -f FILE...   print the normalized gpucloud/v1 form (-o yaml|json)
//   gpuctl catalog               list the GPU types, MIG profiles, speeds and prices
// FILE may be a file, a directory (its *.yaml, *.yml and *.json files) or "-" for stdin.
// Exit codes: 0 valid, 1 invalid input, 2 usage error.
// RunGpuctl is the whole program behind main(); it is reentrant (no global state).
#ifndef GPUCLOUD_CLI_GPUCTL_H_
#define GPUCLOUD_CLI_GPUCTL_H_

#include <iosfwd>

namespace gpucloud::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitUsage = 2;

int RunGpuctl(int argc, const char* const* argv, std::istream& in, std::ostream& out,
              std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_GPUCTL_H_
