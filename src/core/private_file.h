// WritePrivateFile: replaces a file whole with contents only its owner may read — credentials,
// task records, configs holding tokens. Written to PATH.tmp created 0600 (whatever the umask or
// an older file's mode), then renamed over PATH, so a reader sees the old file or the new one,
// never a part, and nobody else can read it even for a moment. With kDurable the data and the
// rename are fsync'd before it returns (credentials); kFast leaves that to the kernel (records
// rewritten often). Thread-safe for different paths.
#ifndef GPUCLOUD_CORE_PRIVATE_FILE_H_
#define GPUCLOUD_CORE_PRIVATE_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace gpucloud {

enum class FileSync { kFast, kDurable };

// Internal naming the path and the reason; nothing is left at PATH.tmp on failure.
absl::Status WritePrivateFile(const std::string& path, const std::string& contents,
                              FileSync sync = FileSync::kFast);

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_PRIVATE_FILE_H_
