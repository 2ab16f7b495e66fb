#include "server/paths.h"

#include <filesystem>
#include <system_error>

#include "core/text.h"

namespace gpucloud::server {
namespace {

namespace fs = std::filesystem;

// `p` without a trailing separator ("a/b/" normalises to "a/b/": its last element is empty).
fs::path Trimmed(fs::path p) {
  if (!p.empty() && !p.has_filename() && p != p.root_path()) p = p.parent_path();
  return p;
}

// Is `p` strictly below `tree`? Both lexically normal and absolute.
bool StrictlyInside(const fs::path& p, const fs::path& tree) {
  auto [t, q] = std::mismatch(tree.begin(), tree.end(), p.begin(), p.end());
  return t == tree.end() && q != p.end();
}

}  // namespace

absl::StatusOr<std::string> ResolveCheckpointDir(std::string_view root, std::string_view namespace_,
                                                 std::string_view job, std::string_view dir) {
  fs::path tree = Trimmed((fs::path(root) / std::string(namespace_)).lexically_normal());
  if (dir.empty()) return (tree / std::string(job)).string();
  if (dir.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("spec.checkpoint.dir: must not contain NUL");
  }
  fs::path d = Trimmed(fs::path(std::string(dir)).lexically_normal());
  if (d.is_relative()) {
    if (d == "." || d.empty() || *d.begin() == "..") {
      return absl::InvalidArgumentError(
          Cat("spec.checkpoint.dir: must name a directory inside the namespace's checkpoint "
              "tree ",
              tree.string(), "/, got \"", dir, "\""));
    }
    return (tree / d).string();
  }
  std::error_code ec;
  fs::path abs_tree =
      tree.is_absolute() ? tree : Trimmed(fs::absolute(tree, ec).lexically_normal());
  if (ec || !StrictlyInside(d, abs_tree)) {
    return absl::InvalidArgumentError(
        Cat("spec.checkpoint.dir: must lie inside the namespace's checkpoint tree ",
            abs_tree.string(), "/ (or be relative to it), got \"", dir, "\""));
  }
  return d.string();
}

}  // namespace gpucloud::server
