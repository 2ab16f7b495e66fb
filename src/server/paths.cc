#include "server/paths.h"

#include <algorithm>
#include <cctype>
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

// One directory name of letters, digits, '.', '_' and '-' (not "." or ".."): every directory
// above a job's checkpoint directory is then the operator's, so no tenant owns a directory on
// the way to another's (the agent gives a job's directory to its task's user), and the path holds
// nothing a mount option could be read from (',', '=', ':').
bool PlainName(const fs::path& p) {
  const std::string s = p.string();
  if (s.empty() || s == "." || s == ".." || std::distance(p.begin(), p.end()) != 1) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

absl::Status NotPlain(std::string_view dir, const fs::path& tree) {
  return absl::InvalidArgumentError(
      Cat("spec.checkpoint.dir: must be one directory name (letters, digits, '.', '_', '-') in "
          "the namespace's checkpoint tree ",
          tree.string(), "/, got \"", dir, "\""));
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
    if (!PlainName(d)) return NotPlain(dir, tree);
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
  if (!PlainName(d.filename()) || Trimmed(d.parent_path()) != abs_tree) {
    return NotPlain(dir, abs_tree);
  }
  return d.string();
}

}  // namespace gpucloud::server
