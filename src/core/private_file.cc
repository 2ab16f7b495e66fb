#include "core/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/text.h"

namespace gpucloud {

absl::Status WritePrivateFile(const std::string& path, const std::string& contents, FileSync sync) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(Cat("cannot create ", tmp, ": ", std::strerror(errno)));
  bool ok = fchmod(fd, 0600) == 0;  // an older file of that name may have a laxer mode
  for (size_t done = 0; ok && done < contents.size();) {
    ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  if (ok && sync == FileSync::kDurable) ok = fsync(fd) == 0;
  int e = errno;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) e = errno;
    unlink(tmp.c_str());
    return absl::InternalError(Cat("cannot write ", path, ": ", std::strerror(e)));
  }
  if (sync == FileSync::kDurable) {  // the rename too
    std::string dir = std::filesystem::path(path).parent_path().string();
    int dfd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
  }
  return absl::OkStatus();
}

}  // namespace gpucloud
